"""Exactly-once consume-transform-produce throughput: coterie next to Apache Kafka.

Issue 12's target: a loop that commits transactions of 100 records with their input offsets
runs at least 0.8 as fast on coterie as on Kafka. Each broker runs as its own subprocess (as
in produce_consume.py). On each: N records of 100 bytes are produced to a 1-partition input
topic; then one confluent-kafka consumer (read_committed, a classic group) and one
transactional producer run the loop: poll up to 100 records, begin a transaction, produce
each record (upper-cased) to the output topic, send the consumer's offsets to the
transaction, commit. The clock runs from the first poll until the last commit returns;
records/s and transactions/s are reported, best of `--rounds` rounds (fresh topics, group
and transactional id each round), the median in brackets.

    .venv/bin/python benchmarks/transactions.py
    .venv/bin/python benchmarks/transactions.py --only coterie --records 5000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import create_topic, prepare_reference, produce_timed, run_broker

BATCH = 100
TIMEOUT = 300.0


def fill(bootstrap: str, topic: str, records: int) -> None:
    """`records` records of 100 bytes in the loop's input topic."""
    produce_timed({"bootstrap.servers": bootstrap, "linger.ms": 5}, topic, records,
                  os.urandom(50).hex().encode())


def loop(bootstrap: str, source: str, sink: str, records: int) -> float:
    """Seconds for the whole exactly-once loop over `records` input records."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1,
                         "transactional.id": f"eos-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    consumer.subscribe([source])
    done = 0
    deadline = time.monotonic() + TIMEOUT
    start = None
    try:
        while done < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {done}/{records} records went through")
            msgs = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
            if not msgs:
                continue
            if start is None:
                start = time.perf_counter()
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, m.value().upper(), partition=0)
            last = msgs[-1]
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, last.offset() + 1)],
                consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            done += len(msgs)
        assert start is not None
        return time.perf_counter() - start
    finally:
        consumer.close()


def bench(kind: str, bootstrap: str, args: argparse.Namespace) -> list[float]:
    rates = []
    for _ in range(args.rounds):
        source, sink = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, source, 1)
        create_topic(bootstrap, sink, 1)
        fill(bootstrap, source, args.records)
        seconds = loop(bootstrap, source, sink, args.records)
        rates.append(args.records / seconds)
        print(f"  {kind:8} {args.records / seconds:>10,.0f} rec/s "
              f"({args.records / BATCH / seconds:,.0f} txn/s)", file=sys.stderr, flush=True)
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["coterie", "kafka"], default=None)
    args = parser.parse_args(argv)
    kinds = [args.only] if args.only else ["coterie", "kafka"]
    if "kafka" in kinds:
        problem = prepare_reference(lambda m: print(f"benchmark: {m}", file=sys.stderr))
        if problem:
            print(f"benchmark: {problem}", file=sys.stderr)
            return 2
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="coterie-bench-") as tmp:
        for kind in kinds:
            with run_broker(kind, Path(tmp)) as bootstrap:
                results[kind] = bench(kind, bootstrap, args)
    print(f"{args.records} records of 100 bytes, transactions of {BATCH}, {args.rounds} "
          "rounds; best (median) rec/s")
    for kind, rates in results.items():
        print(f"{kind:8} {max(rates):>10,.0f} ({statistics.median(rates):,.0f})")
    if len(results) == 2:
        ratio = max(results["coterie"]) / max(results["kafka"])
        print(f"coterie / kafka: x{ratio:.2f} (target >= 0.8)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
