"""A group type added as docs/architecture.md's recipe says: one package (here, a toy type
defined in this file) and one registration. The shard then routes its requests, records,
timers and rebuilds to it, and its groups take part in every rule of "any group" (offset
fencing, ListGroups, DeleteGroups, the undo of a failed append) through the `Group`
protocol, with no edit anywhere else; the classic and consumer APIs never take over an id
it holds."""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from coterie.group.config import ShardConfig
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.group import ListedGroup, Refusal
from coterie.group.kind import Handler, ShardContext
from coterie.group.offsets.messages import (
    CommitPartition,
    DeleteGroupRequest,
    OffsetCommitRequest,
)
from coterie.group.records.record import Record
from coterie.group.registry import REGISTERED, Registration
from coterie.group.result import Result, TimerOp
from coterie.group.shard import GroupShard
from coterie.group.timers import TimerKey, TimerKind
from coterie.group.topic_image import TopicImage
from coterie.group.typed_groups import GroupsOf


# == the toy type: its records, timers, group and kind =========================================
@dataclass(frozen=True, slots=True)
class ToyMemberKey:
    group_id: str
    member_id: str


class ToyTimer(TimerKind):
    TOY_SESSION = "toy-session", True


@dataclass(frozen=True, slots=True)
class ToyJoin:
    group_id: str
    member_id: str

    def refused(self, code: ErrorCode) -> ErrorCode:
        return code


@dataclass(frozen=True)
class ToySnapshot:
    protocol: ClassVar[str] = "toy"
    members: frozenset[str]
    generation: int = 0

    @classmethod
    def new_memo(cls, snapshot: Any) -> None:
        return None

    @classmethod
    def derive(cls, *args: Any) -> list[dict]:
        return []


class ToyGroup:
    group_type = "toy"
    changes_without_records = False

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: set[str] = set()

    def has_members(self) -> bool:
        return bool(self.members)

    def listing(self) -> ListedGroup | None:
        return ListedGroup(self.group_id, "toy", "Stable" if self.members else "Empty", "toy")

    def commit_refusal(self, member_id: str, epoch: int, instance_id: str | None,
                       version: int, transactional: bool = False) -> Refusal | None:
        if member_id in self.members or (epoch < 0 and not self.members):
            return None
        return Refusal(ErrorCode.unknown_member_id, "not a toy member")

    def fetch_refusal(self, member_id: str | None, epoch: int) -> Refusal | None:
        return None

    def offset_delete_refusal(self) -> Refusal | None:
        return None

    def subscribed_topics(self) -> set[str]:
        return {"t"} if self.members else set()

    def offsets_expire_from(self) -> int | None:
        return None if self.members else -1

    def deletion(self) -> tuple[ErrorCode, list[Record]]:
        if self.members:
            return ErrorCode.non_empty_group, []
        return ErrorCode.none, []

    def dropped(self, error: ErrorCode) -> list[tuple[Hashable, Any]]:
        return []

    def event_snapshot(self) -> ToySnapshot:
        return ToySnapshot(frozenset(self.members))

    def event_fingerprint(self) -> Hashable:
        return frozenset(self.members)


class ToyKind:
    record_keys = (ToyMemberKey,)
    timer_kinds = (ToyTimer,)

    def __init__(self, ctx: ShardContext) -> None:
        self.registry = ctx.groups
        self.groups: GroupsOf[ToyGroup] = GroupsOf(ctx.groups, ToyGroup)
        self.rebuilt: list[str] = []

    def requests(self) -> Mapping[type, Handler]:
        return {ToyJoin: self.join}

    def join(self, req: ToyJoin, now_ms: int) -> Result:
        if req.group_id in self.groups or req.group_id not in self.registry:
            record = Record(ToyMemberKey(req.group_id, req.member_id), b"member")
            self.replay(record)
            return Result(ErrorCode.none, [record], [TimerOp(TimerKey(
                ToyTimer.TOY_SESSION, req.group_id, req.member_id), now_ms + 1_000)])
        return Result(ErrorCode.inconsistent_group_protocol)

    def replay(self, record: Record) -> None:
        key = record.key
        group = self.groups.get(key.group_id)
        if record.value is None:
            if group is not None:
                group.members.discard(key.member_id)
            return
        if group is None:
            group = self.groups[key.group_id] = ToyGroup(key.group_id)
        group.members.add(key.member_id)

    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        record = Record(ToyMemberKey(key.group_id, key.member_id), None)
        self.replay(record)
        return Result(records=[record])

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        return [TimerOp(TimerKey(ToyTimer.TOY_SESSION, g.group_id, m), now_ms + 1_000)
                for g in self.groups.values() for m in g.members]

    def after_rebuild(self, group_id: str, failed: list[Record], now_ms: int) -> Result:
        self.rebuilt.append(group_id)
        return Result()

    def on_topics(self, previous: TopicImage, now_ms: int) -> Result:
        return Result()

    def set_group_config(self, group_id: str, config: Mapping[str, Any]) -> None:
        pass


