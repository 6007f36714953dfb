"""The log cleaner: throughput, and what it does to heartbeats meanwhile (issue 14).

A coterie broker runs on a free loopback port with a temporary data dir and
`log.cleaner.backoff.ms` 500 (the cleaner looks for work twice a second). One partition of a
compacted topic (segment.bytes `--segment-mib`, 128 MiB) is filled with `--gib` GiB of keyed
records through confluent-kafka (values of `--value-bytes` bytes, 1,000, uncompressed; keys
drawn at random from `--keys` distinct keys, 100,000, so most records are superseded).
While it fills, the topic's min.compaction.lag.ms is one day, so no segment is cleanable
and nothing is cleaned. Then the two healthy heartbeat probes of benchmarks/_probes.py (the
ones benchmarks/hostile.py uses) run a quiet baseline of `--baseline-seconds`; then
min.compaction.lag.ms is set to 0 with IncrementalAlterConfigs and the probes record until
the broker logs that the partition is cleaned up to its active segment (every pass's log
line is read for its figures).

Reported: the fill rate; per pass, the broker's own figures (time, segments, MB read, MB
written, records removed); cleaned MB/s two ways: the sealed segments' bytes (what was
compacted) over the passes' time, and the bytes the passes read (each sealed byte is read
twice: once for the key map, once to rewrite it) over the same time; the partition's size
on disk before and after; the broker's CPU time during cleaning; heartbeat p50 / p99 / max
(the longest pause) and errors, baseline and during cleaning. Then the partition is consumed
from the start and checked: every key present with its last value, each record at the
offset it was written to, and as many records as the distinct keys of the cleaned segments
plus the active segment's records.

    .venv/bin/python benchmarks/cleaner.py                       # 1 GiB, a few minutes
    .venv/bin/python benchmarks/cleaner.py --gib 0.25 --segment-mib 32
    .venv/bin/python benchmarks/cleaner.py --profile /tmp/cleaner.prof   # broker under cProfile
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from array import array
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import cpu_seconds, create_topic, run_broker_process  # noqa: E402
from _probes import PROBE_SETTINGS, HeartbeatProbes  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

TOPIC = "cleaned"
PROBE_TOPIC = "cleaner-probe"
DAY_MS = 24 * 3600 * 1000
PASS_LINE = re.compile(
    r"cleaned (?P<name>\S+) up to offset (?P<to>\d+) in (?P<secs>[\d.]+) s: (?P<segs>\d+) "
    r"segments into (?P<into>\d+), (?P<read>[\d.]+) MB read, (?P<written>[\d.]+) MB written, "
    r"(?P<removed>\d+) records removed")
MB = 1e6


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _segments(directory: Path) -> list[tuple[int, int]]:
    """(base offset, bytes) of every segment file of a partition, in offset order."""
    return sorted((int(p.name.split(".")[0]), p.stat().st_size)
                  for p in directory.glob("*.log"))


def _fill(bootstrap: str, total_bytes: int, n_keys: int, value_bytes: int,
          keys_at: array) -> tuple[int, float]:
    """Produce until `total_bytes` of values are written; keys_at[i] is the key number of
    the record at offset i (one idempotent producer, one partition: offsets in order)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "batch.size": 1_000_000, "compression.type": "none",
                         "enable.idempotence": True, "queue.buffering.max.kbytes": 1_048_576,
                         "log_level": 4})
    rng = random.Random(14)
    pad = b"x" * (value_bytes - 12)
    count = total_bytes // value_bytes
    started = time.perf_counter()
    for seq in range(count):
        k = rng.randrange(n_keys)
        keys_at.append(k)
        value = b"%012d" % seq + pad
        while True:
            try:
                producer.produce(TOPIC, value, b"k%07d" % k, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if seq % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return count, time.perf_counter() - started


def _set_lag(bootstrap: str, lag_ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", str(lag_ms),
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _passes(log_path: Path, seen: int) -> list[dict]:
    """The cleaner's pass lines for TOPIC-0 in the broker's log."""
    text = log_path.read_text(errors="replace")[seen:]
    return [{k: (v if k == "name" else float(v)) for k, v in m.groupdict().items()}
            for m in PASS_LINE.finditer(text) if m["name"] == f"{TOPIC}-0"]


def _verify(bootstrap: str, keys_at: array, active_base: int) -> dict:
    """Consume the partition from the start and check it against what was produced."""
    n = len(keys_at)
    last: dict[int, int] = {}
    for offset, k in enumerate(keys_at):
        last[k] = offset
    expected = len(set(keys_at[:active_base])) + (n - active_base)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cleaner-check",
                         "enable.auto.commit": False, "log_level": 4,
                         "fetch.max.bytes": 64 * 1024 * 1024})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: dict[int, int] = {}
    count = misplaced = 0
    started = time.perf_counter()
    done = False
    while not done and time.perf_counter() - started < 300:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error():
                raise RuntimeError(f"consume: {msg.error()}")
            count += 1
            offset = msg.offset()
            if int(msg.value()[:12]) != offset:
                misplaced += 1
            seen[int(msg.key()[1:])] = offset
            if offset == n - 1:
                done = True
    consumer.close()
    wrong = sum(1 for k, off in last.items() if seen.get(k) != off)
    return {"records": count, "expected": expected, "keys": len(seen),
            "keys_produced": len(last), "wrong_last_value": wrong, "misplaced": misplaced,
            "complete": done}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="GiB of values to produce")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--segment-mib", type=int, default=128)
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=0.05, help="heartbeat interval (s)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="give up waiting for the cleaner after this long (s)")
    parser.add_argument("--override", action="append", default=[],
                        help="a broker property key=value (repeatable)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run the broker under cProfile, writing its figures here")
    args = parser.parse_args()
    overrides = {**PROBE_SETTINGS, "log.cleaner.backoff.ms": "500"}
    overrides.update(kv.split("=", 1) for kv in args.override)
    launcher = ("-m", "cProfile", "-o", str(args.profile), "-m", "coterie") if args.profile \
        else ("-m", "coterie")
    load_start = _load()
    print(f"load average at start {load_start}", flush=True)
    with tempfile.TemporaryDirectory(prefix="coterie-cleaner-") as tmp, \
            run_broker_process("coterie", Path(tmp), overrides, launcher) as (bootstrap, proc):
        host, port_s = bootstrap.rsplit(":", 1)
        log_path = Path(tmp) / "coterie.log"
        part_dir = Path(tmp) / "coterie-data" / f"{TOPIC}-0"
        create_topic(bootstrap, PROBE_TOPIC, 1)
        create_topic(bootstrap, TOPIC, 1, {
            "cleanup.policy": "compact", "segment.bytes": str(args.segment_mib << 20),
            "min.compaction.lag.ms": str(DAY_MS)})

        keys_at = array("l")
        count, took = _fill(bootstrap, int(args.gib * (1 << 30)), args.keys, args.value_bytes,
                            keys_at)
        before = _segments(part_dir)
        active_base = before[-1][0]
        sealed = sum(size for _, size in before[:-1])
        print(f"filled: {count:,} records of {args.value_bytes} B in {took:.1f} s, "
              f"{count / took:,.0f} rec/s, {count * args.value_bytes / MB / took:.1f} MB/s of "
              f"values; {len(before)} segments, {sum(s for _, s in before) / MB:.1f} MB on "
              f"disk ({sealed / MB:.1f} MB sealed, active segment from offset "
              f"{active_base:,}); load average {_load()}", flush=True)

        with HeartbeatProbes(host, int(port_s), PROBE_TOPIC, args.every) as probes:
            probes.start_window()
            time.sleep(args.baseline_seconds)
            baseline = probes.end_window("baseline", "no cleaning")
            log_seen = len(log_path.read_text(errors="replace"))
            cpu_before = cpu_seconds(proc.pid)
            probes.start_window()
            started = time.perf_counter()
            _set_lag(bootstrap, 0)
            passes: list[dict] = []
            while time.perf_counter() - started < args.timeout:
                passes = _passes(log_path, log_seen)
                if passes and passes[-1]["to"] >= active_base:
                    break
                time.sleep(0.05)
            wall = time.perf_counter() - started
            during = probes.end_window("during cleaning", f"{len(passes)} passes")
            cpu = cpu_seconds(proc.pid) - cpu_before
        load_after = _load()
        after = _segments(part_dir)
        check = _verify(bootstrap, keys_at, active_base)

    if not passes or passes[-1]["to"] < active_base:
        print(f"cleaner did not reach offset {active_base} within {args.timeout:.0f} s")
    print("\n| pass | seconds | segments | MB read | MB written | records removed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for i, p in enumerate(passes, 1):
        print(f"| {i} | {p['secs']:.2f} | {int(p['segs'])} into {int(p['into'])} | "
              f"{p['read']:.1f} | {p['written']:.1f} | {int(p['removed']):,} |")
    secs = sum(p["secs"] for p in passes) or float("nan")
    read = sum(p["read"] for p in passes)
    removed = sum(int(p["removed"]) for p in passes)
    print(f"\n| figure | value |\n| --- | --- |\n"
          f"| data | {args.gib} GiB, {count:,} records, {args.keys:,} keys, segment.bytes "
          f"{args.segment_mib} MiB |\n"
          f"| fill | {count / took:,.0f} rec/s, {count * args.value_bytes / MB / took:.1f} MB/s |\n"
          f"| cleaning time (passes / alter to last pass logged) | {secs:.1f} s / {wall:.1f} s |\n"
          f"| cleaned: sealed MB / s | {sealed / MB / secs:.1f} MB/s ({sealed / MB:.0f} MB) |\n"
          f"| cleaned: MB read / s | {read / secs:.1f} MB/s ({read:.0f} MB) |\n"
          f"| records removed | {removed:,} |\n"
          f"| on disk before / after | {sum(s for _, s in before) / MB:.1f} MB in {len(before)} "
          f"segments / {sum(s for _, s in after) / MB:.1f} MB in {len(after)} segments |\n"
          f"| broker CPU while cleaning | {cpu:.1f} s ({cpu / wall * 100:.0f} % of one core) |\n"
          f"| load average before / after | {load_start} / {load_after} |")
    print("\n| heartbeats | n | p50 ms | p99 ms | max ms | errors |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in (baseline, during):
        errs = ", ".join(sorted(set(r["errors"]))) or "0"
        print(f"| {r['case']} | {r['n']} | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} "
              f"| {errs} |")
    ok = (check["complete"] and check["records"] == check["expected"]
          and check["wrong_last_value"] == 0 and check["misplaced"] == 0
          and check["keys"] == check["keys_produced"])
    print(f"\ncheck: {check['records']:,} records read back (expected {check['expected']:,}: "
          f"the distinct keys below offset {active_base:,} plus the active segment), "
          f"{check['keys']:,} keys of {check['keys_produced']:,}, "
          f"{check['wrong_last_value']} keys without their last value, "
          f"{check['misplaced']} records at another offset than written: "
          f"{'OK' if ok else 'FAILED'}")


if __name__ == "__main__":
    main()
