"""Record-batch headers (Kafka message format v2) as the log checks and rewrites them.

The broker stores and serves the bytes a producer sent, so it only needs the 61-byte batch
header: where the batch ends, which offsets it spans, its timestamps, and whether the CRC
holds. Produce and Fetch never decode records, which keeps the hot path cheap; only a
ListOffsets by timestamp reads into one batch (coterie.log.record_scan), to answer at record
granularity as Kafka does.

The layout itself, its constants and the walk over a buffer of batches are the wire format's
(coterie.wire.record_batch, shared with the consumer and the Spark source) and are
re-exported here under their old names. What this module adds is the log's policy: which
batches a Produce may store (`validate_batches`), and the two header rewrites the broker
makes (`assign_offsets`, `stamp_log_append_time`). Format errors surface as
CorruptRecordError, the LogError the broker maps to CORRUPT_MESSAGE.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from coterie.log.errors import CorruptRecordError
from coterie.wire.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LEADER_EPOCH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    RecordBatchError,
    batch_headers,
)
from coterie.wire.record_batch import parse_batch_header as _parse_batch_header

__all__ = [
    # re-exported from coterie.wire.record_batch
    "ATTRIBUTES_OFFSET",
    "COMPRESSION_MASK",
    "CONTROL_FLAG",
    "CRC_OFFSET",
    "CRC_START",
    "HEADER",
    "HEADER_SIZE",
    "LEADER_EPOCH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "TIMESTAMP_TYPE_FLAG",
    "TRANSACTIONAL_FLAG",
    "BatchHeader",
    # the log's own
    "CorruptRecordError",
    "assign_offsets",
    "parse_batch_header",
    "stamp_log_append_time",
    "validate_batches",
]

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


def parse_batch_header(buf: bytes | bytearray | memoryview, pos: int) -> BatchHeader:
    """`coterie.wire.record_batch.parse_batch_header`, raising CorruptRecordError."""
    try:
        return _parse_batch_header(buf, pos)
    except RecordBatchError as exc:
        raise CorruptRecordError(str(exc)) from exc


def validate_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Check that `buf` is exactly one or more complete, intact v2 batches.

    This is the gate every produced byte passes: once bytes are in the log they are served
    verbatim, so anything a consumer could choke on is refused here. Raises
    CorruptRecordError naming the first problem.
    """
    view = memoryview(buf)
    if not len(view):
        raise CorruptRecordError("no record batches in the buffer")
    try:
        headers = batch_headers(view, strict=True)
    except RecordBatchError as exc:
        raise CorruptRecordError(str(exc)) from exc
    for h in headers:
        pos = h.position
        if h.records_count < 0:
            raise CorruptRecordError(
                f"record batch at byte {pos} has negative recordsCount {h.records_count}"
            )
        if h.last_offset_delta < 0:
            raise CorruptRecordError(
                f"record batch at byte {pos} has negative lastOffsetDelta {h.last_offset_delta}"
            )
        if h.records_count != h.last_offset_delta + 1:
            # A producer's batch always numbers its records 0..n-1. Trusting a larger delta
            # would let one small batch consume up to 2^31 offsets.
            raise CorruptRecordError(
                f"record batch at byte {pos} has recordsCount {h.records_count} but "
                f"lastOffsetDelta {h.last_offset_delta}; they must describe the same records"
            )
        actual = crc32c.crc32c(view[pos + CRC_START : pos + h.size])
        if actual != h.crc:
            raise CorruptRecordError(
                f"record batch at byte {pos} fails its CRC check: stored {h.crc:#010x}, "
                f"computed {actual:#010x}"
            )
    return headers


def assign_offsets(
    buf: bytes | bytearray | memoryview,
    headers: Sequence[BatchHeader],
    first_offset: int,
    leader_epoch: int,
) -> bytearray:
    """Return a copy of `buf` with baseOffset and partitionLeaderEpoch of each batch set.

    Batches get consecutive offset ranges starting at `first_offset`. Both fields sit before
    the CRC-covered region, so the batches stay valid without re-hashing.
    """
    out = bytearray(buf)
    offset = first_offset
    for h in headers:
        _I64.pack_into(out, h.position, offset)
        _I32.pack_into(out, h.position + LEADER_EPOCH_OFFSET, leader_epoch)
        offset += h.last_offset_delta + 1
    return out


def stamp_log_append_time(out: bytearray, headers: Sequence[BatchHeader], now_ms: int) -> None:
    """Mark each batch in `out` as LogAppendTime with maxTimestamp = now_ms, re-hashing it.

    For message.timestamp.type=LogAppendTime Kafka sets the timestamp-type attribute and the
    batch's maxTimestamp, which consumers then use as every record's timestamp; both fields
    are under the CRC, so it is recomputed. The records are untouched.
    """
    for h in headers:
        p = h.position
        attributes = (h.attributes | TIMESTAMP_TYPE_FLAG) & 0xFFFF
        if attributes >= 0x8000:
            attributes -= 0x10000
        _I16.pack_into(out, p + ATTRIBUTES_OFFSET, attributes)
        _I64.pack_into(out, p + MAX_TIMESTAMP_OFFSET, now_ms)
        crc = crc32c.crc32c(memoryview(out)[p + CRC_START : p + h.size])
        _U32.pack_into(out, p + CRC_OFFSET, crc)
