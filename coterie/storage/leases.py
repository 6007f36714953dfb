"""Leases: one owner per partition or coordinator shard, for a while, at an epoch.

Why in the database, on the database's clock: the brokers' clocks disagree and a broker can
be paused at any moment, so "who may write" must be decided where the writes land. A lease row
says who owns a resource and until when (`expires_at`, compared with the database's
`clock_timestamp()` only). Every write of coterie.storage checks, in its own transaction, that
its lease row still names the writer at the writer's epoch and has not expired, holding the
row (FOR SHARE) until it commits; a take-over updates the same row, so it waits for such a
write to finish and the next owner sees everything the previous one committed.

The epoch grows by one with every new tenure: whenever `acquire` succeeds, even when the same
node takes back a lease it had (a restarted broker must fence the writes its previous
incarnation may still have in flight). `renew` extends a tenure without changing its epoch.
The epoch is the partition's leader epoch, which is how clients' leader-epoch fencing works as
on Kafka.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass

import psycopg

from coterie.storage.api import Lease, Resource
from coterie.storage.database import Database

__all__ = ["LeaseRow", "acquire", "every_lease", "holder", "lost_because", "release", "renew",
           "renew_all"]

_ACQUIRE = """
INSERT INTO leases AS l (kind, name, owner, epoch, expires_at)
VALUES (%(kind)s, %(name)s, %(owner)s, 1, clock_timestamp() + %(ttl)s * interval '1 second')
ON CONFLICT (kind, name) DO UPDATE
    SET owner = EXCLUDED.owner, epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at
    WHERE l.owner IS NULL OR l.owner = EXCLUDED.owner OR l.expires_at <= clock_timestamp()
RETURNING epoch
"""

# A node's live leases, locked in key order first (the order writes lock them in,
# postgres_log._LOCK), then extended: a heartbeat never deadlocks with a group commit.
_RENEW_ALL = """
UPDATE leases l SET expires_at = clock_timestamp() + %(ttl)s * interval '1 second'
FROM (SELECT kind, name FROM leases
      WHERE owner = %(owner)s AND expires_at > clock_timestamp()
      ORDER BY kind, name FOR UPDATE) mine
