"""Produce and consume throughput of coterie next to Apache Kafka, measured with librdkafka.

Each broker runs as its own subprocess on a free loopback port with a temporary data dir:
coterie as `python -m coterie serve`, Kafka through scripts/reference_kafka.py (the pinned
reference release; needs java and mvn, see docs/reference-broker.md). Brokers are measured one
after the other, never side by side, so they do not compete for cores with each other.

For every broker and every partition count (1 and 6 by default) the benchmark creates a fresh
topic, then

* produces N records of 1 KiB (no key, explicit round-robin partition) with confluent-kafka,
  linger.ms=5, batch.size=256 KiB, acks=1, no compression; the clock runs from the first
  produce() call until flush() returns with every delivery report in;
* consumes them back with confluent-kafka by manual assignment from offset 0 and default
  fetch settings; the clock runs from assign() until the N-th record arrives.

A small unmeasured warm-up topic is produced and consumed first on each broker.
MB/s counts record values only, in units of 10^6 bytes.

    .venv/bin/python benchmarks/produce_consume.py                   # both brokers
    .venv/bin/python benchmarks/produce_consume.py --only kafka --records 100000
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition, libversion
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
STARTUP_TIMEOUT = 120.0
PHASE_TIMEOUT = 600.0


@dataclass
class Result:
    broker: str
    partitions: int
    records: int
    value_bytes: int
    produce_s: float
    consume_s: float

    @property
    def payload_mb(self) -> float:
        return self.records * self.value_bytes / 1e6

    def rate(self, phase: str) -> tuple[float, float]:
        """(records/s, MB/s) for 'produce' or 'consume'."""
        seconds = self.produce_s if phase == "produce" else self.consume_s
        return self.records / seconds, self.payload_mb / seconds


# --------------------------------------------------------------------------- brokers


def load_reference_kafka() -> ModuleType:
    name = "coterie_reference_kafka"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" /
                                                  "reference_kafka.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_until_serving(bootstrap: str, proc: subprocess.Popen, log_path: Path,
                       metadata_probe: bool) -> None:
    """Wait until the broker listens and, with metadata_probe, answers an all-topics Metadata
    request (Kafka opens its listener before it is ready to serve); fail with its log."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    host, port = bootstrap.rsplit(":", 1)
    last: Exception | None = None
    listening = False
    while not listening and time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                listening = True
        except OSError as exc:
            last = exc
            time.sleep(0.1)
    if listening and not metadata_probe:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while listening and time.monotonic() < deadline and proc.poll() is None:
        try:
            if admin.list_topics(timeout=2).brokers:
                return
        except KafkaException as exc:
            last = exc
        time.sleep(0.2)
    tail = log_path.read_text(errors="replace")[-5000:] if log_path.exists() else ""
    raise RuntimeError(f"broker on {bootstrap} did not start (exit={proc.poll()}, "
                       f"last error={last}); log tail:\n{tail}")


@contextlib.contextmanager
def run_broker(kind: str, workdir: Path) -> Iterator[str]:
    port = free_port()
    data_dir = workdir / f"{kind}-data"
    log_path = workdir / f"{kind}.log"
    if kind == "coterie":
        data_dir.mkdir(parents=True)
        cmd = [sys.executable, "-m", "coterie", "serve", "--host", HOST, "--port", str(port),
               "--data-dir", str(data_dir)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                          env.get("PYTHONPATH")]))
    else:
        cmd = load_reference_kafka().prepare(port, data_dir)
        env = dict(os.environ)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
    bootstrap = f"{HOST}:{port}"
    try:
        # coterie is ready once it listens (as in tests/fixtures/coterie_broker.py)
        wait_until_serving(bootstrap, proc, log_path, metadata_probe=kind == "kafka")
        yield bootstrap
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


# --------------------------------------------------------------------------- workload


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until metadata shows every partition led
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} did not become ready")


