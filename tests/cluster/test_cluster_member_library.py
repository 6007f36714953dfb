"""coterie's own member library on a three-broker cluster (issue 24): leader election, task
distribution and the consumer, each with its group coordinator's broker killed (-9): the
members reach the next coordinator through NOT_COORDINATOR and FindCoordinator, and there is
again exactly one leader known to all, every task running once, every record read."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

from coterie.client.consumer import Consumer as MemberConsumer
from coterie.client.election import LeaderElection
from coterie.client.tasks import TaskDistribution
from tests.cluster.test_cluster_clients import coordinator_of, create, wait_for_leaders
from tests.fixtures.coterie_cluster import CoterieCluster
from tests.integration.member_helpers import FAST, eventually, run
from tests.integration.test_member_tasks import Ledger, covered_once
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(180)


def test_leader_election_goes_on_when_the_coordinators_broker_dies(coterie_cluster):
    cluster = coterie_cluster
    group = "elected"

    async def scenario() -> None:
        elections = [LeaderElection(cluster.bootstrap, group, info=f"host-{i}:80",
                                    session_timeout_ms=10_000, heartbeat_interval_ms=500)
                     for i in range(3)]
        for e in elections:
            await e.start()

        def settled() -> bool:
            infos = {e.leader.info if e.leader else None for e in elections}
            return sum(e.is_leader for e in elections) == 1 and len(infos) == 1 and (
                None not in infos)

        try:
            await eventually(settled, "one leader known to all", 60)
            coordinator = await asyncio.to_thread(coordinator_of, cluster, group, 0)
            cluster.broker(coordinator).kill9()
            await _await_new_coordinator(cluster, group, coordinator)
            await eventually(settled, "one leader known to all again", 60)
            leader = next(e for e in elections if e.is_leader)
            epoch = leader.leadership.epoch
            # Past the session timeout: members that did not reach the new coordinator
            # would have been expelled by now (its loaded group's sessions run afresh) and
            # the leadership would have changed hands.
            await asyncio.sleep(12)
            assert settled()
            assert leader.is_leader and leader.leadership.epoch == epoch
            now = await asyncio.to_thread(coordinator_of, cluster, group, 0)
            assert now != coordinator
            b = cluster.broker(now)
            with RawConnection(b.host, b.port) as conn:
                (described,) = conn.request(DescribeGroupsRequest(
                    groups=(group,), include_authorized_operations=False)).groups
            assert described.error_code == 0
            assert described.group_state == "Stable"
            assert len(described.members) == 3
        finally:
            for e in elections:
                await e.close()

    run(scenario(), timeout=150)


async def _await_new_coordinator(cluster: CoterieCluster, group: str, old: int) -> None:
    """Until FindCoordinator names another broker than `old` for `group` (30 s at most)."""
    killed_at = time.monotonic()

    def moved() -> bool:
        try:
            return coordinator_of(cluster, group, 0) != old
        except AssertionError:
            return False  # nobody leads its partition yet

    while not await asyncio.to_thread(moved):
        assert time.monotonic() - killed_at < 30, "a new coordinator in time"
        await asyncio.sleep(0.2)


def test_tasks_run_once_each_through_the_coordinators_death(coterie_cluster):
    cluster = coterie_cluster
    group = "workers"
    tasks = [f"task-{i}" for i in range(9)]
    ledger = Ledger()

    async def scenario() -> None:
        ws = [TaskDistribution(cluster.bootstrap, group, tasks, capacity=1, info={"n": i},
                               run_task=ledger.runner(f"w{i}"), client_id=f"w{i}", **FAST)
              for i in range(3)]
        for w in ws:
            await w.start()
        try:
            await eventually(lambda: covered_once(ws, tasks), "9 tasks on 3 workers", 60)
            await eventually(lambda: sorted(ledger.running) == sorted(tasks),
                             "every task running", 10)
            coordinator = await asyncio.to_thread(coordinator_of, cluster, group, 0)
            cluster.broker(coordinator).kill9()
            await _await_new_coordinator(cluster, group, coordinator)
            await eventually(lambda: covered_once(ws, tasks)
                             and sorted(ledger.running) == sorted(tasks),
                             "every task running again", 60)
            assert sorted(len(w.tasks) for w in ws) == [3, 3, 3]
        finally:
            for w in ws:
                await w.close()
        assert ledger.violations == []  # never one task on two workers at once

    run(scenario(), timeout=150)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_member_consumer_reads_everything_through_the_coordinators_death(
        coterie_cluster, protocol):
    cluster = coterie_cluster
    topic, group = f"member-{protocol}", f"member-readers-{protocol}"
    create(cluster, topic)
    wait_for_leaders(cluster, topic, {1, 2, 3})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(600):
        p.produce(topic, value=f"first-{i}".encode())
    assert p.flush(30) == 0

    async def scenario() -> None:
        settings = {} if protocol == "consumer" else {
            "session_timeout_ms": FAST["session_timeout_ms"],
            "heartbeat_interval_ms": FAST["heartbeat_interval_ms"]}
        consumers = [MemberConsumer(cluster.bootstrap, group, topics=[topic],
                                    auto_offset_reset="earliest", group_protocol=protocol,
                                    client_id=f"reader-{i}", retry_backoff_max_ms=500,
                                    **settings)
                     for i in range(2)]
        seen: set[bytes] = set()

        async def read_until(count: int, what: str) -> None:
            deadline = time.monotonic() + 60
            while len(seen) < count:
                assert time.monotonic() < deadline, f"{what}: {len(seen)} of {count}"
                for c in consumers:
                    for r in await c.poll(timeout_ms=100):
                        seen.add(r.value)

        for c in consumers:
            await c.start()
        try:
            await read_until(600, "the first records")
            for c in consumers:
                await c.commit()
            coordinator = await asyncio.to_thread(coordinator_of, cluster, group, 0)
            cluster.broker(coordinator).kill9()
            await _await_new_coordinator(cluster, group, coordinator)
            await asyncio.to_thread(_produce, cluster, topic, "second", 600)
            await read_until(1200, "the records after the kill")
            assert seen == {f"{r}-{i}".encode() for r in ("first", "second")
                            for i in range(600)}
            for c in consumers:
                await c.commit()
            committed = await consumers[0].committed([(topic, i) for i in range(6)])
            assert sum(o for o in committed.values() if o is not None) == 1200
        finally:
            for c in consumers:
                await c.close()

    run(scenario(), timeout=150)


def _produce(cluster: CoterieCluster, topic: str, prefix: str, count: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "message.timeout.ms": 60_000})
    for i in range(count):
        p.produce(topic, value=f"{prefix}-{i}".encode())
    assert p.flush(60) == 0
