"""Drives a whole `GroupShard`'s share groups with virtual time (`virtual_time.py`):
heartbeats go through the shard's door, records are kept to be replayed into a fresh shard
(through the byte codec), timers fire in deadline order, and the topic picture is the
shard's (topics get stable ids)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from coterie.group import codec
from coterie.group.classic.config import ClassicConfig
from coterie.group.config import ShardConfig
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.shard import GroupShard
from coterie.group.share.config import ShareGroupConfig
from coterie.group.share.group import ShareGroup
from coterie.group.share.groups import ShareGroups
from coterie.group.share.messages import (
    ShareGroupDescribeRequest,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
)

from ..virtual_time import VirtualTime

_NS = uuid.UUID("0b0f4f7e-8c57-4d43-9a55-2f0e5c1f6a11")


def share_kind(shard: GroupShard) -> ShareGroups:
    (kind,) = [k for k in shard.kinds if isinstance(k, ShareGroups)]
    return kind


class ShareHarness(VirtualTime):
    def __init__(self, topics: dict[str, int] | None = None,
                 config: ShareGroupConfig | None = None, now_ms: int = 0) -> None:
        self.config = config or ShareGroupConfig()
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
                                         ConsumerGroupConfig(), share=self.config),
                          lambda client: f"{client or 'member'}-{next(ids)}",
                          lambda: f"consumer-{next(ids)}")

    @property
    def kind(self) -> ShareGroups:
        return share_kind(self.shard)

    def group(self, group_id: str = "g") -> ShareGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ShareGroup)
        return group

    # -- topics -------------------------------------------------------------------------------
    def set_topics(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        for name in topics:
            if name not in self.topic_ids:
                self.topic_ids[name] = uuid.uuid5(_NS, f"{name}/{next(self._incarnation)}")
        self.apply(self.shard.on_topics_changed(self._picture(), self.now))

    def delete_topic(self, name: str) -> None:
        self.topics.pop(name)
        self.topic_ids.pop(name)
        self.apply(self.shard.on_topics_changed(self._picture(), self.now))

    def _picture(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {n: (self.topic_ids[n], c) for n, c in self.topics.items()}

    def names(self, response: ShareHeartbeatResponse) -> set[tuple[str, int]]:
        """The response's assignment as (topic name, partition)."""
        by_id = {tid: name for name, tid in self.topic_ids.items()}
        assert response.assignment is not None
        return {(by_id[t.topic_id], p) for t in response.assignment for p in t.partitions}

    def held(self, member_id: str, group_id: str = "g") -> set[tuple[str, int]]:
        by_id = {tid: name for name, tid in self.topic_ids.items()}
        return {(by_id[t], p) for t, p in self.group(group_id).members[member_id].assigned}

    # -- requests -----------------------------------------------------------------------------
    def request(self, req: Any) -> Any:
        return self.apply(self.shard.handle(req, self.now))

    def join(self, member_id: str, topics: tuple[str, ...] = ("t",), group_id: str = "g",
             **fields: Any) -> ShareHeartbeatResponse:
        return self.request(ShareHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=0,
            subscribed_topic_names=topics, client_id=f"client-{member_id}",
            client_host="/127.0.0.1", **fields))

    def heartbeat(self, member_id: str, epoch: int, group_id: str = "g",
                  **fields: Any) -> ShareHeartbeatResponse:
        return self.request(ShareHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch,
            client_id=f"client-{member_id}", client_host="/127.0.0.1", **fields))

    def leave(self, member_id: str, group_id: str = "g") -> ShareHeartbeatResponse:
        return self.request(ShareHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=-1,
            client_id=f"client-{member_id}", client_host="/127.0.0.1"))

    def describe(self, group_id: str = "g") -> Any:
        return self.request(ShareGroupDescribeRequest(group_id))

    # -- replay -------------------------------------------------------------------------------
    def replayed_shard(self) -> GroupShard:
        """A fresh shard that loaded every record written so far, through the bytes."""
        fresh = self._build()
        fresh.on_topics_changed(self._picture(), self.now)
        for record in self.records:
            fresh.replay(codec.decode(*codec.encode(record)))
        return fresh

    def check_replay(self) -> None:
        """Replay equals live: every share group rebuilt from its records is the live one."""
        fresh = self.replayed_shard()
        live = {gid: g.snapshot() for gid, g in self.shard.groups.items()
                if isinstance(g, ShareGroup)}
        replayed = {gid: g.snapshot() for gid, g in fresh.groups.items()
                    if isinstance(g, ShareGroup)}
        assert replayed == live
