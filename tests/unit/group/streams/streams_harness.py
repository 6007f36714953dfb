"""Drives a whole `GroupShard`'s streams groups with virtual time (`virtual_time.py`):
heartbeats go through the shard's door, records are kept to be replayed into a fresh shard,
timers fire in deadline order, and the topic picture is the shard's (topics get stable ids).
The internal topics a heartbeat asks for are not created unless a test says so
(`create_requested`), as the broker would."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from coterie.group import codec
from coterie.group.classic.config import ClassicConfig
from coterie.group.config import ShardConfig
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.records.tasks import TaskSet
from coterie.group.shard import GroupShard
from coterie.group.streams.config import StreamsGroupConfig
from coterie.group.streams.group import StreamsGroup
from coterie.group.streams.groups import StreamsGroups
from coterie.group.streams.messages import (
    Endpoint,
    StreamsGroupDescribeRequest,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
)
from coterie.group.streams.topology import Topology

from ..virtual_time import VirtualTime

_NS = uuid.UUID("7d4f6c1e-2a33-4f6e-8d0c-5e9a7b1c3d2f")


def streams(shard: GroupShard) -> StreamsGroups:
    (kind,) = [k for k in shard.kinds if isinstance(k, StreamsGroups)]
    return kind


class StreamsHarness(VirtualTime):
    def __init__(self, topics: dict[str, int] | None = None,
                 config: StreamsGroupConfig | None = None, now_ms: int = 0) -> None:
        self.config = config or StreamsGroupConfig(initial_rebalance_delay_ms=0)
        self.shard = self._build()
        self.coordinator = self.shard
        super().__init__(now_ms)
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._incarnation = itertools.count(1)
        self.topics: dict[str, int] = {}
        if topics:
            self.set_topics(topics)

    def _build(self) -> GroupShard:
        ids = itertools.count(1)
        return GroupShard(0, ShardConfig(ClassicConfig(initial_rebalance_delay_ms=0),
                                         ConsumerGroupConfig(), streams=self.config),
                          lambda client: f"{client or 'member'}-{next(ids)}",
                          lambda: f"consumer-{next(ids)}")

    @property
    def kind(self) -> StreamsGroups:
        return streams(self.shard)

    def group(self, group_id: str = "app") -> StreamsGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, StreamsGroup)
        return group

    # -- topics -------------------------------------------------------------------------------
    def set_topics(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        for name in topics:
            if name not in self.topic_ids:
                self.topic_ids[name] = uuid.uuid5(_NS, f"{name}/{next(self._incarnation)}")
        self.apply(self.shard.on_topics_changed(
            {n: (self.topic_ids[n], c) for n, c in topics.items()}, self.now))

    def create_requested(self, response: StreamsHeartbeatResponse) -> None:
        """Create the internal topics a heartbeat asked for, as the broker does."""
        if response.topics_to_create:
            self.set_topics({**self.topics, **{t.name: t.partitions
                                               for t in response.topics_to_create}})

    # -- requests -----------------------------------------------------------------------------
    def request(self, req: Any) -> Any:
        return self.apply(self.shard.handle(req, self.now))

    def join(self, member_id: str, topology: Topology, process: str | None = None,
             group_id: str = "app", endpoint: Endpoint | None = None,
             **fields: Any) -> StreamsHeartbeatResponse:
        return self.request(StreamsHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=0,
            rebalance_timeout_ms=30_000, topology=topology, owned=TaskSet(),
            process_id=process or f"process-{member_id}", user_endpoint=endpoint,
            client_tags=(), client_id=f"client-{member_id}", client_host="/127.0.0.1",
            **fields))

    def heartbeat(self, member_id: str, epoch: int, owned: TaskSet | None = None,
                  group_id: str = "app", **fields: Any) -> StreamsHeartbeatResponse:
        return self.request(StreamsHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch, owned=owned,
            client_id=f"client-{member_id}", client_host="/127.0.0.1", **fields))

    def leave(self, member_id: str, group_id: str = "app") -> StreamsHeartbeatResponse:
        return self.request(StreamsHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=-1,
            client_id=f"client-{member_id}", client_host="/127.0.0.1"))

    def describe(self, group_id: str = "app") -> Any:
        return self.request(StreamsGroupDescribeRequest(group_id))

    # -- replay -------------------------------------------------------------------------------
    def persisted(self) -> list[Any]:
        """The records a restarted coordinator would load: every one written so far."""
        return self.records

    def replayed_shard(self) -> GroupShard:
        """A fresh shard that loaded the persisted records, through the bytes."""
        fresh = self._build()
        fresh.on_topics_changed({n: (self.topic_ids[n], c) for n, c in self.topics.items()},
                                self.now)
        for record in self.persisted():
            fresh.replay(codec.decode(*codec.encode(record)))
        return fresh
