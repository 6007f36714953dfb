"""Record-level timestamp lookups inside a stored v2 batch (ListOffsets by timestamp).

The log serves batches without opening them (coterie.log.batch reads headers only, in the
wire format of coterie.wire.record_batch), with one exception: ListOffsets by timestamp.
Kafka answers "the first offset whose timestamp is >= T" with a record, not a batch: the
first record, in offset order, whose own timestamp is >= T, and for MAX_TIMESTAMP (-3) the
first record that carries the largest timestamp. Record timestamps inside a batch need not
be monotonic, so the batch's base offset (or, for -3, its last offset) can be off by several
records in either direction. The headers and the sparse time index still find the one batch
to open; only that batch is decompressed and read, with the tree's one record parser
(`coterie.wire.records`).

A record's timestamp is the one a reader sees: the batch's max timestamp under LogAppendTime
(what Kafka's `Record.timestamp()` reports, so what its lookups compare).

Pure: bytes in, values out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

# The log's face of the wire parser: a broken header is a CorruptRecordError (a LogError) here.
from coterie.log.batch import CorruptRecordError, parse_batch_header
from coterie.wire.compression import decompress
from coterie.wire.record_batch import HEADER_SIZE, BatchHeader
from coterie.wire.records import RecordDecodeError, iter_records

__all__ = [
    "OffsetAndTimestamp",
    "first_at_or_after",
    "first_with_max_timestamp",
    "record_times",
]


class OffsetAndTimestamp(NamedTuple):
    """A lookup's answer: the record's offset and its timestamp."""

    offset: int
    timestamp: int


def _header(batch: bytes | memoryview) -> BatchHeader:
    try:
        h = parse_batch_header(batch, 0)
    except CorruptRecordError as exc:
        raise RecordDecodeError(str(exc)) from exc
    if h.size > len(batch):
        raise RecordDecodeError(f"batch of {h.size} bytes cut short at {len(batch)}")
    return h


def record_times(batch: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record of one complete stored batch, in stored order,
    with the timestamp a reader sees (the batch's max timestamp under LogAppendTime)."""
    h = _header(batch)
    try:
        body = decompress(h.compression, bytes(batch[HEADER_SIZE : h.size]))
    except ValueError as exc:
        raise RecordDecodeError(f"batch at offset {h.base_offset}: {exc}") from exc
    append_time = h.max_timestamp if h.is_log_append_time else None
    for offset_delta, timestamp_delta, _, _, _ in iter_records(body, h.records_count):
        offset = h.base_offset + offset_delta
        if append_time is not None:
            yield offset, append_time
        else:
            yield offset, h.base_timestamp + timestamp_delta


def first_at_or_after(batch: bytes | memoryview, target: int,
                      min_offset: int = 0) -> OffsetAndTimestamp | None:
    """The first record of `batch` (in stored order) at or above `min_offset` (the log
    start) whose timestamp is >= `target`: Kafka's answer to ListOffsets(target) once the
    batch is found. None if no record reaches it.

    A batch whose records cannot be read (the broker checks only the CRC on produce, so a
    producer can store an unreadable payload) answers with its base offset and max timestamp:
    a consumer starting there misses nothing.
    """
    try:
        for offset, timestamp in record_times(batch):
            if timestamp >= target and offset >= min_offset:
                return OffsetAndTimestamp(offset, timestamp)
    except RecordDecodeError:
        h = parse_batch_header(batch, 0)
        if h.max_timestamp >= target:
            return OffsetAndTimestamp(max(h.base_offset, min_offset), h.max_timestamp)
    return None


def first_with_max_timestamp(batch: bytes | memoryview) -> OffsetAndTimestamp:
    """The first record of `batch` whose timestamp equals the batch's max timestamp: Kafka's
    answer to ListOffsets(MAX_TIMESTAMP) once the batch is found.

    Kafka recomputes a batch's max timestamp from its records on produce, so some record
    always matches there; coterie keeps the producer's header, so a batch whose header
    claims a timestamp no record carries (or whose records cannot be read) answers with its
    last offset, as before records were read.
    """
    h = parse_batch_header(batch, 0)
    try:
        for offset, timestamp in record_times(batch):
            if timestamp == h.max_timestamp:
                return OffsetAndTimestamp(offset, timestamp)
    except RecordDecodeError:
        pass
    return OffsetAndTimestamp(h.last_offset, h.max_timestamp)
