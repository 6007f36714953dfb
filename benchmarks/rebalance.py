"""Rebalance time of coterie next to Apache Kafka, measured with librdkafka consumers.

Both brokers are started the same way as in produce_consume.py (benchmarks/_brokers.py), one
after the other, with the same `group.initial.rebalance.delay.ms` on both, 0 by default: with
Kafka's default of 3 s every first join would measure that constant delay rather than the
coordinator (`--initial-delay-ms` sets another value, for a cross-check).

For every broker, group size N (10 and 100 by default) and repetition (10 by default), a
fresh topic with P = 2*N partitions and a fresh group id are used:

* N confluent-kafka `Consumer`s (librdkafka, `group.protocol=classic`, eager `range`
  assignor, session.timeout.ms=10000, heartbeat.interval.ms=500, max.poll.interval.ms=60000,
  no auto commit) are created, spread over 4 worker processes with one thread per consumer
  (the measuring process stays free of them); each thread fetches the topic's metadata once
  (so connections are up) and then waits. Every thread calls `consume(timeout=0.1)` in a
  loop, which is what runs the rebalance callbacks; `on_assign` / `on_revoke` / `on_lost`
  report the member's partitions with a `time.monotonic()` stamp (one clock for all
  processes) to the measuring process.
* "join": the clock starts right before the first `subscribe()` and stops at the last change
  of ownership after which every partition is owned by exactly one member, every member owns
  at least one (with P = 2*N each ends with two), and nothing changes for a quiet period
  (2 s, longer than a heartbeat interval, so a rebalance still under way would show).
* "leave": after a pause drawn uniformly from one heartbeat interval (the survivors'
  heartbeats run in step after a rebalance, and when they notice depends on where in that
  cycle the member leaves), one member (the first created, not necessarily the group leader)
  calls `close()`, which revokes locally and sends LeaveGroup. The clock starts right before
  that `close()` and stops the same way, over the N-1 survivors. It is also split at the last
  survivor's `on_revoke`: before it the survivors wait for their next heartbeat to learn of
  the rebalance; after it they rejoin and sync, which is mostly the coordinator's work.
* After each phase, untimed, `describe_consumer_groups` must report the group Stable with
  N (then N-1) members whose assignments cover the topic.

A warm-up group (unmeasured) runs first on each broker. The tables give the median and the
best of the repetitions in seconds with the ratio coterie/kafka (below 1 means coterie is
faster), then every run. On failure the broker and librdkafka logs are kept and named.

    .venv/bin/python benchmarks/rebalance.py                      # both brokers, N=10,100
    .venv/bin/python benchmarks/rebalance.py --only coterie --sizes 10 --reps 1
    .venv/bin/python benchmarks/rebalance.py --initial-delay-ms 1000 --reps 5
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import queue
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, libversion
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _brokers import create_topic, prepare_reference, run_broker

CONSUMER_SETTINGS: dict[str, Any] = {
    "group.protocol": "classic",
    "partition.assignment.strategy": "range",
    "session.timeout.ms": 10_000,
    "heartbeat.interval.ms": 500,
    "max.poll.interval.ms": 60_000,
    "enable.auto.commit": False,
    "auto.offset.reset": "latest",
}
POLL_TIMEOUT = 0.1
READY_TIMEOUT = 90.0
PHASE_TIMEOUT = 120.0
VERIFY_TIMEOUT = 15.0
STOP_TIMEOUT = 90.0


class BenchError(RuntimeError):
    """A measurement could not be completed (with what was seen so far)."""


# --------------------------------------------------------------------------- worker process


def _consumer_thread(member: int, conf: dict[str, Any], topic: str, events: Any,
                     go: threading.Event, leave: threading.Event,
                     stop: threading.Event) -> None:
    def send(*event: Any) -> None:
        events.put(event)

    def on_assign(_consumer: Consumer, partitions: list) -> None:
        send("assign", member, time.monotonic(), sorted(p.partition for p in partitions))

    def on_revoke(_consumer: Consumer, _partitions: list) -> None:
        send("revoke", member, time.monotonic(), [])

    def on_error(err: Any) -> None:
        send("client-error", member, time.monotonic(), str(err))

    consumer = None
    try:
        consumer = Consumer({**conf, "client.id": f"rebalance-{member}", "error_cb": on_error})
        consumer.list_topics(topic, timeout=30)  # connections and metadata are up
        send("ready", member, time.monotonic(), None)
        while not go.wait(0.5):
            if stop.is_set():
                return
        send("subscribe", member, time.monotonic(), None)
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_revoke)
        while not (stop.is_set() or leave.is_set()):
            for msg in consumer.consume(num_messages=100, timeout=POLL_TIMEOUT):
                if msg.error():
                    send("client-error", member, time.monotonic(), str(msg.error()))
        if leave.is_set():
            send("leaving", member, time.monotonic(), None)
            consumer.close()
            consumer = None
            send("left", member, time.monotonic(), None)
    except Exception:
        send("thread-error", member, time.monotonic(), traceback.format_exc())
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except Exception:
                send("thread-error", member, time.monotonic(), traceback.format_exc())
        send("closed", member, time.monotonic(), None)


def worker_main(index: int, members: list[int], conf: dict[str, Any], topic: str,
                commands: Any, events: Any, log_path: str) -> None:
    """Host some consumers, one thread each, and obey the measuring process: "go" (all
    subscribe), ("leave", member), "stop" (close all and exit)."""
    logger = logging.getLogger(f"librdkafka-worker-{index}")
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    conf = {**conf, "logger": logger}
    parent = os.getppid()
    go, stop = threading.Event(), threading.Event()
    leave = {m: threading.Event() for m in members}
    threads = {m: threading.Thread(target=_consumer_thread, name=f"member-{m}", daemon=True,
                                   args=(m, conf, topic, events, go, leave[m], stop))
               for m in members}
    for t in threads.values():
        t.start()
    try:
        while True:
            try:
                command = commands.get(timeout=1.0)
            except queue.Empty:
                if os.getppid() != parent:  # the measuring process is gone
                    break
                continue
            if command == "go":
                go.set()
            elif command == "stop":
                break
            elif isinstance(command, tuple) and command[0] == "leave":
                leave[command[1]].set()
    finally:
        stop.set()
        deadline = time.monotonic() + STOP_TIMEOUT - 10
        for t in threads.values():
            t.join(max(0.0, deadline - time.monotonic()))
        stuck = [m for m, t in threads.items() if t.is_alive()]
        events.put(("stopped", index, time.monotonic(), stuck))


# --------------------------------------------------------------------------- measuring process


@dataclass
class Ownership:
    """What the measuring process knows about every member, fed by the workers' events."""

    partitions: int
    owned: dict[int, frozenset[int]] = field(default_factory=dict)
    departed: set[int] = field(default_factory=set)
    assigns: dict[int, int] = field(default_factory=dict)  # on_assign calls per member
    stamps: dict[str, dict[int, float]] = field(default_factory=dict)  # event -> member -> t
    revoked_at: dict[int, float] = field(default_factory=dict)  # last on_revoke per member
    last_change: float = 0.0  # stamp of the last ownership change of a live member
    last_arrival: float = 0.0  # when that change reached this process
    client_errors: list[str] = field(default_factory=list)
    thread_errors: list[str] = field(default_factory=list)
    stopped: dict[int, list[int]] = field(default_factory=dict)  # worker -> stuck members

    def apply(self, event: tuple) -> None:
        kind, who, stamp, payload = event
        if kind in ("assign", "revoke"):
            self.owned[who] = frozenset(payload)
            if kind == "assign":
                self.assigns[who] = self.assigns.get(who, 0) + 1
            else:
                self.revoked_at[who] = stamp
            if who not in self.departed:
                self.last_change = max(self.last_change, stamp)
                self.last_arrival = time.monotonic()
        elif kind == "client-error":
            self.client_errors.append(f"member {who}: {payload}")
        elif kind == "thread-error":
            self.thread_errors.append(f"member {who}: {payload}")
        elif kind == "stopped":
            self.stopped[who] = payload
        else:
            self.stamps.setdefault(kind, {})[who] = stamp

    def settled(self, live: list[int]) -> bool:
        """Every partition owned by exactly one live member, and every live member owns some."""
        held = [self.owned.get(m, frozenset()) for m in live]
        if not all(held):
            return False
        union: set[int] = set().union(*held)
        return sum(len(h) for h in held) == self.partitions and union == set(
            range(self.partitions))

    def summary(self, live: list[int]) -> str:
        held = [len(self.owned.get(m, ())) for m in live]
        owned: set[int] = set().union(*(self.owned.get(m, frozenset()) for m in live))
        return (f"{sum(1 for h in held if h)}/{len(live)} live members own partitions, "
                f"{len(owned)}/{self.partitions} partitions owned, "
                f"{sum(held) - len(owned)} owned twice; last errors: "
                f"{(self.client_errors + self.thread_errors)[-3:]}")


