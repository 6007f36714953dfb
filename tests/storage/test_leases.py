"""Leases and fencing on a real PostgreSQL: one owner at a time, a new epoch for every new
tenure, and a write by a broker that lost its lease refused with nothing written."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from coterie.storage import leases
from coterie.storage.api import Append, Lease, Resource, TopicIdPartition
from coterie.storage.database import Database
from coterie.storage.errors import LeaseLost
from coterie.storage.postgres_log import PostgresLog
from tests.storage.helpers import LONG_TTL, batch_count, expire, topic_with_leases, with_dbs
from tests.unit.log.batches import make_batch


def test_two_nodes_racing_for_a_resource_exactly_one_wins(pg_dsn: str) -> None:
    async def scenario(a: Database, b: Database) -> None:
        for i in range(30):
            resource = Resource.group_shard(i)
            got = await asyncio.gather(leases.acquire(a, resource, 1, LONG_TTL),
                                       leases.acquire(b, resource, 2, LONG_TTL))
            winners = [lease for lease in got if lease is not None]
            assert len(winners) == 1, got
            assert winners[0].epoch == 1
            assert await leases.holder(a, resource) == winners[0]

    with_dbs(pg_dsn, scenario, 2)


def test_an_expired_lease_is_taken_at_the_next_epoch(pg_dsn: str) -> None:
    async def scenario(a: Database, b: Database) -> None:
        resource = Resource.txn_shard(0)
        first = await leases.acquire(a, resource, 1, ttl=0.3)
        assert first == Lease(resource, 1, 1)
        assert await leases.acquire(b, resource, 2, LONG_TTL) is None  # still live
        assert await leases.renew(a, first, ttl=0.3)
        await asyncio.sleep(0.4)  # the ttl runs out on the database's clock
        assert await leases.holder(b, resource) is None
        second = await leases.acquire(b, resource, 2, LONG_TTL)
        assert second == Lease(resource, 2, 2)
        assert not await leases.renew(a, first, LONG_TTL)  # the old owner cannot revive it
        assert not await leases.release(a, first)
        assert await leases.holder(a, resource) == second

    with_dbs(pg_dsn, scenario, 2)


def test_release_hands_over_at_once_and_reacquiring_fences_the_old_epoch(pg_dsn: str) -> None:
    async def scenario(db: Database) -> None:
        resource = Resource("partition", "x-0")
        first = await leases.acquire(db, resource, 1, LONG_TTL)
        assert first is not None and await leases.release(db, first)
        assert await leases.holder(db, resource) is None
        second = await leases.acquire(db, resource, 2, LONG_TTL)
        assert second == Lease(resource, 2, 2)
        # The same node taking its lease again (a restarted broker) starts a new tenure.
        third = await leases.acquire(db, resource, 2, LONG_TTL)
        assert third == Lease(resource, 2, 3)
        assert not await leases.renew(db, second, LONG_TTL)
        assert await leases.renew_all(db, 2, LONG_TTL) == [third]
        assert await leases.renew_all(db, 1, LONG_TTL) == []

    with_dbs(pg_dsn, scenario)


def test_a_write_by_the_old_owner_is_refused_and_writes_nothing(pg_dsn: str) -> None:
    async def scenario(a: Database, b: Database) -> None:
        (tp,), (old,) = await topic_with_leases(a, node_id=1)
        log_a, log_b = PostgresLog(a), PostgresLog(b)
        await log_a.append(tp, make_batch(2), old)
        await expire(a, old)  # node 1 paused past its lease
        # Expired but not yet taken: still refused (the lease is checked on the database's
        # clock in the write's own transaction).
        with pytest.raises(LeaseLost, match="expired"):
            await log_a.append(tp, make_batch(1), old)
        new = await leases.acquire(b, Resource.partition(tp), 2, LONG_TTL)
        assert new is not None and new.epoch == old.epoch + 1
        with pytest.raises(LeaseLost, match=r"now node 2 at epoch 2 \(live\)"):
            await log_a.append(tp, make_batch(1), old)
        with pytest.raises(LeaseLost):
            await log_a.delete_records(tp, 1, old)
        assert await log_b.bounds(tp) == (0, 2)
        assert await batch_count(b, tp) == 1
        # The new owner continues from the durable end, at its epoch.
        appended = await log_b.append(tp, make_batch(3), new)
        assert (appended.first_offset, appended.last_offset) == (2, 4)

    with_dbs(pg_dsn, scenario, 2)


def test_group_commit_is_one_transaction_all_or_nothing(pg_dsn: str) -> None:
    async def scenario(db: Database) -> None:
        tps, held = await topic_with_leases(db, partitions=3)
        log = PostgresLog(db)
        answers = await log.append_many([
            Append(tps[0], make_batch(2), held[0]),
            Append(tps[1], make_batch(1), held[1]),
            Append(tps[0], make_batch(3), held[0]),  # the same partition again: in order
            Append(tps[2], make_batch(1) + make_batch(1), held[2]),
        ])
        assert [(x.first_offset, x.last_offset) for x in answers] == [
            (0, 1), (0, 0), (2, 4), (0, 1)]
        assert [await log.log_end_offset(tp) for tp in tps] == [5, 1, 2]
        # One lease of three lost: nothing of the group commit is written.
        await expire(db, held[1])
        with pytest.raises(LeaseLost):
            await log.append_many([Append(tp, make_batch(1), lease)
                                   for tp, lease in zip(tps, held, strict=True)])
        assert [await log.log_end_offset(tp) for tp in tps] == [5, 1, 2]
        assert [await batch_count(db, tp) for tp in tps] == [2, 1, 2]
        with pytest.raises(ValueError, match="two leases"):
            await log.append_many([Append(tps[0], make_batch(1), held[0]),
                                   Append(tps[0], make_batch(1), held[1])])

    with_dbs(pg_dsn, scenario)


def test_a_take_over_racing_with_appends_loses_and_doubles_nothing(pg_dsn: str) -> None:
    """Node 1 keeps appending while its lease expires and node 2 takes the partition and
    appends too: every acknowledged append is in the log exactly once, at offsets that never
    overlap, node 1's all before node 2's first."""

    async def scenario(a: Database, b: Database) -> None:
        (tp,), (old,) = await topic_with_leases(a, node_id=1)
        log_a, log_b = PostgresLog(a), PostgresLog(b)
        acked: list[tuple[int, int, bytes]] = []

        async def node1() -> None:
            for i in range(200):
                try:
                    got = await log_a.append(tp, make_batch([b"a%d" % i]), old)
                except LeaseLost:
                    return
                acked.append((got.first_offset, 1, b"a%d" % i))

        async def node2() -> None:
            await asyncio.sleep(0.02)
            await expire(b, old)
            new = None
            while new is None:
                new = await leases.acquire(b, Resource.partition(tp), 2, LONG_TTL)
            for i in range(50):
                got = await log_b.append(tp, make_batch([b"b%d" % i]), new)
                acked.append((got.first_offset, 2, b"b%d" % i))

        await asyncio.gather(node1(), node2())
        offsets = sorted(o for o, _, _ in acked)
        assert offsets == list(range(len(acked)))
        assert await log_b.log_end_offset(tp) == len(acked)
        owners = [n for _, n, _ in sorted(acked)]
        assert owners == sorted(owners)  # node 1's writes, then node 2's
        assert owners.count(2) == 50 and 0 < owners.count(1) < 200
        stored = await log_b.read(tp, 0, 1 << 24)
        for _, _, value in acked:
            assert stored.count(value) >= 1

    with_dbs(pg_dsn, scenario, 2)


def test_a_partition_and_a_shard_of_one_name_are_two_leases(pg_dsn: str) -> None:
    """Resources are (kind, name): a partition and a shard with one name do not collide."""

    async def scenario(db: Database) -> None:
        tp = TopicIdPartition(uuid.UUID(int=1), 0)
        one = await leases.acquire(db, Resource.partition(tp), 1, LONG_TTL)
        two = await leases.acquire(db, Resource("group-shard", str(tp)), 2, LONG_TTL)
        assert one is not None and two is not None

    with_dbs(pg_dsn, scenario)


def test_heartbeats_and_group_commits_never_deadlock(pg_dsn: str) -> None:
    """A broker's heartbeat (renew_all, every lease row) runs while group commits over the
    same partitions, in other orders and on other connections, lock those rows: both lock in
    the leases' key order, so PostgreSQL never has to break a deadlock."""

    async def scenario(setup: Database, c1: Database, c2: Database, beat: Database) -> None:
        tps, held = await topic_with_leases(setup, partitions=12)  # names "...-10" < "...-2"
        pairs = list(zip(tps, held, strict=True))

        async def commits(db: Database, order: list[tuple[TopicIdPartition, Lease]]) -> None:
            log = PostgresLog(db)
            for _ in range(40):
                await log.append_many([Append(tp, make_batch(1), lease)
                                       for tp, lease in order])

        async def heartbeats() -> None:
            for _ in range(80):
                assert len(await leases.renew_all(beat, 1, LONG_TTL)) == 12

        await asyncio.gather(commits(c1, pairs), commits(c2, pairs[::-1]), heartbeats())
        assert [await PostgresLog(setup).log_end_offset(tp) for tp in tps] == [80] * 12

    with_dbs(pg_dsn, scenario, 4)
