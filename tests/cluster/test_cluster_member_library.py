"""coterie's own member library on a three-broker cluster (issue 24): leader election whose
group coordinator's broker is killed (-9): the members reach the next coordinator through
NOT_COORDINATOR and FindCoordinator, and there is again exactly one leader, known to all."""

from __future__ import annotations

import asyncio
import time

import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

from coterie.client.election import LeaderElection
from tests.cluster.test_cluster_clients import coordinator_of
from tests.integration.member_helpers import eventually, run
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
            killed_at = time.monotonic()

            def moved() -> bool:
                try:
                    return coordinator_of(cluster, group, 0) != coordinator
                except AssertionError:
                    return False  # nobody leads its partition yet

            while True:
                if await asyncio.to_thread(moved):
                    break
                assert time.monotonic() - killed_at < 30, "a new coordinator in time"
                await asyncio.sleep(0.2)
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
