"""What the codecs of the KIP-848-era families (streams and share groups) share beyond the
framing of `classic_codec`: keys and values whose strings Kafka must be able to read back,
one `encode` over a family's key and value entities, and the check that an array read is not
null where the schema forbids it.

Kafka reads every string of these records with an int16 length, even where the format is a
compact string, so a record holding a longer one is refused at encoding (`RecordEncodeError`),
not left to fail Kafka's loading.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass
from typing import Any

from kio.serial.errors import SerialError

from coterie.common.limits import MAX_STRING_BYTES, shown, too_long
from coterie.group.records.classic_codec import RecordDecodeError, RecordEncodeError, prefixed
from coterie.group.records.record import Record

# A family's key (or key and value) as (version or record type, schema class, entity).
KeyEntity = Callable[[object], tuple[int, type, object]]
ValueEntity = Callable[[object, object], tuple[type, object]]

# What kio and struct raise on values they cannot write.
ENCODE_ERRORS = (SerialError, struct.error, ValueError, OverflowError, TypeError,
                 AttributeError, UnicodeEncodeError)


def long_string(value: object) -> str | None:
    """The first string in a schema entity (or a tuple of them) too long for Kafka to read."""
    if isinstance(value, str):
        return value if too_long(value) else None
    if isinstance(value, tuple):
        items: Iterable[object] = value
    elif is_dataclass(value):
        items = (getattr(value, f.name) for f in fields(value))
    else:
        return None
    for item in items:
        found = long_string(item)
        if found is not None:
            return found
    return None


def checked_prefixed(version: int, schema_type: type, entity: object) -> bytes:
    """`prefixed`, after refusing a string Kafka could not read back."""
    long = long_string(entity)
    if long is not None:
        raise RecordEncodeError(f"a string longer than {MAX_STRING_BYTES} bytes in "
                                f"{schema_type.__name__.lstrip('_')}: {shown(long)}")
    return prefixed(version, schema_type, entity)


def encode_record(record: Record, key_entity: KeyEntity, value_entity: ValueEntity,
                  value_version: int) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a record of one family; a tombstone has value None."""
    try:
        key = checked_prefixed(*key_entity(record.key))
        if record.value is None:
            return key, None
        return key, checked_prefixed(value_version, *value_entity(record.key, record.value))
    except RecordEncodeError:
        raise
    except ENCODE_ERRORS as exc:
        raise RecordEncodeError(
            f"cannot encode {type(record.key).__name__} record: {exc}") from exc


def non_null(items: Any, what: str) -> Any:
    """A non-nullable array as read: kio hands back a null one as None."""
    if items is None:
        raise RecordDecodeError(f"{what} is null")
    return items
