"""Speed of the streams-group sticky task assignor (issue 26, KIP-1071), which a streams
group's coordinator runs inline when a member joins or leaves.

Inputs: --processes processes of --members-per-process members each (1,000 members by
default: 200 x 5), --subtopologies stateful subtopologies of --partitions tasks each (10,000
tasks by default: 10 x 1,000), with 0 and then 1 standby replica:

* `initial`: a new group, nobody owns anything;
* `join`: the group after `initial` (every member owns what `initial` gave it, active and
  standby) plus one member on a new process. This is the round a scale-up causes.

Each figure is the median of --repeat calls; building the spec is never timed. Results are
checked (every active task once, one copy of a task per process) and for `join` the active
tasks that changed member are counted.

    .venv/bin/python benchmarks/streams_task_assignor.py
    .venv/bin/python benchmarks/streams_task_assignor.py --quick
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coterie.assign.streams_tasks import (
    SubtopologySpec,
    TaskAssignmentSpec,
    TaskGroupAssignment,
    TaskId,
    TaskMemberSpec,
    assign_tasks,
    flatten,
)


def initial_spec(processes: int, per_process: int, subtopologies: int, partitions: int,
                 replicas: int) -> TaskAssignmentSpec:
    members = {f"member-{p:04d}-{k}": TaskMemberSpec(f"member-{p:04d}-{k}", f"process-{p:04d}")
               for p in range(processes) for k in range(per_process)}
    subs = {f"{s}": SubtopologySpec(f"{s}", partitions) for s in range(subtopologies)}
    return TaskAssignmentSpec(members, subs, replicas)


def join_spec(spec: TaskAssignmentSpec, result: TaskGroupAssignment) -> TaskAssignmentSpec:
    """`spec`'s group after it received `result`, plus one member on a new process."""
    members = {m: TaskMemberSpec(m, spec.members[m].process_id,
                                 active=result.members[m].active,
                                 standby=result.members[m].standby)
               for m in spec.members}
    members["member-new"] = TaskMemberSpec("member-new", "process-new")
    return TaskAssignmentSpec(members, spec.subtopologies, spec.num_standby_replicas)


def check(spec: TaskAssignmentSpec, result: TaskGroupAssignment) -> None:
    tasks = sum(s.partitions for s in spec.subtopologies.values())
    active = Counter(t for a in result.members.values() for t in flatten(a.active))
    assert len(active) == tasks and set(active.values()) == {1}
    copies: Counter[tuple[str, TaskId]] = Counter()
    for m, a in result.members.items():
        for t in flatten(a.active) | flatten(a.standby):
            copies[(spec.members[m].process_id, t)] += 1
    assert set(copies.values()) == {1}


def timed(spec: TaskAssignmentSpec, repeat: int) -> tuple[float, TaskGroupAssignment]:
    times = []
    result = assign_tasks(spec)
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = assign_tasks(spec)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def moved_actives(before: TaskGroupAssignment, after: TaskGroupAssignment) -> int:
    owner = {t: m for m, a in before.members.items() for t in flatten(a.active)}
    return sum(1 for m, a in after.members.items() for t in flatten(a.active)
               if owner.get(t) != m)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument("--members-per-process", type=int, default=5)
    parser.add_argument("--subtopologies", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20 x 5 members, 10 x 100 tasks")
    args = parser.parse_args()
    if args.quick:
        args.processes, args.partitions, args.repeat = 20, 100, 3
    members = args.processes * args.members_per_process
    tasks = args.subtopologies * args.partitions
    print(f"python {sys.version.split()[0]}; {members} members ({args.processes} processes x "
          f"{args.members_per_process}), {tasks} tasks ({args.subtopologies} subtopologies x "
          f"{args.partitions}), median of {args.repeat}")
    print(f"{'standbys':>8} {'round':>8} {'seconds':>9} {'moved actives':>14}")
    for replicas in (0, 1):
        spec = initial_spec(args.processes, args.members_per_process, args.subtopologies,
                            args.partitions, replicas)
        seconds, first = timed(spec, args.repeat)
        check(spec, first)
        print(f"{replicas:>8} {'initial':>8} {seconds:>9.3f} {'-':>14}")
        joined = join_spec(spec, first)
        seconds, second = timed(joined, args.repeat)
        check(joined, second)
        print(f"{replicas:>8} {'join':>8} {seconds:>9.3f} {moved_actives(first, second):>14}")


if __name__ == "__main__":
    main()
