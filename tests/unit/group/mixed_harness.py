"""Drives a shard's classic and consumer groups (the mixed kind, mixed groups included) with
virtual time.

Records are "persisted" into a list, timers live in a dict and fire in deadline order when
time advances, and answers to classic requests (immediate or completed later) are stored by
request token. Topics get stable ids derived from their names. Classic members send real
consumer-protocol subscription bytes and get real assignment bytes back.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign.classic_leader import JoinedMember, lead
from coterie.assign.registry import lookup
from coterie.group import codec
from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.messages import (
    DescribedGroup,
    DescribeGroupRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coterie.group.config import ShardConfig
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
    TopicPartitions,
)
from coterie.group.mixed.groups import MixedGroups
from coterie.group.shard import GroupShard
from coterie.wire.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_subscription,
)

from .consumer_harness import mid
from .virtual_time import VirtualTime

_NS = uuid.UUID("0b7f5c1e-2a33-4f6e-8d0c-5e9a7b1c3d2f")


def mixed(shard: GroupShard) -> MixedGroups:
    """The shard's kind serving classic and consumer groups."""
    (kind,) = [k for k in shard.kinds if isinstance(k, MixedGroups)]
    return kind


def subscription(topics: Iterable[str] = ("foo",), owned: Iterable[str] = (),
                 version: int = 1, generation: int = -1) -> bytes:
    """Consumer-protocol subscription bytes; `owned` as partition names ("foo-1")."""
    parts = frozenset((n.rpartition("-")[0], int(n.rpartition("-")[2])) for n in owned)
    return encode_subscription(Subscription(tuple(topics), owned_partitions=parts,
                                            generation_id=generation, version=version))


