"""Task distribution's wire format and default assignor (pure: no I/O, no clock, no random).

Workers advertise metadata in JoinGroup and receive their tasks in SyncGroup, both as JSON so
that DescribeGroups output stays readable and a rolling upgrade can add fields:

    metadata   {"version": 1, "capacity": 2.0, "info": {...}, "owned": ["t1", "t4"]}
    assignment {"version": 1, "generation": 7, "leader": "<member id>", "tasks": ["t1", "t4"]}

An assignment with an "error" field tells a worker that the leader could not read its
metadata (a newer format, say): that worker gets no tasks and reports the error, and the rest
of the group carries on (seed 1 wants such errors raised to the user rather than retried).

`capacity` weighs the share of tasks a worker gets; `info` is free-form custom metadata (tags,
rack, host) for custom assignors; `owned` is what the worker held in its last generation, so
an assignor can keep tasks where they run.

`balanced_assignment`, the default assignor, gives every worker a share proportional to its
capacity (largest-remainder rounding, so shares differ from the exact proportion by less than
one task) and, within those shares, leaves tasks with their previous owner. Workers are
ordered by (group.instance.id, member id) so the result does not depend on the order members
joined. If every capacity is 0, every worker counts as capacity 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Worker:
    """One member of the group as the assignor sees it."""

    member_id: str
    group_instance_id: str | None = None
    capacity: float = 1.0
    info: Mapping[str, Any] = field(default_factory=dict)
    owned: tuple[str, ...] = ()


#: (tasks to distribute, workers) -> member id -> its tasks. A task may go to several
#: workers (redundant assignment) if a custom assignor wants that.
TaskAssignor = Callable[[Sequence[str], Sequence[Worker]], Mapping[str, Sequence[str]]]


def encode_metadata(capacity: float, info: Mapping[str, Any], owned: Sequence[str]) -> bytes:
    return json.dumps({"version": FORMAT_VERSION, "capacity": capacity, "info": dict(info),
                       "owned": list(owned)}).encode()


def decode_metadata(member_id: str, group_instance_id: str | None, data: bytes) -> Worker:
    """A worker from its JoinGroup metadata; raises ValueError on bytes it cannot read."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), int):
        raise ValueError(f"worker {member_id}: not task-distribution metadata: {data[:80]!r}")
    capacity = float(doc.get("capacity", 1.0))
    if not math.isfinite(capacity) or capacity < 0:
        raise ValueError(f"worker {member_id}: capacity must be >= 0, got {capacity}")
    info = doc.get("info") or {}
    owned = doc.get("owned") or []
    if not isinstance(info, dict) or not isinstance(owned, list):
        raise ValueError(f"worker {member_id}: malformed info/owned in {data[:80]!r}")
    return Worker(member_id, group_instance_id, capacity, info, tuple(str(t) for t in owned))


def encode_assignment(generation_id: int, leader_id: str, tasks: Sequence[str],
                      error: str | None = None) -> bytes:
    doc: dict[str, Any] = {"version": FORMAT_VERSION, "generation": generation_id,
                           "leader": leader_id, "tasks": list(tasks)}
    if error is not None:
        doc["error"] = error
    return json.dumps(doc).encode()


def decode_assignment(data: bytes) -> tuple[str, ...]:
    """The tasks of an assignment; raises ValueError on bytes it cannot read, and on an
    assignment in which the leader reports that it could not read this worker's metadata."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a task assignment: {data[:80]!r}")
    if doc.get("error"):
        raise ValueError(f"the leader refused this worker: {doc['error']}")
    tasks = doc.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise ValueError(f"'tasks' must be a list of strings: {data[:80]!r}")
    return tuple(tasks)


def _order(workers: Sequence[Worker]) -> list[Worker]:
    return sorted(workers, key=lambda w: (w.group_instance_id or "", w.member_id))


def quotas(task_count: int, workers: Sequence[Worker]) -> dict[str, int]:
    """How many tasks each worker gets: proportional to capacity, largest remainder first."""
    ordered = _order(workers)
    if not ordered:
        return {}
    weights = [w.capacity for w in ordered]
    total = sum(weights)
    if total <= 0:
        weights = [1.0] * len(ordered)
        total = float(len(ordered))
    exact = [task_count * w / total for w in weights]
    share = [math.floor(x) for x in exact]
    rest = task_count - sum(share)
    by_remainder = sorted(range(len(ordered)), key=lambda i: (-(exact[i] - share[i]), i))
    for i in by_remainder[:rest]:
        share[i] += 1
    return {w.member_id: s for w, s in zip(ordered, share, strict=True)}


def balanced_assignment(tasks: Sequence[str],
                        workers: Sequence[Worker]) -> dict[str, list[str]]:
    """Every task to exactly one worker, shares by capacity, previous owners kept."""
    unique = list(dict.fromkeys(tasks))
    ordered = _order(workers)
    quota = quotas(len(unique), ordered)
    result: dict[str, list[str]] = {w.member_id: [] for w in ordered}
    wanted = set(unique)
    taken: set[str] = set()
    for w in ordered:
        for task in w.owned:
            if len(result[w.member_id]) >= quota[w.member_id]:
                break
            if task in wanted and task not in taken:
                result[w.member_id].append(task)
                taken.add(task)
    position = {w.member_id: i for i, w in enumerate(ordered)}
    for task in unique:
        if task in taken:
            continue
        target = max(ordered, key=lambda w: (quota[w.member_id] - len(result[w.member_id]),
                                             -position[w.member_id]))
        result[target.member_id].append(task)
        taken.add(task)
    return result
