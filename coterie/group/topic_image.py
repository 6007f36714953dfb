"""The consumer-group coordinator's view of the cluster's topics.

The coordinator does not own topics; the broker tells it what exists (name, id, partition
count) whenever that changes, and the coordinator keeps the latest picture here. It is not
persisted: after a restart the broker hands over the current picture again, and any group
whose subscribed topics changed while it was down gets a new group epoch (the metadata hash
in its group record no longer matches).

The metadata hash is coterie's own, not Kafka's (Kafka 4.1+ hashes topic ids, names,
partition counts and racks with its own scheme); a Kafka broker reading coterie's records, or
the other way round, sees a different hash once and rebalances the group once, which is
harmless.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What assignment needs to know of a topic. `tp(p)` gives one (topic id, partition)
    tuple per partition, made on first use, which every member's assignment shares: with
    ten partitions a member, their own tuples cost as much as the rest of the member."""

    topic_id: uuid.UUID
    partitions: int
    _tps: tuple[tuple[uuid.UUID, int], ...] | None = field(default=None, init=False,
                                                           repr=False, compare=False)

    def tp(self, partition: int) -> tuple[uuid.UUID, int]:
        """The shared (topic id, partition) tuple."""
        tps = self._tps
        if tps is None:
            tps = tuple((self.topic_id, p) for p in range(self.partitions))
            object.__setattr__(self, "_tps", tps)
        if 0 <= partition < len(tps):
            return tps[partition]
        return (self.topic_id, partition)


@dataclass(frozen=True, slots=True)
class TopicImage:
    """Topics by name (and by id), with a version that grows with every change the broker
    reports (regex resolutions record the version they were computed against)."""

    by_name: Mapping[str, TopicInfo] = field(default_factory=dict)
    version: int = 0
    by_id: Mapping[uuid.UUID, str] = field(default_factory=dict)

    @classmethod
    def of(cls, topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo],
           version: int = 0) -> TopicImage:
        by_name = {name: t if isinstance(t, TopicInfo) else TopicInfo(t[0], t[1])
                   for name, t in topics.items()}
        return cls(by_name, version, {t.topic_id: name for name, t in by_name.items()})

    def names(self) -> Iterable[str]:
        return self.by_name.keys()

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return self.by_id.get(topic_id)

    def metadata_hash(self, topics: Iterable[str]) -> int:
        """A signed 64-bit digest of the named topics that exist (name, id, partitions);
        0 when none does. Topics that do not exist contribute nothing, so creating one a
        group subscribes to changes the hash."""
        present = sorted(t for t in topics if t in self.by_name)
        if not present:
            return 0
        digest = hashlib.blake2b(digest_size=8)
        for name in present:
            info = self.by_name[name]
            raw = name.encode()
            digest.update(len(raw).to_bytes(4, "big"))
            digest.update(raw)
            digest.update(info.topic_id.bytes)
            digest.update(info.partitions.to_bytes(4, "big", signed=True))
        return int.from_bytes(digest.digest(), "big", signed=True)


class Topics:
    """The shard's current topic picture, shared by the group types it serves: the shard
    replaces `image` when the broker reports a change (`GroupShard.on_topics_changed`).

    Versions: each new picture's is above the last one and above every version a loaded
    record names (`raise_floor`: a regex resolution records the version it was computed
    against). Versions restart with the process (Kafka's are metadata offsets, which do
    not), so the first picture after loading must be newer than every loaded resolution."""

    __slots__ = ("_floor", "image")

    def __init__(self, image: TopicImage | None = None) -> None:
        self.image = image or TopicImage()
        self._floor = 0

    def raise_floor(self, version: int) -> None:
        self._floor = max(self._floor, version)

    def next_version(self) -> int:
        return max(self.image.version, self._floor) + 1
