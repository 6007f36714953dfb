"""The streams-group task assignor (KIP-1071): Kafka's `sticky` task assignor, pure.

A streams group's coordinator, not a member, decides which member runs which task. A task is
one partition of one subtopology: (subtopology id, partition). Each task runs as an *active*
task on exactly one member; a task of a stateful subtopology also gets up to
`num_standby_replicas` *standby* copies that keep its state warm elsewhere so a failover need
not restore from the changelog. A member belongs to a *process* (one Kafka Streams instance,
possibly with several stream threads, each its own member); state lives on the process's disk,
so a standby is worth something only on a different process from its active task and from the
task's other standbys.

The rules, as in Kafka 4.2's StickyTaskAssignor (facts read from it, code written here):

- Quotas: every member may take ceil(tasks left / members left) active tasks, and
  ceil((active + standby tasks) left / members left) tasks in all. A member that reaches the
  quota exactly leaves the pool and the quota is recomputed for the rest; this is what makes
  the sticky passes end balanced within one when each process has one member.
- Active tasks, in three passes: (1) back to the member that ran the task as active, while it
  is under the active quota; (2) then to a member that held it as standby or warm-up (the one
  on the least loaded process, see `_least_loaded_previous`), while under the quota; (3) the
  rest to the least loaded process (tasks per member of the process), and within it to its
  member with the fewest tasks. Passes 1-2 walk tasks by (partition, subtopology) and pass 3
  by (subtopology, partition), so that a first assignment is range-like (consecutive
  partitions of a subtopology spread over processes).
- Standby tasks, for stateful subtopologies only, walked by (partition, subtopology)
  descending: each replica goes first to the task's previous active member, if its process
  holds no copy of the task yet and it is under the total quota; then to a previous standby
  (or warm-up) holder on a process without a copy, under the quota; the replicas still
  missing go, walked by (subtopology, partition) descending, to the least loaded process
  holding no copy (and its least loaded member), regardless of quota.
- A process never holds two copies of one task (active and standby, or two standbys). When
  fewer processes than 1 + `num_standby_replicas` exist, the missing standbys are not placed:
  Kafka logs a warning; here they are counted in `TaskGroupAssignment.unplaced_standbys`.
- No warm-up tasks are ever assigned: Kafka's sticky assignor returns none.

Two later Kafka fixes are included, because 4.2's behaviour there loses state for no gain:
reported warm-up tasks count as previous standbys for stickiness (KAFKA-21001; 4.2 ignores
them, so a re-computed assignment could throw a finished restore away), and the search for
the least loaded previous standby skips holders whose process already has a copy before it
picks its first candidate (KAFKA-20899; before it, a first holder whose process was
ineligible could make the search return nobody although another holder was eligible, and the
standby went to the least loaded process instead).

Not (yet) done, all later than 4.2 in Kafka: stickiness at cold start from the task offsets
members report (KAFKA-20719), balancing stateful and stateless active tasks separately
(KAFKA-21060), rack-aware standby placement by client tags. Rack and client tags are carried
in the spec for the coordinator but unused, as in Kafka 4.2's sticky assignor.

Determinism: Kafka breaks ties by hash-map and heap order; here every tie is broken by
process id, then member id (previous standby holders are tried in member id order), so the
same spec gives the same assignment in every process.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coterie.assign.spec import AssignorError

TaskId = tuple[str, int]
"""(subtopology id, partition)."""

Tasks = Mapping[str, frozenset[int]]
"""Tasks keyed by subtopology id -> partitions, the shape of KIP-1071's records and RPCs."""


class TaskAssignorError(AssignorError):
    """The spec cannot be assigned: tasks but no members, or a negative replica count."""


@dataclass(frozen=True, slots=True)
class SubtopologySpec:
    """One subtopology: its task count (its input topics' maximum partition count) and
    whether it keeps state; only stateful subtopologies get standby tasks."""

    subtopology_id: str
    partitions: int
    stateful: bool = True


@dataclass(frozen=True, slots=True)
class TaskMemberSpec:
    """One member (one stream thread) as the assignor sees it: its process and the tasks it
    holds now (its current target assignment, plus warm-ups it reported)."""

    member_id: str
    process_id: str
    rack: str | None = None
    client_tags: Mapping[str, str] = field(default_factory=dict)
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskAssignmentSpec:
    """Members keyed by member id, subtopologies keyed by id, and the group's standby count."""

    members: Mapping[str, TaskMemberSpec]
    subtopologies: Mapping[str, SubtopologySpec]
    num_standby_replicas: int = 0


