"""Reading the records inside a stored v2 batch, and the record-level timestamp lookups.

The log serves batches without opening them (coterie.log.batch reads headers only, in the
wire format of coterie.wire.record_batch), with one exception: ListOffsets by timestamp.
Kafka answers "the first offset whose timestamp is >= T" with a record, not a batch: the
first record, in offset order, whose own timestamp is >= T, and for MAX_TIMESTAMP (-3) the
first record that carries the largest timestamp. Record
timestamps inside a batch need not be monotonic, so the batch's base offset (or, for -3, its
last offset) can be off by several records in either direction. The headers and the sparse
time index still find the one batch to open; only that batch is decompressed and read.

The record parser here is also the consumer's (`coterie.client.records` builds its
`ConsumerRecord`s from `iter_records`): there is one parser of the record format in the tree,
in the lowest layer that needs it. `iter_keys` is its lighter walk (key and byte span of each
record, no values or headers) for the log cleaner and the produce check of compacted topics.
(`coterie.spark.columns` keeps a hand-inlined copy of the
record loop because it is the Spark source's hot path; tests hold the two to the same answers.
The batch header and the walk over batches are not copied anywhere: they are
coterie.wire.record_batch's.)

One record, after the 61-byte batch header (all integers zigzag varints except `attributes`)::

    length  attributes:int8  timestampDelta  offsetDelta  keyLength key  valueLength value
    headerCount [headerKeyLength headerKey headerValueLength headerValue]...

A length of -1 is a null key, value or header value. A record's offset is the batch's base
offset plus its delta; its timestamp the batch's base timestamp plus its delta, unless the
batch says LogAppendTime, when every record carries the batch's max timestamp (what Kafka's
`Record.timestamp()` reports, so what its lookups compare).

Pure: bytes in, values out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

# The log's face of the wire parser: a broken header is a CorruptRecordError (a LogError) here.
from coterie.log.batch import CorruptRecordError, parse_batch_header
from coterie.log.compression import decompress
from coterie.wire.record_batch import HEADER_SIZE, BatchHeader

__all__ = [
    "OffsetAndTimestamp",
    "RawRecord",
    "RecordDecodeError",
    "first_at_or_after",
    "first_with_max_timestamp",
    "iter_keys",
    "iter_records",
    "read_varint",
    "record_times",
]


class RecordDecodeError(ValueError):
    """Bytes that are not valid v2 record batches (bad CRC, lengths, varints or codec)."""


# One record as stored: (offset delta, timestamp delta, key, value, headers), the deltas
# against its batch's base offset and base timestamp, each header a (key, value) pair. A
# plain tuple: the consumer decodes every record it delivers through here, and a named tuple
# costs measurably more per record.
RawRecord = tuple[int, int, bytes | None, bytes | None, tuple[tuple[bytes, bytes | None], ...]]


class OffsetAndTimestamp(NamedTuple):
    """A lookup's answer: the record's offset and its timestamp."""

    offset: int
    timestamp: int


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos` -> (value, position after it)."""
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise RecordDecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint longer than 10 bytes")


def _bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    size, pos = read_varint(buf, pos)
    if size < 0:
        return None, pos
    end = pos + size
    if end > len(buf):
        raise RecordDecodeError(f"a {size}-byte field runs past the end of its record")
    return buf[pos:end], end


def iter_records(body: bytes, count: int) -> Iterator[RawRecord]:
    """The `count` records of a batch's (decompressed) records section, in stored order.
    Raises RecordDecodeError on bytes that do not parse as records."""
    pos = 0
    size = len(body)
    for _ in range(count):
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise RecordDecodeError(f"record of {length} bytes overruns its batch")
        pos += 1  # record attributes: unused
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        n_headers, pos = read_varint(body, pos)
        headers: tuple[tuple[bytes, bytes | None], ...] = ()
        if n_headers:
            if n_headers < 0:
                raise RecordDecodeError(f"negative header count {n_headers}")
            pairs = []
            for _ in range(n_headers):
                name, pos = _bytes(body, pos)
                if name is None:
                    raise RecordDecodeError("a header with a null key")
                header_value, pos = _bytes(body, pos)
                pairs.append((name, header_value))
            headers = tuple(pairs)
        if pos != end:
            raise RecordDecodeError(f"record length {length} disagrees with its fields")
        yield offset_delta, ts_delta, key, value, headers


def iter_keys(body: bytes, count: int) -> Iterator[tuple[int, int, int, int, bytes | None, bool]]:
    """(start, end, offset delta, timestamp delta, key, is a tombstone) of each record in
    a batch's decompressed records section, without reading values or headers: what the log
    cleaner needs (which key, where the record's bytes lie, to copy them) and the produce
    check of a compacted topic (every record has a key). Raises RecordDecodeError on bad
    bytes."""
    pos = 0
    size = len(body)
    for _ in range(count):
        start = pos
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise RecordDecodeError(f"record of {length} bytes overruns its batch")
        pos += 1
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key_len, pos = read_varint(body, pos)
        key = None
        if key_len >= 0:
            key = body[pos:pos + key_len]
            pos += key_len
        value_len, _ = read_varint(body, pos)
        yield start, end, offset_delta, ts_delta, key, value_len < 0
        pos = end


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
