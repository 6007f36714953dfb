"""Reading the records of fetched v2 record batches: what a consumer hands to its user.

A Fetch response carries, per partition, a run of record batches as the broker stores them
(the last one possibly cut short: brokers send whole batches up to a byte limit and may end
with a partial one). The batches are walked and their 61-byte headers read by the wire
format's one walker (`coterie.wire.record_batch.batch_headers`, shared with the broker's
produce checks), and the records inside, after decompression (`coterie.wire.compression`),
with the tree's one record parser (`coterie.wire.records`, which also describes the record
format; the broker's log reads records with it too). This module turns them into what a
consumer delivers.
A record's offset is the batch's base offset plus its delta; its timestamp the batch's base
timestamp plus its delta, unless the batch says LogAppendTime, when every record carries the
batch's max timestamp.

What `decode_batches` leaves out: control batches (transaction markers: the consumer reads
uncommitted data and never shows markers) and records before `from_offset` (a fetch starting
inside a batch gets the whole batch). `next_offset` tells the caller where to fetch next even
when nothing was delivered, so a run of control batches or a compacted gap never stalls it.
`fetched_batches` holds those batch-level rules (and the CRC check and decompression) for
both readers of fetched bytes, this module and `coterie.spark.columns`.

Pure: bytes in, records out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from coterie.wire.compression import decompress
from coterie.wire.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    RecordBatchError,
    batch_crc,
    batch_headers,
)
from coterie.wire.records import RecordDecodeError, iter_records, read_varint

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


def fetched_batches(buf: bytes, topic: str, partition: int, from_offset: int,
                    check_crc: bool) -> Iterator[tuple[BatchHeader, bytes | None]]:
    """Each complete batch of one partition's fetched bytes that reaches `from_offset`, with
    its decompressed records section, or None for a control batch (whose records a consumer
    never shows, but whose offsets it must step over). A trailing partial batch ends the
    walk. Raises RecordDecodeError, naming the partition, on bytes that cannot be batches, a
    CRC mismatch (if `check_crc`) or a records section that does not decompress."""
    try:
        headers = batch_headers(buf)
    except RecordBatchError as exc:
        raise RecordDecodeError(f"{topic}-{partition}: {exc}") from exc
    for h in headers:
        if h.last_offset < from_offset:
            continue
        if check_crc and batch_crc(buf, h) != h.crc:
            raise RecordDecodeError(
                f"{topic}-{partition}: record batch at offset {h.base_offset} fails its CRC "
                f"check")
        if h.is_control:
            yield h, None
            continue
        pos = h.position
        try:
            body = decompress(h.compression, buf[pos + HEADER_SIZE:pos + h.size])
        except ValueError as exc:
            raise RecordDecodeError(
                f"{topic}-{partition}: batch at offset {h.base_offset}: {exc}") from exc
        yield h, body


def decode_batches(data: bytes | memoryview | None, topic: str, partition: int,
                   from_offset: int = 0, *, check_crc: bool = True) -> Decoded:
    """The records at or after `from_offset` in `data` (v2 batches, a trailing partial batch
    ignored). Raises RecordDecodeError on bytes that cannot be batches."""
    records: list[ConsumerRecord] = []
    next_offset = from_offset
    for h, body in fetched_batches(bytes(data or b""), topic, partition, from_offset,
                                   check_crc):
        if body is not None:
            append_time = h.max_timestamp if h.is_log_append_time else None
            records.extend(_records(body, h.records_count, topic, partition, h.base_offset,
                                    h.base_timestamp, append_time, h.partition_leader_epoch,
                                    from_offset))
        next_offset = max(next_offset, h.next_offset)
    return Decoded(records, next_offset)


__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "ConsumerRecord",
    "Decoded",
    "RecordDecodeError",
    "decode_batches",
    "fetched_batches",
    "read_varint",
]
