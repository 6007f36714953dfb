"""A coordinator record: one durable change of a shard's state, as a plain value.

Every change the group coordinator makes that must survive a crash is one `Record`, appended
to `__consumer_offsets` before the client is answered and replayed through the same code at
start-up. Its shape follows Apache Kafka's coordinator records: a key naming what is changed
and a value holding its new state; a value of None is a tombstone that deletes it. Each
group type has its keys and values (`records/classic.py`, `records/consumer.py`), committed
offsets theirs (`records/offsets.py`); the codecs map them to Kafka's bytes
(`records/topic_codec.py`).

Every key is a frozen, hashable value that names its group (`group_id`): the shard routes a
record to its group by it, and compaction keeps the last value per key.
"""

from __future__ import annotations

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
