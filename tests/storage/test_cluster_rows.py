"""Broker registration, producer-id blocks and topic rows on a real PostgreSQL: the rows
several brokers share."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from coterie.storage import brokers, leases
from coterie.storage.api import Resource
from coterie.storage.brokers import BrokerRow
from coterie.storage.cluster_id import cluster_id
from coterie.storage.database import Database
from coterie.storage.errors import NodeIdInUse, RegistrationLost, UnknownTopic
from coterie.storage.producer_ids import allocate_block
from coterie.storage.topics import (
    create_partitions,
    create_topic,
    delete_topic,
    topic_by_name,
    topics,
)
from tests.storage.helpers import LONG_TTL, with_dbs


def test_a_node_id_is_held_by_one_live_broker(pg_dsn: str) -> None:
    async def scenario(a: Database, b: Database) -> None:
        first = await brokers.register(a, 1, "10.0.0.1", 9092, ttl=0.3)
        await brokers.register(b, 2, "10.0.0.2", 9092, LONG_TTL)
        with pytest.raises(NodeIdInUse, match=r"node.id 1 is registered by a live broker "
                                              r"at 10\.0\.0\.1:9092"):
            await brokers.register(b, 1, "10.0.0.3", 9092, LONG_TTL)
        assert await brokers.live_brokers(b) == [BrokerRow(1, "10.0.0.1", 9092, None),
                                                 BrokerRow(2, "10.0.0.2", 9092, None)]
        await brokers.heartbeat(a, first, ttl=0.3)
        await asyncio.sleep(0.4)  # node 1 stops heartbeating: it drops out by itself
        assert [r.node_id for r in await brokers.live_brokers(b)] == [2]
        again = await brokers.register(b, 1, "10.0.0.3", 9093, LONG_TTL, rack="r1")
        assert again.incarnation != first.incarnation
        assert await brokers.live_brokers(a) == [BrokerRow(1, "10.0.0.3", 9093, "r1"),
                                                 BrokerRow(2, "10.0.0.2", 9092, None)]
        # The paused first incarnation cannot keep the new registration alive.
        with pytest.raises(RegistrationLost):
            await brokers.heartbeat(a, first, LONG_TTL)
        await brokers.deregister(b, again)
        assert [r.node_id for r in await brokers.live_brokers(a)] == [2]
        await brokers.register(a, 1, "10.0.0.1", 9092, LONG_TTL)  # free at once

    with_dbs(pg_dsn, scenario, 2)


def test_producer_id_blocks_never_overlap(pg_dsn: str) -> None:
    async def scenario(*dbs: Database) -> None:
        blocks = await asyncio.gather(*(allocate_block(db, node, size=1000)
                                        for node, db in enumerate(dbs) for _ in range(4)))
        starts = sorted(b.first_id for b in blocks)
        assert starts == list(range(0, 12_000, 1000))
        small = await allocate_block(dbs[0], 0, size=10)
        assert (small.first_id, small.end) == (12_000, 12_010)

    with_dbs(pg_dsn, scenario, 3)


def test_topics_and_their_partitions(pg_dsn: str) -> None:
    async def scenario(db: Database) -> None:
        row = await create_topic(db, "orders", 3, {"retention.ms": "1000"})
        assert await topic_by_name(db, "orders") == row
        with pytest.raises(psycopg.errors.UniqueViolation):
            await create_topic(db, "orders", 1)
        await create_partitions(db, row.topic_id, 5)
        assert (await topic_by_name(db, "orders")).partition_count == 5
        with pytest.raises(ValueError, match="cannot go to 4"):
            await create_partitions(db, row.topic_id, 4)
        async with db.session() as conn:
            cur = await conn.execute(
                "SELECT partition, log_start_offset, next_offset FROM partitions "
                "WHERE topic_id = %s ORDER BY partition", (row.topic_id,))
            assert await cur.fetchall() == [(p, 0, 0) for p in range(5)]
        await create_topic(db, "audit", 1)
        assert [t.name for t in await topics(db)] == ["audit", "orders"]
        assert await delete_topic(db, row.topic_id)
        assert not await delete_topic(db, row.topic_id)
        with pytest.raises(UnknownTopic):
            await topic_by_name(db, "orders")
        async with db.session() as conn:
            cur = await conn.execute("SELECT count(*) FROM partitions WHERE topic_id = %s",
                                     (row.topic_id,))
            assert await cur.fetchone() == (0,)

    with_dbs(pg_dsn, scenario)


def test_the_first_broker_names_the_cluster(pg_dsn: str) -> None:
    async def scenario(a: Database, b: Database) -> None:
        assert await cluster_id(a, "first-id") == "first-id"
        assert await cluster_id(b, "second-id") == "first-id"  # every later one reads it

    with_dbs(pg_dsn, scenario, n=2)


def test_live_leases_are_the_held_unexpired_ones(pg_dsn: str) -> None:
    async def scenario(a: Database, b: Database) -> None:
        kept = await leases.acquire(a, Resource("partition", "x-0"), 1, LONG_TTL)
        short = await leases.acquire(b, Resource("partition", "x-1"), 2, 0.2)
        given = await leases.acquire(b, Resource("partition", "x-2"), 2, LONG_TTL)
        assert kept and short and given
        await leases.release(b, given)
        assert set(await leases.live_leases(a)) == {kept.resource, short.resource}
        await asyncio.sleep(0.3)
        assert await leases.live_leases(b) == {kept.resource: kept}

    with_dbs(pg_dsn, scenario, n=2)


def test_a_broken_connection_is_replaced(pg_dsn: str, postgres_server) -> None:
    async def scenario(db: Database) -> None:
        cur = await db.connection.execute("SELECT pg_backend_pid()")
        (pid,) = await cur.fetchone()
        with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError):
            async with db.session() as conn:
                await conn.execute("SELECT 1")
        assert db.broken
        await db.reconnect()
        assert not db.broken
        assert await live_brokers_count(db) == 0

    with_dbs(pg_dsn, scenario)


async def live_brokers_count(db: Database) -> int:
    return len(await brokers.live_brokers(db))