WITH_TOYS = (*REGISTERED, Registration("toy groups", ToyKind, ()))


def shard() -> GroupShard:
    return GroupShard(0, ShardConfig(ClassicConfig(initial_rebalance_delay_ms=0),
                                     ConsumerGroupConfig()),
                      lambda c: "classic-1", lambda: "c" * 22, registrations=WITH_TOYS)


def toy(s: GroupShard) -> ToyKind:
    (kind,) = [k for k in s.kinds if isinstance(k, ToyKind)]
    return kind


# == the tests ==================================================================================
def test_a_registered_type_gets_its_requests_records_and_timers():
    s = shard()
    s.on_topics_changed({"t": (uuid.UUID(int=3), 2)}, 0)
    result = s.handle(ToyJoin("toys", "m1"), 0)
    assert result.response == ErrorCode.none and [r.key for r in result.records] == [
        ToyMemberKey("toys", "m1")]
    s.committed(result.records)
    assert s.groups["toys"].group_type == "toy"
    # Its timer comes back to it through the shard.
    fired = s.on_timer(result.timers[0].key, 1_000)
    assert fired.records == [Record(ToyMemberKey("toys", "m1"), None)]
    assert not s.groups["toys"].members
    # Its records replay into a fresh shard (loading) through the same door.
    fresh = GroupShard(0, s.config, lambda c: "x", lambda: "y", registrations=WITH_TOYS)
    for record in result.records:
        fresh.replay(record)
    assert fresh.groups["toys"].members == {"m1"}
    assert [op.key for op in fresh.timers_after_load(0)] == [
        TimerKey(ToyTimer.TOY_SESSION, "toys", "m1")]


def test_the_rules_of_any_group_apply_to_it():
    s = shard()
    s.on_topics_changed({"t": (uuid.UUID(int=3), 2)}, 0)
    s.committed(s.handle(ToyJoin("toys", "m1"), 0).records)
    commit = OffsetCommitRequest("toys", "stranger", 1, (CommitPartition("t", 0, 5),))
    assert s.handle(commit, 0).response.codes == (ErrorCode.unknown_member_id,)
    ok = OffsetCommitRequest("toys", "m1", 1, (CommitPartition("t", 0, 5),))
    assert s.handle(ok, 0).response.codes == (ErrorCode.none,)
    assert [(g.group_id, g.state, g.group_type) for g in s.list_groups(types=["toy"])] == [
        ("toys", "Stable", "toy")]
    assert s.handle(DeleteGroupRequest("toys"), 0).response == ErrorCode.non_empty_group


def test_a_failed_append_rebuilds_it_and_its_kind_rederives():
    s = shard()
    s.committed(s.handle(ToyJoin("toys", "m1"), 0).records)
    failed = s.handle(ToyJoin("toys", "m2"), 0)
    assert s.groups["toys"].members == {"m1", "m2"}  # applied at once
    revert = s.revert("toys", failed.records, 0)
    assert revert.rebuilt and s.groups["toys"].members == {"m1"}
    assert toy(s).rebuilt == ["toys"]


def test_the_classic_and_consumer_apis_never_take_over_its_ids():
    s = shard()
    s.committed(s.handle(ToyJoin("toys", "m1"), 0).records)
    join = JoinGroupRequest("toys", "", "consumer", (("range", b""),), 10_000, 10_000)
    assert s.handle(join, 0).response.error == ErrorCode.inconsistent_group_protocol
    assert s.handle(SyncGroupRequest("toys", 1, "m1"), 0).response.error == (
        ErrorCode.unknown_member_id)
    assert s.handle(HeartbeatRequest("toys", 1, "m1"), 0).response == (
        ErrorCode.unknown_member_id)
    assert s.handle(LeaveGroupRequest("toys", (LeavingMember("m1"),)), 0).response.members[
        0][1] == ErrorCode.unknown_member_id
    beat = ConsumerHeartbeatRequest(group_id="toys", member_id="c" * 22, member_epoch=0,
                                    rebalance_timeout_ms=30_000,
                                    subscribed_topic_names=("t",), owned=())
    answer = s.handle(beat, 0).response
    assert answer.error == ErrorCode.group_id_not_found
    assert answer.error_message == "Group toys is not a consumer group."
    assert isinstance(s.groups["toys"], ToyGroup) and s.groups["toys"].members == {"m1"}
