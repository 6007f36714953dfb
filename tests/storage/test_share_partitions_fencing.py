"""The broker's share partitions (coterie.broker.share_partitions.SharePartitions) over the
PostgreSQL share-state store, as two cluster brokers: a broker that still counts on a lease
the database has given to another (the race a pause or a slow clock opens) writes no share
state, answers NOT_LEADER_OR_FOLLOWER and drops its copy; the new leader loads exactly what
was acknowledged; and a broker taking a partition back reloads it (issue 27, points 3-4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.share_partitions import SharePartitions
from coterie.broker.share_sessions import ShareSessions
from coterie.share import AckBatch, AcquireMode
from coterie.storage import leases
from coterie.storage.api import Lease, Resource
from coterie.storage.postgres_share_state import PostgresShareStateStore
from tests.storage.helpers import LONG_TTL, expire, topic_with_leases, with_dbs

ACCEPT = 1


@dataclass
class _Led:
    lease: Lease


@dataclass
class _Cluster:
    """What SharePartitions asks a cluster broker: the lease it serves a partition under
    (set by the test: the broker's own belief, not the database's)."""

    led: dict[tuple[str, int], Lease] = field(default_factory=dict)

    def serving(self, topic: str, index: int) -> _Led | None:
        lease = self.led.get((topic, index))
        return None if lease is None else _Led(lease)


def _services(node_id: int, cluster: _Cluster, topic_id: Any) -> SimpleNamespace:
    part = SimpleNamespace(log_start_offset=0, local_start_offset=0, high_watermark=100,
                           offset_for_timestamp=lambda ts: None)
    return SimpleNamespace(
        config=SimpleNamespace(props={"group.share.record.lock.duration.ms": "30000"},
                               node_id=node_id),
        group_configs=None, cluster=cluster, now_ms=lambda: 1_000,
        logs=SimpleNamespace(partition=lambda topic, index: part,
                             topic_by_id=lambda tid: SimpleNamespace(name="t")),
        waiters=SimpleNamespace(notify=lambda topic, index: None),
        share_sessions=ShareSessions(),
        # The group's coordinator is another broker: the group is not asked (trusted).
        groups=SimpleNamespace(handle=lambda request: SimpleNamespace(
            error=ErrorCode.not_coordinator, members=())))


def test_a_deposed_leader_writes_no_share_state_and_a_returning_one_reloads(pg_dsn) -> None:
    async def scenario(db1, db2) -> None:
        (tp,), (lease1,) = await topic_with_leases(db1, "t")
        key = ("g", tp.topic_id, tp.partition)
        c1, c2 = _Cluster({("t", 0): lease1}), _Cluster()
        node1 = SharePartitions(_services(1, c1, tp.topic_id), PostgresShareStateStore(db1))
        node2 = SharePartitions(_services(2, c2, tp.topic_id), PostgresShareStateStore(db2))
        store = node1.store

        async def acquire_and_accept(node: SharePartitions, lease: Lease, member: str,
                                     acquired: list[int], accept: tuple[int, int]
                                     ) -> ErrorCode:
            async with node.lock(key):
                sp = await node.state(key, "t", lease, 1_000)
                got = sp.acquire(member, [(o, o) for o in acquired], 100, 1_000,
                                 mode=AcquireMode.RECORD_LIMIT)
                assert [o for r in got.acquired
                        for o in range(r.first_offset, r.last_offset + 1)] == acquired
                assert await node.persist(key, sp, got, lease) == ErrorCode.none
                outcome = sp.acknowledge(member, [AckBatch(*accept, (ACCEPT,))], 1_000)
                assert outcome.error == ErrorCode.none
                return await node.persist(key, sp, outcome, lease)

        # Node 1 leads (share.auto.offset.reset latest: the window starts at the log end,
        # 100): m1 acquires 100-109 and accepts 100-104.
        assert await acquire_and_accept(node1, lease1, "m1", list(range(100, 110)),
                                        (100, 104)) == ErrorCode.none
        # Node 1 is stopped past its lease; node 2 takes the partition at a new epoch.
        await expire(db2, lease1)
        lease2 = await leases.acquire(db2, Resource.partition(tp), 2, LONG_TTL)
        assert lease2 is not None and lease2.epoch == lease1.epoch + 1
        c2.led[("t", 0)] = lease2
        written = await store.load("g", tp)
        # Node 1, awake but not yet told (it still counts on lease1), accepts what m1 holds:
        # the database refuses the write, the answer is NOT_LEADER_OR_FOLLOWER, and its
        # copy is dropped.
        async with node1.lock(key):
            sp = await node1.state(key, "t", lease1, 1_000)  # its cached copy
            assert sp.start_offset == 105
            outcome = sp.acknowledge("m1", [AckBatch(105, 109, (ACCEPT,))], 1_000)
            assert outcome.error == ErrorCode.none  # in memory...
            code = await node1.persist(key, sp, outcome, lease1)
        assert code == ErrorCode.not_leader_or_follower  # ...but never durable
        assert node1.cached(key) is None
        assert await store.load("g", tp) == written
        # Node 1 (still believing in lease1) loads the partition again: a copy of what is
        # stored now, cached under lease1's epoch.
        async with node1.lock(key):
            stale = await node1.state(key, "t", lease1, 1_000)
        assert stale.start_offset == 105
        # Node 2 loads what was acknowledged: 105-109 are delivered again, 105-107 accepted.
        assert await acquire_and_accept(node2, lease2, "m2", list(range(105, 110)),
                                        (105, 107)) == ErrorCode.none
        # Node 1 takes the partition back at a third epoch, its copy from the first still
        # cached: it must reload, and find 105-107 accepted and 108-109 to deliver.
        await expire(db1, lease2)
        lease3 = await leases.acquire(db1, Resource.partition(tp), 1, LONG_TTL)
        assert lease3 is not None and lease3.epoch == lease2.epoch + 1
        c1.led[("t", 0)] = lease3
        async with node1.lock(key):
            sp = await node1.state(key, "t", lease3, 1_000)
            assert sp is not stale and sp.start_offset == 108
            got = sp.acquire("m3", [(o, o) for o in range(100, 110)], 100, 1_000,
                             mode=AcquireMode.RECORD_LIMIT)
        assert [(r.first_offset, r.last_offset) for r in got.acquired] == [(108, 109)]
        node1.close()
        node2.close()

    with_dbs(pg_dsn, scenario, n=2)


def test_a_copy_of_a_partition_led_elsewhere_now_is_not_described_as_live(pg_dsn) -> None:
    """DescribeShareGroupOffsets takes a share partition's live copy where this broker has
    one (coterie.broker.handlers.share_offsets), else the stored state. A broker that lost
    the partition keeps its copy until it next touches it; that copy is not live any more
    (another broker may have moved the state on) and must not be offered as such."""
    async def scenario(db1, db2) -> None:
        (tp,), (lease1,) = await topic_with_leases(db1, "t")
        key = ("g", tp.topic_id, tp.partition)
        c1, c2 = _Cluster({("t", 0): lease1}), _Cluster()
        node1 = SharePartitions(_services(1, c1, tp.topic_id), PostgresShareStateStore(db1))
        node2 = SharePartitions(_services(2, c2, tp.topic_id), PostgresShareStateStore(db2))
        async with node1.lock(key):
            await node1.state(key, "t", lease1, 1_000)
        assert node1.cached(key) is not None  # leading it: live
        await expire(db2, lease1)
        lease2 = await leases.acquire(db2, Resource.partition(tp), 2, LONG_TTL)
        assert lease2 is not None
        c1.led.clear()  # node 1's round found the lease gone
        c2.led[("t", 0)] = lease2
        async with node2.lock(key):
            sp = await node2.state(key, "t", lease2, 1_000)
            got = sp.acquire("m", [(100, 104)], 100, 1_000, mode=AcquireMode.RECORD_LIMIT)
            done = sp.acknowledge("m", [AckBatch(100, 104, (ACCEPT,))], 1_000)
            assert await node2.persist(key, sp, done, lease2) == ErrorCode.none
        assert got.acquired
        assert node2.cached(key).start_offset == 105
        assert node1.cached(key) is None  # not leading it: the store is the truth
        node1.close()
        node2.close()

    with_dbs(pg_dsn, scenario, n=2)


def test_a_leader_whose_group_has_no_session_left_reloads_what_its_coordinator_deleted(
        pg_dsn) -> None:
    """DeleteShareGroupOffsets is answered by the group's coordinator (the group empty),
    which deletes the stored state; the partition's leader is another broker. Once the last
    share session of the group on the leader has ended, the leader drops its copy, so the
    group's next member starts afresh (share.auto.offset.reset) rather than from the copy."""
    async def scenario(db1, db2) -> None:
        (tp,), (lease1,) = await topic_with_leases(db1, "t")
        key = ("g", tp.topic_id, tp.partition)
        services = _services(1, _Cluster({("t", 0): lease1}), tp.topic_id)
        leader = SharePartitions(services, PostgresShareStateStore(db1))
        coordinator = SharePartitions(_services(2, _Cluster(), tp.topic_id),
                                      PostgresShareStateStore(db2))
        sessions = services.share_sessions
        sessions.fetch("g", "m", 0, [(tp.topic_id, 0)], [], False, "connection")
        async with leader.lock(key):
            sp = await leader.state(key, "t", lease1, 1_000)
            sp.acquire("m", [(100, 109)], 100, 1_000, mode=AcquireMode.RECORD_LIMIT)
            done = sp.acknowledge("m", [AckBatch(100, 104, (ACCEPT,))], 1_000)
            assert await leader.persist(key, sp, done, lease1) == ErrorCode.none
        assert sp.start_offset == 105
        sessions.disconnected("connection")  # the member closed: the group is empty
        await leader.release_member("g", "m")
        await coordinator.delete_state("g", tp)
        assert await coordinator.store.load("g", tp) == []
        async with leader.lock(key):
            again = await leader.state(key, "t", lease1, 1_000)
        assert again.start_offset == 100  # afresh at the log end (latest), not 105
        leader.close()
        coordinator.close()

    with_dbs(pg_dsn, scenario, n=2)


