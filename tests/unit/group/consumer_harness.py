"""Drives ConsumerGroups (the consumer core alone) with virtual time, as the broker would,
minus the sockets.

Records are "persisted" into a list, timers live in a dict and fire in deadline order when
time advances. Topics get stable ids derived from their names (a re-created topic gets a new
one). Member ids are readable strings that are still valid v1 member ids (22 characters of
URL-safe base64).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.groups import ConsumerGroups
from coterie.group.consumer.messages import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    TopicPartitions,
)
from coterie.group.records.record import Record
from coterie.group.result import Result
from coterie.group.topic_image import TopicImage, TopicInfo

from .virtual_time import VirtualTime

_NS = uuid.UUID("6d3c0b8e-4f3a-4d7e-9a51-3c2f1e0d9b8a")
UNSET: Any = object()


def change_topics(core: ConsumerGroups,
                  topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo] | TopicImage,
                  now_ms: int, version: int | None = None) -> Result:
    """What a shard does when the broker's topics change (`GroupShard.on_topics_changed`),
    for the consumer core alone: the new picture, and the core's answer to it."""
    previous = core.topics.image
    if not isinstance(topics, TopicImage):
        topics = TopicImage.of(topics, core.topics.next_version() if version is None
                               else version)
    core.topics.image = topics
    return core.on_topics(previous, now_ms)


def delete_group(core: ConsumerGroups, group_id: str) -> tuple[Any, list[Record]]:
    """DeleteGroups of a consumer group as the shard does it (`Group.deletion`, then the
    tombstones replayed); GROUP_ID_NOT_FOUND without one."""
    group = core.groups.get(group_id)
    if group is None:
        return ErrorCode.group_id_not_found, []
    code, records = group.deletion()
    for record in records:
        core.replay(record)
    return code, records


def mid(name: str) -> str:
    """A readable member id that passes v1's UUID check."""
    return (name + "_" * 22)[:22]


class ConsumerHarness(VirtualTime):
    def __init__(self, topics: dict[str, int] | None = None,
                 config: ConsumerGroupConfig | None = None, now_ms: int = 0,
                 records: list[Record] | None = None) -> None:
        self.config = config or ConsumerGroupConfig()
        counter = itertools.count(1)
        self.coordinator = ConsumerGroups(self.config,
                                               lambda: mid(f"gen{next(counter)}"))
        super().__init__(now_ms)
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.partition_counts: dict[str, int] = {}
        self._incarnation = itertools.count(1)
        if records:
            self.load(records)
        if topics:
            self.set_topics(topics)

    # -- plumbing ---------------------------------------------------------------------------
    def group(self, group_id: str = "g") -> ConsumerGroup:
        return self.coordinator.groups[group_id]

    def replayed(self) -> ConsumerGroups:
        fresh = ConsumerGroups(self.config, lambda: "unused")
        for record in self.records:
            fresh.replay(record)
        return fresh

    # -- topics -----------------------------------------------------------------------------
    def set_topics(self, topics: dict[str, int], recreate: Iterable[str] = ()) -> Result:
        """The broker's topics are now `topics` (name -> partitions)."""
        for name in recreate:
            self.topic_ids.pop(name, None)
        for name in list(self.topic_ids):
            if name not in topics:
                del self.topic_ids[name]
        for name in topics:
            if name not in self.topic_ids:
                self.topic_ids[name] = uuid.uuid5(_NS, f"{name}/{next(self._incarnation)}")
        self.partition_counts = dict(topics)
        result = change_topics(self.coordinator,
                               {n: (self.topic_ids[n], c) for n, c in topics.items()}, self.now)
        self.apply(result)
        return result

    def tp(self, topic: str, partition: int) -> tuple[uuid.UUID, int]:
        return self.topic_ids[topic], partition

    def tps(self, *names: str) -> frozenset[tuple[uuid.UUID, int]]:
        """tps("foo-0", "foo-2") -> the partitions by id."""
        out = []
        for n in names:
            topic, _, p = n.rpartition("-")
            out.append(self.tp(topic, int(p)))
        return frozenset(out)

    def names(self, partitions: Iterable[tuple[uuid.UUID, int]]) -> set[str]:
        by_id = {v: k for k, v in self.topic_ids.items()}
        return {f"{by_id.get(t, t)}-{p}" for t, p in partitions}

    def wire(self, names: Iterable[str]) -> tuple[TopicPartitions, ...]:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for t, p in self.tps(*names):
            by_topic.setdefault(t, []).append(p)
        return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in by_topic.items())

    # -- requests ---------------------------------------------------------------------------
    def request(self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
        return self.apply(self.coordinator.heartbeat(req, self.now))

    def join(self, member_id: str, topics: Iterable[str] | None = ("foo",),
             regex: str | None = None, group_id: str = "g", instance_id: str | None = None,
             assignor: str | None = None, rebalance_ms: int = 30_000,
             version: int = 1) -> ConsumerHeartbeatResponse:
        return self.request(ConsumerHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=0, instance_id=instance_id,
            rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=None if topics is None else tuple(topics),
            subscribed_topic_regex=regex, server_assignor=assignor, owned=(),
            version=version, client_id="client", client_host="/127.0.0.1"))

    def heartbeat(self, member_id: str, epoch: int, owned: Iterable[str] | None = None,
                  group_id: str = "g", instance_id: str | None = None,
                  topics: Iterable[str] | None = None, regex: str | None = None,
                  full: bool = False, version: int = 1,
                  assignor: str | None = None) -> ConsumerHeartbeatResponse:
        """A heartbeat; `owned` as partition names ("foo-1"), None for "unchanged"."""
        wire_owned = None if owned is None else self.wire(owned)
        names = None if topics is None else tuple(topics)
        if full:
            member = self.group(group_id).members[member_id]
            names = tuple(sorted(member.subscribed_topic_names)) if names is None else names
            wire_owned = self.wire([]) if wire_owned is None else wire_owned
        return self.request(ConsumerHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch,
            instance_id=instance_id, subscribed_topic_names=names,
            subscribed_topic_regex=regex, owned=wire_owned, server_assignor=assignor,
            rebalance_timeout_ms=30_000 if full else -1, version=version,
            client_id="client", client_host="/127.0.0.1"))

    def leave(self, member_id: str, epoch: int = -1, group_id: str = "g",
              instance_id: str | None = None) -> ConsumerHeartbeatResponse:
        return self.request(ConsumerHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch,
            instance_id=instance_id, version=1))

    def assigned(self, response: ConsumerHeartbeatResponse) -> set[str] | None:
        """The partition names in a response's assignment (None when it carries none)."""
        if response.assignment is None:
            return None
        return self.names((t.topic_id, p) for t in response.assignment for p in t.partitions)