class MixedHarness(VirtualTime):
    def __init__(self, topics: dict[str, int] | None = None,
                 config: ConsumerGroupConfig | None = None,
                 classic_config: ClassicConfig | None = None, now_ms: int = 0) -> None:
        self.config = config or ConsumerGroupConfig()
        self.classic_config = classic_config or ClassicConfig(initial_rebalance_delay_ms=0)
        self.shard = self._build()
        self.coordinator = mixed(self.shard)
        super().__init__(now_ms)
        self._tokens = itertools.count(1)
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._incarnation = itertools.count(1)
        if topics:
            self.set_topics(topics)

    def _build(self) -> GroupShard:
        classic_ids = itertools.count(1)
        consumer_ids = itertools.count(1)
        return GroupShard(0, ShardConfig(self.classic_config, self.config),
                          lambda client: f"{client or 'member'}-{next(classic_ids)}",
                          lambda: mid(f"gen{next(consumer_ids)}"))

    # -- plumbing ---------------------------------------------------------------------------
    def replayed(self) -> MixedGroups:
        """A fresh coordinator that loaded every record written so far (through the bytes)."""
        return mixed(self.replayed_shard())

    def replayed_shard(self) -> GroupShard:
        """A fresh shard that loaded every record written so far (through the bytes), offsets
        included."""
        fresh = self._build()
        fresh.on_topics_changed(
            {n: (self.topic_ids[n], c.partitions) for n, c in
             self.shard.image.by_name.items()}, self.now)
        for record in self.records:
            fresh.replay(codec.decode(*codec.encode(record)))
        return fresh

    def describe(self, group_id: str, version: int = 5) -> DescribedGroup:
        """DescribeGroups of one group, through the shard's door."""
        return self.shard.handle(DescribeGroupRequest(group_id, version), self.now).response

    def describe_consumer(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group, through the shard's door."""
        return self.shard.handle(ConsumerGroupDescribeRequest(group_id), self.now).response

    def group_type(self, group_id: str = "g") -> str | None:
        """"classic", "consumer", or None for an id no group holds."""
        group = self.shard.groups.get(group_id)
        return None if group is None else group.group_type

    def group(self, group_id: str = "g") -> ConsumerGroup:
        return self.coordinator.consumer.groups[group_id]

    def classic_group(self, group_id: str = "g") -> ClassicGroup:
        return self.coordinator.classic.groups[group_id]

    # -- topics -----------------------------------------------------------------------------
    def set_topics(self, topics: dict[str, int]) -> None:
        for name in topics:
            if name not in self.topic_ids:
                self.topic_ids[name] = uuid.uuid5(_NS, f"{name}/{next(self._incarnation)}")
        self.apply(self.shard.on_topics_changed(
            {n: (self.topic_ids[n], c) for n, c in topics.items()}, self.now))

    def tps(self, *names: str) -> frozenset[tuple[uuid.UUID, int]]:
        out = []
        for n in names:
            topic, _, p = n.rpartition("-")
            out.append((self.topic_ids[topic], int(p)))
        return frozenset(out)

    def names(self, partitions: Iterable[tuple[uuid.UUID, int]]) -> set[str]:
        by_id = {v: k for k, v in self.topic_ids.items()}
        return {f"{by_id.get(t, t)}-{p}" for t, p in partitions}

    def wire(self, names: Iterable[str]) -> tuple[TopicPartitions, ...]:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for t, p in self.tps(*names):
            by_topic.setdefault(t, []).append(p)
        return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in by_topic.items())

    # -- consumer-protocol requests ---------------------------------------------------------
    def request(self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
        return self.apply(self.coordinator.consumer_heartbeat(req, self.now))

    def join(self, member_id: str, topics: Iterable[str] = ("foo",), group_id: str = "g",
             instance_id: str | None = None) -> ConsumerHeartbeatResponse:
        return self.request(ConsumerHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=0, instance_id=instance_id,
            rebalance_timeout_ms=30_000, subscribed_topic_names=tuple(topics), owned=(),
            client_id="client", client_host="/127.0.0.1"))

    def heartbeat(self, member_id: str, epoch: int, owned: Iterable[str] | None = None,
                  group_id: str = "g") -> ConsumerHeartbeatResponse:
        return self.request(ConsumerHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch,
            owned=None if owned is None else self.wire(owned)))

    def leave(self, member_id: str, group_id: str = "g",
              instance_id: str | None = None) -> ConsumerHeartbeatResponse:
        return self.request(ConsumerHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=-1, instance_id=instance_id))

    def assigned(self, response: ConsumerHeartbeatResponse) -> set[str] | None:
        if response.assignment is None:
            return None
        return self.names((t.topic_id, p) for t in response.assignment for p in t.partitions)

    # -- classic requests -------------------------------------------------------------------
    def cjoin(self, member_id: str = "", topics: Iterable[str] = ("foo",),
              owned: Iterable[str] = (), protocol: str = "range", group_id: str = "g",
              instance_id: str | None = None, session_ms: int = 10_000,
              rebalance_ms: int = 30_000, protocol_type: str = "consumer",
              version: int = 1, metadata: bytes | None = None,
              protocols: tuple | None = None, require_known: bool = True) -> Any:
        """A JoinGroup; returns its token (the answer, if any, is self.answers[token])."""
        token = next(self._tokens)
        if protocols is None:
            meta = subscription(topics, owned, version) if metadata is None else metadata
            protocols = ((protocol, meta),)
        resp = self.apply(self.coordinator.join_group(JoinGroupRequest(
            group_id=group_id, member_id=member_id, protocol_type=protocol_type,
            protocols=tuple(protocols), session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, group_instance_id=instance_id,
            require_known_member_id=require_known, client_id="classic",
            client_host="/127.0.0.2", token=token), self.now))
        if resp is not None:
            self.answers[token] = resp
        return token

    def cjoin_new(self, **kw: Any) -> tuple[str, Any]:
        """MEMBER_ID_REQUIRED, then join again with the given id: (member id, token)."""
        token = self.cjoin(**kw)
        first = self.answers.get(token)
        if first is not None and first.error == ErrorCode.member_id_required:
            kw["member_id"] = first.member_id
            return first.member_id, self.cjoin(**kw)
        assert first is not None and first.error == ErrorCode.none, first
        return first.member_id, token

    def csync(self, member_id: str, generation: int, assignments: dict | None = None,
              group_id: str = "g", instance_id: str | None = None,
              protocol_name: str | None = None) -> Any:
        token = next(self._tokens)
        resp = self.apply(self.coordinator.sync_group(SyncGroupRequest(
            group_id=group_id, generation_id=generation, member_id=member_id,
            assignments=tuple((assignments or {}).items()), group_instance_id=instance_id,
            protocol_type="consumer", protocol_name=protocol_name, token=token), self.now))
        if resp is not None:
            self.answers[token] = resp
        return token

    def cheartbeat(self, member_id: str, generation: int, group_id: str = "g",
                   instance_id: str | None = None) -> ErrorCode:
        return self.apply(self.coordinator.heartbeat(HeartbeatRequest(
            group_id, generation, member_id, instance_id), self.now))

    def cleave(self, *members: LeavingMember, group_id: str = "g") -> Any:
        return self.apply(self.coordinator.leave_group(LeaveGroupRequest(
            group_id, tuple(members)), self.now))

    def answer(self, token: Any) -> Any:
        return self.answers.get(token)

    def join_answer(self, token: Any) -> JoinGroupResponse:
        answer = self.answers.get(token)
        assert isinstance(answer, JoinGroupResponse), answer
        return answer

    def sync_answer(self, token: Any) -> SyncGroupResponse:
        answer = self.answers.get(token)
        assert isinstance(answer, SyncGroupResponse), answer
        return answer

    @staticmethod
    def partitions(sync: SyncGroupResponse) -> set[str]:
        """The partition names in a SyncGroup answer's assignment bytes."""
        return {f"{t}-{p}" for t, p in decode_assignment(sync.assignment).partitions}

    def sync_round(self, tokens: dict[str, Any], assignor: str = "range",
                   group_id: str = "g") -> tuple[int, dict[str, set[str]]]:
        """Every member's JoinGroup of a classic rebalance has been answered: the leader
        runs `assignor` (coterie's classic leader step), everyone sends SyncGroup. Returns
        the generation and each member's partitions."""
        joins = {m: self.join_answer(t) for m, t in tokens.items()}
        assert all(j.error == ErrorCode.none for j in joins.values()), joins
        generation = next(iter(joins.values())).generation_id
        leader = next(j for j in joins.values() if j.members)
        counts = {n: c.partitions for n, c in self.coordinator.consumer.image.by_name.items()}
        assignments = lead(lookup(assignor), [JoinedMember(m.member_id, m.group_instance_id,
                                                           m.metadata) for m in leader.members],
                           counts)
        sync_tokens = {m: self.csync(m, generation, assignments if m == leader.member_id
                                     else None, group_id=group_id) for m in joins}
        out = {}
        for m, t in sync_tokens.items():
            answer = self.sync_answer(t)
            assert answer.error == ErrorCode.none, answer
            out[m] = self.partitions(answer)
        return generation, out
