"""Rows/s into a Spark aggregation: coterie's Python data source next to Spark's Kafka connector.

One local Spark session (`local[2]` by default) runs the same batch query over the same data
twice per source:

    spark.read.format(F).option(...).option("subscribe", T).load()
         .groupBy("partition").count().collect()

* `coterie` on coterie: coterie.spark's pure-Python source reading a coterie broker;
* `coterie` on kafka: the same source reading the pinned reference Apache Kafka broker
  (scripts/reference_kafka.py; needs java and mvn), which separates the source's cost from the
  broker's;
* `kafka` on kafka: Spark's own connector (org.apache.spark:spark-sql-kafka-0-10_2.13 of the
  installed pyspark's version, or `--connector-version`, fetched with mvn into
  ~/.cache/coterie/spark-kafka-<version>) reading the reference broker. When the connector
  cannot be fetched (or does not load) the row says why and no ratio is printed.

Each broker runs as its own subprocess (benchmarks/_brokers.py), one after the other, never
side by side; the data (N records with a 100-byte value and a short key, round-robin over P
partitions) is produced with confluent-kafka before the clock starts. A first unmeasured query
warms up the session (JVM JIT, Python worker start); then `--repeat` timed runs, the best
reported. The ratio is coterie's rows/s (source and broker) over the Kafka connector's on
Kafka.

    .venv/bin/python benchmarks/spark_source.py                      # both
    .venv/bin/python benchmarks/spark_source.py --records 200000 --partitions 4 --only coterie
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import create_topic, prepare_reference, run_broker

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
TOPIC = "spark-bench"

# What the connector needs besides Spark itself (which pyspark ships): its token provider, the
# Kafka client and commons-pool2, at the versions Spark 4.2's parent pom pins. They are copied
# one by one (no transitive resolution): Spark's parent pom names an extra repository that is
# not reachable from every machine.
KAFKA_CLIENTS_VERSION = "3.9.2"
COMMONS_POOL2_VERSION = "2.13.1"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def connector_jars(version: str) -> list[str] | str:
    """Spark's Kafka connector `version` and what it needs, from Maven; or why not."""
    missing = [t for t in ("java", "mvn") if shutil.which(t) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH"
    lib = Path.home() / ".cache" / "coterie" / f"spark-kafka-{version}"
    marker = lib / ".complete"
    if not marker.exists():
        log(f"fetching spark-sql-kafka-0-10_2.13:{version} with mvn into {lib}")
        artifacts = [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",
                     f"org.apache.spark:spark-token-provider-kafka-0-10_2.13:{version}",
                     f"org.apache.kafka:kafka-clients:{KAFKA_CLIENTS_VERSION}",
                     f"org.apache.commons:commons-pool2:{COMMONS_POOL2_VERSION}"]
        for artifact in artifacts:
            cmd = ["mvn", "-q", "-B", f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={artifact}",
                   f"-DoutputDirectory={lib}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                  cwd=tempfile.gettempdir())
            if proc.returncode != 0:
                return f"mvn could not fetch {artifact}"
        marker.write_text(version + "\n")
    return sorted(str(p) for p in lib.glob("*.jar"))


def produce(bootstrap: str, records: int, partitions: int) -> None:
    create_topic(bootstrap, TOPIC, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 512 * 1024, "acks": "1", "log_level": 4})
    value = b"v" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, key=b"k%d" % i, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "records left unsent"


def timed(spark, fmt: str, bootstrap: str, records: int, repeat: int) -> float:
    """Best seconds of `repeat` runs of the aggregation (after one warm-up run)."""
    def once() -> float:
        start = time.perf_counter()
        counts = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", TOPIC).option("startingOffsets", "earliest").load()
                  .groupBy("partition").count().collect())
        elapsed = time.perf_counter() - start
        total = sum(r["count"] for r in counts)
        assert total == records, f"{fmt}: counted {total} of {records}"
        return elapsed

    once()
    return min(once() for _ in range(repeat))


def measure(kind: str, formats: list[str], spark, workdir: Path, args: argparse.Namespace,
            out: Callable[[str], None]) -> dict[tuple[str, str], float]:
    """rows/s of each format reading the same data from one broker of `kind`."""
    rates: dict[tuple[str, str], float] = {}
    with run_broker(kind, workdir) as bootstrap:
        log(f"{kind}: producing {args.records} records into {args.partitions} partitions")
        produce(bootstrap, args.records, args.partitions)
        for fmt in formats:
            try:
                seconds = timed(spark, fmt, bootstrap, args.records, args.repeat)
            except Exception as exc:  # e.g. a connector that does not fit this Spark
                out(f"| {fmt} | {kind} | - | - | - | failed: "
                    f"{str(exc).splitlines()[0][:200]} |")
                continue
            rates[(fmt, kind)] = args.records / seconds
            out(f"| {fmt} | {kind} | {args.records:,} | {args.partitions} | {seconds:.2f} | "
                f"{rates[(fmt, kind)]:,.0f} |")
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--only", choices=("coterie", "kafka"))
    parser.add_argument("--connector-version", default=None,
                        help="spark-sql-kafka version (default: the installed pyspark's)")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyspark
    from pyspark.sql import SparkSession

    import coterie.spark

    jars: list[str] | str = "skipped (--only coterie)"
    if args.only != "coterie":
        jars = connector_jars(args.connector_version or pyspark.__version__)
    builder = (SparkSession.builder.master(args.master).appName("coterie-spark-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "2g"))
    if isinstance(jars, list):
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    coterie.spark.register(spark)

    lines: list[str] = []
    out = lines.append
    connector = args.connector_version or pyspark.__version__
    out(f"pyspark {pyspark.__version__} (Kafka connector {connector}), master {args.master}, "
        f"{args.records:,} records of 100 bytes, {args.partitions} partitions, best of "
        f"{args.repeat}")
    out("")
    out("| source | broker | records | partitions | seconds | rows/s |")
    out("| --- | --- | --- | --- | --- | --- |")
    rates: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="coterie-spark-bench-") as tmp:
        if args.only != "kafka":
            rates |= measure("coterie", ["coterie"], spark, Path(tmp), args, out)
        if args.only != "coterie":
            reference = prepare_reference(log)
            if reference is not None:
                out(f"| - | kafka | - | - | - | not measured: {reference} |")
            else:
                # coterie's source reads Kafka too: separates the source from the broker
                formats = ["coterie"] + (["kafka"] if isinstance(jars, list) else [])
                rates |= measure("kafka", formats, spark, Path(tmp), args, out)
                if not isinstance(jars, list):
                    out(f"| kafka | kafka | - | - | - | not measured: {jars} |")
    spark.stop()
    ours, theirs = rates.get(("coterie", "coterie")), rates.get(("kafka", "kafka"))
    if ours and theirs:
        out("")
        out(f"ratio coterie (source + broker) / Spark's Kafka connector on Kafka: "
            f"{ours / theirs:.2f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
