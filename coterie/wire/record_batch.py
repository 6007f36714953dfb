"""The Kafka record-batch header (message format v2, "magic 2"), and walking a run of batches.

Why here: three layers read the same 61 bytes. The log validates and stamps every produced
batch (coterie.log.batch) and reads into one for timestamp lookups (coterie.log.record_scan);
the consumer (coterie.client.records) and the Spark source (coterie.spark.columns) walk the
batches of every fetch. The layout, its constants and the one walk over a buffer of batches
(`batch_headers`) live once, in the lowest layer, so the readers cannot drift apart. What
each reader does with a batch (refuse it, skip it, decompress it) stays with the reader;
nothing here looks past the header, except `batch_crc`, which hashes the bytes the header's
CRC covers.

Layout (big-endian), with the byte offset of each field::

     0 baseOffset int64        8 batchLength int32     12 partitionLeaderEpoch int32
    16 magic int8             17 crc uint32            21 attributes int16
    23 lastOffsetDelta int32  27 baseTimestamp int64   35 maxTimestamp int64
    43 producerId int64       51 producerEpoch int16   53 baseSequence int32
    57 recordsCount int32     61 records...

batchLength counts everything after itself, so a batch occupies batchLength + 12 bytes. The
CRC (CRC-32C) covers attributes to the end, which is why a broker may rewrite baseOffset and
partitionLeaderEpoch without recomputing it.

Attributes: bits 0-2 the compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), bit 3
the timestamp type (set: LogAppendTime), bit 4 transactional, bit 5 control (a transaction
marker).

Pure and allocation-light: headers are read in place from any buffer (bytes, bytearray,
memoryview) with one `struct` call each; no batch is copied.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

__all__ = [
    "ATTRIBUTES_OFFSET",
    "COMPRESSION_MASK",
    "CONTROL_FLAG",
    "CRC_OFFSET",
    "CRC_START",
    "HEADER",
    "HEADER_SIZE",
    "LEADER_EPOCH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "TIMESTAMP_TYPE_FLAG",
    "TRANSACTIONAL_FLAG",
    "BatchHeader",
    "RecordBatchError",
    "batch_crc",
    "batch_headers",
    "parse_batch_header",
]

# The whole header as one struct: unpacking it is a single C call, cheaper than field reads.
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
_unpack_header = HEADER.unpack_from  # bound once: batch_headers runs on every produce
# baseOffset + batchLength: the part of a batch that batchLength does not count.
LOG_OVERHEAD = 12
# The smallest batchLength a v2 header can claim (a batch with zero record bytes).
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# The only format read: older ones (magic 0 and 1) have a different layout.
MAGIC = 2

# Byte offsets, within a batch, of the fields that are read or rewritten on their own.
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
# Where the CRC-covered bytes start (the attributes); they run to the end of the batch.
CRC_START = ATTRIBUTES_OFFSET

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08  # set: LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20


class RecordBatchError(ValueError):
    """Bytes that cannot be framed as v2 batches: a header too short, of another magic or
    with an impossible length, or (in a strict walk) a last batch cut short.

    Each layer re-raises it as its own error (the log as CorruptRecordError, the consumer as
    RecordDecodeError), because each tells its caller something different."""


@dataclass(slots=True)
class BatchHeader:
    """One batch's header fields, plus where the batch sits in the buffer it came from.

    The first thirteen fields are HEADER's, in its order; `position` is the batch's first
    byte in the buffer and `size` its length including the 12-byte prefix."""

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
    def end(self) -> int:
        """The position just past this batch in its buffer."""
        return self.position + self.size

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
    def is_log_append_time(self) -> bool:
        """Set when the broker stamped the batch: every record's timestamp is then the
        batch's maxTimestamp, whatever the record's own delta says."""
        return bool(self.attributes & TIMESTAMP_TYPE_FLAG)

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK


def parse_batch_header(buf: bytes | bytearray | memoryview, pos: int) -> BatchHeader:
    """Decode the header at `pos` without looking at the body or the CRC.

    Checks only what is needed to make the fields meaningful: the 61 header bytes are
    present, magic is 2 (older formats have a different layout), and batchLength is at least
    a header's worth. Whether the whole batch is in `buf` is the caller's concern, so this
    also works on a header read on its own. Raises RecordBatchError.
    """
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise RecordBatchError(
            f"truncated record batch at byte {pos}: {max(len(buf) - pos, 0)} bytes left, "
            f"a batch header needs {HEADER_SIZE}"
        )
    fields = HEADER.unpack_from(buf, pos)
    magic = fields[3]
    if magic != MAGIC:
        raise RecordBatchError(
            f"record batch at byte {pos} has magic {magic}; only magic 2 (Kafka 0.11+) is supported"
        )
    batch_length = fields[1]
    if batch_length < MIN_BATCH_LENGTH:
        raise RecordBatchError(
            f"record batch at byte {pos} claims batchLength {batch_length}, less than the "
            f"{MIN_BATCH_LENGTH} bytes of its own header"
        )
    return BatchHeader(*fields, pos, batch_length + LOG_OVERHEAD)


def batch_headers(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, strict: bool = False
) -> list[BatchHeader]:
    """The header of each complete batch in `buf` from `pos` (a batch start), in order: the
    one walk over a run of batches, for every reader in the tree.

    Each header carries its `position` and `size`, so the caller slices the batch itself
    (`buf[h.position:h.end]`) only if it needs the bytes. A header that cannot be v2 raises
    RecordBatchError (see `parse_batch_header`); nothing after it can be framed.

    The end of the buffer is where the two kinds of caller differ:

    - strict=False (reading a Fetch response): a broker sends whole batches up to a byte
      limit and may end with a partial one, so a trailing piece (under a header's worth, or
      a header whose batch runs past the end) ends the walk quietly; it is fetched again
      next time. The caller knows where the walk stopped from the last header's `end`.
    - strict=True (checking a Produce request): the buffer must be whole batches, so the
      same trailing piece raises RecordBatchError.

    A list rather than a generator: every caller walks all of it (the log keeps the list to
    rewrite the batches), headers are small, and on the produce path, one call per request
    with one batch or a few, a generator's setup and resumes cost more than the list.
    """
    # `parse_batch_header` is inlined for the good case; a header it would refuse is handed
    # to it for the message.
    total = len(buf)
    headers: list[BatchHeader] = []
    while pos < total:
        if total - pos < HEADER_SIZE:
            if strict:
                parse_batch_header(buf, pos)  # raises: truncated
            break
        fields = _unpack_header(buf, pos)
        size = fields[1] + LOG_OVERHEAD
        if fields[3] != MAGIC or size < HEADER_SIZE:
            parse_batch_header(buf, pos)  # raises: wrong magic or impossible length
        end = pos + size
        if end > total:
            if strict:
                raise RecordBatchError(
                    f"record batch at byte {pos} claims batchLength {fields[1]} "
                    f"({size} bytes with its prefix) but only {total - pos} bytes remain"
                )
            break
        headers.append(BatchHeader(*fields, pos, size))
        pos = end
    return headers


def batch_crc(buf: bytes | bytearray | memoryview, h: BatchHeader) -> int:
    """The CRC-32C of the bytes `h`'s CRC covers (attributes to the end of the batch), computed
    over `buf` in place; equal to `h.crc` when the batch is intact."""
    start = h.position
    return crc32c.crc32c(memoryview(buf)[start + CRC_START : start + h.size])
