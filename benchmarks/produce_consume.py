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
import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition, libversion

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import create_topic, prepare_reference, run_broker

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


# --------------------------------------------------------------------------- workload


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
        problem = prepare_reference(lambda m: print(f"benchmark: {m}", file=sys.stderr,
                                                     flush=True))
        if problem:
            print(f"benchmark: {problem}", file=sys.stderr)
            return 2

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
