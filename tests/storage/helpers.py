"""Setting up a migrated database, a topic and a lease for the storage tests.

Every storage test runs its scenario in `asyncio.run` against its own database on the
session's real PostgreSQL server (tests/fixtures/postgres.py), as the broker will: through
coterie.storage's own functions, never by writing rows behind its back, except where a test
says it moves the database clock's view of a lease on purpose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from coterie.storage import leases
from coterie.storage.api import Lease, Resource, TopicIdPartition
from coterie.storage.database import Database
from coterie.storage.migrations import migrate
from coterie.storage.topics import create_topic

LONG_TTL = 60.0


def with_dbs(dsn: str, scenario: Callable[..., Awaitable[None]], n: int = 1) -> None:
    """Run `scenario(db, ...)` with `n` connections to a migrated database (one per broker
    it plays), closed afterwards whatever happens."""

    async def main() -> None:
        dbs = [await open_db(dsn) for _ in range(n)]
        try:
            await scenario(*dbs)
        finally:
            for db in dbs:
                await db.close()

    asyncio.run(main())


async def open_db(dsn: str) -> Database:
    """A connection to a migrated database."""
    db = await Database.connect(dsn)
    await migrate(db.connection)
    return db


async def topic_with_leases(db: Database, name: str = "t", partitions: int = 1,
                            node_id: int = 1) -> tuple[list[TopicIdPartition], list[Lease]]:
    """A topic, and `node_id`'s lease on each of its partitions."""
    row = await create_topic(db, name, partitions)
    tps = [TopicIdPartition(row.topic_id, p) for p in range(partitions)]
    held = []
    for tp in tps:
        lease = await leases.acquire(db, Resource.partition(tp), node_id, LONG_TTL)
        assert lease is not None
        held.append(lease)
    return tps, held


async def expire(db: Database, lease: Lease) -> None:
    """Make a lease's time run out now, as if its owner had stopped renewing it (instead of
    waiting out a ttl)."""
    async with db.session() as conn:
        await conn.execute(
            "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second' "
            "WHERE kind = %s AND name = %s", (lease.resource.kind, lease.resource.name))


async def batch_count(db: Database, tp: TopicIdPartition) -> int:
    async with db.session() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM batches WHERE topic_id = %s AND partition = %s",
            (tp.topic_id, tp.partition))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])