class Group:
    """N consumers of one group in worker processes, and the view of their ownership."""

    def __init__(self, bootstrap: str, n: int, partitions: int, workers: int, workdir: Path,
                 label: str, debug: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.n = n
        self.group_id = f"rebalance-{label}-{uuid.uuid4().hex[:8]}"
        self.topic = f"rebalance-{label}-{uuid.uuid4().hex[:8]}"
        self.partitions = partitions
        self.state = Ownership(partitions)
        ctx = mp.get_context("spawn")  # no fork of a process that already runs librdkafka
        self.events = ctx.Queue()
        conf = {"bootstrap.servers": bootstrap, "group.id": self.group_id, **CONSUMER_SETTINGS}
        if debug:
            conf["debug"] = debug
        workers = max(1, min(workers, n))
        self.host_of = {m: m % workers for m in range(n)}
        self.commands = [ctx.Queue() for _ in range(workers)]
        self.procs = [
            ctx.Process(target=worker_main, name=f"rebalance-worker-{w}", daemon=True,
                        args=(w, [m for m in range(n) if m % workers == w], conf, self.topic,
                              self.commands[w], self.events,
                              str(workdir / f"{label}-worker-{w}.log")))
            for w in range(workers)
        ]
        self.quiet = 2.0

    def pump(self, timeout: float) -> None:
        try:
            self.state.apply(self.events.get(timeout=timeout))
            while True:
                self.state.apply(self.events.get_nowait())
        except queue.Empty:
            pass

    def wait_for(self, what: str, condition: Callable[[], bool], timeout: float,
                 live: list[int]) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise BenchError(f"group {self.group_id}: timed out after {timeout:.0f} s "
                                 f"waiting for {what}: {self.state.summary(live)}")
            if self.state.thread_errors:
                raise BenchError(f"group {self.group_id}: consumer thread failed while "
                                 f"waiting for {what}:\n{self.state.thread_errors[0]}")
            dead = [p.name for p in self.procs if not p.is_alive()]
            if dead:
                raise BenchError(f"group {self.group_id}: worker {dead} died while waiting "
                                 f"for {what}")
            self.pump(0.05)

    def wait_settled(self, live: list[int], what: str) -> float:
        """Block until `live` own the topic exactly once and nothing changed for the quiet
        period; return the stamp of the last change."""
        def done() -> bool:
            return (self.state.settled(live)
                    and time.monotonic() - self.state.last_arrival >= self.quiet)
        self.wait_for(what, done, PHASE_TIMEOUT, live)
        return self.state.last_change

    def start(self) -> None:
        create_topic(self.bootstrap, self.topic, self.partitions)
        for p in self.procs:
            p.start()
        everyone = list(range(self.n))
        self.wait_for(f"{self.n} consumers to start",
                      lambda: len(self.state.stamps.get("ready", {})) == self.n,
                      READY_TIMEOUT, everyone)

    def join(self) -> dict[str, float]:
        """Phase 1, from the first subscribe() until settled."""
        live = list(range(self.n))
        for c in self.commands:
            c.put("go")
        self.wait_for("subscribe() calls",
                      lambda: len(self.state.stamps.get("subscribe", {})) == self.n,
                      PHASE_TIMEOUT, live)
        subscribed = self.state.stamps["subscribe"].values()
        start = min(subscribed)
        end = self.wait_settled(live, "every partition to be owned once")
        self.verify(live)
        return {"join_s": end - start, "join_spread_s": max(subscribed) - start,
                "join_assigns": max(self.state.assigns.values())}

    def leave(self, pause: float, member: int = 0) -> dict[str, float]:
        """Phase 2, from the member's close() until the survivors settle. `pause` (seconds)
        is waited first, so that close() falls at a different point of the survivors'
        heartbeat cycle in every repetition (their heartbeats are in step after a rebalance,
        and how long they take to notice depends on that point)."""
        live = [m for m in range(self.n) if m != member]
        before = dict(self.state.assigns)
        time.sleep(pause)
        self.state.revoked_at.clear()
        self.state.departed.add(member)
        self.commands[self.host_of[member]].put(("leave", member))
        self.wait_for(f"member {member} to start closing",
                      lambda: member in self.state.stamps.get("leaving", {}),
                      PHASE_TIMEOUT, live)
        start = self.state.stamps["leaving"][member]
        end = self.wait_settled(live, f"survivors to own every partition after {member} left")
        self.verify(live)
        last_revoke = max((self.state.revoked_at[m] for m in live
                           if m in self.state.revoked_at), default=start)
        return {"leave_s": end - start, "leave_notice_s": last_revoke - start,
                "leave_regroup_s": end - last_revoke,
                "leave_assigns": max(self.state.assigns.get(m, 0) - before.get(m, 0)
                                     for m in live)}

    def verify(self, live: list[int]) -> None:
        """Untimed: the broker itself must describe the group as Stable with these members
        and an assignment that covers the topic."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 4})
        deadline = time.monotonic() + VERIFY_TIMEOUT
        seen = "nothing"
        while time.monotonic() < deadline:
            try:
                desc = admin.describe_consumer_groups(
                    [self.group_id], request_timeout=5)[self.group_id].result()
            except Exception as exc:  # retried, reported below
                seen = repr(exc)
                time.sleep(0.2)
                continue
            covered = sorted(tp.partition for m in desc.members
                             for tp in m.assignment.topic_partitions)
            seen = f"state {desc.state}, {len(desc.members)} members, {len(covered)} partitions"
            if (desc.state == ConsumerGroupState.STABLE and len(desc.members) == len(live)
                    and covered == list(range(self.partitions))):
                return
            time.sleep(0.2)
        raise BenchError(f"group {self.group_id} is not Stable with {len(live)} members "
                         f"owning {self.partitions} partitions: {seen}")

    def close(self) -> None:
        """Stop every worker (closing its consumers); bounded, then forceful."""
        for c in self.commands:
            c.put("stop")
        deadline = time.monotonic() + STOP_TIMEOUT
        while (len(self.state.stopped) < len(self.procs) and time.monotonic() < deadline
               and any(p.is_alive() for p in self.procs)):
            self.pump(0.2)
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.terminate()
                p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
        stuck = sorted(m for ms in self.state.stopped.values() for m in ms)
        if stuck:
            print(f"benchmark: warning: consumers {stuck[:10]} of {self.group_id} did not "
                  "close in time", file=sys.stderr, flush=True)


@dataclass
class Sample:
    broker: str
    n: int
    partitions: int
    rep: int
    join_s: float
    join_spread_s: float  # from the first to the last subscribe() call
    join_assigns: int  # most on_assign calls one member saw in the join phase
    leave_s: float
    leave_notice_s: float  # close() until the last survivor's on_revoke
    leave_regroup_s: float  # the last survivor's on_revoke until settled
    leave_assigns: int
    client_errors: int


def run_once(kind: str, bootstrap: str, n: int, rep: int, args: argparse.Namespace,
             workdir: Path) -> Sample:
    group = Group(bootstrap, n, args.partitions_per_member * n, args.workers, workdir,
                  f"{kind}-n{n}-r{rep}", args.client_debug)
    group.quiet = args.quiet
    # The same pauses for both brokers: seeded by N and repetition.
    pause = random.Random(f"{n}/{rep}").uniform(
        0, CONSUMER_SETTINGS["heartbeat.interval.ms"] / 1000)
    try:
        group.start()
        joined = group.join()
        left = group.leave(pause)
    finally:
        group.close()
    return Sample(kind, n, group.partitions, rep, **joined, **left,
                  client_errors=len(group.state.client_errors))


def bench_broker(kind: str, bootstrap: str, args: argparse.Namespace,
                 workdir: Path) -> list[Sample]:
    if args.warmup:
        run_once(kind, bootstrap, args.warmup, 0, args, workdir)
        print(f"  {kind:8} warm-up group of {args.warmup} done", file=sys.stderr, flush=True)
    samples = []
    for n in args.sizes:
        for rep in range(1, args.reps + 1):
            s = run_once(kind, bootstrap, n, rep, args, workdir)
            samples.append(s)
            print(f"  {kind:8} N={n:<4} rep {rep:<2}: join {s.join_s:6.3f} s (subscribes "
                  f"over {s.join_spread_s:.3f} s, <= {s.join_assigns} on_assign per member), "
                  f"leave {s.leave_s:6.3f} s = {s.leave_notice_s:.3f} to the last revoke + "
                  f"{s.leave_regroup_s:.3f}, client errors {s.client_errors}",
                  file=sys.stderr, flush=True)
    return samples


# --------------------------------------------------------------------------- report


PHASE_LABELS = {"join": "join", "leave": "leave",
                "notice": "leave: until the last revoke", "regroup": "leave: from it on"}


def runs_by_key(samples: list[Sample]) -> dict[tuple[str, int, str], list[float]]:
    """Seconds of every repetition, by (broker, N, phase)."""
    out: dict[tuple[str, int, str], list[float]] = {}
    for s in samples:
        out.setdefault((s.broker, s.n, "join"), []).append(s.join_s)
        out.setdefault((s.broker, s.n, "leave"), []).append(s.leave_s)
        out.setdefault((s.broker, s.n, "notice"), []).append(s.leave_notice_s)
        out.setdefault((s.broker, s.n, "regroup"), []).append(s.leave_regroup_s)
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ratio(c: float | None, k: float | None) -> str:
    return f"x{c / k:.2f}" if c is not None and k else "-"


def table(samples: list[Sample]) -> str:
    """Medians and best runs with their ratios, then every run."""
    runs = runs_by_key(samples)
    med = {k: statistics.median(v) for k, v in runs.items()}
    best = {k: min(v) for k, v in runs.items()}
    sizes = sorted({s.n for s in samples})
    lines = ["| N | partitions | phase | coterie median s | kafka median s | ratio | "
             "coterie best s | kafka best s | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n in sizes:
        parts = next(s.partitions for s in samples if s.n == n)
        for phase, label in PHASE_LABELS.items():
            cm, km = med.get(("coterie", n, phase)), med.get(("kafka", n, phase))
            cb, kb = best.get(("coterie", n, phase)), best.get(("kafka", n, phase))
            lines.append(f"| {n} | {parts} | {label} | {_fmt(cm)} | {_fmt(km)} | "
                         f"{_ratio(cm, km)} | {_fmt(cb)} | {_fmt(kb)} | {_ratio(cb, kb)} |")
    lines += ["", "| broker | N | phase | every run, s |", "| --- | --- | --- | --- |"]
    for kind in ("coterie", "kafka"):
        for n in sizes:
            for phase, label in PHASE_LABELS.items():
                if (kind, n, phase) in runs:
                    each = ", ".join(_fmt(v) for v in runs[(kind, n, phase)])
                    lines.append(f"| {kind} | {n} | {label} | {each} |")
    return "\n".join(lines)


def sizes_arg(text: str) -> list[int]:
    sizes = [int(x) for x in text.split(",") if x.strip()]
    if not sizes or any(n < 2 for n in sizes):
        raise argparse.ArgumentTypeError("sizes must be integers >= 2 (one member leaves)")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=sizes_arg, default=[10, 100],
                        help="comma-separated group sizes N (default 10,100)")
    parser.add_argument("--reps", type=int, default=10, help="repetitions per size (default 10)")
    parser.add_argument("--only", choices=["coterie", "kafka"], default=None,
                        help="measure just one broker")
    parser.add_argument("--partitions-per-member", type=int, default=2,
                        help="the topic gets this many partitions per member (default 2)")
    parser.add_argument("--workers", type=int, default=4,
                        help="worker processes hosting the consumer threads (default 4)")
    parser.add_argument("--quiet", type=float, default=2.0,
                        help="seconds without ownership change that end a phase (default 2)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="size of the unmeasured warm-up group per broker (0 to skip)")
    parser.add_argument("--initial-delay-ms", type=int, default=0,
                        help="group.initial.rebalance.delay.ms for both brokers (default 0)")
    parser.add_argument("--client-debug", default=None, metavar="CONTEXTS",
                        help="librdkafka debug contexts (e.g. cgrp) for the worker logs")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep the broker and worker logs even when all went well")
    parser.add_argument("--json", type=Path, default=None, help="also write samples as JSON")
    args = parser.parse_args(argv)
    if args.warmup == 1:
        parser.error("--warmup must be 0 or >= 2")

    kinds = [args.only] if args.only else ["coterie", "kafka"]
    if "kafka" in kinds:
        problem = prepare_reference(lambda m: print(f"benchmark: {m}", file=sys.stderr,
                                                     flush=True))
        if problem:
            print(f"benchmark: {problem}", file=sys.stderr)
            return 2

    overrides = {"group.initial.rebalance.delay.ms": str(args.initial_delay_ms)}
    workdir = Path(tempfile.mkdtemp(prefix="coterie-rebalance-"))
    samples: list[Sample] = []
    try:
        for kind in kinds:
            print(f"benchmark: starting {kind} (logs in {workdir})", file=sys.stderr,
                  flush=True)
            with run_broker(kind, workdir, overrides) as bootstrap:
                samples += bench_broker(kind, bootstrap, args, workdir)
    except (BenchError, RuntimeError) as exc:
        print(f"benchmark: FAILED: {exc}\nbenchmark: broker and client logs kept in {workdir}",
              file=sys.stderr)
        return 1
    except BaseException:
        print(f"benchmark: interrupted; broker and client logs kept in {workdir}",
              file=sys.stderr)
        raise
    if args.keep_logs:
        print(f"benchmark: logs kept in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)

    settings = ", ".join(f"{k}={v}" for k, v in CONSUMER_SETTINGS.items())
    print(f"\nlibrdkafka {libversion()[0]}: {settings}; broker "
          f"group.initial.rebalance.delay.ms={args.initial_delay_ms}; "
          f"P = {args.partitions_per_member}*N; "
          f"median of {args.reps}; quiet period {args.quiet} s; {args.workers} worker "
          "processes\n")
    print(table(samples))
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in samples], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
