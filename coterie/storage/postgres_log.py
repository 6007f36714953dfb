"""The partition log in PostgreSQL: Kafka's record batches as rows, every write fenced by a lease.

Why this shape (docs/storage-postgresql.md has the long form):

- **One transaction per group commit, conditional on the leases.** `append_many` locks, in
  one statement, each partition's counters row together with the writer's lease row, which
  must still name the writer at its epoch with `expires_at` after the database's clock. A
  lease missing from the answer (lost, expired, taken) raises LeaseLost and the transaction
  rolls back: all or nothing. Holding the lease row (FOR SHARE) until commit makes a
  take-over wait for the write, so the next owner continues from everything committed.
  `append` is a group commit of one.
- **Few round trips, none per batch.** An append is BEGIN, the lock, one statement that
  inserts every batch row and advances every counter (arrays unnested server-side), COMMIT;
  a read is one query whatever the number of batches; lookups are one query each.
- **Fetch by byte position.** Each batch's `byte_position` (the bytes of the partition
  before it) turns max_bytes into an index range, so a read returns whole batches from the
  one holding the offset, within max_bytes but at least one (KIP-74), without reading rows
  it will not send.
- **Time index by running maximum.** `running_max_timestamp` never decreases with the
  offset, so the first batch that can hold a timestamp >= T is one index lookup; only that
  batch is opened (coterie.log.record_scan) to answer at record granularity, as Kafka does.

All of it runs over one `Database` (a connection and its lock). The store keeps no state of
its own: any broker holding the lease can continue a partition where another left it.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Sequence
from dataclasses import dataclass

import psycopg

from coterie.log.batch import validate_batches
from coterie.log.producers import ProducerStates
from coterie.log.record_scan import first_at_or_after, first_with_max_timestamp
from coterie.log.txn_index import AbortedTxn
from coterie.storage import producer_rows
from coterie.storage.api import (
    Append,
    Appended,
    Lease,
    OffsetAndTimestamp,
    Retention,
    TopicIdPartition,
)
from coterie.storage.batch_rows import BatchRow, Tail, number_batches
from coterie.storage.database import Database
from coterie.storage.errors import Diverged, LeaseLost, OffsetOutOfRange, UnknownPartition
from coterie.storage.leases import lost_because
from coterie.wire.record_batch import batch_headers

__all__ = ["PostgresLog"]

# The partitions' counters, locked for writing, each joined with the live lease its writer
# presents. Rows are locked in the order of the leases' keys, the order leases.renew_all locks
# them in too, so neither concurrent group commits nor a heartbeat can deadlock with them.
_LOCK = """
SELECT p.topic_id, p.partition, p.log_start_offset, p.next_offset, p.next_position, p.max_timestamp
FROM unnest(%(topic_ids)s::uuid[], %(partitions)s::integer[], %(kinds)s::text[],
            %(names)s::text[], %(owners)s::integer[], %(epochs)s::integer[])
     AS w (topic_id, partition, kind, name, owner, epoch)
JOIN partitions p ON p.topic_id = w.topic_id AND p.partition = w.partition
JOIN leases l ON l.kind = w.kind AND l.name = w.name AND l.owner = w.owner
             AND l.epoch = w.epoch AND l.expires_at > clock_timestamp()
ORDER BY l.kind, l.name, p.topic_id, p.partition
FOR NO KEY UPDATE OF p FOR SHARE OF l
"""

_WRITE = """
WITH inserted AS (
    INSERT INTO batches (topic_id, partition, base_offset, last_offset, byte_position, size,
                         max_timestamp, running_max_timestamp, leader_epoch, producer_id,
                         producer_epoch, base_sequence, record_count, is_transactional,
                         is_control, data)
    SELECT * FROM unnest(%(b_topic_ids)s::uuid[], %(b_partitions)s::integer[],
                         %(base_offsets)s::bigint[], %(last_offsets)s::bigint[],
                         %(positions)s::bigint[], %(sizes)s::integer[],
                         %(max_timestamps)s::bigint[], %(running)s::bigint[],
                         %(leader_epochs)s::integer[], %(producer_ids)s::bigint[],
                         %(producer_epochs)s::smallint[], %(base_sequences)s::integer[],
                         %(record_counts)s::integer[], %(transactional)s::boolean[],
                         %(control)s::boolean[], %(data)s::bytea[])
)
UPDATE partitions p
SET next_offset = u.next_offset, next_position = u.next_position,
    max_timestamp = u.max_timestamp, leader_epoch = u.leader_epoch