def test_an_alter_through_a_coordinator_not_leading_fences_the_leaders_copy(pg_dsn) -> None:
    """AlterShareGroupOffsets answered by the group's coordinator, which does not lead the
    partition: it writes a new snapshot at the new start offset with the next state epoch,
    under no lease. The leader's copy from before (here still cached: a share session
    outlived its member) cannot write over it: its next write is refused
    (NOT_LEADER_OR_FOLLOWER, as Kafka answers FENCED_STATE_EPOCH), it drops the copy, and
    loads the new state, at the new start offset."""
    async def scenario(db1, db2) -> None:
        (tp,), (lease1,) = await topic_with_leases(db1, "t")
        key = ("g", tp.topic_id, tp.partition)
        leader = SharePartitions(_services(1, _Cluster({("t", 0): lease1}), tp.topic_id),
                                 PostgresShareStateStore(db1))
        coordinator = SharePartitions(_services(2, _Cluster(), tp.topic_id),
                                      PostgresShareStateStore(db2))
        async with leader.lock(key):
            sp = await leader.state(key, "t", lease1, 1_000)
            sp.acquire("m", [(100, 109)], 100, 1_000, mode=AcquireMode.RECORD_LIMIT)
            done = sp.acknowledge("m", [AckBatch(100, 101, (ACCEPT,))], 1_000)
            assert await leader.persist(key, sp, done, lease1) == ErrorCode.none
        assert (sp.start_offset, sp.state_epoch) == (102, 0)
        await coordinator.reset("g", "t", tp, 40)
        async with leader.lock(key):
            stale = await leader.state(key, "t", lease1, 1_000)
            assert stale is sp  # still cached: nothing told the leader
            late = stale.acknowledge("m", [AckBatch(102, 109, (ACCEPT,))], 1_000)
            assert await leader.persist(key, stale, late, lease1) == \
                ErrorCode.not_leader_or_follower
        assert leader.cached(key) is None
        async with leader.lock(key):
            fresh = await leader.state(key, "t", lease1, 1_000)
        assert (fresh.start_offset, fresh.state_epoch) == (40, 1)
        got = fresh.acquire("m2", [(40, 44)], 100, 1_000, mode=AcquireMode.RECORD_LIMIT)
        assert [(r.first_offset, r.last_offset) for r in got.acquired] == [(40, 44)]
        assert await leader.persist(key, fresh, got, lease1) == ErrorCode.none
        # A second alter goes on from the stored epoch.
        await coordinator.reset("g", "t", tp, 7)
        async with leader.lock(key):
            assert await leader.persist(key, fresh, fresh.release_member("m2", 1_000),
                                        lease1) == ErrorCode.not_leader_or_follower
            again = await leader.state(key, "t", lease1, 1_000)
        assert (again.start_offset, again.state_epoch) == (7, 2)
        leader.close()
        coordinator.close()

    with_dbs(pg_dsn, scenario, n=2)
