"""Task distribution among workers: tasks spread by capacity, every task on exactly one
worker; when a worker leaves (or dies silently) its tasks move to the others while theirs
stay put; a new task list is distributed; a worker whose metadata the leader cannot read is
refused alone; no task ever runs on two workers at once.
Runs against coterie and, marked `reference`, against Apache Kafka."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest

from coterie.client.errors import AssignmentError
from coterie.client.member import MemberState
from coterie.client.task_assignor import decode_assignment
from coterie.client.tasks import PROTOCOL_NAME, PROTOCOL_TYPE, TaskDistribution
from tests.integration import member_helpers
from tests.integration.member_helpers import (
    FAST,
    RecordingProtocol,
    Target,
    eventually,
    member,
    new_group,
    run,
)

group_broker = member_helpers.group_broker

TASKS = [f"task-{i:02d}" for i in range(12)]


class Ledger:
    """Which worker runs which task right now; any overlap is recorded as a violation."""

    def __init__(self) -> None:
        self.running: dict[str, str] = {}
        self.violations: list[tuple[str, str, str]] = []
        self.starts: Counter[str] = Counter()

    def runner(self, worker: str) -> Callable[[str], Awaitable[None]]:
        async def run_task(task_id: str) -> None:
            other = self.running.get(task_id)
            if other is not None:
                self.violations.append((task_id, other, worker))
            self.running[task_id] = worker
            self.starts[task_id] += 1
            try:
                await asyncio.Event().wait()
            finally:
                if self.running.get(task_id) == worker:
                    del self.running[task_id]
        return run_task


def workers(target: Target, group: str, ledger: Ledger, capacities: list[float],
            tasks: list[str] = TASKS) -> list[TaskDistribution]:
    return [TaskDistribution(target.bootstrap, group, tasks, capacity=c, info={"n": i},
                             run_task=ledger.runner(f"w{i}"), client_id=f"w{i}", **FAST)
            for i, c in enumerate(capacities)]


def covered_once(ws: list[TaskDistribution], tasks: list[str]) -> bool:
    held = [t for w in ws for t in w.tasks]
    gens = {w.generation_id for w in ws}
    return sorted(held) == sorted(tasks) and len(gens) == 1 and -1 not in gens


def test_tasks_spread_by_capacity_and_move_when_a_worker_leaves(group_broker: Target) -> None:
    ledger = Ledger()

    async def scenario() -> None:
        ws = workers(group_broker, new_group("tasks"), ledger, [1, 1, 2])
        for w in ws:
            await w.start()
        await eventually(lambda: covered_once(ws, TASKS), "12 tasks on 3 workers", 30)
        assert [len(w.tasks) for w in ws] == [3, 3, 6]
        # Task coroutines start just after the assignment is taken: wait for them.
        await eventually(lambda: sorted(ledger.running) == sorted(TASKS), "every task running", 10)
        before = {id(w): set(w.tasks) for w in ws}
        await ws[2].close()
        rest = ws[:2]
        await eventually(lambda: covered_once(rest, TASKS) and
                         all(len(w.tasks) == 6 for w in rest), "tasks to move", 30)
        for w in rest:
            assert before[id(w)] <= set(w.tasks)  # the survivors kept what they ran
        await eventually(lambda: sorted(ledger.running) == sorted(TASKS), "moved tasks running",
                         10)
        assert {ledger.running[t] for t in TASKS} == {"w0", "w1"}
        for w in rest:
            await w.close()
        assert ledger.violations == []
        assert ledger.running == {}

    run(scenario())


def test_a_worker_that_vanishes_loses_its_tasks_after_the_session_timeout(
        group_broker: Target) -> None:
    ledger = Ledger()

    async def scenario() -> None:
        ws = workers(group_broker, new_group("tasks"), ledger, [1, 1, 1])
        for w in ws:
            await w.start()
        await eventually(lambda: covered_once(ws, TASKS), "12 tasks on 3 workers", 30)
        await ws[0].close(leave=False)  # no LeaveGroup: the coordinator must time it out
        took = await eventually(lambda: covered_once(ws[1:], TASKS), "tasks to move", 30)
        assert took > FAST["session_timeout_ms"] / 1000 - 1.5  # only the session timeout
        for w in ws[1:]:
            await w.close()
        assert ledger.violations == []

    run(scenario())


def test_a_new_task_list_is_distributed(group_broker: Target) -> None:
    ledger = Ledger()

    async def scenario() -> None:
        ws = workers(group_broker, new_group("tasks"), ledger, [1, 1], tasks=TASKS[:4])
        for w in ws:
            await w.start()
        await eventually(lambda: covered_once(ws, TASKS[:4]), "4 tasks on 2 workers", 30)
        for w in ws:
            w.set_tasks(TASKS)
        await eventually(lambda: covered_once(ws, TASKS), "12 tasks on 2 workers", 30)
        assert sorted(len(w.tasks) for w in ws) == [6, 6]
        for w in ws:
            await w.close()
        assert ledger.violations == []

    run(scenario())


def test_a_worker_whose_metadata_the_leader_cannot_read_fails_alone(
        group_broker: Target) -> None:
    ledger = Ledger()

    async def scenario() -> None:
        group = new_group("tasks")
        (honest,) = workers(group_broker, group, ledger, [1])
        await honest.start()
        await eventually(lambda: covered_once([honest], TASKS), "the first worker", 30)
        odd = RecordingProtocol("odd", protocol_type=PROTOCOL_TYPE,
                                protocols=[(PROTOCOL_NAME, b"\x00 not json")],
                                decode=decode_assignment)
        stranger = member(group_broker, group, "odd", protocol=odd)
        await stranger.start()
        with pytest.raises(AssignmentError, match="refused"):
            await asyncio.wait_for(stranger.wait_closed(), 30)
        await eventually(lambda: covered_once([honest], TASKS) and
                         honest.member.state is MemberState.STABLE, "the group to settle", 30)
        assert honest.error is None
        await honest.close()
        await stranger.close()
        assert ledger.violations == []

    run(scenario())
