"""Share partitions' state in PostgreSQL (`share_state.ShareStateStore`), for a cluster.

Why this shape (docs/share-state-storage.md has the long form):

- **Fenced like the partition log.** `append` and `replace` are one transaction each, which
  first locks the writer's lease row (FOR SHARE), still naming the writer at its epoch and
  unexpired on the database's clock, together with the partition's row (FOR KEY SHARE: a
  topic deletion waits, a produce does not). No such row: LeaseLost (or UnknownPartition)
  and the transaction rolls back. Holding the lease row until the commit makes a take-over
  wait for the write, so the next leader loads everything its predecessor committed; a
  write of the deposed leader after that is refused. That is `postgres_log.PostgresLog`'s
  fencing, lease for lease.
- **A row per entry, numbered under a row per partition.** `share_states` holds, per group
  and partition with state, the next sequence number; an append takes its numbers with an
  upsert of that row, which also locks it, so two writers of one partition (two write
  connections of one leader) are ordered rather than racing for a number. Entries load in
  sequence order, with one index range scan.
- **Replace is append, then delete what came before, in one transaction.** The append
  locks the partition's `share_states` row first, so an append through another connection
  is wholly before the replace (and deleted by it) or wholly after; the delete, a statement
  of its own, sees every entry committed before. Readers see the old list or the new one,
  never a mix.
- **Rows are keyed by the SHA-256 of the group id**, since a group id may be longer than a
  btree index entry can be; the id itself is kept once per partition with state.

- **A state epoch per partition** (`share_states.state_epoch`): the upsert that numbers an
  append also checks it, a leader's write at or above it, a reset above it (and a reset
  takes no lease, as a delete); refused, nothing is written (StateEpochFenced).

Reads and deletes take no lease and run as single statements. All of it over one `Database`
(a connection and its lock), as the partition log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import psycopg

from coterie.storage.api import Lease, TopicIdPartition
from coterie.storage.database import Database
from coterie.storage.errors import LeaseLost, StateEpochFenced, UnknownPartition
from coterie.storage.leases import lost_because
from coterie.storage.share_state import check_group_id, check_lease

__all__ = ["PostgresShareStateStore", "group_key"]

# The writer's live lease with its partition's row, locked until the commit.
_LOCK = """
SELECT 1
FROM leases l
JOIN partitions p ON p.topic_id = %(topic_id)s::uuid AND p.partition = %(partition)s::integer
WHERE l.kind = %(kind)s AND l.name = %(name)s AND l.owner = %(owner)s
  AND l.epoch = %(epoch)s AND l.expires_at > clock_timestamp()
FOR SHARE OF l FOR KEY SHARE OF p
"""

# Number the entries after the ones stored (creating the partition's row, or locking it and
# advancing its counter) and insert them, in one statement; answers the first one's number,
# or no row when the stored state epoch fences the write ({fence}: `<=` for a leader's
# write, `<` for a reset; the row is locked either way).
_APPEND_FENCED = """
WITH head AS (
    INSERT INTO share_states AS s (group_key, topic_id, partition, group_id, next_seq,
                                   state_epoch)
    VALUES (%(key)s, %(topic_id)s::uuid, %(partition)s::integer, %(group_id)s,
            %(count)s::bigint, %(state_epoch)s::integer)
    ON CONFLICT (group_key, topic_id, partition)
        DO UPDATE SET next_seq = s.next_seq + EXCLUDED.next_seq,
                      state_epoch = EXCLUDED.state_epoch
        WHERE s.state_epoch {fence} EXCLUDED.state_epoch
    RETURNING s.next_seq - %(count)s::bigint AS first_seq
), written AS (
    INSERT INTO share_state_entries (group_key, topic_id, partition, seq, data)
    SELECT %(key)s, %(topic_id)s::uuid, %(partition)s::integer, head.first_seq + e.n - 1,
           e.data
    FROM head, unnest(%(data)s::bytea[]) WITH ORDINALITY AS e (data, n)
)
SELECT first_seq FROM head
"""
_APPEND = _APPEND_FENCED.format(fence="<=")
_RESET = _APPEND_FENCED.format(fence="<")

# What a replace's new entries replace: every entry numbered before them. A statement of its
# own, after _APPEND locked the partition's row: it sees every append committed before.
_DELETE_BEFORE = """
DELETE FROM share_state_entries
WHERE group_key = %(key)s AND topic_id = %(topic_id)s::uuid AND partition = %(partition)s::integer
  AND seq < %(first)s::bigint
