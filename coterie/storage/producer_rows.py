"""Producer state and aborted transactions read from the batches' header columns.

Why: a broker taking a partition over copies only its recent batches (docs/cluster.md), yet
it must check an idempotent producer's next sequence and know where each open transaction
began exactly as if it had replayed the whole partition; and a read_committed fetch below
the copy needs the aborted transactions of the range it reads. Every batch row carries the
header fields these rules look at (`producer_id`, `producer_epoch`, `base_sequence`, offsets,
`is_transactional`, `is_control`), and three partial indexes (schema version 8) answer each
question with short index walks, so neither reads a data batch's bytes: only a transaction
marker's first bytes, where its type (COMMIT or ABORT) is.

- `producer_states(at)` is the state coterie.log.producers would hold after replaying every
  stored batch below `at`: per producer, its last batches replayed (from the fifth-last data
  batch on, which leaves the same five in its window, the same epoch and last offset), and
  the first offset of its open transaction: the first transactional data batch after its
  last marker, found by index and set last (the short replay cannot see it).
- `aborted_transactions(start, end)` lists the aborted transactions with records in
  [start, end) (coterie.log.txn_index's rule, as a consumer uses it): ABORT markers within
  the range, and the next marker after the range of each producer with transactional
  batches in it, when that marker is an ABORT. One query for the range, whatever it holds.

All of it is one query each, over the `Database` given.
"""

from __future__ import annotations

from collections.abc import Sequence

from coterie.log.partition import control_marker
from coterie.log.producers import ProducerEntry, ProducerStates
from coterie.log.txn_index import AbortedTxn
from coterie.storage.api import TopicIdPartition
from coterie.storage.database import Database
from coterie.wire.record_batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader
from coterie.wire.txn_markers import ABORT

__all__ = ["aborted_transactions", "producer_states"]

# A marker's type is in its first record's key, within this many bytes of the batch's start
# (the 61-byte header, then a handful of varints and a 4-byte key).
_MARKER_HEAD = 125

_TP = "topic_id = %(topic_id)s::uuid AND partition = %(partition)s::integer"

# Every producer id of the partition (a skip scan of batches_by_producer: one index probe
# per producer, not one entry per batch), then for each: where its replay starts (its
# fifth-last data batch below `at`), the first offset of its open transaction, and the
# header columns of the batches it replays.
_STATES = f"""
WITH RECURSIVE pids (pid) AS (
    (SELECT producer_id FROM batches WHERE {_TP} AND producer_id >= 0
     ORDER BY producer_id LIMIT 1)
  UNION ALL
    SELECT (SELECT b.producer_id FROM batches b
            WHERE b.{_TP.replace(' AND ', ' AND b.')} AND b.producer_id >= 0
              AND b.producer_id > pids.pid
            ORDER BY b.producer_id LIMIT 1)
    FROM pids WHERE pids.pid IS NOT NULL
)
SELECT p.pid, t.first_offset, r.base_offset, r.last_offset, r.producer_epoch,
       r.base_sequence, r.max_timestamp, r.is_transactional, r.is_control, r.head
FROM pids p
CROSS JOIN LATERAL (
    SELECT coalesce((SELECT base_offset FROM batches
                     WHERE {_TP} AND producer_id = p.pid AND producer_id >= 0
                       AND NOT is_control AND base_offset < %(at)s::bigint
                     ORDER BY base_offset DESC OFFSET 4 LIMIT 1), -1) AS from_offset
) k
CROSS JOIN LATERAL (
    SELECT min(base_offset) AS first_offset FROM batches
    WHERE {_TP} AND producer_id = p.pid AND producer_id >= 0
      AND is_transactional AND NOT is_control AND base_offset < %(at)s::bigint
      AND base_offset > coalesce((SELECT max(base_offset) FROM batches
                                  WHERE {_TP} AND producer_id = p.pid AND producer_id >= 0
                                    AND is_control AND base_offset < %(at)s::bigint), -1)
) t
JOIN LATERAL (
    SELECT base_offset, last_offset, producer_epoch, base_sequence, max_timestamp,
           is_transactional, is_control,
           CASE WHEN is_control THEN substring(data FROM 1 FOR {_MARKER_HEAD}) END AS head
    FROM batches
    WHERE {_TP} AND producer_id = p.pid AND producer_id >= 0
      AND base_offset >= k.from_offset AND base_offset < %(at)s::bigint
    OFFSET 0  -- a probe per producer, never one join over the partition's rows
) r ON true
WHERE p.pid IS NOT NULL
ORDER BY p.pid, r.base_offset
"""

