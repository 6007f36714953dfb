"""Assignor speed: coterie's sticky and cooperative-sticky next to kafka-python's
StickyPartitionAssignor on identical inputs, plus coterie's range and round-robin.

Inputs (homogeneous subscriptions: every member subscribes to every topic; the partitions are
spread evenly over --topics topics, 10 by default):

* `initial`: a new group, nobody owns anything, no user data;
* `join`: the group after `initial` (every member owns the share coterie's sticky gave it,
  generation 1) plus one new member that owns nothing. This is the incremental round a
  rolling scale-up causes.

How each assignor receives the previous assignment is how it would in a real group:
* coterie `sticky` and kafka-python's sticky: as sticky user data in each subscription
  (coterie gets Java's layout, kafka-python its own), decoded inside the timed call;
* coterie `cooperative-sticky`: as the subscription's owned partitions and generation
  (`MemberSpec.owned` / `generation`), with Java's 4-byte generation as user data.
kafka-python gets subscriptions already parsed into its ConsumerProtocolSubscription objects,
as its coordinator hands them to the assignor; building inputs is never timed.

Each timed figure is the median of --repeat calls (fewer for kafka-python when one call takes
longer than 10 s: the count is printed). kafka-python runs in a forked child so that a call
longer than --kp-cap seconds can be stopped and reported as such. Results are checked: every
partition assigned once (coterie's cooperative round may leave out partitions it must revoke
first), balance within one, and for `join` the partitions that changed owner are counted.

    .venv/bin/python benchmarks/assignors.py              # 100/1000 members x 1k/10k partitions
    .venv/bin/python benchmarks/assignors.py --quick      # small smoke run
    .venv/bin/python benchmarks/assignors.py --kp-cap 120 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.structs import TopicPartition as KafkaTP

from coterie.assign.cooperative_sticky import (
    CooperativeStickyAssignor,
    cooperative_subscription_user_data,
)
from coterie.assign.spec import AssignmentSpec, GroupAssignment, MemberSpec, TopicSpec
from coterie.assign.sticky import StickyAssignor, subscription_user_data

FULL_CASES = [(100, 1_000), (100, 10_000), (1_000, 1_000), (1_000, 10_000)]
QUICK_CASES = [(10, 100), (50, 1_000)]
SLOW_CALL_S = 10.0

Owned = dict[str, frozenset[tuple[str, int]]]


@dataclass
class Timing:
    median_s: float | None  # None: stopped at cap_s
    runs: int
    cap_s: float = 0.0

    def cell(self) -> str:
        if self.runs == 0 and not self.cap_s:
            return "-"
        if self.median_s is None:
            return f"> {self.cap_s:.0f} s (stopped)"
        return f"{fmt_s(self.median_s)} (n={self.runs})"


def fmt_s(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.2f} ms"


# --- inputs ---------------------------------------------------------------------------------


def topic_layout(partitions: int, topics: int) -> dict[str, int]:
    base, extra = divmod(partitions, topics)
    return {f"topic-{i:02d}": base + (i < extra) for i in range(topics)}


def member_id(i: int) -> str:
    return f"consumer-{i:05d}"


def coterie_spec(layout: dict[str, int], members: int, owned: Owned | None,
                 cooperative: bool) -> AssignmentSpec:
    topics = {t: TopicSpec(t, n) for t, n in layout.items()}
    subscribed = frozenset(layout)
    specs = {}
    for i in range(members):
        mid = member_id(i)
        prev = None if owned is None else owned.get(mid)
        if prev is None:
            specs[mid] = MemberSpec(mid, subscribed)
        elif cooperative:
            specs[mid] = MemberSpec(mid, subscribed, owned=prev, generation=1,
                                    metadata=cooperative_subscription_user_data(1))
        else:
            specs[mid] = MemberSpec(mid, subscribed, metadata=subscription_user_data(prev, 1))
    return AssignmentSpec(specs, topics)


def kafka_python_input(layout: dict[str, int], members: int,
                       owned: Owned | None) -> tuple[Any, list[Any]]:
    """(cluster, members) as kafka-python's coordinator gives them to an assignor."""
    partition_sets = {t: set(range(n)) for t, n in layout.items()}
    cluster = SimpleNamespace(topics=lambda: set(partition_sets),
                              partitions_for_topic=partition_sets.get)
    topics = sorted(layout)
    out = []
    for i in range(members):
        mid = member_id(i)
        prev = None if owned is None else owned.get(mid)
        kafka_prev = None if prev is None else [KafkaTP(t, p) for t, p in sorted(prev)]
        subscription = StickyPartitionAssignor._metadata(topics, kafka_prev, 1)
        out.append(SimpleNamespace(
            member_id=mid, group_instance_id=None,
            metadata=ConsumerProtocolSubscription.decode(subscription.encode())))
    return cluster, out


