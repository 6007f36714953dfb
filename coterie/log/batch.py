"""Record-batch headers (Kafka message format v2), and nothing deeper.

The broker stores and serves the bytes a producer sent, so it only needs the 61-byte batch
header: where the batch ends, which offsets it spans, its timestamps, and whether the CRC
holds. Produce and Fetch never decode records, which keeps the hot path cheap; only a
ListOffsets by timestamp reads into one batch (coterie.log.record_scan), to answer at record
granularity as Kafka does.

Layout (big-endian), with the byte offset of each field::

     0 baseOffset int64        8 batchLength int32     12 partitionLeaderEpoch int32
    16 magic int8             17 crc uint32            21 attributes int16
    23 lastOffsetDelta int32  27 baseTimestamp int64   35 maxTimestamp int64
    43 producerId int64       51 producerEpoch int16   53 baseSequence int32
    57 recordsCount int32     61 records...

batchLength counts everything after itself, so a batch occupies batchLength + 12 bytes. The
CRC (CRC-32C) covers attributes to the end, which is why the broker may rewrite baseOffset
and partitionLeaderEpoch without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from coterie.log.errors import CorruptRecordError

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "CorruptRecordError",
    "assign_offsets",
    "parse_batch_header",
    "stamp_log_append_time",
    "validate_batches",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# baseOffset + batchLength: the part of a batch that batchLength does not count.
LOG_OVERHEAD = 12
# The smallest batchLength a v2 header can claim (a batch with zero record bytes).
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CRC_START = 21
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
LEADER_EPOCH_OFFSET = 12

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08  # set: LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20


@dataclass(slots=True)
class BatchHeader:
    """One batch's header fields, plus where the batch sits in the buffer it came from."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int
    size: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK


def parse_batch_header(buf: bytes | bytearray | memoryview, pos: int) -> BatchHeader:
    """Decode the header at `pos` without looking at the body or the CRC.

    Checks only what is needed to make the fields meaningful: the 61 header bytes are
    present, magic is 2 (older formats have a different layout), and batchLength is at least
    a header's worth. Whether the whole batch is in `buf` is the caller's concern, so this
    also works on a header read on its own.
    """
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated record batch at byte {pos}: {max(len(buf) - pos, 0)} bytes left, "
            f"a batch header needs {HEADER_SIZE}"
        )
    fields = HEADER.unpack_from(buf, pos)
    magic = fields[3]
    if magic != 2:
        raise CorruptRecordError(
            f"record batch at byte {pos} has magic {magic}; only magic 2 (Kafka 0.11+) is supported"
        )
    batch_length = fields[1]
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch at byte {pos} claims batchLength {batch_length}, less than the "
            f"{MIN_BATCH_LENGTH} bytes of its own header"
        )
    return BatchHeader(*fields, pos, batch_length + LOG_OVERHEAD)


def validate_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Check that `buf` is exactly one or more complete, intact v2 batches.

    This is the gate every produced byte passes: once bytes are in the log they are served
    verbatim, so anything a consumer could choke on is refused here. Raises
    CorruptRecordError naming the first problem.
    """
    view = memoryview(buf)
    total = len(view)
    if total == 0:
        raise CorruptRecordError("no record batches in the buffer")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        h = parse_batch_header(view, pos)
        end = pos + h.size
        if end > total:
            raise CorruptRecordError(
                f"record batch at byte {pos} claims batchLength {h.batch_length} "
                f"({h.size} bytes with its prefix) but only {total - pos} bytes remain"
            )
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
        actual = crc32c.crc32c(view[pos + CRC_START : end])
        if actual != h.crc:
            raise CorruptRecordError(
                f"record batch at byte {pos} fails its CRC check: stored {h.crc:#010x}, "
                f"computed {actual:#010x}"
            )
        headers.append(h)
        pos = end
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
        _U32.pack_into(out, p + MAGIC_OFFSET + 1, crc)
