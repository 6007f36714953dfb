"""The shard's durable view: what reached the log, as the log would replay it.

Why. A shard applies a result's records when it decides them (a step reads what the step
before it wrote), before the broker has appended them. When the append fails, what they did
must be undone, and the one way coterie undoes anything is to rebuild from what is durable
(`GroupShard.revert`): a group is replayed from its durable records, a group's offsets are
copied back from the durable offsets. This view is that "what is durable": it takes a
result's records only once the broker has appended them (`committed`), and every record
and transaction marker loaded at start-up.

It keeps:
- per live key of a group record, its last durable value (values only: a `Record` is built
  when asked for, at a rebuild or a compaction; a consumer member has three such keys), in
  first-written order, an order replay accepts;
- the durable committed and pending transactional offsets, as an `OffsetStore` fed the same
  records and markers as the live one: the same rules (a later record wins over an earlier
  pending one, a marker commits or drops a producer's pending offsets) with the same replay
  positions, so a copy of a group's offsets from here is exactly what the log would give.

Iterating it gives every live durable value as a `Record` (what a compaction keeps).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coterie.group.offsets.store import NO_PRODUCER_ID, OffsetStore
from coterie.group.records.offsets import OffsetCommitKey
from coterie.group.records.record import Record


class DurableView:
    """The records and markers that reached the log (module docstring)."""

    __slots__ = ("_values", "offsets")

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}  # group record key -> last durable value
        self.offsets = OffsetStore()

    def committed(self, records: list[Record], producer_id: int = NO_PRODUCER_ID) -> None:
        """`records` reached the log (in a transactional batch of `producer_id`, if set)."""
        values = self._values
        for record in records:
            key = record.key
            if isinstance(key, OffsetCommitKey):
                self.offsets.replay(record, producer_id)
            elif record.value is None:
                values.pop(key, None)
            else:
                values[key] = record.value

    def marker(self, producer_id: int, commit: bool) -> None:
        """A transaction marker reached the log."""
        self.offsets.replay_marker(producer_id, commit)

    def group_records(self, group_id: str) -> list[Record]:
        """The group's durable records (offsets aside), in an order replay accepts."""
        return [Record(key, value) for key, value in self._values.items()
                if key.group_id == group_id]

    def __iter__(self) -> Iterator[Record]:
        """Every live durable value, group records first, then committed offsets."""
        for key, value in self._values.items():
            yield Record(key, value)
        yield from self.offsets.records()

    def __len__(self) -> int:
        return len(self._values) + self.offsets.count()

    def __getitem__(self, key: Any) -> Record:
        """The durable record of `key` (a group record's or a committed offset's)."""
        if isinstance(key, OffsetCommitKey):
            value = self.offsets.fetch(key.group_id, key.topic, key.partition)
            if value is None:
                raise KeyError(key)
            return Record(key, value)
        return Record(key, self._values[key])

    def __eq__(self, other: object) -> bool:
        """The same durable values and offsets (replay positions aside: a log compacted
        since replays the same values at other positions)."""
        if not isinstance(other, DurableView):
            return NotImplemented
        return self._values == other._values and self.offsets.state() == other.offsets.state()

    __hash__ = None  # type: ignore[assignment]