# --- timing ---------------------------------------------------------------------------------


def time_calls(call: Callable[[], Any], repeat: int) -> tuple[Timing, Any]:
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
        if times[-1] > SLOW_CALL_S:
            break
    return Timing(statistics.median(times), len(times)), result


def _child(conn: Any, call: Callable[[], Any], repeat: int) -> None:
    for i in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = call()
        elapsed = time.perf_counter() - start
        last = i == repeat - 1 or elapsed > SLOW_CALL_S
        conn.send((elapsed, result if last else None))
        if last:
            return


def time_capped(call: Callable[[], Any], repeat: int, cap_s: float) -> tuple[Timing, Any]:
    """Like time_calls, in a forked child; a call running longer than cap_s is stopped."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, call, repeat), daemon=True)
    proc.start()
    child.close()
    times: list[float] = []
    result = None
    try:
        while True:
            if not parent.poll(cap_s):
                proc.kill()
                proc.join()
                if times:
                    return Timing(statistics.median(times), len(times)), result
                return Timing(None, 0, cap_s), None
            elapsed, result = parent.recv()
            times.append(elapsed)
            if result is not None:
                break
    finally:
        proc.join(timeout=5)
    return Timing(statistics.median(times), len(times)), result


# --- checks ---------------------------------------------------------------------------------


def coterie_parts(result: GroupAssignment) -> Owned:
    return {m: a.partitions for m, a in result.members.items()}


def kafka_python_parts(result: dict[str, Any]) -> Owned:
    return {m: frozenset((t, p) for t, ps in a.assigned_partitions for p in ps)
            for m, a in result.items()}


def check(parts: Owned, total: int, complete: bool = True) -> str:
    """'ok' or what is wrong: duplicates, missing partitions, imbalance."""
    given = [tp for ps in parts.values() for tp in ps]
    if len(given) != len(set(given)):
        return "DUPLICATES"
    if complete and len(given) != total:
        return f"MISSING {total - len(given)}"
    sizes = [len(ps) for ps in parts.values()]
    if complete and max(sizes) - min(sizes) > 1:
        return f"UNBALANCED {min(sizes)}..{max(sizes)}"
    return "ok"


def moved(before: Owned, after: Owned) -> int:
    """Partitions that changed owner (owned before by someone, now by someone else)."""
    owner = {tp: m for m, ps in before.items() for tp in ps}
    return sum(1 for m, ps in after.items() for tp in ps if owner.get(tp, m) != m)


# --- the run --------------------------------------------------------------------------------


def run_case(members: int, partitions: int, topics: int, repeat: int,
             kp_cap: float) -> list[dict[str, Any]]:
    layout = topic_layout(partitions, topics)
    rows = []
    previous: Owned | None = None
    for round_name in ("initial", "join"):
        n = members if round_name == "initial" else members + 1
        owned = previous
        sticky_spec = coterie_spec(layout, n, owned, cooperative=False)
        coop_spec = coterie_spec(layout, n, owned, cooperative=True)
        cluster, kp_members = kafka_python_input(layout, n, owned)

        t_sticky, r_sticky = time_calls(lambda s=sticky_spec: StickyAssignor().assign(s), repeat)
        t_coop, r_coop = time_calls(lambda s=coop_spec: CooperativeStickyAssignor().assign(s),
                                    repeat)
        t_kp, r_kp = time_capped(
            lambda c=cluster, ms=kp_members: StickyPartitionAssignor().assign(c, ms),
            repeat, kp_cap)

        sticky_parts = coterie_parts(r_sticky)
        coop_parts = coterie_parts(r_coop)
        kp_parts = kafka_python_parts(r_kp) if r_kp is not None else None
        row = {
            "members": members, "partitions": partitions, "round": round_name,
            "sticky": t_sticky, "coop": t_coop, "kp": t_kp,
            "check": "/".join([
                check(sticky_parts, partitions),
                check(coop_parts, partitions, complete=owned is None),
                check(kp_parts, partitions) if kp_parts is not None else "-"]),
            "moved": "",
        }
        if owned is not None:
            revoked = sum(len(ps) for ps in owned.values()) - sum(
                len(coop_parts[m] & ps) for m, ps in owned.items())
            row["moved"] = (f"{moved(owned, sticky_parts)} / 0 (+{revoked} revoked) / "
                            + (str(moved(owned, kp_parts)) if kp_parts is not None else "-"))
        rows.append(row)
        print_row(row, flush=True)
        if previous is None:
            previous = sticky_parts
        else:
            rows.append(follow_up(layout, n, coop_parts, partitions, repeat))
            print_row(rows[-1], flush=True)
    return rows


def follow_up(layout: dict[str, int], n: int, first: Owned, partitions: int,
              repeat: int) -> dict[str, Any]:
    """cooperative-sticky's second round after `join`: members own what round one gave them
    (the revoked partitions are free), generation 2."""
    spec = coterie_spec(layout, n, first, cooperative=True)
    spec = AssignmentSpec({m: replace(s, generation=2) for m, s in spec.members.items()},
                          spec.topics)
    t_coop, r_coop = time_calls(lambda: CooperativeStickyAssignor().assign(spec), repeat)
    parts = coterie_parts(r_coop)
    none = Timing(None, 0)
    return {"members": n - 1, "partitions": partitions, "round": "join, 2nd cooperative round",
            "sticky": none, "coop": t_coop, "kp": none,
            "check": f"-/{check(parts, partitions)}/-",
            "moved": (f"- / {moved(first, parts)} (+{sum(len(parts[m] - first[m]) for m in parts)}"
                      " placed) / -")}


def ratio(kp: Timing, ours: Timing) -> str:
    if ours.median_s is None or (kp.runs == 0 and not kp.cap_s):
        return "-"
    if kp.median_s is None:
        return f"> x{kp.cap_s / ours.median_s:,.0f}"
    return f"x{kp.median_s / ours.median_s:,.0f}"


HEADER = ("| members | partitions | round | coterie sticky | coterie cooperative-sticky "
          "| kafka-python sticky | kp / sticky | kp / coop | moved (sticky / coop / kp) "
          "| check |")


def print_row(row: dict[str, Any], flush: bool = False) -> None:
    print(f"| {row['members']:,} | {row['partitions']:,} | {row['round']} "
          f"| {row['sticky'].cell()} | {row['coop'].cell()} | {row['kp'].cell()} "
          f"| {ratio(row['kp'], row['sticky'])} | {ratio(row['kp'], row['coop'])} "
          f"| {row['moved'] or '-'} | {row['check']} |", flush=flush)


def run_simple(members: int, partitions: int, topics: int, repeat: int) -> None:
    """coterie's range and round-robin (and kafka-python's, for scale) on the initial input."""
    try:
        from coterie.assign.range import RangeAssignor
        from coterie.assign.roundrobin import RoundRobinAssignor
    except ImportError as e:
        print(f"\nrange/roundrobin skipped: {e}")
        return
    layout = topic_layout(partitions, topics)
    spec = coterie_spec(layout, members, None, cooperative=False)
    cluster, kp_members = kafka_python_input(layout, members, None)
    print(f"\n| assignor ({members:,} members x {partitions:,} partitions) | coterie "
          "| kafka-python | kp / coterie | check |")
    print("| --- | --- | --- | --- | --- |")
    for ours, theirs in ((RangeAssignor(), RangePartitionAssignor),
                         (RoundRobinAssignor(), RoundRobinPartitionAssignor)):
        t_ours, r_ours = time_calls(lambda a=ours: a.assign(spec), repeat)
        t_kp, _ = time_calls(lambda a=theirs: a.assign(cluster, kp_members), repeat)
        sizes = [len(a.partitions) for a in r_ours.members.values()]
        total = sum(sizes)
        status = "ok" if total == partitions else f"MISSING {partitions - total}"
        print(f"| {ours.name} | {t_ours.cell()} | {t_kp.cell()} | {ratio(t_kp, t_ours)} "
              f"| {status}, sizes {min(sizes)}..{max(sizes)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5, help="calls per figure (median)")
    parser.add_argument("--kp-cap", type=float, default=900.0,
                        help="seconds one kafka-python call may take before it is stopped")
    args = parser.parse_args()
    cases = QUICK_CASES if args.quick else FULL_CASES
    import kafka
    print(f"python {sys.version.split()[0]}, kafka-python {kafka.__version__}, "
          f"{args.topics} topics, homogeneous subscriptions, median of up to "
          f"{args.repeat} calls\n")
    print(HEADER)
    print("|" + " --- |" * (HEADER.count("|") - 1))
    for members, partitions in cases:
        run_case(members, partitions, args.topics, args.repeat, args.kp_cap)
    simple = cases[-1]
    run_simple(simple[0], simple[1], args.topics, args.repeat)


if __name__ == "__main__":
    main()