"""

_DELETE_PARTITION = """
DELETE FROM share_states
WHERE group_key = %(key)s AND topic_id = %(topic_id)s::uuid AND partition = %(partition)s::integer
"""

_DELETE_GROUP = "DELETE FROM share_states WHERE group_key = %(key)s"

_LOAD = """
SELECT data FROM share_state_entries
WHERE group_key = %(key)s AND topic_id = %(topic_id)s::uuid AND partition = %(partition)s::integer
ORDER BY seq
"""

_PARTITIONS_OF = """
SELECT topic_id, partition FROM share_states WHERE group_key = %(key)s
ORDER BY topic_id, partition
"""


def group_key(group_id: str) -> bytes:
    """The rows' key for `group_id`: the SHA-256 of its UTF-8 (ValueError for an id the
    stores cannot keep, share_state.check_group_id). In psql:
    `sha256(convert_to('<group id>', 'UTF8'))`."""
    return hashlib.sha256(check_group_id(group_id)).digest()


class PostgresShareStateStore:
    """`ShareStateStore` over the `share_states` and `share_state_entries` tables."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -------------------------------------------------------------------------- writing

    async def append(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                     lease: Lease, *, state_epoch: int = 0) -> None:
        """Add `entries` after the stored ones, in one transaction conditional on `lease`:
        LeaseLost (UnknownPartition for a partition that does not exist) and nothing
        written otherwise. An empty `entries` writes nothing, but is still refused under a
        lost lease."""
        params = _params(group_id, tp)
        check_lease(tp, lease)
        data = [bytes(e) for e in entries]
        async with self._db.transaction() as conn:
            await _lock(conn, tp, lease)
            if data:
                await _append(conn, _APPEND, params, group_id, data, state_epoch)

    async def replace(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                      lease: Lease, *, state_epoch: int = 0) -> None:
        """Make `entries` the whole stored list, in one transaction conditional on `lease`
        (as `append`): appended, which locks the partition's row (so an append of another
        connection comes wholly before or after), then every entry before them deleted.
        With no entries, the partition's row goes, and its entries with it."""
        params = _params(group_id, tp)
        check_lease(tp, lease)
        data = [bytes(e) for e in entries]
        async with self._db.transaction() as conn:
            await _lock(conn, tp, lease)
            if not data:
                await conn.execute(_DELETE_PARTITION, params)
                return
            first = await _append(conn, _APPEND, params, group_id, data, state_epoch)
            await conn.execute(_DELETE_BEFORE, {**params, "first": first})

    async def reset(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                    state_epoch: int) -> None:
        """`replace` with no lease, conditional on `state_epoch` being above the stored one
        (StateEpochFenced otherwise): the row's lock orders it with the leader's writes,
        which are then refused until the leader loads the new state."""
        params = _params(group_id, tp)
        data = [bytes(e) for e in entries]
        if not data:
            raise ValueError("a reset writes a new snapshot: entries must not be empty")
        async with self._db.transaction() as conn:
            first = await _append(conn, _RESET, params, group_id, data, state_epoch)
            await conn.execute(_DELETE_BEFORE, {**params, "first": first})

    async def delete(self, group_id: str, tp: TopicIdPartition | None = None) -> None:
        """Drop the group's state on `tp`, or on every partition: one statement, no lease
        (an administrator's action). A writer in flight on the partition is waited for."""
        if tp is None:
            statement, params = _DELETE_GROUP, {"key": group_key(group_id)}
        else:
            statement, params = _DELETE_PARTITION, _params(group_id, tp)
        async with self._db.session() as conn:
            await conn.execute(statement, params)

    # -------------------------------------------------------------------------- reading

    async def load(self, group_id: str, tp: TopicIdPartition) -> list[bytes]:
        params = _params(group_id, tp)
        async with self._db.session() as conn:
            cur = await conn.execute(_LOAD, params)
            rows = await cur.fetchall()
        return [bytes(r[0]) for r in rows]

    async def partitions_of(self, group_id: str) -> list[TopicIdPartition]:
        key = group_key(group_id)
        async with self._db.session() as conn:
            cur = await conn.execute(_PARTITIONS_OF, {"key": key})
            rows = await cur.fetchall()
        return sorted(TopicIdPartition(t, p) for t, p in rows)


async def _append(conn: psycopg.AsyncConnection, statement: str, params: dict[str, object],
                  group_id: str, data: list[bytes], state_epoch: int) -> int:
    """Run `_APPEND` or `_RESET`; the first new entry's sequence number, StateEpochFenced
    when the stored state epoch refused it (and the transaction then rolls back)."""
    cur = await conn.execute(statement, {**params, "group_id": group_id, "count": len(data),
                                         "data": data, "state_epoch": state_epoch})
    row = await cur.fetchone()
    if row is None:
        raise StateEpochFenced(f"the share state of {group_id!r} on {params['topic_id']}-"
                               f"{params['partition']} has a newer state epoch than "
                               f"{state_epoch}; nothing was written")
    return int(row[0])


def _params(group_id: str, tp: TopicIdPartition) -> dict[str, object]:
    return {"key": group_key(group_id), "topic_id": tp.topic_id, "partition": tp.partition}


async def _lock(conn: psycopg.AsyncConnection, tp: TopicIdPartition, lease: Lease) -> None:
    """Lock the writer's live lease and the partition's row; raise why when there is none."""
    cur = await conn.execute(_LOCK, {
        "topic_id": tp.topic_id, "partition": tp.partition, "kind": lease.resource.kind,
        "name": lease.resource.name, "owner": lease.owner, "epoch": lease.epoch})
    if await cur.fetchone() is not None:
        return
    cur = await conn.execute("SELECT 1 FROM partitions WHERE topic_id = %s AND partition = %s",
                             (tp.topic_id, tp.partition))
    if await cur.fetchone() is None:
        raise UnknownPartition(f"no partition {tp}")
    raise LeaseLost(f"node {lease.owner} no longer holds the lease on {lease.resource} at "
                    f"epoch {lease.epoch} ({await lost_because(conn, lease)}); nothing was "
                    "written")
