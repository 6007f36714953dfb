"""The shard's durable view: the last value of every live key that reached the log.

A shard keeps, per live key, the value the log holds for it (`shard.py`: a failed append is
undone to it, compaction writes it out). It used to be a dict of key -> `Record`, which costs
a `Record` (48 bytes) per key on top of the key and the value, and, as a dict keeps the first
of equal keys, a second key object per key rewritten since (the new record's). A consumer
group member has three such keys. Here only the value is kept; the `Record` is built when
asked for, which is only when a group is rebuilt after a failed append, or at compaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from coterie.group.records.record import Record


class DurableRecords(Mapping[Any, Record]):
    """Key -> the `Record` that last reached the log for it, in first-written order (module
    docstring). `put` and `drop` change it; reading it builds `Record`s."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}

    def put(self, record: Record) -> None:
        """`record` reached the log and its value is not None: it is its key's value now."""
        self._values[record.key] = record.value

    def drop(self, key: Any) -> None:
        """A tombstone for `key` reached the log."""
        self._values.pop(key, None)

    def __getitem__(self, key: Any) -> Record:
        return Record(key, self._values[key])

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def records(self) -> Iterator[Record]:
        """Every record, in first-written order (the keys are the ones the map holds)."""
        for key, value in self._values.items():
            yield Record(key, value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DurableRecords):
            return self._values == other._values
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DurableRecords({self._values!r})"
