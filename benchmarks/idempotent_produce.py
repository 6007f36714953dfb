"""Idempotent produce throughput: coterie with and without idempotence, next to Apache Kafka.

Issue 12's targets: an idempotent producer on coterie reaches at least 0.9 of coterie's
non-idempotent figure, and at least Kafka's idempotent figure. Each broker runs as its own
subprocess (as in produce_consume.py); on each, fresh topics of P partitions get N records of
1 KiB from confluent-kafka (acks=all, linger.ms=5, batch.size=256 KiB, no compression), once
with enable.idempotence=false and once with true, alternating for `--rounds` rounds so that
drift in the machine's load hits both alike. Each producer first delivers one record per
partition (so an idempotent one has its producer id); then the clock runs from the next
produce() until flush() returns with every delivery report in. Best round of each is
reported (the least disturbed by other work on the machine), with the median in brackets.

    .venv/bin/python benchmarks/idempotent_produce.py
    .venv/bin/python benchmarks/idempotent_produce.py --only coterie --records 50000
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

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import create_topic, prepare_reference, run_broker

PHASE_TIMEOUT = 600.0


def produce(bootstrap: str, topic: str, partitions: int, records: int, value: bytes,
            idempotent: bool) -> float:
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
        "batch.size": 256 * 1024, "compression.type": "none",
        "queue.buffering.max.messages": 500_000, "enable.idempotence": idempotent,
    })
    failures: list[str] = []
    delivered = 0

    def on_delivery(err, _msg) -> None:
        nonlocal delivered
        if err is not None:
            failures.append(str(err))
        else:
            delivered += 1

    # One record per partition first, outside the clock: an idempotent producer's first
    # step is InitProducerId, and librdkafka's start-up round trips (a fixed ~0.3 s here)
    # would otherwise weigh on a run that lasts well under a second.
    for p in range(partitions):
        producer.produce(topic, value, partition=p, on_delivery=on_delivery)
    producer.flush(PHASE_TIMEOUT)
    delivered -= partitions
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


def bench(kind: str, bootstrap: str, args: argparse.Namespace) -> dict[bool, list[float]]:
    value = os.urandom(1024)
    warm = f"warm-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, warm, 1)
    produce(bootstrap, warm, 1, 20_000, value, True)
    rates: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.rounds):
        for idempotent in ((False, True) if r % 2 == 0 else (True, False)):
            topic = f"idem-{int(idempotent)}-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, topic, args.partitions)
            seconds = produce(bootstrap, topic, args.partitions, args.records, value, idempotent)
            rates[idempotent].append(args.records / seconds)
            print(f"  {kind:8} idempotent={idempotent!s:5} {args.records / seconds:>10,.0f} rec/s",
                  file=sys.stderr, flush=True)
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["coterie", "kafka"], default=None)
    args = parser.parse_args(argv)
    kinds = [args.only] if args.only else ["coterie", "kafka"]
    if "kafka" in kinds:
        problem = prepare_reference(lambda m: print(f"benchmark: {m}", file=sys.stderr))
        if problem:
            print(f"benchmark: {problem}", file=sys.stderr)
            return 2
    results: dict[str, dict[bool, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="coterie-bench-") as tmp:
        for kind in kinds:
            with run_broker(kind, Path(tmp)) as bootstrap:
                results[kind] = bench(kind, bootstrap, args)
    print(f"{args.records} records of 1 KiB, {args.partitions} partitions, acks=all, "
          f"{args.rounds} rounds; best (median) rec/s")
    best: dict[tuple[str, bool], float] = {}
    for kind, rates in results.items():
        for idempotent, values in rates.items():
            best[kind, idempotent] = max(values)
            print(f"{kind:8} idempotent={idempotent!s:5} {max(values):>10,.0f} "
                  f"({statistics.median(values):,.0f})")
    if ("coterie", True) in best:
        ratio = best["coterie", True] / best["coterie", False]
        print(f"coterie idempotent / coterie plain: x{ratio:.2f} (target >= 0.9)")
    if ("coterie", True) in best and ("kafka", True) in best:
        ratio = best["coterie", True] / best["kafka", True]
        print(f"coterie idempotent / kafka idempotent: x{ratio:.2f} (target >= 1.0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
