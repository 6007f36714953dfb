"""Rows/s into a Spark aggregation: coterie's Python data source next to Spark's Kafka connector.

One local Spark session (`local[2]` by default) runs the same batch query over the same data
twice per source:

    spark.read.format(F).option(...).option("subscribe", T).load()
         .groupBy("partition").count().collect()

* `coterie` on coterie: coterie.spark's pure-Python source reading a coterie broker;
* `coterie` on kafka: the same source reading the pinned reference Apache Kafka broker
  (scripts/reference_kafka.py; needs java and mvn), which separates the source's cost from the
  broker's;
* `kafka` on kafka: Spark's own connector (org.apache.spark:spark-sql-kafka-0-10_2.13)
  reading the reference broker. Its jars come from Maven, one artifact at a time, into
  ~/.cache/coterie/spark-kafka-<version>: the connector, then whatever its POM (and theirs)
  needs at run time that pyspark's own jars lack (for 4.2.0: the token provider,
  kafka-clients and commons-pool2). The release matching the installed pyspark is tried
  first, then FALLBACK_CONNECTOR (4.2.0), and a token provider missing at the connector's
  version is replaced by FALLBACK_TOKEN_PROVIDER (4.0.0); every substitution is printed
  under the header. `--connector-version` asks for one release only. When nothing loads
  the row says why and no ratio is printed.

Each broker runs as its own subprocess (benchmarks/_brokers.py), one after the other, never
side by side; the data (N records with a 100-byte value and a short key, round-robin over P
partitions) is produced with confluent-kafka before the clock starts. A first unmeasured query
warms up the session (JVM JIT, Python worker start); then `--repeat` timed runs, the best
reported. Two ratios are printed, both over the Kafka connector's rows/s on Kafka: coterie's
source on coterie (source and broker), and coterie's source on Kafka (the source alone).

    .venv/bin/python benchmarks/spark_source.py                      # both
    .venv/bin/python benchmarks/spark_source.py --records 200000 --partitions 4 --only coterie
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import create_topic, prepare_reference, run_broker

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
TOPIC = "spark-bench"
SPARK_GROUP = "org.apache.spark"
CONNECTOR = "spark-sql-kafka-0-10_2.13"
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10_2.13"
# Stand-ins used when a release is missing from the Maven repository this machine reaches: the
# last connector release that can be fetched there, and a token provider release that has the
# four classes the 4.2.0 connector uses from it (KafkaConfigUpdater, KafkaTokenUtil,
# KafkaTokenClusterConf, KafkaRedactionUtil) and runs a batch read with it.
FALLBACK_CONNECTOR = "4.2.0"
FALLBACK_TOKEN_PROVIDER = "4.0.0"
POM_NS = "{http://maven.apache.org/POM/4.0.0}"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Connector:
    """The jars that make Spark's `kafka` format loadable, and what had to be substituted."""

    version: str
    jars: list[str]
    notes: list[str] = field(default_factory=list)


