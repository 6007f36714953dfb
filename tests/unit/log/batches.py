"""Build real Kafka v2 record batches for the log tests, without a client library.

The records inside are properly encoded (varint lengths, zigzag deltas) so the bytes are
what a producer would send, even though the log itself never looks inside them.
(`kio_batch` is the exception: a batch written by kio, as an independent writer.)
"""

from __future__ import annotations

import io
import struct
from datetime import UTC, datetime

import crc32c
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount (the CRC-covered header)
_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, leaderEpoch, magic, crc


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


varint = _varint  # for other test modules that build records by hand


def _record(delta: int, ts_delta: int, key: bytes | None, value: bytes) -> bytes:
    body = bytearray(b"\x00")  # record attributes
    body += _varint(ts_delta) + _varint(delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(len(value)) + value
    body += _varint(0)  # no headers
    return _varint(len(body)) + bytes(body)


def make_batch(
    values: list[bytes] | int = 1,
    *,
    base_offset: int = 0,
    timestamp: int = 1_000,
    timestamps: list[int] | None = None,
    attributes: int = 0,
    magic: int = 2,
    leader_epoch: int = -1,
    producer_id: int = -1,
    key: bytes | None = None,
) -> bytes:
    """One batch holding `values` (or that many small records), each with `key`."""
    if isinstance(values, int):
        values = [b"v%d" % i for i in range(values)]
    stamps = timestamps or [timestamp] * len(values)
    base_ts = stamps[0]
    records = b"".join(
        _record(i, ts - base_ts, key, v)
        for i, (v, ts) in enumerate(zip(values, stamps, strict=True))
    )
    tail = (
        _TAIL.pack(
            attributes, len(values) - 1, base_ts, max(stamps), producer_id, -1, -1, len(values)
        )
        + records
    )
    crc = crc32c.crc32c(tail)
    return _PREFIX.pack(base_offset, len(tail) + 9, leader_epoch, magic, crc) + tail


def split_batches(data: bytes) -> list[bytes]:
    """Cut a run of batches at their batchLength boundaries."""
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos : pos + length + 12])
        pos += length + 12
    return out


def batch_base_offset(batch: bytes) -> int:
    return struct.unpack_from(">q", batch, 0)[0]


def without_offset(batch: bytes) -> bytes:
    """The batch with baseOffset and leader epoch zeroed, for comparing content."""
    return bytes(8) + batch[8:12] + bytes(4) + batch[16:]


def kio_batch(n: int) -> bytes:
    """One batch of `n` records written by kio (all timestamped 2024-01-01T00:00Z)."""
    ts = datetime(2024, 1, 1, tzinfo=UTC)
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=ts,
            offset=i64(i),
            key=b"k",
            value=b"value %d" % i,
            headers=(),
        )
        for i in range(n)
    )
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            records=records,
            attributes=i16(0),
        ),
    )
    return buf.getvalue()
