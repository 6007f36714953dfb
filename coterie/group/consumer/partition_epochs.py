"""Which member epoch holds each partition of a consumer group, stored per topic as an array.

A group holds one entry per partition some member may still be using (`group.py`). A dict of
(topic id, partition) -> epoch costs about 46 bytes an entry (its slot, hash and index), so
with ten partitions a member it was the largest part of a member's memory after its target.
Partitions of a topic are small consecutive integers, so here each topic has one `array('i')`
indexed by partition, `FREE` where nobody holds it: four bytes a partition.

A partition index too large for an array (a corrupt record, or an absurdly large topic) goes
to a plain dict instead, so that no record can make the group allocate gigabytes. The class
offers the mapping operations the coordinator and its tests use (`in`, `[]`, get, pop, set,
len, iteration, `dict(...)`), with the same answers a dict would give.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterator, MutableMapping

from coterie.group.records.consumer import TopicIdPartition

FREE = -(2 ** 31)
"""An array slot nobody holds: below every member epoch (the held ones are >= 0)."""

MAX_ARRAY_PARTITION = 1 << 16
"""Partitions from this index on live in the fallback dict, not in an array."""


class PartitionEpochs(MutableMapping[TopicIdPartition, int]):
    """(topic id, partition) -> the member epoch it is held at (module docstring)."""

    __slots__ = ("_by_topic", "_counts", "_len", "_other")

    def __init__(self) -> None:
        self._by_topic: dict[uuid.UUID, array[int]] = {}
        self._counts: dict[uuid.UUID, int] = {}  # held slots in each topic's array
        self._other: dict[TopicIdPartition, int] = {}
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __contains__(self, tp: object) -> bool:
        return self.get(tp) is not None  # type: ignore[arg-type]

    def get(self, tp: TopicIdPartition, default: int | None = None) -> int | None:  # type: ignore[override]
        topic_id, p = tp
        epochs = self._by_topic.get(topic_id)
        if epochs is not None and 0 <= p < len(epochs):
            held = epochs[p]
            return default if held == FREE else held
        return self._other.get(tp, default)

    def __getitem__(self, tp: TopicIdPartition) -> int:
        held = self.get(tp)
        if held is None:
            raise KeyError(tp)
        return held

    def __setitem__(self, tp: TopicIdPartition, epoch: int) -> None:
        topic_id, p = tp
        if not 0 <= p < MAX_ARRAY_PARTITION or epoch == FREE:
            if tp not in self._other:
                self._len += 1
            self._other[tp] = epoch
            return
        epochs = self._by_topic.get(topic_id)
        if epochs is None:
            epochs = self._by_topic[topic_id] = array("i")
            self._counts[topic_id] = 0
        if p >= len(epochs):
            epochs.extend([FREE] * (p + 1 - len(epochs)))
        if epochs[p] == FREE:
            self._len += 1
            self._counts[topic_id] += 1
        epochs[p] = epoch

    def __delitem__(self, tp: TopicIdPartition) -> None:
        if self.pop(tp, None) is None:
            raise KeyError(tp)

    def pop(self, tp: TopicIdPartition, default: int | None = None) -> int | None:  # type: ignore[override]
        topic_id, p = tp
        epochs = self._by_topic.get(topic_id)
        if epochs is not None and 0 <= p < len(epochs):
            held = epochs[p]
            if held == FREE:
                return default
            epochs[p] = FREE
            self._len -= 1
            left = self._counts[topic_id] - 1
            if left:
                self._counts[topic_id] = left
            else:  # a topic nobody holds any more costs nothing
                del self._by_topic[topic_id], self._counts[topic_id]
            return held
        if tp in self._other:
            self._len -= 1
            return self._other.pop(tp)
        return default

    def __iter__(self) -> Iterator[TopicIdPartition]:
        for topic_id, epochs in self._by_topic.items():
            for p, held in enumerate(epochs):
                if held != FREE:
                    yield topic_id, p
        yield from self._other

    def copy(self) -> PartitionEpochs:
        new = PartitionEpochs()
        new._by_topic = {t: array("i", epochs) for t, epochs in self._by_topic.items()}
        new._counts = dict(self._counts)
        new._other = dict(self._other)
        new._len = self._len
        return new

    def __repr__(self) -> str:
        return f"PartitionEpochs({dict(self)!r})"