# The transactional batches of [start, end) (by the primary key, from the batch holding
# `start`); the markers among them, and each producer's first marker past `end`; for every
# marker, its first bytes and where its transaction began.
_ABORTED = f"""
WITH ranged AS MATERIALIZED (
    SELECT producer_id, base_offset, is_control FROM batches
    WHERE {_TP} AND base_offset < %(end)s::bigint
      AND base_offset >= coalesce((SELECT base_offset FROM batches
                                   WHERE {_TP} AND last_offset >= %(start)s::bigint
                                   ORDER BY last_offset LIMIT 1), %(start)s::bigint)
      AND last_offset >= %(start)s::bigint AND producer_id >= 0 AND is_transactional
    ORDER BY base_offset  -- the primary key's range: the rows of [start, end) only
), markers AS (
    SELECT producer_id, base_offset FROM ranged WHERE is_control
  UNION
    SELECT m.producer_id, m.base_offset
    FROM (SELECT DISTINCT producer_id FROM ranged WHERE NOT is_control) d
    CROSS JOIN LATERAL (
        SELECT producer_id, base_offset FROM batches
        WHERE {_TP} AND producer_id = d.producer_id AND producer_id >= 0 AND is_control
          AND base_offset >= %(end)s::bigint
        ORDER BY base_offset LIMIT 1) m
)
SELECT m.producer_id, m.base_offset, substring(b.data FROM 1 FOR {_MARKER_HEAD}),
       (SELECT min(t.base_offset) FROM batches t
        WHERE t.{_TP.replace(' AND ', ' AND t.')} AND t.producer_id = m.producer_id
          AND t.producer_id >= 0 AND t.is_transactional AND NOT t.is_control
          AND t.base_offset < m.base_offset
          AND t.base_offset > coalesce((
              SELECT max(c.base_offset) FROM batches c
              WHERE c.{_TP.replace(' AND ', ' AND c.')} AND c.producer_id = m.producer_id
                AND c.producer_id >= 0 AND c.is_control AND c.base_offset < m.base_offset),
              -1))
FROM markers m
JOIN batches b ON b.{_TP.replace(' AND ', ' AND b.')} AND b.base_offset = m.base_offset
ORDER BY m.base_offset
"""


def _header(pid: int, row: Sequence) -> BatchHeader:
    """A BatchHeader holding what the producer rules read, from a row's columns."""
    base, last, epoch, base_seq, max_ts, transactional, control = row
    attributes = (TRANSACTIONAL_FLAG if transactional else 0) | (CONTROL_FLAG if control else 0)
    return BatchHeader(base, 0, -1, 2, 0, attributes, last - base, max_ts, max_ts, pid,
                       epoch, base_seq, last - base + 1, 0, 0)


async def producer_states(db: Database, tp: TopicIdPartition, at: int) -> ProducerStates:
    """The producer state after every stored batch of `tp` below offset `at` (module
    docstring); one query."""
    async with db.session() as conn:
        cur = await conn.execute(_STATES, {"topic_id": tp.topic_id, "partition": tp.partition,
                                           "at": at})
        rows = await cur.fetchall()
    by_pid: dict[int, tuple[int | None, list[Sequence]]] = {}
    for row in rows:
        pid, first_open = row[0], row[1]
        by_pid.setdefault(pid, (first_open, []))[1].append(row[2:])
    entries: list[ProducerEntry] = []
    for pid, (first_open, batches) in by_pid.items():
        states = ProducerStates()
        for *columns, head in batches:
            h = _header(pid, columns)
            kind = control_marker(head, 0) if h.is_control and head is not None else None
            states.replay_batch(h, kind)
        entry = states.entries.get(pid)
        if entry is None:
            continue
        entry.txn_first_offset = None if first_open is None else int(first_open)
        entries.append(entry)
    return ProducerStates.from_entries(entries)


async def aborted_transactions(db: Database, tp: TopicIdPartition, start: int,
                               end: int) -> list[AbortedTxn]:
    """The aborted transactions of `tp` with records in [start, end), in marker order; one
    query. Their `last_stable_offset` is unknown here and given as the marker's offset + 1
    (no reader of the list uses it)."""
    if end <= start:
        return []
    async with db.session() as conn:
        cur = await conn.execute(_ABORTED, {"topic_id": tp.topic_id, "partition": tp.partition,
                                            "start": start, "end": end})
        rows = await cur.fetchall()
    found = []
    for pid, marker, head, first in rows:
        if first is None or first >= end or control_marker(head, 0) != ABORT:
            continue
        found.append(AbortedTxn(int(pid), int(first), int(marker), int(marker) + 1))
    return found