FROM unnest(%(p_topic_ids)s::uuid[], %(p_partitions)s::integer[], %(next_offsets)s::bigint[],
            %(next_positions)s::bigint[], %(p_max_timestamps)s::bigint[],
            %(p_epochs)s::integer[])
     AS u (topic_id, partition, next_offset, next_position, max_timestamp, leader_epoch)
WHERE p.topic_id = u.topic_id AND p.partition = u.partition
"""

# Whole batches from the one holding the offset: the first batch always, the next ones while
# they end within max_bytes of its start. The partition's bounds come along, to check the
# offset against, in the same round trip.
_READ = """
SELECT p.log_start_offset, p.next_offset, b.data
FROM partitions p
LEFT JOIN LATERAL (
    SELECT s.data, s.byte_position
    FROM (SELECT base_offset, byte_position FROM batches
          WHERE topic_id = p.topic_id AND partition = p.partition
            AND last_offset >= %(offset)s::bigint
          ORDER BY last_offset LIMIT 1) f
    JOIN batches s ON s.topic_id = p.topic_id AND s.partition = p.partition
                  AND s.byte_position >= f.byte_position
                  AND s.byte_position < f.byte_position + greatest(%(max_bytes)s::bigint, 1)
                  AND (s.base_offset = f.base_offset
                       OR s.byte_position + s.size <= f.byte_position + %(max_bytes)s::bigint)
) b ON p.next_offset > %(offset)s::bigint
WHERE p.topic_id = %(topic_id)s::uuid AND p.partition = %(partition)s::integer
ORDER BY b.byte_position
"""

# The first batches, in offset order, that may hold a timestamp >= ts (the running maximum
# reaches it and so does the batch's own), from the log start (or `after`) on.
_BY_TIME = """
SELECT p.log_start_offset, b.base_offset, b.data
FROM partitions p
LEFT JOIN LATERAL (
    SELECT base_offset, data FROM batches
    WHERE topic_id = p.topic_id AND partition = p.partition
      AND running_max_timestamp >= %(ts)s::bigint AND max_timestamp >= %(ts)s::bigint
      AND last_offset >= greatest(p.log_start_offset, %(after)s::bigint)
    ORDER BY running_max_timestamp, base_offset
    LIMIT %(limit)s::bigint
) b ON true
WHERE p.topic_id = %(topic_id)s::uuid AND p.partition = %(partition)s::integer
ORDER BY b.base_offset
"""

# Rare (ListOffsets -3, kafka-get-offsets): a walk over the partition's rows, not indexed.
_MAX_TIMESTAMP = """
SELECT p.log_start_offset, b.data
FROM partitions p
LEFT JOIN LATERAL (
    SELECT data FROM batches
    WHERE topic_id = p.topic_id AND partition = p.partition
      AND last_offset >= p.log_start_offset AND max_timestamp >= 0
    ORDER BY max_timestamp DESC, base_offset
    LIMIT 1
) b ON true
WHERE p.topic_id = %(topic_id)s::uuid AND p.partition = %(partition)s::integer
"""

# Where a copy of the last `bytes` of a partition starts: the first batch that begins within
# them (whole batches only), with the partition's bounds.
_COPY_BOUNDS = """
SELECT p.log_start_offset, p.next_offset,
       (SELECT base_offset FROM batches
        WHERE topic_id = p.topic_id AND partition = p.partition
          AND byte_position >= p.next_position - %(bytes)s::bigint
        ORDER BY byte_position LIMIT 1)
