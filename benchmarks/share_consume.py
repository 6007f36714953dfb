"""Share-group consume throughput (KIP-932) of coterie next to Apache Kafka, with librdkafka's
ShareConsumer: 1, 4 and 16 consumers on one topic of 4 partitions (issue 27).

Each broker runs as its own subprocess on a free loopback port with a temporary data dir
(benchmarks/_brokers.py: coterie as `python -m coterie serve`, Kafka 4.2.1 through
scripts/reference_kafka.py), one broker after the other in the same run, so they do not
compete for cores with each other. On each broker:

* one topic of `--partitions` (4) partitions gets `--records` (1,500,000) records of
  `--value-size` (100) bytes, round-robin over the partitions, produced before any consumer
  starts (confluent-kafka, linger.ms=5, acks=1); each value starts with the record's number;
* for every consumer count (1, 4, 16 by default) a fresh share group is given
  share.auto.offset.reset=earliest (IncrementalAlterConfigs on the GROUP resource), then that
  many ShareConsumers, each in its own process (multiprocessing, spawn), subscribe and wait
  until all are subscribed and `--settle` seconds have passed (the members join and get
  their partitions: Kafka names a member's partitions one heartbeat, 5 s, after it joins),
  then all start polling at once. Acknowledgement is implicit (the default): the records a
  poll returned are accepted with the next poll, the last ones on close;
* the clock runs from the first record any consumer got to the last record any consumer got.
  Once every record has arrived the consumers keep polling another `--grace` second(s),
  so that a record delivered twice would show, then close.

records/s = distinct records / window; acks/s = records accepted / window, where every record
a consumer polled counts as accepted (implicit acknowledgement accepts it on the consumer's
next poll or on close; a record delivered twice is accepted twice). Each record's number is
checked: every record exactly once on each broker, or the duplicates and the missing are
reported.

    .venv/bin/python benchmarks/share_consume.py                  # both brokers
    .venv/bin/python benchmarks/share_consume.py --only coterie --consumers 1,4
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import struct
import sys
import tempfile
import time
import uuid
from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PHASE_TIMEOUT = 180.0


@dataclass
class Level:
    broker: str
    consumers: int
    records: int
    window_s: float
    polled: int  # records polled in all, duplicates included (each one accepted)
    distinct: int
    duplicates: int
    missing: int
    per_consumer: list[int]
    errors: list[str]
    go_to_last_s: float  # from the moment all consumers may poll to the last record
    broker_cpu_s: float  # the broker's CPU time from go until the consumers stopped
    consumers_cpu_s: float  # the consumer processes' CPU time from go until they stopped

    @property
    def records_per_s(self) -> float:
        return self.distinct / self.window_s if self.window_s > 0 else 0.0

    @property
    def acks_per_s(self) -> float:
        return self.polled / self.window_s if self.window_s > 0 else 0.0


# --------------------------------------------------------------------------- consumer process


def consumer_main(index: int, bootstrap: str, group: str, topic: str, out: str,
                  ready, go, stop, counts, results) -> None:
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "log_level": 3})  # not the "Preview" warning of every consumer
    c.subscribe([topic])
    ready.put(index)
    go.wait()
    cpu0 = time.process_time()
    ids = array("I")
    first = last = 0.0
    errors: list[str] = []
    unpack = struct.Struct(">I").unpack_from
    try:
        while not stop.is_set():
            batch = c.poll(0.1)
            now = time.monotonic()
            got = 0
            for m in batch:
                if m.error() is not None:
                    if len(errors) < 5:
                        errors.append(str(m.error()))
                    continue
                ids.append(unpack(m.value())[0])
                got += 1
            if got:
                if not first:
                    first = now
                last = now
                counts[index] = len(ids)
    finally:
        cpu = time.process_time() - cpu0  # librdkafka's threads included
        c.close()  # accepts the last poll's records
    with open(out, "wb") as f:
        ids.tofile(f)
    results.put((index, first, last, len(ids), errors, cpu))


# --------------------------------------------------------------------------- workload


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                  "batch.size": 256 * 1024, "compression.type": "none",
                  "queue.buffering.max.messages": 500_000})
    pad = os.urandom(max(0, size - 4))
    failures: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failures.append(str(err))

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, struct.pack(">I", i) + pad, partition=i % partitions,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(PHASE_TIMEOUT) or failures:
        raise RuntimeError(f"produce to {topic}: not every record delivered {failures[:3]}")
    return time.perf_counter() - start


def set_earliest(bootstrap: str, group: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    (future,) = admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])]).values()
    future.result(30)


def run_level(kind: str, bootstrap: str, broker_pid: int, topic: str, n: int,
              args: argparse.Namespace, work: Path) -> Level:
    from _brokers import cpu_seconds

    ctx = mp.get_context("spawn")  # no fork of a process holding librdkafka threads
    group = f"share-bench-{n}-{uuid.uuid4().hex[:6]}"
    set_earliest(bootstrap, group)
    ready, results = ctx.Queue(), ctx.Queue()
    go, stop = ctx.Event(), ctx.Event()
    counts = ctx.Array("q", n, lock=False)
    outs = [str(work / f"{kind}-{n}-{i}.ids") for i in range(n)]
    procs = [ctx.Process(target=consumer_main, daemon=True,
                         args=(i, bootstrap, group, topic, outs[i], ready, go, stop, counts,
                               results)) for i in range(n)]
    for p in procs:
        p.start()
    try:
        for _ in range(n):
            ready.get(timeout=PHASE_TIMEOUT)
        time.sleep(args.settle)
        broker_cpu0 = cpu_seconds(broker_pid)
        go_at = time.monotonic()
        go.set()
        deadline = time.monotonic() + PHASE_TIMEOUT
        while sum(counts) < args.records and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(args.grace)  # a record delivered twice would show now
        stop.set()
        broker_cpu = cpu_seconds(broker_pid) - broker_cpu0
        got = [results.get(timeout=60) for _ in range(n)]
        for p in procs:
            p.join(30)
    finally:
        stop.set()
        go.set()
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
    got.sort()
    firsts = [g[1] for g in got if g[1]]
    lasts = [g[2] for g in got if g[2]]
    window = (max(lasts) - min(firsts)) if firsts else 0.0
    seen: Counter[int] = Counter()
    for out in outs:
        ids = array("I")
        with open(out, "rb") as f:
            ids.frombytes(f.read())
        seen.update(ids)
        os.unlink(out)
    distinct = sum(1 for i in seen if 0 <= i < args.records)
    return Level(kind, n, args.records, window, polled=sum(g[3] for g in got),
                 distinct=distinct, duplicates=sum(c - 1 for c in seen.values() if c > 1),
                 missing=args.records - distinct, per_consumer=[g[3] for g in got],
                 errors=[e for g in got for e in g[4]],
                 go_to_last_s=(max(lasts) - go_at) if lasts else 0.0,
                 broker_cpu_s=broker_cpu, consumers_cpu_s=sum(g[5] for g in got))


def bench_broker(kind: str, args: argparse.Namespace, work: Path) -> list[Level]:
    from _brokers import create_topic, run_broker_process

    out: list[Level] = []
    launcher: tuple[str, ...] = ("-m", "coterie")
    if kind == "coterie" and args.profile:
        launcher = ("-m", "cProfile", "-o", str(args.profile), "-m", "coterie")
    with run_broker_process(kind, work, launcher=launcher) as (bootstrap, proc):
        topic = f"share-bench-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, args.partitions)
        secs = produce(bootstrap, topic, args.partitions, args.records, args.value_size)
        print(f"  {kind}: produced {args.records:,} records in {secs:.1f} s",
              file=sys.stderr, flush=True)
        for n in args.consumers:
            level = run_level(kind, bootstrap, proc.pid, topic, n, args, work)
            out.append(level)
            print(f"  {kind:8} {n:>2} consumers: {level.records_per_s:>9,.0f} records/s "
                  f"{level.acks_per_s:>9,.0f} acks/s in {level.window_s:.2f} s "
                  f"({level.go_to_last_s:.2f} s from go), broker CPU "
                  f"{level.broker_cpu_s:.2f} s, consumers CPU {level.consumers_cpu_s:.2f} s, "
                  f"duplicates {level.duplicates}, missing {level.missing}, "
                  f"per consumer {level.per_consumer}"
                  + (f", errors {level.errors[:3]}" if level.errors else ""),
                  file=sys.stderr, flush=True)
    return out


# --------------------------------------------------------------------------- report


def table(levels: list[Level]) -> str:
    lines = [f"{'broker':8} {'consumers':>9} {'window s':>9} {'from go':>8} {'records/s':>10} "
             f"{'acks/s':>10} {'broker CPU':>10} {'cons. CPU':>9} {'dups':>5} {'missing':>7}  "
             "per consumer"]
    for lv in levels:
        lines.append(f"{lv.broker:8} {lv.consumers:>9} {lv.window_s:>9.2f} "
                     f"{lv.go_to_last_s:>8.2f} "
                     f"{lv.records_per_s:>10,.0f} {lv.acks_per_s:>10,.0f} "
                     f"{lv.broker_cpu_s:>10.2f} {lv.consumers_cpu_s:>9.2f} {lv.duplicates:>5} "
                     f"{lv.missing:>7}  {lv.per_consumer}")
    by = {(lv.broker, lv.consumers): lv for lv in levels}
    ratios = []
    for lv in levels:
        k = by.get(("kafka", lv.consumers))
        if lv.broker == "coterie" and k is not None and k.records_per_s:
            ratios.append(f"{lv.consumers:>9} consumers: records/s x"
                          f"{lv.records_per_s / k.records_per_s:.2f}, acks/s x"
                          f"{lv.acks_per_s / k.acks_per_s:.2f}")
    if ratios:
        lines += ["", "coterie/kafka (>1 means coterie is faster)", *ratios]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from _brokers import prepare_reference

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_500_000)
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (>= 4)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--consumers", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 4, 16], help="comma-separated consumer counts")
    parser.add_argument("--settle", type=float, default=6.0,
                        help="seconds between all subscribed and polling")
    parser.add_argument("--grace", type=float, default=1.0,
                        help="seconds of polling after the last record, for duplicates")
    parser.add_argument("--only", choices=["coterie", "kafka"], default=None)
    parser.add_argument("--profile", type=Path, default=None,
                        help="run coterie under cProfile, its figures written here")
    args = parser.parse_args(argv)

    kinds = [args.only] if args.only else ["coterie", "kafka"]
    if "kafka" in kinds:
        problem = prepare_reference(lambda m: print(f"benchmark: {m}", file=sys.stderr,
                                                     flush=True))
        if problem:
            print(f"benchmark: {problem}", file=sys.stderr)
            return 2
    from confluent_kafka import libversion

    levels: list[Level] = []
    with tempfile.TemporaryDirectory(prefix="coterie-share-bench-") as tmp:
        for kind in kinds:
            print(f"benchmark: {kind}", file=sys.stderr, flush=True)
            levels += bench_broker(kind, args, Path(tmp))
    print(f"\n{args.records:,} records x {args.value_size} B on {args.partitions} partitions, "
          f"ShareConsumer (librdkafka {libversion()[0]}), implicit acknowledgement, "
          f"one process per consumer\n")
    print(table(levels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
