"""Every record coterie keeps in `__consumer_offsets`, encoded and decoded through one door.

The topic holds the records of every registered family side by side, in the order they were
written (offset commits, types 0 and 1, and classic groups, type 2: `records/classic_codec.py`;
KIP-848 consumer groups, types 3, 5, 6, 7, 8 and 16: `records/consumer_codec.py`; KIP-932
share groups, types 10 to 15: `records/share_codec.py`; KIP-1071 streams groups, types 17
and 19 to 23: `records/streams_codec.py`). Loading
replays them in that order through one path, so they are decoded by one function: this one
looks at the key's version prefix (the record type) and hands the bytes to the family that
owns it (`registry.FAMILIES`). Types no registered family models (transactions, types Kafka
may add) raise `UnknownRecordType`, which a loader
skips, as Kafka skips records it does not know.
"""

from __future__ import annotations

from kio.serial.readers import read_int16

from coterie.group.records.classic_codec import RecordDecodeError, UnknownRecordType
from coterie.group.records.record import Record, RecordFamily
from coterie.group.registry import FAMILIES

__all__ = ["RecordDecodeError", "UnknownRecordType", "decode", "encode"]

_BY_TYPE: dict[int, RecordFamily] = {t: f for f in FAMILIES for t in f.record_types}
_BY_KEY: dict[type, RecordFamily] = {k: f for f in FAMILIES for k in f.key_types}


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of any record; a tombstone has value None."""
    family = _BY_KEY.get(type(record.key))
    if family is None:
        raise TypeError(f"no registered record family writes {type(record.key).__name__}")
    return family.encode(record)


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode a record of any registered family, by the record type in its key."""
    key = bytes(key)
    try:
        record_type = int(read_int16(key, 0)[0])
    except Exception as exc:  # kio raises several error types on short buffers
        raise RecordDecodeError(f"record key too short to hold a version: {key!r}") from exc
    family = _BY_TYPE.get(record_type)
    if family is None:
        raise UnknownRecordType(record_type)
    return family.decode(key, value)