FROM partitions p
WHERE p.topic_id = %(topic_id)s::uuid AND p.partition = %(partition)s::integer
"""

_BOUNDS = """
SELECT log_start_offset, next_offset FROM partitions WHERE topic_id = %s AND partition = %s
"""

# Move the log start and drop the batches wholly below it, in one statement.
_TRUNCATE = """
WITH dropped AS (
    DELETE FROM batches
    WHERE topic_id = %(topic_id)s::uuid AND partition = %(partition)s::integer
      AND last_offset < %(start)s::bigint
    RETURNING 1
), moved AS (
    UPDATE partitions SET log_start_offset = %(start)s::bigint
    WHERE topic_id = %(topic_id)s::uuid AND partition = %(partition)s::integer
)
SELECT count(*) FROM dropped
"""

# Compaction (PostgresLog.compact): rows dropped by base offset (the primary key), and rows
# rewritten in place, only where the row still spans the same offsets.
_DROP_BATCHES = """
DELETE FROM batches
WHERE topic_id = %(topic_id)s::uuid AND partition = %(partition)s::integer
  AND base_offset = ANY(%(bases)s::bigint[])
"""

_REWRITE_BATCHES = """
UPDATE batches b
SET size = u.size, max_timestamp = u.max_timestamp, record_count = u.record_count,
    data = u.data
FROM unnest(%(bases)s::bigint[], %(lasts)s::bigint[], %(sizes)s::integer[],
            %(max_timestamps)s::bigint[], %(counts)s::integer[], %(data)s::bytea[])
     AS u (base_offset, last_offset, size, max_timestamp, record_count, data)
WHERE b.topic_id = %(topic_id)s::uuid AND b.partition = %(partition)s::integer
  AND b.base_offset = u.base_offset AND b.last_offset = u.last_offset
"""

_FIRST_KEPT_BY_TIME = """
SELECT base_offset FROM batches
WHERE topic_id = %s AND partition = %s AND running_max_timestamp >= %s::bigint
ORDER BY running_max_timestamp, base_offset LIMIT 1
"""

_AT_POSITION = """
SELECT base_offset, last_offset, byte_position, size FROM batches
WHERE topic_id = %s AND partition = %s AND byte_position <= %s::bigint
ORDER BY byte_position DESC LIMIT 1
"""

_TIME_LOOKUP_STEP = 4  # candidate batches fetched per round of a timestamp lookup


@dataclass(frozen=True, slots=True)
class _Locked:
    """A partition's counters as locked for a write (its lease checked)."""

    log_start: int
    tail: Tail