@dataclass(frozen=True, slots=True)
class TaskMemberAssignment:
    """One member's target: active, standby and warm-up tasks by subtopology id."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskGroupAssignment:
    """One entry for every member of the spec; `unplaced_standbys` counts, per task, the
    standby replicas no process could take (the coordinator's cue to warn)."""

    members: Mapping[str, TaskMemberAssignment]
    unplaced_standbys: Mapping[TaskId, int] = field(default_factory=dict)


def flatten(tasks: Tasks) -> set[TaskId]:
    """{subtopology: partitions} -> set of (subtopology, partition)."""
    return {(s, p) for s, ps in tasks.items() for p in ps}


def compact(tasks: Iterable[TaskId]) -> dict[str, frozenset[int]]:
    """Set of (subtopology, partition) -> {subtopology: partitions}, subtopologies sorted."""
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(out[s]) for s in sorted(out)}


class _Process:
    """A process's load while the assignment is built: tasks per member, and the copies of
    tasks it holds (so it never takes a second copy of one)."""

    __slots__ = ("count", "heap", "members", "process_id", "task_count", "tasks")

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.members: list[str] = []
        self.count: dict[str, int] = {}
        # Lazy min-heap of (task count, member id); an entry is current only while its count
        # equals count[member], older entries are dropped when they surface. This keeps the
        # least loaded member O(log n) even for a process with hundreds of members.
        self.heap: list[tuple[int, str]] = []
        self.tasks: set[TaskId] = set()
        self.task_count = 0

    def add_member(self, member_id: str) -> None:
        self.members.append(member_id)
        self.count[member_id] = 0
        heapq.heappush(self.heap, (0, member_id))

    @property
    def load(self) -> float:
        """Tasks per member: how Kafka compares processes of different sizes."""
        return self.task_count / len(self.members)

    def add(self, member_id: str, task: TaskId) -> int:
        """Give `task` to `member_id`; return the member's new task count."""
        n = self.count[member_id] + 1
        self.count[member_id] = n
        heapq.heappush(self.heap, (n, member_id))
        self.tasks.add(task)
        self.task_count += 1
        return n

    def least_loaded_member(self) -> str:
        while True:
            n, member_id = self.heap[0]
            if self.count[member_id] == n:
                return member_id
            heapq.heappop(self.heap)


class _Quota:
    """ceil(tasks left / members left); a member that reaches it exactly leaves the pool."""

    __slots__ = ("members", "tasks", "value")

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks = tasks
        self.members = members
        self.value = _ceil_div(tasks, members)

    def reached(self, count: int) -> None:
        if count == self.value:
            self.members -= 1
            self.tasks -= count
            self.value = _ceil_div(self.tasks, self.members)