def produce(bootstrap: str, topic: str, partitions: int, records: int, value: bytes) -> float:
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "batch.size": 256 * 1024,
        "compression.type": "none",
        "queue.buffering.max.messages": 500_000,
    })
    failures: list[str] = []
    delivered = 0

    def on_delivery(err, _msg) -> None:
        nonlocal delivered
        if err is not None:
            failures.append(str(err))
        else:
            delivered += 1

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(PHASE_TIMEOUT)
    elapsed = time.perf_counter() - start
    if remaining or failures or delivered != records:
        raise RuntimeError(f"produce to {topic}: {remaining} undelivered, {delivered} ok, "
                           f"errors {failures[:3]}")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required by librdkafka; never used
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    seen = 0
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + PHASE_TIMEOUT
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consume from {topic}: only {seen}/{records} records")
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error():
                    raise RuntimeError(f"consume from {topic}: {msg.error()}")
                seen += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def bench_broker(kind: str, bootstrap: str, args: argparse.Namespace) -> list[Result]:
    value = os.urandom(args.value_size)
    if args.warmup:
        warm = f"bench-warmup-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, warm, 1)
        produce(bootstrap, warm, 1, args.warmup, value)
        consume(bootstrap, warm, 1, args.warmup)
    results = []
    for partitions in args.partitions:
        topic = f"bench-{partitions}p-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, partitions)
        produce_s = produce(bootstrap, topic, partitions, args.records, value)
        consume_s = consume(bootstrap, topic, partitions, args.records)
        result = Result(kind, partitions, args.records, args.value_size, produce_s, consume_s)
        results.append(result)
        print(f"  {kind:8} {partitions}p: produce {result.rate('produce')[1]:8.1f} MB/s, "
              f"consume {result.rate('consume')[1]:8.1f} MB/s", file=sys.stderr, flush=True)
    return results


# --------------------------------------------------------------------------- report


def table(results: list[Result]) -> str:
    lines = [
        f"{'broker':10} {'parts':>5} {'records':>9} "
        f"{'produce rec/s':>14} {'produce MB/s':>13} {'consume rec/s':>14} {'consume MB/s':>13}",
    ]
    for r in results:
        p_rps, p_mbs = r.rate("produce")
        c_rps, c_mbs = r.rate("consume")
        lines.append(f"{r.broker:10} {r.partitions:>5} {r.records:>9} "
                     f"{p_rps:>14,.0f} {p_mbs:>13.1f} {c_rps:>14,.0f} {c_mbs:>13.1f}")
    by_key = {(r.broker, r.partitions): r for r in results}
    ratios = []
    for r in results:
        other = by_key.get(("kafka", r.partitions))
        if r.broker == "coterie" and other is not None:
            ratios.append(f"{'coterie/kafka':14} {r.partitions:>5}   "
                          f"produce x{r.rate('produce')[0] / other.rate('produce')[0]:.2f}   "
                          f"consume x{r.rate('consume')[0] / other.rate('consume')[0]:.2f}")
    if ratios:
        lines += ["", "ratio (throughput, >1 means coterie is faster)", *ratios]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per topic")
    parser.add_argument("--value-size", type=int, default=1024, help="bytes per record value")
    parser.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 6], help="comma-separated partition counts (default 1,6)")
    parser.add_argument("--warmup", type=int, default=20_000,
                        help="unmeasured warm-up records per broker (0 to skip)")
    parser.add_argument("--only", choices=["coterie", "kafka"], default=None,
                        help="measure just one broker")
    parser.add_argument("--json", type=Path, default=None, help="also write results as JSON")
    args = parser.parse_args(argv)

    kinds = [args.only] if args.only else ["coterie", "kafka"]
    if "kafka" in kinds:
        rk = load_reference_kafka()
        try:
            rk.require_tools(("java",))
            rk.fetch(log=lambda m: print(m, file=sys.stderr, flush=True))
        except rk.ReferenceKafkaError as exc:
            print(f"benchmark: {exc}", file=sys.stderr)
            return 2
        print(f"benchmark: reference broker is Apache Kafka {rk.kafka_version()}",
              file=sys.stderr)

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="coterie-bench-") as tmp:
        for kind in kinds:
            print(f"benchmark: starting {kind}", file=sys.stderr, flush=True)
            with run_broker(kind, Path(tmp)) as bootstrap:
                results += bench_broker(kind, bootstrap, args)

    print(f"\n{args.records:,} records x {args.value_size} B values per topic "
          f"(librdkafka {libversion()[0]}, acks=1, linger.ms=5, "
          "batch.size=256KiB)\n")
    print(table(results))
    if args.json:
        payload = [{**asdict(r), "produce_rps": r.rate("produce")[0],
                    "produce_mbps": r.rate("produce")[1], "consume_rps": r.rate("consume")[0],
                    "consume_mbps": r.rate("consume")[1]} for r in results]
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
