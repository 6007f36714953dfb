"""Bytes of the `__share_group_state` records, as Kafka 4.2.1's ShareCoordinatorRecordSerde
writes and reads them (share-coordinator's ShareSnapshot*/ShareUpdate* message schemas).

kio has no schema for these coordinator records, so they are written by hand with struct,
field by field from the JSON schemas:

- a key is an int16 (0 ShareSnapshotKey, 1 ShareUpdateKey), then, not flexible: GroupId
  (int16-length string), TopicId (16 bytes), Partition (int32);
- a value is an int16 version (0), then, flexible: the int32/int64 fields in schema order,
  StateBatches as a compact array (unsigned varint length + 1) of (FirstOffset int64,
  LastOffset int64, DeliveryState int8, DeliveryCount int16, empty tagged fields), then the
  value's tagged fields: DeliveryCompleteCount (tag 0, int32, KIP-1226) only when it is not
  its default -1, as Kafka writes it.

Reading refuses what Kafka would refuse (a null array, a bad version, trailing bytes) with
`ShareRecordDecodeError`, and skips unknown tagged fields as Kafka does.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from coterie.share.records import (
    SNAPSHOT_KEY_VERSION,
    UNKNOWN_DELIVERY_COMPLETE_COUNT,
    UPDATE_KEY_VERSION,
    VALUE_VERSION,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
)

__all__ = ["ShareRecordDecodeError", "ShareRecordEncodeError", "decode", "encode"]

_DELIVERY_COMPLETE_COUNT_TAG: Final = 0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_KEY_TAIL = struct.Struct(">16si")
_BATCH = struct.Struct(">qqbh")
_SNAPSHOT_HEAD = struct.Struct(">iiiqqq")  # epochs, start offset, create and write timestamps
_UPDATE_HEAD = struct.Struct(">iiq")       # snapshot and leader epochs, start offset


class ShareRecordEncodeError(ValueError):
    """A value that does not fit the schema (a string over 32,767 bytes, a number out of its
    field's range)."""


class ShareRecordDecodeError(ValueError):
    """Bytes that are not a ShareSnapshot or ShareUpdate record."""


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a record; a tombstone's value is None."""
    key = record.key
    version = SNAPSHOT_KEY_VERSION if isinstance(key, ShareSnapshotKey) else UPDATE_KEY_VERSION
    group = key.group_id.encode()
    if len(group) > 0x7FFF:
        raise ShareRecordEncodeError(f"group id of {len(group)} bytes: Kafka reads at most 32767")
    try:
        key_bytes = (_I16.pack(version) + _I16.pack(len(group)) + group
                     + _KEY_TAIL.pack(key.topic_id.bytes, key.partition))
        value = record.value
        if value is None:
            return key_bytes, None
        if isinstance(value, ShareSnapshotValue):
            head = _SNAPSHOT_HEAD.pack(value.snapshot_epoch, value.state_epoch,
                                       value.leader_epoch, value.start_offset,
                                       value.create_timestamp, value.write_timestamp)
        else:
            head = _UPDATE_HEAD.pack(value.snapshot_epoch, value.leader_epoch,
                                     value.start_offset)
        parts = [_I16.pack(VALUE_VERSION), head, _uvarint(len(value.state_batches) + 1)]
        for b in value.state_batches:
            parts.append(_BATCH.pack(b.first_offset, b.last_offset, b.delivery_state,
                                     b.delivery_count))
            parts.append(b"\x00")  # the batch's (empty) tagged fields
        if value.delivery_complete_count == UNKNOWN_DELIVERY_COMPLETE_COUNT:
            parts.append(b"\x00")
        else:
            parts.append(b"\x01" + _uvarint(_DELIVERY_COMPLETE_COUNT_TAG) + _uvarint(4)
                         + _I32.pack(value.delivery_complete_count))
        return key_bytes, b"".join(parts)
    except struct.error as exc:
        raise ShareRecordEncodeError(f"cannot encode {type(record.value).__name__}: {exc}") \
            from exc


class _Reader:
    """A cursor over one key or value; every read checks the bytes are there."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ShareRecordDecodeError(f"{self.what}: truncated at byte {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size))

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ShareRecordDecodeError(f"{self.what}: varint too long")

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ShareRecordDecodeError(
                f"{self.what}: {len(self.data) - self.pos} bytes after the last field")


def _tagged(r: _Reader) -> dict[int, bytes]:
    fields = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        fields[tag] = r.take(r.uvarint())
    return fields


def _batches(r: _Reader) -> tuple[StateBatch, ...]:
    n = r.uvarint()
    if n == 0:
        raise ShareRecordDecodeError(f"{r.what}: StateBatches is null")
    out = []
    for _ in range(n - 1):
        out.append(StateBatch(*r.unpack(_BATCH)))
        _tagged(r)
    return tuple(out)


def _delivery_complete_count(tagged: dict[int, bytes], what: str) -> int:
    raw = tagged.get(_DELIVERY_COMPLETE_COUNT_TAG)
    if raw is None:
        return UNKNOWN_DELIVERY_COMPLETE_COUNT
    if len(raw) != 4:
        raise ShareRecordDecodeError(f"{what}: DeliveryCompleteCount of {len(raw)} bytes")
    return _I32.unpack(raw)[0]


def decode(key: bytes, value: bytes | None) -> ShareStateRecord:
    """The record these bytes hold; `ShareRecordDecodeError` for anything else."""
    r = _Reader(bytes(key), "share state key")
    (version,) = r.unpack(_I16)
    if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
        raise ShareRecordDecodeError(f"not a share state record (key version {version})")
    (length,) = r.unpack(_I16)
    if length < 0:
        raise ShareRecordDecodeError("share state key: GroupId is null")
    try:
        group = r.take(length).decode()
    except UnicodeDecodeError as exc:
        raise ShareRecordDecodeError(f"share state key: GroupId: {exc}") from exc
    topic, partition = r.unpack(_KEY_TAIL)
    r.done()
    key_type = ShareSnapshotKey if version == SNAPSHOT_KEY_VERSION else ShareUpdateKey
    record_key = key_type(group, uuid.UUID(bytes=bytes(topic)), partition)
    if value is None:
        return ShareStateRecord(record_key, None)
    what = "ShareSnapshotValue" if version == SNAPSHOT_KEY_VERSION else "ShareUpdateValue"
    v = _Reader(bytes(value), what)
    (value_version,) = v.unpack(_I16)
    if value_version != VALUE_VERSION:
        raise ShareRecordDecodeError(f"unsupported {what} version {value_version}")
    if version == SNAPSHOT_KEY_VERSION:
        head = v.unpack(_SNAPSHOT_HEAD)
        batches = _batches(v)
        count = _delivery_complete_count(_tagged(v), what)
        v.done()
        return ShareStateRecord(record_key, ShareSnapshotValue(*head, batches, count))
    head = v.unpack(_UPDATE_HEAD)
    batches = _batches(v)
    count = _delivery_complete_count(_tagged(v), what)
    v.done()
    return ShareStateRecord(record_key, ShareUpdateValue(*head, batches, count))