WHERE l.kind = mine.kind AND l.name = mine.name AND l.owner = %(owner)s
RETURNING l.kind, l.name, l.epoch
"""


async def acquire(db: Database, resource: Resource, node_id: int, ttl: float) -> Lease | None:
    """Take `resource` for `ttl` seconds if it is free, released, expired or already this
    node's; returns the lease at its new epoch, or None while another node holds it.

    Two nodes racing for one resource: exactly one gets it (the row's lock orders them and the
    loser sees a live lease of another owner)."""
    _check_ttl(ttl)
    async with db.session() as conn:
        cur = await conn.execute(_ACQUIRE, {"kind": resource.kind, "name": resource.name,
                                            "owner": node_id, "ttl": ttl})
        row = await cur.fetchone()
    return None if row is None else Lease(resource, node_id, int(row[0]))


async def renew(db: Database, lease: Lease, ttl: float) -> bool:
    """Extend a lease still held (same owner and epoch, not expired) to `ttl` seconds from
    now. False when it was lost: the holder must stop writing and acquire it again."""
    _check_ttl(ttl)
    async with db.session() as conn:
        cur = await conn.execute(
            "UPDATE leases SET expires_at = clock_timestamp() + %s * interval '1 second' "
            "WHERE kind = %s AND name = %s AND owner = %s AND epoch = %s "
            "AND expires_at > clock_timestamp()",
            (ttl, lease.resource.kind, lease.resource.name, lease.owner, lease.epoch))
        return cur.rowcount == 1


async def renew_all(db: Database, node_id: int, ttl: float) -> list[Lease]:
    """Extend every lease `node_id` still holds, in one statement (a broker's heartbeat);
    returns them. A lease missing from the answer was lost."""
    _check_ttl(ttl)
    async with db.session() as conn:
        cur = await conn.execute(_RENEW_ALL, {"ttl": ttl, "owner": node_id})
        rows = await cur.fetchall()
    return [Lease(Resource(k, n), node_id, int(e)) for k, n, e in sorted(rows)]


async def release(db: Database, lease: Lease) -> bool:
    """Give a held lease up now (a clean shutdown, a rebalance of leadership), so another
    node need not wait for it to expire. False if it was no longer held."""
    async with db.session() as conn:
        cur = await conn.execute(
            "UPDATE leases SET owner = NULL, expires_at = clock_timestamp() "
            "WHERE kind = %s AND name = %s AND owner = %s AND epoch = %s",
            (lease.resource.kind, lease.resource.name, lease.owner, lease.epoch))
        return cur.rowcount == 1


async def holder(db: Database, resource: Resource) -> Lease | None:
    """Who holds `resource` now (a live lease), or None: what a broker answers with when it
    is not the owner (FindCoordinator, NOT_LEADER_OR_FOLLOWER's new leader)."""
    async with db.session() as conn:
        cur = await conn.execute(
            "SELECT owner, epoch FROM leases WHERE kind = %s AND name = %s "
            "AND owner IS NOT NULL AND expires_at > clock_timestamp()",
            (resource.kind, resource.name))
        row = await cur.fetchone()
    return None if row is None else Lease(resource, int(row[0]), int(row[1]))


async def live_leases(db: Database) -> dict[Resource, Lease]:
    """Every live lease (held and not expired by the database's clock), in one query: a
    broker's picture of who leads what, which Metadata and FindCoordinator answer from."""
    async with db.session() as conn:
        cur = await conn.execute(
            "SELECT kind, name, owner, epoch FROM leases "
            "WHERE owner IS NOT NULL AND expires_at > clock_timestamp()")
        rows = await cur.fetchall()
    return {Resource(k, n): Lease(Resource(k, n), int(o), int(e)) for k, n, o, e in rows}


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """One row of the lease table as an operator reads it (the console's brokers page): a
    partition lease names its topic and partition (None: its topic is gone); `owner` is None
    once released; `expires_in_ms` is by the database's clock, negative once expired."""

    resource: Resource
    owner: int | None
    epoch: int
    expires_in_ms: int
    topic: str | None = None
    partition: int | None = None


async def every_lease(db: Database) -> list[LeaseRow]:
    """Every row of the lease table, live or not, with the topic names of partition leases
    (their names hold the topic id), in one read-only transaction: nothing is locked."""
    async with db.transaction() as conn:
        cur = await conn.execute(
            "SELECT kind, name, owner, epoch, "
            "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint "
            "FROM leases ORDER BY kind, name")
        rows = await cur.fetchall()
        cur = await conn.execute("SELECT topic_id, name FROM topics")
        names = {tid: name for tid, name in await cur.fetchall()}
    out = []
    for kind, name, owner, epoch, left in rows:
        topic, partition = None, None
        if kind == "partition":
            tid, _, index = name.rpartition("-")
            with contextlib.suppress(ValueError):
                topic, partition = names.get(uuid.UUID(tid)), int(index)
        out.append(LeaseRow(Resource(kind, name), owner, int(epoch), int(left), topic,
                            partition))
    return out


async def lost_because(conn: psycopg.AsyncConnection, lease: Lease) -> str:
    """What became of a lease a write presented and was refused for, in the words of
    LeaseLost's message ("nobody holds it", "it was released at epoch 3", "now node 2 at
    epoch 4 (live)"), read on `conn` inside the refused write's transaction."""
    cur = await conn.execute(
        "SELECT owner, epoch, expires_at > clock_timestamp() FROM leases "
        "WHERE kind = %s AND name = %s", (lease.resource.kind, lease.resource.name))
    row = await cur.fetchone()
    if row is None:
        return "nobody holds it"
    if row[0] is None:
        return f"it was released at epoch {row[1]}"
    state = "live" if row[2] else "expired"
    return f"now node {row[0]} at epoch {row[1]} ({state})"


def _check_ttl(ttl: float) -> None:
    if not ttl > 0:
        raise ValueError(f"a lease's ttl must be positive, not {ttl}")
