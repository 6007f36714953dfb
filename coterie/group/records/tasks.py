"""A streams member's tasks: active, standby and warm-up, each keyed by subtopology id.

KIP-1071 names a task by (subtopology id, partition); its records and RPCs carry tasks
grouped by subtopology (`TaskIds`: subtopology id and a list of partitions), so the group
keeps them in that shape too: one frozen mapping subtopology id -> frozenset of partitions
per role. `TaskSet` is the value a member's current assignment, its target assignment and
the tasks it is still to give up are made of (Kafka's `TasksTuple`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

Tasks = Mapping[str, frozenset[int]]
"""Tasks keyed by subtopology id -> partitions (no empty entries). Never changed once built:
every function here returns a new mapping."""

EMPTY: Tasks = {}


def tasks(pairs: Mapping[str, Iterable[int]] | None = None) -> Tasks:
    """A normalised Tasks: empty partition sets dropped."""
    if not pairs:
        return {}
    return {s: frozenset(p) for s, p in sorted(pairs.items()) if p}


def union(a: Tasks, b: Tasks) -> Tasks:
    if not b:
        return a
    if not a:
        return b
    return tasks({s: a.get(s, frozenset()) | b.get(s, frozenset()) for s in a.keys() | b.keys()})


def minus(a: Tasks, b: Tasks) -> Tasks:
    """The tasks of `a` not in `b`."""
    if not a or not b:
        return a
    return tasks({s: p - b.get(s, frozenset()) for s, p in a.items()})


def intersect(a: Tasks, b: Tasks) -> Tasks:
    if not a or not b:
        return {}
    return tasks({s: p & b[s] for s, p in a.items() if s in b})


def overlaps(a: Tasks, b: Tasks) -> bool:
    """Whether some task is in both (Kafka's containsAny, one role)."""
    if len(b) < len(a):
        a, b = b, a
    return any(s in b and not p.isdisjoint(b[s]) for s, p in a.items())


def is_subset(a: Tasks, b: Tasks) -> bool:
    """Whether every task of `a` is in `b`."""
    return all(s in b and p <= b[s] for s, p in a.items())


def each(t: Tasks) -> Iterator[tuple[str, int]]:
    """Every (subtopology id, partition), in order."""
    for s in sorted(t):
        for p in sorted(t[s]):
            yield s, p


def count(t: Tasks) -> int:
    return sum(len(p) for p in t.values())


@dataclass(frozen=True, slots=True, eq=True, unsafe_hash=False)
class TaskSet:
    """Active, standby and warm-up tasks (Kafka's TasksTuple). Compared by value; not
    hashable (its mappings are not)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    @classmethod
    def of(cls, active: Mapping[str, Iterable[int]] | None = None,
           standby: Mapping[str, Iterable[int]] | None = None,
           warmup: Mapping[str, Iterable[int]] | None = None) -> TaskSet:
        return cls(tasks(active), tasks(standby), tasks(warmup))

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def union(self, other: TaskSet) -> TaskSet:
        return TaskSet(union(self.active, other.active), union(self.standby, other.standby),
                       union(self.warmup, other.warmup))

    def minus(self, other: TaskSet) -> TaskSet:
        return TaskSet(minus(self.active, other.active), minus(self.standby, other.standby),
                       minus(self.warmup, other.warmup))

    def intersect(self, other: TaskSet) -> TaskSet:
        """The tasks in both, role by role (what a member keeps of its target)."""
        return TaskSet(intersect(self.active, other.active),
                       intersect(self.standby, other.standby),
                       intersect(self.warmup, other.warmup))

    def overlaps(self, other: TaskSet) -> bool:
        """Whether some task is in both in the same role (Kafka's TasksTuple.containsAny):
        a task one holds as active and the other as standby does not count."""
        return (overlaps(self.active, other.active) or overlaps(self.standby, other.standby)
                or overlaps(self.warmup, other.warmup))

    def issubset(self, other: TaskSet) -> bool:
        """Whether every task of each role is in `other` in that same role."""
        return (is_subset(self.active, other.active) and is_subset(self.standby, other.standby)
                and is_subset(self.warmup, other.warmup))


NO_TASKS = TaskSet()
