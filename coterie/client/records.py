"""Reading the records of fetched v2 record batches: what a consumer hands to its user.

A Fetch response carries, per partition, a run of record batches as the broker stores them
(the last one possibly cut short: brokers send whole batches up to a byte limit and may end
with a partial one). The 61-byte batch header is read with the broker's own parser
(`coterie.log.batch.parse_batch_header`), and the records inside, after decompression
(`coterie.log.compression`), with the log's record parser (`coterie.log.record_scan`, which
also describes the record format): the broker reads records too, for timestamp lookups, and
the log may not import the client, so the one parser lives there. This module turns them into
what a consumer delivers. A record's offset is the batch's base offset plus its delta; its
timestamp the batch's base timestamp plus its delta, unless the batch says LogAppendTime,
when every record carries the batch's max timestamp.

What `decode_batches` leaves out: control batches (transaction markers: the consumer reads
uncommitted data and never shows markers) and records before `from_offset` (a fetch starting
inside a batch gets the whole batch). `next_offset` tells the caller where to fetch next even
when nothing was delivered, so a run of control batches or a compacted gap never stalls it.

Pure: bytes in, records out.
"""

from __future__ import annotations

from dataclasses import dataclass

import crc32c

from coterie.log.batch import (
    CRC_START,
    HEADER_SIZE,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_FLAG,
    CorruptRecordError,
    parse_batch_header,
)
from coterie.log.compression import decompress
from coterie.log.record_scan import RecordDecodeError, iter_records, read_varint

CREATE_TIME = 0
LOG_APPEND_TIME = 1

Header = tuple[str, bytes | None]


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


def _records(body: bytes, count: int, topic: str, partition: int, base_offset: int,
             base_timestamp: int, append_time: int | None, leader_epoch: int,
             from_offset: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    for offset_delta, ts_delta, key, value, raw_headers in iter_records(body, count):
        offset = base_offset + offset_delta
        if offset >= from_offset:
            if append_time is not None:
                timestamp, kind = append_time, LOG_APPEND_TIME
            else:
                timestamp, kind = base_timestamp + ts_delta, CREATE_TIME
            headers = tuple((name.decode("utf-8", errors="replace"), header_value)
                            for name, header_value in raw_headers) if raw_headers else ()
            out.append(ConsumerRecord(topic, partition, offset, timestamp, kind, key, value,
                                      headers, leader_epoch))
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
    "read_varint",
]