def mvn_copy(coordinate: str, dest: Path) -> bool:
    """Copy one artifact (group:artifact:version:type, nothing transitive) into dest."""
    cmd = ["mvn", "-q", "-B", f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={coordinate}",
           f"-DoutputDirectory={dest}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          cwd=tempfile.gettempdir())
    return proc.returncode == 0


def runtime_dependencies(pom: Path) -> list[tuple[str, str, str | None]]:
    """(group, artifact, version) of the non-optional compile/runtime dependencies a POM
    names; version is None when the POM leaves it to a parent or an unknown property."""
    root = ElementTree.parse(pom).getroot()
    props = {child.tag.removeprefix(POM_NS): child.text or ""
             for child in root.findall(f"{POM_NS}properties/*")}
    props["project.version"] = root.findtext(f"{POM_NS}version") or ""
    deps = []
    for dep in root.findall(f"{POM_NS}dependencies/{POM_NS}dependency"):
        if dep.findtext(f"{POM_NS}scope", "compile") not in ("compile", "runtime"):
            continue
        if dep.findtext(f"{POM_NS}optional", "false") == "true":
            continue
        version = dep.findtext(f"{POM_NS}version")
        if version and version.startswith("${"):
            version = props.get(version[2:-1])
        deps.append((dep.findtext(f"{POM_NS}groupId", ""),
                     dep.findtext(f"{POM_NS}artifactId", ""), version))
    return deps


def fetch_connector(version: str, bundled: set[str], lib: Path) -> Connector | str:
    """Copy Spark's Kafka connector `version` into lib with everything it needs at run time
    that pyspark does not ship (`bundled`: the file names of pyspark's own jars, any version
    of an artifact counting). Dependencies
    are walked breadth first from the connector's POM, the nearest version of an artifact
    winning as in Maven; artifacts are copied one by one because Spark's parent POM names a
    repository that not every machine reaches. Returns why not when something is missing."""
    lib.mkdir(parents=True)
    notes: list[str] = []
    queue = [(SPARK_GROUP, CONNECTOR, version)]
    seen: set[str] = set()
    while queue:
        group, artifact, wanted = queue.pop(0)
        shipped = re.compile(re.escape(artifact) + r"-\d.*\.jar")
        if artifact in seen or any(shipped.fullmatch(name) for name in bundled):
            continue
        seen.add(artifact)
        if wanted is None:
            return f"{group}:{artifact}: version not resolvable from the POMs"
        got = wanted
        if not mvn_copy(f"{group}:{artifact}:{wanted}:jar", lib):
            if artifact == CONNECTOR:
                return f"mvn could not fetch {group}:{artifact}:{wanted}"
            if artifact == TOKEN_PROVIDER and mvn_copy(
                    f"{group}:{artifact}:{FALLBACK_TOKEN_PROVIDER}:jar", lib):
                got = FALLBACK_TOKEN_PROVIDER
                notes.append(f"token provider {wanted} could not be fetched, "
                             f"{FALLBACK_TOKEN_PROVIDER} used")
            else:
                return f"mvn could not fetch {group}:{artifact}:{wanted} (needed by the connector)"
        with tempfile.TemporaryDirectory() as poms:
            if not mvn_copy(f"{group}:{artifact}:{got}:pom", Path(poms)):
                return f"mvn could not fetch the POM of {group}:{artifact}:{got}"
            queue += runtime_dependencies(Path(poms) / f"{artifact}-{got}.pom")
    return Connector(version, [], notes)


def connector_jars(pyspark_version: str, requested: str | None, jars_dir: Path
                   ) -> Connector | str:
    """Spark's Kafka connector and what it needs, from Maven (cached under
    ~/.cache/coterie/spark-kafka-<version>); or why not. Without `requested`, the installed
    pyspark's release, else FALLBACK_CONNECTOR, saying so."""
    missing = [t for t in ("java", "mvn") if shutil.which(t) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH"
    bundled = {p.name for p in jars_dir.glob("*.jar")}
    versions = [requested] if requested else list(dict.fromkeys([pyspark_version,
                                                                 FALLBACK_CONNECTOR]))
    reasons: list[str] = []
    for version in versions:
        lib = Path.home() / ".cache" / "coterie" / f"spark-kafka-{version}"
        manifest = lib / "manifest.json"
        if manifest.exists():
            found = Connector(**json.loads(manifest.read_text()))
        else:
            log(f"fetching {CONNECTOR}:{version} and its dependencies with mvn into {lib}")
            staging = lib.with_name(lib.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            fetched = fetch_connector(version, bundled, staging)
            if isinstance(fetched, str):
                reasons.append(fetched)
                shutil.rmtree(staging, ignore_errors=True)
                continue
            found = fetched
            (staging / "manifest.json").write_text(json.dumps(asdict(found), indent=1) + "\n")
            shutil.rmtree(lib, ignore_errors=True)
            staging.rename(lib)
        found.jars = sorted(str(p) for p in lib.glob("*.jar"))
        found.notes = reasons + found.notes
        if version != pyspark_version:
            found.notes.append(f"connector {version} on pyspark {pyspark_version}")
        return found
    return "; ".join(reasons)


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
                  .option("subscribe", TOPIC).option("startingOffsets", "earliest")
                  .option("endingOffsets", "latest").load()
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
                        help="spark-sql-kafka version (default: the installed pyspark's, "
                        f"else {FALLBACK_CONNECTOR})")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyspark
    from pyspark.sql import SparkSession

    import coterie.spark

    connector: Connector | str = "skipped (--only coterie)"
    if args.only != "coterie":
        connector = connector_jars(pyspark.__version__, args.connector_version,
                                   Path(pyspark.__file__).parent / "jars")
    builder = (SparkSession.builder.master(args.master).appName("coterie-spark-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "2g"))
    if isinstance(connector, Connector):
        builder = builder.config("spark.jars", ",".join(connector.jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    coterie.spark.register(spark)

    lines: list[str] = []
    out = lines.append
    used = connector.version if isinstance(connector, Connector) else "none"
    out(f"pyspark {pyspark.__version__} (Kafka connector {used}), master {args.master}, "
        f"{args.records:,} records of 100 bytes, {args.partitions} partitions, best of "
        f"{args.repeat}")
    if isinstance(connector, Connector):
        for note in connector.notes:
            out(f"- {note}")
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
                formats = ["coterie"] + (["kafka"] if isinstance(connector, Connector) else [])
                rates |= measure("kafka", formats, spark, Path(tmp), args, out)
                if not isinstance(connector, Connector):
                    out(f"| kafka | kafka | - | - | - | not measured: {connector} |")
    spark.stop()
    theirs = rates.get(("kafka", "kafka"))
    if theirs:
        out("")
        for key, what in ((("coterie", "coterie"), "coterie's source on coterie"),
                          (("coterie", "kafka"), "coterie's source on Kafka")):
            if key in rates:
                out(f"ratio {what} / Spark's Kafka connector on Kafka: "
                    f"{rates[key] / theirs:.2f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
