"""Which members, on which processes, hold each task of a streams group, by role.

Reconciliation (`reconciliation.py`) hands a task to a member only once nobody else may still
be running it. For partitions the consumer group keeps an epoch per partition
(`consumer/partition_epochs.py`); Kafka 4.2's streams group keeps process ids instead
(`StreamsGroup.currentActiveTaskToProcessId`, `currentStandbyTaskToProcessIds`,
`currentWarmupTaskToProcessIds`), because the rules are about processes: an active task has
one owner in the whole group, and one process (one Kafka Streams client, whose threads are the
members) must never hold the same task twice, in the same role or in two roles.

A member "holds" a task while it is assigned to it or pending its revocation: the index is
fed with both (`CurrentAssignment.holds()`), as Kafka feeds its maps from both.

Kafka keeps process ids only, a set per standby/warm-up task, and throws when an active task
gets a second owner. Here each task maps member id -> process id instead. That costs a little
more but makes the index a function of the members' current holdings alone: replaying member
records in any order, or the same record twice, gives the same index; removing one member of a
process does not forget another member of that process holding the same task; and an
inconsistent state (two owners of one active task, say after a corrupt log) is represented,
not an exception halfway through a load. Queries answer with sets, so such a state still
blocks the task for everyone instead of depending on which record came last.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from coterie.group.records.tasks import NO_TASKS, Tasks, TaskSet, each

Task = tuple[str, int]
"""(subtopology id, partition)."""

_NOBODY: Mapping[str, str] = {}


class TaskHolders(Protocol):
    """What reconciliation asks about the group: the processes holding a task in each role
    (empty when none). `TaskOwners` answers it; tests may pass something simpler."""

    def active_processes(self, subtopology: str, partition: int) -> frozenset[str]: ...

    def standby_processes(self, subtopology: str, partition: int) -> frozenset[str]: ...

    def warmup_processes(self, subtopology: str, partition: int) -> frozenset[str]: ...


class TaskOwners:
    """The group's task -> holders index, fed one member at a time (module docstring)."""

    __slots__ = ("_active", "_members", "_standby", "_warmup")

    def __init__(self) -> None:
        self._members: dict[str, tuple[str, TaskSet]] = {}
        # role -> task -> member id -> process id
        self._active: dict[Task, dict[str, str]] = {}
        self._standby: dict[Task, dict[str, str]] = {}
        self._warmup: dict[Task, dict[str, str]] = {}

    # -- feeding ------------------------------------------------------------------------------
    def update(self, member_id: str, process_id: str, holds: TaskSet) -> None:
        """Makes `holds` the member's holdings (replacing whatever it held before, also under
        another process id); no tasks at all is the same as `remove`."""
        self.remove(member_id)
        if holds.is_empty():
            return
        self._members[member_id] = (process_id, holds)
        self._index(holds.active, self._active, member_id, process_id)
        self._index(holds.standby, self._standby, member_id, process_id)
        self._index(holds.warmup, self._warmup, member_id, process_id)

    def remove(self, member_id: str) -> None:
        """Forgets the member's tasks (it left, was fenced, or holds nothing any more)."""
        old = self._members.pop(member_id, None)
        if old is None:
            return
        holds = old[1]
        self._unindex(holds.active, self._active, member_id)
        self._unindex(holds.standby, self._standby, member_id)
        self._unindex(holds.warmup, self._warmup, member_id)

    @staticmethod
    def _index(tasks: Tasks, by_task: dict[Task, dict[str, str]], member_id: str,
               process_id: str) -> None:
        for task in each(tasks):
            by_task.setdefault(task, {})[member_id] = process_id

    @staticmethod
    def _unindex(tasks: Tasks, by_task: dict[Task, dict[str, str]], member_id: str) -> None:
        for task in each(tasks):
            holders = by_task[task]
            del holders[member_id]
            if not holders:
                del by_task[task]

    # -- queries ------------------------------------------------------------------------------
    def holds(self, member_id: str) -> TaskSet:
        """What the index has for the member (nothing if unknown)."""
        found = self._members.get(member_id)
        return NO_TASKS if found is None else found[1]

    def active_holders(self, subtopology: str, partition: int) -> Mapping[str, str]:
        """member id -> process id of every member holding the task as active (one, or none,
        in a consistent group)."""
        return self._active.get((subtopology, partition), _NOBODY)

    def standby_holders(self, subtopology: str, partition: int) -> Mapping[str, str]:
        return self._standby.get((subtopology, partition), _NOBODY)

    def warmup_holders(self, subtopology: str, partition: int) -> Mapping[str, str]:
        return self._warmup.get((subtopology, partition), _NOBODY)

    def active_processes(self, subtopology: str, partition: int) -> frozenset[str]:
        return frozenset(self.active_holders(subtopology, partition).values())

    def standby_processes(self, subtopology: str, partition: int) -> frozenset[str]:
        return frozenset(self.standby_holders(subtopology, partition).values())

    def warmup_processes(self, subtopology: str, partition: int) -> frozenset[str]:
        return frozenset(self.warmup_holders(subtopology, partition).values())

    def members(self) -> Iterator[tuple[str, str, TaskSet]]:
        """(member id, process id, holdings) of every member holding something."""
        for member_id, (process_id, holds) in self._members.items():
            yield member_id, process_id, holds

    def snapshot(self) -> dict[str, dict[Task, dict[str, str]]]:
        """The whole index as plain dicts, for comparisons in tests and debugging."""
        return {"active": {t: dict(h) for t, h in self._active.items()},
                "standby": {t: dict(h) for t, h in self._standby.items()},
                "warmup": {t: dict(h) for t, h in self._warmup.items()}}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskOwners):
            return NotImplemented
        return self._members == other._members

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"TaskOwners({self._members!r})"
