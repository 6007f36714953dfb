"""Reading the records of fetched v2 record batches: what a consumer hands to its user.

A Fetch response carries, per partition, a run of record batches as the broker stores them
(the last one possibly cut short: brokers send whole batches up to a byte limit and may end
with a partial one). The 61-byte batch header is read with the broker's own parser
(`coterie.log.batch.parse_batch_header`); this module reads what the broker never looks at:
the records inside, after decompressing them (`coterie.client.compression`).

One record, after the batch header (all integers zigzag varints except `attributes`)::

    length  attributes:int8  timestampDelta  offsetDelta  keyLength key  valueLength value
    headerCount [headerKeyLength headerKey headerValueLength headerValue]...

A length of -1 is a null key, value or header value. A record's offset is the batch's base
offset plus its delta; its timestamp the batch's base timestamp plus its delta, unless the
batch says LogAppendTime, when every record carries the batch's max timestamp.

What `decode_batches` leaves out: control batches (transaction markers: the consumer reads
uncommitted data and never shows markers) and records before `from_offset` (a fetch starting
inside a batch gets the whole batch). `next_offset` tells the caller where to fetch next even
when nothing was delivered, so a run of control batches or a compacted gap never stalls it.

Pure: bytes in, records out.
"""

from __future__ import annotations

from dataclasses import dataclass

import crc32c

from coterie.client.compression import decompress
from coterie.log.batch import (
    CRC_START,
    HEADER_SIZE,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_FLAG,
    CorruptRecordError,
    parse_batch_header,
)

CREATE_TIME = 0
LOG_APPEND_TIME = 1

Header = tuple[str, bytes | None]


class RecordDecodeError(ValueError):
    """Fetched bytes that are not valid v2 record batches (bad CRC, bad lengths, bad codec)."""


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One record as the consumer delivers it."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # CREATE_TIME or LOG_APPEND_TIME
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class Decoded:
    """The records of one partition's fetched bytes, and where the next fetch starts."""

    records: list[ConsumerRecord]
    next_offset: int  # after the last complete batch; `from_offset` if there was none


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos` -> (value, position after it). Shared with the Spark
    source's column decoder (coterie.spark.columns)."""
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


def _records(body: bytes, count: int, topic: str, partition: int, base_offset: int,
             base_timestamp: int, append_time: int | None, leader_epoch: int,
             from_offset: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    pos = 0
    for _ in range(count):
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise RecordDecodeError(f"record of {length} bytes overruns its batch")
        pos += 1  # record attributes: unused
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        n_headers, pos = read_varint(body, pos)
        if n_headers < 0:
            raise RecordDecodeError(f"negative header count {n_headers}")
        headers: list[Header] = []
        for _ in range(n_headers):
            name, pos = _bytes(body, pos)
            if name is None:
                raise RecordDecodeError("a header with a null key")
            header_value, pos = _bytes(body, pos)
            headers.append((name.decode("utf-8", errors="replace"), header_value))
        if pos != end:
            raise RecordDecodeError(f"record length {length} disagrees with its fields")
        offset = base_offset + offset_delta
        if offset >= from_offset:
            if append_time is not None:
                timestamp, kind = append_time, LOG_APPEND_TIME
            else:
                timestamp, kind = base_timestamp + ts_delta, CREATE_TIME
            out.append(ConsumerRecord(topic, partition, offset, timestamp, kind, key, value,
                                      tuple(headers), leader_epoch))
    return out


def decode_batches(data: bytes | memoryview | None, topic: str, partition: int,
                   from_offset: int = 0, *, check_crc: bool = True) -> Decoded:
    """The records at or after `from_offset` in `data` (v2 batches, a trailing partial batch
    ignored). Raises RecordDecodeError on bytes that cannot be batches."""
    buf = bytes(data or b"")
    records: list[ConsumerRecord] = []
    next_offset = from_offset
    pos = 0
    while len(buf) - pos >= HEADER_SIZE:
        magic = buf[pos + MAGIC_OFFSET]
        if magic != 2:
            raise RecordDecodeError(
                f"{topic}-{partition}: record batch with magic {magic} at byte {pos}; only "
                f"v2 batches are read")
        try:
            h = parse_batch_header(buf, pos)
        except CorruptRecordError as exc:
            raise RecordDecodeError(f"{topic}-{partition}: {exc}") from exc
        end = pos + h.size
        if end > len(buf):
            break  # a partial batch at the end of a fetch: fetched again next time
        if h.last_offset < from_offset:
            pos = end
            continue
        if check_crc and crc32c.crc32c(memoryview(buf)[pos + CRC_START:end]) != h.crc:
            raise RecordDecodeError(
                f"{topic}-{partition}: record batch at offset {h.base_offset} fails its CRC "
                f"check")
        if not h.is_control:
            try:
                body = decompress(h.compression, buf[pos + HEADER_SIZE:end])
            except ValueError as exc:
                raise RecordDecodeError(
                    f"{topic}-{partition}: batch at offset {h.base_offset}: {exc}") from exc
            append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_FLAG else None
            records.extend(_records(body, h.records_count, topic, partition, h.base_offset,
                                    h.base_timestamp, append_time, h.partition_leader_epoch,
                                    from_offset))
        next_offset = max(next_offset, h.next_offset)
        pos = end
    return Decoded(records, next_offset)


__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "ConsumerRecord",
    "Decoded",
    "RecordDecodeError",
    "decode_batches",
]
