"""Every record coterie keeps in `__consumer_offsets`, encoded and decoded through one door.

The topic holds classic records (offset commits, types 0 and 1; classic group metadata, type
2; `records/classic_codec.py`) and KIP-848 consumer-group records (types 3, 5, 6, 7, 8 and 16;
`records/consumer_codec.py`) side by side, in the order they were written. Loading replays
them in that order through one path, so the two families must be decoded by one function:
this one looks at the key's version prefix (the record type) and hands the bytes to the codec
that owns it. Types neither codec models (share groups, streams groups, transactions) raise
`UnknownRecordType`, which a loader skips, as Kafka skips records it does not know.
"""

from __future__ import annotations

from typing import Final

from kio.serial.readers import read_int16

from coterie.group.records import classic_codec, consumer_codec
from coterie.group.records.classic_codec import RecordDecodeError, UnknownRecordType
from coterie.group.records.consumer import CONSUMER_RECORD_KEY_TYPES
from coterie.group.records.consumer_codec import CONSUMER_RECORD_TYPES
from coterie.group.records.record import Record

__all__ = ["CLASSIC_RECORD_TYPES", "decode", "encode", "is_consumer_record"]

# OffsetCommitKey (0 and 1) and GroupMetadataKey (2).
CLASSIC_RECORD_TYPES: Final = frozenset({0, 1, 2})


def is_consumer_record(record: Record) -> bool:
    """True for KIP-848 consumer-group records (types 3-8, 16)."""
    return isinstance(record.key, CONSUMER_RECORD_KEY_TYPES)


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of any record; a tombstone has value None."""
    if is_consumer_record(record):
        return consumer_codec.encode(record)
    return classic_codec.encode(record)


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode a record of either family, dispatching on the record type in the key."""
    key = bytes(key)
    try:
        record_type = int(read_int16(key, 0)[0])
    except Exception as exc:  # kio raises several error types on short buffers
        raise RecordDecodeError(f"record key too short to hold a version: {key!r}") from exc
    if record_type in CLASSIC_RECORD_TYPES:
        return classic_codec.decode(key, value)
    if record_type in CONSUMER_RECORD_TYPES:
        return consumer_codec.decode(key, value)
    raise UnknownRecordType(record_type)
