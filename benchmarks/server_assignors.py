"""Time of coterie's server-side (KIP-848) assignors, `uniform` and `range`, at the grid
points of Apache Kafka's JMH `ServerSideAssignorBenchmark`.

Inputs, as Kafka's benchmark builds them (`AssignorBenchmarkUtils`, `partitionsToMemberRatio`
10, no racks):

* M members `member0` .. `member{M-1}`, T topics `topic-0` .. `topic-{T-1}` of 10*M/T
  partitions each.
* homogeneous: every member subscribes to every topic. heterogeneous: members and topics are
  cut into 5 contiguous buckets (ceil(M/5) members, ceil(T/5) topics each) and a bucket's
  members subscribe to that bucket's topics.
* full: nobody owns anything. incremental: M-1 members own the assignment the same assignor
  gave them (computed once, untimed), and `newMember` joins owning nothing, subscribed to
  everything (homogeneous) or to the topics of `member{M-2}` (heterogeneous). Every timed run
  assigns that same spec, i.e. it measures "one member joined a settled group of M-1".

Each cell is timed with `time.perf_counter()` (or, with `--clock cpu`, the process's CPU
time, `time.process_time()`, which leaves out the time the process waits for a core on a
busy machine) around `assignor.assign(spec)` alone, after a `gc.collect()`. The median of
the repetitions is reported, and the fastest one (on a machine shared with other work, the
least disturbed figure). The first run of a cell is
reported separately: for `uniform` it includes building the memoised partition universes
when the cell's topics were not seen before (in a coordinator they are built once per topic
shape).

Targets (issue 5): at most 2 ms at 1000 x 10k, incremental, homogeneous; at most 50 ms at
10k x 100k. Kafka's published figures (Java, JMH, one core) are printed next to ours where
they exist.

    .venv/bin/python benchmarks/server_assignors.py            # the full grid (a few minutes)
    .venv/bin/python benchmarks/server_assignors.py --clock cpu --runs 15   # busy machine
    .venv/bin/python benchmarks/server_assignors.py --quick    # smoke run, small sizes
    .venv/bin/python benchmarks/server_assignors.py --points 10000x1000 \
        --subscriptions heterogeneous --kinds full --assignors uniform   # one cell
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coterie.assign.range import RangeAssignor
from coterie.assign.spec import AssignmentSpec, Assignor, MemberSpec, TopicSpec
from coterie.assign.uniform import UniformAssignor

BUCKETS = 5
RATIO = 10

# Kafka's published JMH figures in ms: (assignor, subscription, kind, members, topics).
KAFKA_MS = {
    ("uniform", "homogeneous", "incremental", 10_000, 100): "~2",
    ("uniform", "heterogeneous", "full", 10_000, 100): "22.9",
    ("range", "homogeneous", "full", 1_000, 100): "0.48",
}


@dataclass(frozen=True)
class Point:
    members: int
    topics: int

    @property
    def partitions(self) -> int:
        return self.members * RATIO


@dataclass
class Cell:
    assignor: str
    subscription: str
    kind: str
    point: Point
    median_ms: float
    min_ms: float
    first_ms: float
    runs: int

    @property
    def target_ms(self) -> float | None:
        if self.point.members >= 10_000:
            return 50.0
        if (self.point.members == 1_000 and self.kind == "incremental"
                and self.subscription == "homogeneous"):
            return 2.0
        return None


def topics_of(point: Point) -> dict[str, TopicSpec]:
    per_topic = point.partitions // point.topics
    return {f"topic-{t}": TopicSpec(f"topic-{t}", per_topic) for t in range(point.topics)}


def subscriptions(point: Point, count: int, subscription: str) -> list[frozenset[str]]:
    """Member i's subscription, for i < count, as Kafka's benchmark utilities build them."""
    names = [f"topic-{t}" for t in range(point.topics)]
    if subscription == "homogeneous":
        everything = frozenset(names)
        return [everything] * count
    buckets = min(BUCKETS, count)
    topics_per = math.ceil(len(names) / buckets)
    members_per = math.ceil(count / buckets)
    out: list[frozenset[str]] = []
    for b in range(buckets):
        subs = frozenset(names[b * topics_per:(b + 1) * topics_per])
        out.extend([subs] * (min((b + 1) * members_per, count) - b * members_per))
    return out


def build_spec(assignor: Assignor, point: Point, subscription: str, kind: str) -> AssignmentSpec:
    topics = topics_of(point)
    if kind == "full":
        subs = subscriptions(point, point.members, subscription)
        return AssignmentSpec({f"member{i}": MemberSpec(f"member{i}", s)
                               for i, s in enumerate(subs)}, topics)
    count = point.members - 1
    subs = subscriptions(point, count, subscription)
    settled = AssignmentSpec({f"member{i}": MemberSpec(f"member{i}", s)
                              for i, s in enumerate(subs)}, topics)
    previous = assignor.assign(settled)
    members = {mid: replace(m, owned=previous.members[mid].partitions, generation=1)
               for mid, m in settled.members.items()}
    joiner_subs = subs[count - 1] if subscription == "heterogeneous" else frozenset(topics)
    members["newMember"] = MemberSpec("newMember", joiner_subs)
    return AssignmentSpec(members, topics)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def time_cell(assignor: Assignor, spec: AssignmentSpec, runs: int,
              clock: str = "wall") -> tuple[float, float, float]:
    """(median, fastest, first) in ms over `runs` timed calls."""
    now = CLOCKS[clock]
    samples = []
    for _ in range(runs):
        gc.collect()
        start = now()
        assignor.assign(spec)
        samples.append((now() - start) * 1000)
    return statistics.median(samples), min(samples), samples[0]


SUBSCRIPTIONS = ("homogeneous", "heterogeneous")
KINDS = ("full", "incremental")


def run(points: list[Point], runs: int, assignors: list[str],
        subscriptions_: tuple[str, ...] = SUBSCRIPTIONS,
        kinds: tuple[str, ...] = KINDS, clock: str = "wall") -> list[Cell]:
    cells = []
    for point in points:
        for subscription in subscriptions_:
            for kind in kinds:
                for name in assignors:
                    assignor: Assignor = UniformAssignor() if name == "uniform" else RangeAssignor()
                    spec = build_spec(assignor, point, subscription, kind)
                    median, fastest, first = time_cell(assignor, spec, runs, clock)
                    cell = Cell(name, subscription, kind, point, median, fastest, first, runs)
                    cells.append(cell)
                    print(f"  {name:7} {subscription:13} {kind:11} {point.members:>6} x "
                          f"{point.partitions:>7} ({point.topics} topics): "
                          f"median {median:8.2f} ms, min {fastest:8.2f} ms, "
                          f"first {first:8.2f} ms", file=sys.stderr)
    return cells


def table(cells: list[Cell]) -> str:
    lines = ["| assignor | subscription | kind | members x partitions (topics) | median ms "
             "| min ms | first run ms | Kafka JMH ms | target ms | met |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in cells:
        p = c.point
        kafka = KAFKA_MS.get((c.assignor, c.subscription, c.kind, p.members, p.topics), "")
        target = "" if c.target_ms is None else f"<= {c.target_ms:g}"
        met = "" if c.target_ms is None else ("met" if c.median_ms <= c.target_ms else "not met")
        lines.append(f"| {c.assignor} | {c.subscription} | {c.kind} | {p.members:,} x "
                     f"{p.partitions:,} ({p.topics}) | {c.median_ms:.2f} | {c.min_ms:.2f} "
                     f"| {c.first_ms:.2f} "
                     f"| {kafka} | {target} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 100 x 1k and 1000 x 10k, 3 runs per cell")
    parser.add_argument("--runs", type=int, default=None,
                        help="timed runs per cell (default 15 at 1000 members or fewer, "
                             "7 above)")
    parser.add_argument("--assignors", default="uniform,range")
    parser.add_argument("--points", default=None,
                        help="only these grid points, e.g. 10000x1000 (members x topics), "
                             "comma-separated")
    parser.add_argument("--subscriptions", default=",".join(SUBSCRIPTIONS),
                        help="homogeneous and/or heterogeneous (default both)")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="full and/or incremental (default both)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: time.perf_counter (default); cpu: time.process_time")
    args = parser.parse_args(argv)
    assignors = args.assignors.split(",")
    subscriptions_ = tuple(args.subscriptions.split(","))
    kinds = tuple(args.kinds.split(","))
    if not set(subscriptions_) <= set(SUBSCRIPTIONS) or not set(kinds) <= set(KINDS):
        parser.error("--subscriptions / --kinds: unknown value")
    if args.quick:
        groups = [([Point(100, 10), Point(1_000, 100)], args.runs or 3)]
    else:
        groups = [([Point(1_000, 100)], args.runs or 15),
                  ([Point(10_000, 100), Point(10_000, 1_000)], args.runs or 7)]
    if args.points:
        wanted = {tuple(int(n) for n in p.split("x")) for p in args.points.split(",")}
        groups = [([p for p in points if (p.members, p.topics) in wanted], runs)
                  for points, runs in groups]
    cells: list[Cell] = []
    for points, runs in groups:
        cells.extend(run(points, runs, assignors, subscriptions_, kinds, args.clock))
    print(table(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