def _ceil_div(a: int, b: int) -> int:
    return 0 if b <= 0 else -(-a // b)


def _by_load(process: _Process) -> tuple[float, str]:
    """Heap entry for the least loaded process, ties to the smallest process id."""
    return (process.load, process.process_id)


class _State:
    """Everything one assignment run mutates."""

    def __init__(self, spec: TaskAssignmentSpec) -> None:
        if spec.num_standby_replicas < 0:
            raise TaskAssignorError(
                f"num.standby.replicas must be >= 0, got {spec.num_standby_replicas}")
        self.replicas = spec.num_standby_replicas
        subs = [spec.subtopologies[s] for s in sorted(spec.subtopologies)]
        self.all_tasks = [(s.subtopology_id, p) for s in subs for p in range(s.partitions)]
        self.stateful_tasks = [(s.subtopology_id, p) for s in subs if s.stateful
                               for p in range(s.partitions)]
        existing = set(self.all_tasks)
        self.processes: dict[str, _Process] = {}
        self.process_of: dict[str, _Process] = {}
        self.prev_active: dict[TaskId, str] = {}
        self.prev_standby: dict[TaskId, list[str]] = {}
        for member_id in sorted(spec.members):
            m = spec.members[member_id]
            process = self.processes.get(m.process_id)
            if process is None:
                process = self.processes[m.process_id] = _Process(m.process_id)
            process.add_member(member_id)
            self.process_of[member_id] = process
            for task in flatten(m.active):
                # Two members claiming one active task: Kafka keeps the last one it reads in
                # hash order; here the smallest member id, so the choice is reproducible.
                if task in existing:
                    self.prev_active.setdefault(task, member_id)
            for task in sorted(flatten(m.standby) | flatten(m.warmup)):
                if task in existing:
                    self.prev_standby.setdefault(task, []).append(member_id)
        n_members = len(spec.members)
        if self.all_tasks and n_members == 0:
            raise TaskAssignorError(f"no member to assign {len(self.all_tasks)} tasks to")
        self.active_quota = _Quota(len(self.all_tasks), n_members)
        self.total_quota = _Quota(len(self.all_tasks) + len(self.stateful_tasks) * self.replicas,
                                  n_members)
        self.active: dict[str, list[TaskId]] = {m: [] for m in spec.members}
        self.standby: dict[str, list[TaskId]] = {m: [] for m in spec.members}
        self.unplaced: dict[TaskId, int] = {}

    # --- placing ---------------------------------------------------------------------------

    def give_active(self, member_id: str, task: TaskId) -> None:
        n = self.process_of[member_id].add(member_id, task)
        self.active[member_id].append(task)
        self.active_quota.reached(n)
        self.total_quota.reached(n)

    def give_standby(self, member_id: str, task: TaskId) -> None:
        n = self.process_of[member_id].add(member_id, task)
        self.standby[member_id].append(task)
        self.total_quota.reached(n)

    def count(self, member_id: str) -> int:
        return self.process_of[member_id].count[member_id]

    def least_loaded_previous(self, members: list[str] | None,
                              task: TaskId | None) -> str | None:
        """Among previous standby holders (skipping, when `task` is given, those whose process
        already holds a copy): the first, replaced by a later one only when both its process
        load and its own task count are strictly lower (Kafka's rule, after KAFKA-20899)."""
        if not members:
            return None
        best: str | None = None
        best_process = best_member = 0.0
        for member_id in members:
            process = self.process_of[member_id]
            if task is not None and task in process.tasks:
                continue
            load, own = process.load, process.count[member_id]
            if best is None or (load < best_process and own < best_member):
                best, best_process, best_member = member_id, load, own
        return best

    # --- passes ----------------------------------------------------------------------------

    def assign_active(self) -> None:
        remaining: list[TaskId] = []
        for task in sorted(self.all_tasks, key=lambda t: (t[1], t[0])):
            prev = self.prev_active.get(task)
            if prev is not None and self.count(prev) < self.active_quota.value:
                self.give_active(prev, task)
            else:
                remaining.append(task)
        rest: list[TaskId] = []
        for task in remaining:
            prev = self.least_loaded_previous(self.prev_standby.get(task), None)
            if prev is not None and self.count(prev) < self.active_quota.value:
                self.give_active(prev, task)
            else:
                rest.append(task)
        rest.sort()
        heap = [_by_load(p) for p in self.processes.values()]
        heapq.heapify(heap)
        for task in rest:
            process = self.processes[heapq.heappop(heap)[1]]
            self.give_active(process.least_loaded_member(), task)
            heapq.heappush(heap, _by_load(process))

    def assign_standby(self) -> None:
        to_least_loaded: list[tuple[TaskId, int]] = []
        for task in sorted(self.stateful_tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for i in range(self.replicas):
                prev = self.prev_active.get(task)
                if prev is not None:
                    process = self.process_of[prev]
                    if task not in process.tasks and self.count(prev) < self.total_quota.value:
                        self.give_standby(prev, task)
                        continue
                prev = self.least_loaded_previous(self.prev_standby.get(task), task)
                if prev is not None and self.count(prev) < self.total_quota.value:
                    self.give_standby(prev, task)
                    continue
                to_least_loaded.append((task, self.replicas - i))
                break
        to_least_loaded.sort(reverse=True)
        heap = [_by_load(p) for p in self.processes.values()]
        heapq.heapify(heap)
        for task, missing in to_least_loaded:
            for i in range(missing):
                if not self.standby_to_least_loaded(heap, task):
                    self.unplaced[task] = missing - i
                    break

    def standby_to_least_loaded(self, heap: list[tuple[float, str]],
                                task: TaskId) -> bool:
        """Give `task` to the least loaded process holding no copy of it; False if none."""
        skipped = []
        placed = False
        while heap:
            entry = heapq.heappop(heap)
            process = self.processes[entry[1]]
            if task in process.tasks:
                skipped.append(entry)
                continue
            self.give_standby(process.least_loaded_member(), task)
            heapq.heappush(heap, _by_load(process))
            placed = True
            break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return placed


def assign_tasks(spec: TaskAssignmentSpec) -> TaskGroupAssignment:
    """Kafka's sticky task assignment of `spec` (see the module docstring for the rules)."""
    state = _State(spec)
    state.assign_active()
    if state.replicas > 0:
        state.assign_standby()
    members = {m: TaskMemberAssignment(compact(state.active[m]), compact(state.standby[m]))
               for m in sorted(spec.members)}
    return TaskGroupAssignment(members, dict(sorted(state.unplaced.items())))


class StickyTaskAssignor:
    """The named strategy a streams group's coordinator runs (Kafka's only built-in task
    assignor for streams groups, named `sticky`)."""

    name = "sticky"

    def assign(self, spec: TaskAssignmentSpec) -> TaskGroupAssignment:
        return assign_tasks(spec)
