"""Task distribution among workers, Connect-style, on top of the group membership protocol.

Seed 1's Copycat (Kafka Connect) case: "a pool of worker processes ... act as one large group.
If one worker fails, the connector partitions that lived in that process need to be
redistributed over the rest of the worker processes." Each worker joins the group with
protocol type `coterie-tasks` and advertises its capacity and free-form `info` (custom
metadata, JSON); the group's leader splits the task list among the workers with an assignor
(default: `balanced_assignment`, shares weighted by capacity, tasks kept where they ran) and
every worker receives its own tasks.

    async def run(task_id: str) -> None:
        ...                             # cancelled (and awaited) when the task moves away

    async with TaskDistribution("127.0.0.1:9092", "workers", ["t1", "t2", "t3"],
                                capacity=2, run_task=run) as worker:
        print(await worker.wait_assigned())

Rebalances are eager, as in Connect's first protocol: before a worker rejoins, all its tasks
are revoked (`run_task` tasks cancelled and awaited, `on_revoked` called), so no task ever
runs on two live workers at once; the sticky assignor then gives most of them back to it.

The task list is the leader's: pass the same list (from shared configuration) to every
worker, and call `set_tasks()` on every worker when it changes; each call also asks for a
rebalance, and the leader distributes its own list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from coterie.client.cluster import Cluster
from coterie.client.member import GroupMember
from coterie.client.member_api import MemberBackedApi, call_back
from coterie.client.protocol import EmbeddedProtocol, Generation, JoinedMember
from coterie.client.task_assignor import (
    TaskAssignor,
    balanced_assignment,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

log = logging.getLogger("coterie.client.tasks")

PROTOCOL_TYPE = "coterie-tasks"
PROTOCOL_NAME = "tasks-v1"

Callback = Callable[..., Any]


class _TaskProtocol(EmbeddedProtocol):
    protocol_type = PROTOCOL_TYPE

    def __init__(self, owner: TaskDistribution) -> None:
        self.owner = owner

    async def metadata(self) -> Sequence[tuple[str, bytes]]:
        o = self.owner
        return [(PROTOCOL_NAME, encode_metadata(o.capacity, o.info, o.last_tasks))]

    async def assign(self, generation: Generation,
                     members: Sequence[JoinedMember]) -> Mapping[str, bytes]:
        workers, refused = [], {}
        for m in members:
            try:
                workers.append(decode_metadata(m.member_id, m.group_instance_id, m.metadata))
            except ValueError as e:
                log.warning("group %s: worker %s has unreadable metadata: %s",
                            self.owner.member.group_id, m.member_id, e)
                refused[m.member_id] = f"unreadable worker metadata: {e}"
        plan = self.owner.assignor(list(self.owner.task_list()), workers)
        unknown = set(plan) - {w.member_id for w in workers}
        if unknown:
            raise ValueError(f"assignor named workers not in the group: {sorted(unknown)}")
        out = {w.member_id: encode_assignment(generation.generation_id, generation.member_id,
                                              plan.get(w.member_id, ())) for w in workers}
        for member_id, error in refused.items():
            out[member_id] = encode_assignment(generation.generation_id, generation.member_id,
                                               (), error=error)
        return out

    async def on_assignment(self, generation: Generation, assignment: bytes) -> None:
        await self.owner._start_tasks(generation, decode_assignment(assignment))

    async def on_revoke(self, generation: Generation) -> None:
        await self.owner._stop_tasks("rebalance")

    async def on_lost(self, generation: Generation) -> None:
        await self.owner._stop_tasks("generation lost")


class TaskDistribution(MemberBackedApi):
    """One worker of a task-distribution group (see the module docstring).

    tasks       the task ids to distribute (a sequence, or a function returning one: it is
                called on the leader at each assignment)
    capacity    this worker's weight (>= 0); `info`: JSON-able custom metadata for assignors
    assignor    (tasks, workers) -> {member id: [task, ...]}; default `balanced_assignment`
    on_assigned(tasks, generation_id) / on_revoked(tasks, reason): optional callbacks
    run_task(task_id): optional coroutine run per assigned task, cancelled on revocation
    Other keyword arguments go to `GroupMember`.
    """

    def __init__(self, bootstrap: str | Sequence[str] | Cluster, group_id: str,
                 tasks: Sequence[str] | Callable[[], Sequence[str]] = (), *,
                 capacity: float = 1.0, info: Mapping[str, Any] | None = None,
                 assignor: TaskAssignor = balanced_assignment,
                 on_assigned: Callback | None = None, on_revoked: Callback | None = None,
                 run_task: Callable[[str], Awaitable[None]] | None = None,
                 **member_options: Any) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self._tasks = tasks
        self.capacity = float(capacity)
        self.info = dict(info or {})
        self.assignor = assignor
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.run_task = run_task
        self.member = GroupMember(bootstrap, group_id, _TaskProtocol(self), **member_options)
        self._assigned: tuple[str, ...] = ()
        self.last_tasks: tuple[str, ...] = ()
        self._running: dict[str, asyncio.Task[None]] = {}
        self.history: list[tuple[int, tuple[str, ...]]] = []

    # -- public view --------------------------------------------------------------------------
    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks this worker holds now (empty between revocation and assignment)."""
        return self._assigned

    @property
    def generation_id(self) -> int:
        return self.member.generation_id

    def task_list(self) -> Sequence[str]:
        return self._tasks() if callable(self._tasks) else self._tasks

    def set_tasks(self, tasks: Sequence[str] | Callable[[], Sequence[str]]) -> None:
        """Replace the task list and ask for a rebalance (call it on every worker)."""
        self._tasks = tasks
        self.member.request_rejoin("the task list changed")

    # -- life cycle ---------------------------------------------------------------------------
    async def _release(self, reason: str) -> None:
        await self._stop_tasks(reason)

    async def wait_assigned(self, timeout: float | None = None) -> tuple[str, ...]:
        """Wait until the worker holds an assignment and return its tasks."""
        await self.member.wait_stable(timeout)
        return self._assigned

    # -- transitions (the member's task) ------------------------------------------------------
    async def _start_tasks(self, generation: Generation, tasks: tuple[str, ...]) -> None:
        self._assigned = tasks
        self.last_tasks = tasks
        self.history.append((generation.generation_id, tasks))
        log.info("group %s: worker %s runs %d task(s) in generation %d",
                 self.member.group_id, generation.member_id, len(tasks),
                 generation.generation_id)
        if self.run_task is not None:
            for task_id in tasks:
                self._running[task_id] = asyncio.create_task(self._run_one(task_id),
                                                             name=f"coterie-task-{task_id}")
        await call_back(self.on_assigned, tasks, generation.generation_id)

    async def _run_one(self, task_id: str) -> None:
        assert self.run_task is not None
        try:
            await self.run_task(task_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("group %s: task %s failed", self.member.group_id, task_id)

    async def _stop_tasks(self, reason: str) -> None:
        tasks, self._assigned = self._assigned, ()
        running, self._running = self._running, {}
        for task in running.values():
            task.cancel()
        for task in running.values():
            with contextlib.suppress(BaseException):
                await task
        if tasks:
            await call_back(self.on_revoked, tasks, reason)