class PostgresLog:
    """Partition logs in PostgreSQL (the `PartitionLogStore` of coterie.storage.api)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -------------------------------------------------------------------------- writing

    async def append(self, tp: TopicIdPartition, records: bytes | bytearray | memoryview,
                     lease: Lease) -> Appended:
        """Store `records` at the log end under `lease` (a group commit of one)."""
        return (await self.append_many([Append(tp, records, lease)]))[0]

    async def append_many(self, appends: Sequence[Append]) -> list[Appended]:
        """Store several appends in one transaction, in the order given (appends to one
        partition get consecutive offsets in that order). All or nothing: LeaseLost if any
        lease is no longer held, and nothing is written."""
        if not appends:
            return []
        leases: dict[TopicIdPartition, Lease] = {}
        for a in appends:
            if leases.setdefault(a.tp, a.lease) != a.lease:
                raise ValueError(f"appends to {a.tp} under two leases in one group commit: "
                                 f"{leases[a.tp]} and {a.lease}")
        # The bytes are checked (framing, CRC) before the transaction: no lock is held while
        # they are hashed, and a bad batch costs the database nothing.
        checked = [(a, validate_batches(a.records)) for a in appends]
        async with self._db.transaction() as conn:
            locked = await self._lock(conn, leases)
            tails = {tp: state.tail for tp, state in locked.items()}
            rows: list[BatchRow] = []
            answers: list[Appended] = []
            for a, headers in checked:
                if a.expected_offset is not None and \
                        a.expected_offset != tails[a.tp].next_offset:
                    raise Diverged(
                        f"append to {a.tp} numbered from offset {a.expected_offset}, but the "
                        f"stored log ends at {tails[a.tp].next_offset}; nothing was written")
                new_rows, tails[a.tp] = number_batches(
                    a.tp, a.records, headers, tails[a.tp], a.lease.epoch)
                rows += new_rows
                answers.append(Appended(
                    new_rows[0].base_offset, new_rows[-1].last_offset,
                    sum(r.record_count for r in new_rows), locked[a.tp].log_start))
            await conn.execute(_WRITE, _write_params(rows, tails, leases))
        return answers

    async def _lock(self, conn: psycopg.AsyncConnection,
                    leases: dict[TopicIdPartition, Lease]) -> dict[TopicIdPartition, _Locked]:
        """Lock each partition's counters with its writer's live lease (one statement);
        raise why when any is missing."""
        wanted = sorted(leases.items(), key=lambda kv: (kv[0].topic_id.bytes, kv[0].partition))
        cur = await conn.execute(_LOCK, {
            "topic_ids": [tp.topic_id for tp, _ in wanted],
            "partitions": [tp.partition for tp, _ in wanted],
            "kinds": [lease.resource.kind for _, lease in wanted],
            "names": [lease.resource.name for _, lease in wanted],
            "owners": [lease.owner for _, lease in wanted],
            "epochs": [lease.epoch for _, lease in wanted],
        })
        found: dict[TopicIdPartition, _Locked] = {}
        for topic_id, partition, start, next_offset, position, max_ts in await cur.fetchall():
            found[TopicIdPartition(topic_id, partition)] = _Locked(
                start, Tail(next_offset, position, max_ts))
        missing = [(tp, lease) for tp, lease in wanted if tp not in found]
        if missing:
            await self._refuse(conn, missing)
        return found

    async def _refuse(self, conn: psycopg.AsyncConnection,
                      missing: list[tuple[TopicIdPartition, Lease]]) -> None:
        """Raise the reason the first missing (partition, lease) was not locked."""
        tp, lease = missing[0]
        cur = await conn.execute("SELECT 1 FROM partitions WHERE topic_id = %s AND partition = %s",
                                 (tp.topic_id, tp.partition))
        if await cur.fetchone() is None:
            raise UnknownPartition(f"no partition {tp}")
        now = await lost_because(conn, lease)
        raise LeaseLost(f"node {lease.owner} no longer holds the lease on {lease.resource} at "
                        f"epoch {lease.epoch} ({now}); nothing was written"
                        + (f" for {len(missing)} partitions" if len(missing) > 1 else ""))

    async def delete_records(self, tp: TopicIdPartition, offset: int, lease: Lease) -> int:
        """DeleteRecords: make `offset` the log start and drop the batches wholly below it
        (the one holding it stays; reads skip what lies below the start). An offset at or
        below the log start changes nothing. Returns the log start."""
        async with self._db.transaction() as conn:
            locked = (await self._lock(conn, {tp: lease}))[tp]
            end = locked.tail.next_offset
            if offset > end:
                raise OffsetOutOfRange(
                    f"cannot delete records of {tp} up to {offset}: the log ends at {end}")
            if offset <= locked.log_start:
                return locked.log_start
            await conn.execute(_TRUNCATE, {"topic_id": tp.topic_id, "partition": tp.partition,
                                           "start": offset})
        return offset

    async def enforce_retention(self, tp: TopicIdPartition, lease: Lease, policy: Retention,
                                now_ms: int) -> int:
        """Drop the oldest batches retention no longer keeps; returns how many went.

        Time (retention.ms): every batch before the first whose running maximum timestamp is
        within retention.ms of `now_ms` (Kafka's rule for segments, by batch: the oldest go
        while their largest timestamp is too old). Size (retention.bytes, Kafka's rule): the
        oldest batch goes while the log would still hold at least retention.bytes without
        it. The log start moves to the first batch kept (or the log end)."""
        if policy.retention_ms < 0 and policy.retention_bytes < 0:
            return 0
        async with self._db.transaction() as conn:
            locked = (await self._lock(conn, {tp: lease}))[tp]
            key = (tp.topic_id, tp.partition)
            start = locked.log_start
            if policy.retention_ms >= 0:
                cur = await conn.execute(_FIRST_KEPT_BY_TIME,
                                         (*key, now_ms - policy.retention_ms))
                row = await cur.fetchone()
                start = max(start, locked.tail.next_offset if row is None else int(row[0]))
            if policy.retention_bytes >= 0:
                limit = locked.tail.next_position - policy.retention_bytes
                cur = await conn.execute(_AT_POSITION, (*key, limit))
                row = await cur.fetchone()
                if row is not None:
                    base, last, position, size = row
                    start = max(start, base if position + size > limit else last + 1)
            if start <= locked.log_start:
                return 0
            cur = await conn.execute(_TRUNCATE, {"topic_id": tp.topic_id,
                                                 "partition": tp.partition, "start": start})
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def compact(self, tp: TopicIdPartition, lease: Lease, dropped: Sequence[int],
                      rebuilt: AsyncIterable[Sequence[bytes]]) -> tuple[int, int]:
        """What a compaction pass did to the leader's copy, done to the rows under `lease`,
        in one transaction: the batches at the `dropped` base offsets go, and each of
        `rebuilt` (a batch with fewer records, at the base offset of the row it replaces)
        takes its row's place. Offsets and byte positions stay as they were: the log gets
        gaps, as a compacted Kafka log does, and a fetch's position range simply holds
        fewer bytes. The log start and end do not move. Returns (rows deleted, rows
        rewritten); LeaseLost if the lease is gone, and then nothing changed. `rebuilt`
        comes in slices (one statement each), so that a large pass is never all in memory."""
        key = {"topic_id": tp.topic_id, "partition": tp.partition}
        async with self._db.transaction() as conn:
            await self._lock(conn, {tp: lease})
            deleted = rewritten = 0
            if dropped:
                cur = await conn.execute(_DROP_BATCHES, {**key, "bases": list(dropped)})
                deleted = cur.rowcount
            async for batches in rebuilt:
                if not batches:
                    continue
                headers = [batch_headers(b, strict=True)[0] for b in batches]
                cur = await conn.execute(_REWRITE_BATCHES, {
                    **key,
                    "bases": [h.base_offset for h in headers],
                    "lasts": [h.base_offset + h.last_offset_delta for h in headers],
                    "sizes": [h.size for h in headers],
                    "max_timestamps": [h.max_timestamp for h in headers],
                    "counts": [h.records_count for h in headers],
                    "data": [bytes(b) for b in batches],
                })
                rewritten += cur.rowcount
        return deleted, rewritten

    # -------------------------------------------------------------------------- reading

    async def read(self, tp: TopicIdPartition, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`: at most `max_bytes` in total but at
        least one batch (KIP-74), in one query; b"" at the log end. OffsetOutOfRange below
        the log start or above the log end."""
        async with self._db.session() as conn:
            cur = await conn.execute(_READ, {"topic_id": tp.topic_id, "partition": tp.partition,
                                             "offset": offset, "max_bytes": max_bytes})
            rows = await cur.fetchall()
        if not rows:
            raise UnknownPartition(f"no partition {tp}")
        start, end = rows[0][0], rows[0][1]
        if offset < start or offset > end:
            raise OffsetOutOfRange(
                f"offset {offset} is out of range for {tp}: the log holds [{start}, {end}]")
        return b"".join(r[2] for r in rows if r[2] is not None)

    async def log_start_offset(self, tp: TopicIdPartition) -> int:
        return (await self.bounds(tp))[0]

    async def log_end_offset(self, tp: TopicIdPartition) -> int:
        return (await self.bounds(tp))[1]

    async def bounds(self, tp: TopicIdPartition) -> tuple[int, int]:
        """(log start offset, log end offset) in one query."""
        async with self._db.session() as conn:
            cur = await conn.execute(_BOUNDS, (tp.topic_id, tp.partition))
            row = await cur.fetchone()
        if row is None:
            raise UnknownPartition(f"no partition {tp}")
        return int(row[0]), int(row[1])

    async def copy_bounds(self, tp: TopicIdPartition,
                          last_bytes: int | None) -> tuple[int, int, int]:
        """(log start, copy start, log end): where a copy of the partition's last
        `last_bytes` bytes starts, at a batch's first offset (the log start when the whole
        log is within them, or `last_bytes` is None; the log end when its last batch alone
        is larger). One query."""
        async with self._db.session() as conn:
            cur = await conn.execute(_COPY_BOUNDS, {
                "topic_id": tp.topic_id, "partition": tp.partition,
                "bytes": -1 if last_bytes is None else last_bytes})
            row = await cur.fetchone()
        if row is None:
            raise UnknownPartition(f"no partition {tp}")
        start, end, first = int(row[0]), int(row[1]), row[2]
        if last_bytes is None:
            return start, start, end
        return start, max(start, end if first is None else int(first)), end

    async def offset_for_timestamp(self, tp: TopicIdPartition,
                                   timestamp: int) -> OffsetAndTimestamp | None:
        """The first record, in offset order at or above the log start, whose timestamp is
        >= `timestamp` (a real timestamp; ListOffsets' -1 and -2 are the log's bounds).
        Usually one query and one batch opened; a batch whose header promises a timestamp
        its records do not reach sends the lookup on to the next ones."""
        after = -1
        while True:
            async with self._db.session() as conn:
                cur = await conn.execute(_BY_TIME, {
                    "topic_id": tp.topic_id, "partition": tp.partition, "ts": timestamp,
                    "after": after, "limit": _TIME_LOOKUP_STEP})
                rows = await cur.fetchall()
            if not rows:
                raise UnknownPartition(f"no partition {tp}")
            start = int(rows[0][0])
            candidates = [(int(r[1]), r[2]) for r in rows if r[1] is not None]
            for _, data in candidates:
                found = first_at_or_after(data, timestamp, start)
                if found is not None:
                    return found
            if len(candidates) < _TIME_LOOKUP_STEP:
                return None
            after = candidates[-1][0] + 1

    async def producer_states(self, tp: TopicIdPartition, at: int) -> ProducerStates:
        """The producer state as a replay of every stored batch below `at` leaves it, read
        from the rows' header columns (coterie.storage.producer_rows); one query."""
        return await producer_rows.producer_states(self._db, tp, at)

    async def aborted_transactions(self, tp: TopicIdPartition, start: int,
                                   end: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start, end), for a read_committed
        fetch (coterie.storage.producer_rows); one query."""
        return await producer_rows.aborted_transactions(self._db, tp, start, end)

    async def max_timestamp(self, tp: TopicIdPartition) -> OffsetAndTimestamp | None:
        """The first record carrying the log's largest timestamp (ListOffsets -3); None when
        no batch has a timestamp. Walks the partition's rows: a rare request."""
        async with self._db.session() as conn:
            cur = await conn.execute(_MAX_TIMESTAMP,
                                     {"topic_id": tp.topic_id, "partition": tp.partition})
            row = await cur.fetchone()
        if row is None:
            raise UnknownPartition(f"no partition {tp}")
        return None if row[1] is None else first_with_max_timestamp(row[1])


def _write_params(rows: list[BatchRow], tails: dict[TopicIdPartition, Tail],
                  leases: dict[TopicIdPartition, Lease]) -> dict[str, list]:
    """The arrays _WRITE unnests: one element per batch row, one per partition."""
    parts = sorted(tails.items(), key=lambda kv: (kv[0].topic_id.bytes, kv[0].partition))
    return {
        "b_topic_ids": [r.topic_id for r in rows],
        "b_partitions": [r.partition for r in rows],
        "base_offsets": [r.base_offset for r in rows],
        "last_offsets": [r.last_offset for r in rows],
        "positions": [r.byte_position for r in rows],
        "sizes": [r.size for r in rows],
        "max_timestamps": [r.max_timestamp for r in rows],
        "running": [r.running_max_timestamp for r in rows],
        "leader_epochs": [r.leader_epoch for r in rows],
        "producer_ids": [r.producer_id for r in rows],
        "producer_epochs": [r.producer_epoch for r in rows],
        "base_sequences": [r.base_sequence for r in rows],
        "record_counts": [r.record_count for r in rows],
        "transactional": [r.is_transactional for r in rows],
        "control": [r.is_control for r in rows],
        "data": [r.data for r in rows],
        "p_topic_ids": [tp.topic_id for tp, _ in parts],
        "p_partitions": [tp.partition for tp, _ in parts],
        "next_offsets": [t.next_offset for _, t in parts],
        "next_positions": [t.next_position for _, t in parts],
        "p_max_timestamps": [t.max_timestamp for _, t in parts],
        "p_epochs": [leases[tp].epoch for tp, _ in parts],
    }
