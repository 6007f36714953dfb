"""The `batches` rows an append writes: a produce payload numbered at a partition's tail.

Why pure and apart from the SQL: which offsets, byte positions and time-index values each
batch gets is the heart of an append, and it should be checkable without a database. The SQL
side (postgres_log.py) locks the partition's counters (`Tail`), hands them here, and writes
what comes back.

The bytes are the producer's, checked beforehand (framing and CRC:
coterie.log.batch.validate_batches, the same gate as the file log, whose headers come here)
and rewritten only where Kafka's broker rewrites them:
baseOffset and partitionLeaderEpoch (coterie.log.batch.assign_offsets). Both lie before the
CRC-covered part of the header, so the CRC stays valid and nothing is re-hashed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from coterie.log.batch import assign_offsets
from coterie.storage.api import TopicIdPartition
from coterie.wire.record_batch import BatchHeader

__all__ = ["BatchRow", "Tail", "number_batches"]


@dataclass(frozen=True, slots=True)
class Tail:
    """A partition's counters: where the next batch goes."""

    next_offset: int
    next_position: int  # bytes ever appended: the next batch's byte_position
    max_timestamp: int  # the largest maxTimestamp ever appended (-1: none)


@dataclass(frozen=True, slots=True)
class BatchRow:
    """One row of `batches` (schema.py), in its column order."""

    topic_id: uuid.UUID
    partition: int
    base_offset: int
    last_offset: int
    byte_position: int
    size: int
    max_timestamp: int
    running_max_timestamp: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    is_transactional: bool
    is_control: bool
    data: bytes


def number_batches(tp: TopicIdPartition, records: bytes | bytearray | memoryview,
                   headers: Sequence[BatchHeader], tail: Tail,
                   leader_epoch: int) -> tuple[list[BatchRow], Tail]:
    """The rows for `records` (complete v2 batches, `headers` as validate_batches read them)
    appended to `tp` at `tail`, stamped with `leader_epoch`, and the tail after them."""
    data = assign_offsets(records, headers, tail.next_offset, leader_epoch)
    rows: list[BatchRow] = []
    offset, position, running = tail.next_offset, tail.next_position, tail.max_timestamp
    whole = len(headers) == 1
    for h in headers:
        running = max(running, h.max_timestamp)
        rows.append(BatchRow(
            topic_id=tp.topic_id,
            partition=tp.partition,
            base_offset=offset,
            last_offset=offset + h.last_offset_delta,
            byte_position=position,
            size=h.size,
            max_timestamp=h.max_timestamp,
            running_max_timestamp=running,
            leader_epoch=leader_epoch,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            record_count=h.records_count,
            is_transactional=h.is_transactional,
            is_control=h.is_control,
            data=bytes(data) if whole else bytes(data[h.position:h.end]),
        ))
        offset += h.last_offset_delta + 1
        position += h.size
    return rows, Tail(offset, position, running)
