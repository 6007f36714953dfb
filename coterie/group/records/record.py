"""A coordinator record: one durable change of a shard's state, as a plain value.

Every change the group coordinator makes that must survive a crash is one `Record`, appended
to `__consumer_offsets` before the client is answered and replayed through the same code at
start-up. Its shape follows Apache Kafka's coordinator records: a key naming what is changed
and a value holding its new state; a value of None is a tombstone that deletes it. Each
group type has its keys and values (`records/classic.py`, `records/consumer.py`), committed
offsets theirs (`records/offsets.py`); a codec per record family maps them to Kafka's bytes
(`RecordFamily`; `coterie.group.codec` is the one door for every family).

Every key is a frozen, hashable value that names its group (`group_id`): the shard routes a
record to its group by it, and compaction keeps the last value per key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class RecordKey(Protocol):
    """What every record key offers: the group it belongs to (keys are also hashable)."""

    @property
    def group_id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Record:
    """One state change: `value` None is a tombstone for `key`."""

    key: Any  # a RecordKey of one of the record modules
    value: Any  # its value type, or None for a tombstone


@dataclass(frozen=True, slots=True)
class RecordFamily:
    """The records one codec module owns: their record types (the int16 a key starts with),
    their key classes, and the codec. A group kind registers the families of its records
    (`coterie.group.registry`); `coterie.group.codec` dispatches over them."""

    name: str
    record_types: frozenset[int]
    key_types: tuple[type, ...]
    encode: Callable[[Record], tuple[bytes, bytes | None]]
    decode: Callable[[bytes, bytes | None], Record]
