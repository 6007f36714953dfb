"""The classic and consumer (KIP-848) group types of a shard, mixed groups included.

Why one kind for two types. A group id names one group, of one type at a time, but the two
protocols' requests can reach either type: a classic consumer sends JoinGroup to a consumer
group in the middle of an online upgrade, a new consumer sends ConsumerGroupHeartbeat to a
classic group and so starts one. `MixedGroups` is the `GroupKind` (`coterie.group.kind`)
registered for both types: it owns the `ClassicGroups` and the `ConsumerGroups` of a shard
(both seeing the shard's one registry of groups), routes every request of their APIs to the
group that holds the id, and converts a group from one type to the other when Apache Kafka
4.x would (seed 3; the record order is in `mixed/conversion.py`, the classic members'
handlers in `mixed/classic_members.py`). It is pure like the cores: requests and `now_ms`
in, `Result` out.

Routing:
- JoinGroup: checked like any JoinGroup first (group id, session timeout bounds, metadata
  size). A consumer group with members takes the member in as a classic member; an *empty*
  consumer group is deleted (tombstones first) and a classic group is created, as in Kafka.
  Otherwise the classic core.
- SyncGroup, Heartbeat, LeaveGroup: the consumer group's classic-member handlers if the id is
  a consumer group, else the classic core.
- ConsumerGroupHeartbeat: checked on its face first (`ConsumerGroups.check`). For an id
  held by a classic group, anything but a join (epoch 0) is GROUP_ID_NOT_FOUND "Group <id> is
  not a consumer group."; a join into an *empty* classic group deletes it and creates a
  consumer group (whatever the migration policy); a join into a classic group with members
  is the online upgrade: refused with GROUP_ID_NOT_FOUND (Kafka's messages) when the policy
  forbids upgrades, the group's protocol type is not "consumer", it has more members than
  group.consumer.max.size, or its embedded protocol cannot be converted; otherwise the group
  is converted (`upgrade_records`) and the join proceeds in the consumer group. If the join
  itself is refused, nothing is kept: the classic group is put back as it was.
  Parked JoinGroup / SyncGroup requests of the converted group are answered
  REBALANCE_IN_PROGRESS, so those members rejoin, into the consumer group.
- Downgrade: after any step that removed a member from a consumer group (a leave of either
  protocol, a session, revocation, join or sync timeout, a classic static member replacing
  the last consumer-protocol one), if members remain and every one of them speaks the
  classic protocol, the policy allows downgrades and they fit in group.max.size, the group
  becomes a classic group (`downgrade_records`); unless it was STABLE (everyone at the
  target), a rebalance starts at once.
- ConsumerGroupPrepareAssignment / ConsumerGroupInstallAssignment (coterie extensions for
  client-side assignors, `consumer/client_assignment.py`): the consumer core; an id held
  by a classic group is GROUP_ID_NOT_FOUND "Group <id> is not a consumer group.".
- An id held by a group of another type (a kind registered beside this one) is never taken
  over, with one exception of Kafka 4.2's: a new member's JoinGroup replaces an *empty*
  streams group by a classic group. Otherwise JoinGroup answers INCONSISTENT_GROUP_PROTOCOL
  (UNKNOWN_MEMBER_ID for a member id into an empty streams group), SyncGroup, Heartbeat
  and LeaveGroup UNKNOWN_MEMBER_ID (as for an unknown group), ConsumerGroupHeartbeat and
  the assignor extension GROUP_ID_NOT_FOUND "Group <id> is not a consumer group.".
- DescribeGroups describes classic groups only (Kafka 4.x): a group of any other type is
  Dead before v6, GROUP_ID_NOT_FOUND "not a classic group" from v6; an id with only
  committed offsets is an Empty classic group. ConsumerGroupDescribe: a group of any other
  type, or an id with only committed offsets, is "not a consumer group".

Timers are routed by the kind of their key (`coterie.group.timers`): `ClassicTimer`s are the
classic core's; of the `ConsumerTimer`s, CONSUMER_JOIN and CONSUMER_SYNC are the classic
members' of consumer groups, the others the consumer core's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.common.limits import shown
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.groups import ClassicGroups
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicState
from coterie.group.classic.messages import (
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribeGroupRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coterie.group.consumer.client_assignment import (
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
)
from coterie.group.consumer.group import ConsumerGroup, ConsumerGroupState
from coterie.group.consumer.groups import ConsumerGroups
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.member import JOIN_EPOCH
from coterie.group.consumer.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
    SettledHeartbeat,
)
from coterie.group.kind import Handler, ShardContext
from coterie.group.mixed.classic_members import ClassicMembers
from coterie.group.mixed.conversion import (
    ConversionRefused,
    downgrade_records,
    upgrade_records,
)
from coterie.group.records.classic import GroupMetadataKey
from coterie.group.records.consumer import (
    CONSUMER_RECORD_KEY_TYPES,
    ConsumerGroupMemberMetadataKey,
)
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey
from coterie.group.topic_image import TopicImage
from coterie.wire.consumer_protocol import PROTOCOL_TYPE

UPGRADE_POLICIES = frozenset({"bidirectional", "upgrade"})
DOWNGRADE_POLICIES = frozenset({"bidirectional", "downgrade"})
# Group types of other kinds whose empty groups a classic JoinGroup replaces (Kafka 4.2's
# classicGroupJoin deletes an empty streams group; a share group is never replaced).
REPLACEABLE_WHEN_EMPTY = frozenset({"streams"})
CLASSIC_MEMBER_TIMERS = frozenset({ConsumerTimer.CONSUMER_JOIN, ConsumerTimer.CONSUMER_SYNC})
# A group's own settings (the GROUP config resource) that consumer groups read.
SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"


class MixedGroups:
    """Classic and consumer groups of one shard (module docstring): a `GroupKind`."""

    record_keys = (GroupMetadataKey, *CONSUMER_RECORD_KEY_TYPES)
    timer_kinds = (ClassicTimer, ConsumerTimer)

    def __init__(self, ctx: ShardContext) -> None:
        self._ctx = ctx
        config = ctx.config
        self.classic = ClassicGroups(config.classic, ctx.new_member_id, ctx.groups)
        self.consumer = ConsumerGroups(
            config.consumer, ctx.new_consumer_member_id, ctx.groups, ctx.topics,
            client_assignment_timeout_ms=config.client_assignment_timeout_ms,
            topic_access=config.topic_access)
        self.classic_members = ClassicMembers(self.consumer)

    @property
    def migration_policy(self) -> str:
        return self.consumer.config.migration_policy

    def requests(self) -> Mapping[type, Handler]:
        return {
            JoinGroupRequest: self.join_group,
            SyncGroupRequest: self.sync_group,
            HeartbeatRequest: self.heartbeat,
            LeaveGroupRequest: self.leave_group,
            ConsumerHeartbeatRequest: self.consumer_heartbeat,
            # Straight to the consumer core (the broker's hottest path): it sends any id
            # that is not a settled consumer group's down the general path.
            SettledHeartbeat: self.consumer.settled_heartbeat,
            PrepareAssignmentRequest: self.prepare_assignment,
            InstallAssignmentRequest: self.install_assignment,
            DescribeGroupRequest: self.describe_group,
            ConsumerGroupDescribeRequest: self.describe_consumer_group,
        }

    # == records, loading, rebuilding =========================================================
    def replay(self, record: Record) -> None:
        """Apply one group record (classic or consumer) to the core that owns it."""
        if isinstance(record.key, GroupMetadataKey):
            self.classic.replay(record)
        else:
            self.consumer.replay(record)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        return self.classic.timers_after_load(now_ms) + self.consumer.timers_after_load(now_ms)

    def after_rebuild(self, group_id: str, failed: list[Record], now_ms: int) -> Result:
        group = self._ctx.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            return self.classic.after_rebuild(group_id, failed, now_ms)
        if isinstance(group, ConsumerGroup):
            return self.consumer.after_rebuild(group_id, now_ms)
        return Result()

    def on_topics(self, previous: TopicImage, now_ms: int) -> Result:
        return self.consumer.on_topics(previous, now_ms)

    def set_group_config(self, group_id: str, config: Mapping[str, Any]) -> None:
        self.consumer.set_group_config(group_id, config.get(SESSION_TIMEOUT),
                                       config.get(HEARTBEAT_INTERVAL))

    # == JoinGroup / SyncGroup / Heartbeat / LeaveGroup =======================================
    def _foreign(self, group_id: str) -> bool:
        """Whether the id is held by a group of a type this kind does not serve (it must
        not create a second group under that id)."""
        group = self._ctx.groups.get(group_id)
        return group is not None and not isinstance(group, (ClassicGroup, ConsumerGroup))

    def join_group(self, req: JoinGroupRequest, now_ms: int) -> Result:
        refusal = self.classic.validate_join(req)
        if refusal is not None:
            return Result(refusal)
        gid = req.group_id
        if self._foreign(gid):
            return self._join_foreign(req, now_ms)
        group = self.consumer.groups.get(gid)
        if group is None:
            return self.classic.join_group(req, now_ms)
        if group.members:
            result = self.classic_members.join(req, now_ms)
            return self._maybe_downgrade(gid, result, now_ms)
        # An empty consumer group gives way to the classic group this join creates.
        if req.member_id != UNKNOWN_MEMBER_ID:
            return Result(JoinGroupResponse(ErrorCode.unknown_member_id,
                                            member_id=req.member_id))
        if not req.protocol_type or not req.protocols:
            return Result(JoinGroupResponse(ErrorCode.inconsistent_group_protocol,
                                            member_id=req.member_id))
        forgotten = self.classic_members.forget_group(gid)
        self.consumer.forget_round(gid)  # (its timer, if any, finds no round)
        _, tombstones = group.deletion()
        for record in tombstones:
            self.replay(record)
        result = self.classic.join_group(req, now_ms)
        result.records[:0] = tombstones
        result.timers[:0] = forgotten
        return result

    def _join_foreign(self, req: JoinGroupRequest, now_ms: int) -> Result:
        """A JoinGroup for an id held by a group of another type (Kafka 4.2): an *empty*
        streams group gives way to the classic group a new member's join creates (its
        tombstones first; a join naming a member id is UNKNOWN_MEMBER_ID); any other is
        INCONSISTENT_GROUP_PROTOCOL. The foreign group is taken out of the registry here,
        which is what replaying its tombstones does (an empty group keeps nothing else)."""
        gid = req.group_id
        group = self._ctx.groups[gid]
        if group.group_type not in REPLACEABLE_WHEN_EMPTY or group.has_members():
            return Result(JoinGroupResponse(ErrorCode.inconsistent_group_protocol,
                                            member_id=req.member_id))
        if req.member_id != UNKNOWN_MEMBER_ID:
            return Result(JoinGroupResponse(ErrorCode.unknown_member_id,
                                            member_id=req.member_id))
        code, tombstones = group.deletion()
        if code != ErrorCode.none:
            return Result(JoinGroupResponse(ErrorCode.inconsistent_group_protocol,
                                            member_id=req.member_id))
        del self._ctx.groups[gid]
        result = self.classic.join_group(req, now_ms)
        result.records[:0] = tombstones
        return result

    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> Result:
        if self._foreign(req.group_id):
            return Result(SyncGroupResponse(ErrorCode.unknown_member_id))
        if req.group_id in self.consumer.groups:
            return self.classic_members.sync(req, now_ms)
        return self.classic.sync_group(req, now_ms)

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Result:
        if self._foreign(req.group_id):
            return Result(ErrorCode.unknown_member_id)
        if req.group_id in self.consumer.groups:
            return self.classic_members.heartbeat(req, now_ms)
        return self.classic.heartbeat(req, now_ms)

    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> Result:
        if self._foreign(req.group_id):
            return Result(LeaveGroupResponse(ErrorCode.unknown_member_id, tuple(
                (m, ErrorCode.unknown_member_id) for m in req.members)))
        if req.group_id in self.consumer.groups:
            result = self.classic_members.leave(req, now_ms)
            return self._maybe_downgrade(req.group_id, result, now_ms)
        return self.classic.leave_group(req, now_ms)

    # == ConsumerGroupHeartbeat ===============================================================
    def consumer_heartbeat(self, req: ConsumerHeartbeatRequest, now_ms: int) -> Result:
        invalid = self.consumer.check(req)
        if invalid is not None:
            return Result(invalid)
        gid = req.group_id
        if self._foreign(gid):
            return _not_found(f"Group {gid} is not a consumer group.")
        classic_group = self.classic.groups.get(gid)
        if classic_group is None:
            result = self.consumer.heartbeat(req, now_ms, validated=True)
            return self._maybe_downgrade(gid, result, now_ms)
        if req.member_epoch != JOIN_EPOCH:
            return _not_found(f"Group {gid} is not a consumer group.")
        if classic_group.is_(ClassicState.EMPTY):
            conversion = [Record(GroupMetadataKey(gid), None)]
        else:
            refusal = self._upgrade_refusal(gid)
            if refusal is not None:
                return _not_found(refusal)
            try:
                conversion = upgrade_records(classic_group, self.consumer.image)
            except ConversionRefused as exc:
                return _not_found(str(exc))
        for record in conversion:
            self.replay(record)
        result = self.consumer.heartbeat(req, now_ms, validated=True)
        response = result.response
        if response is None or response.error != ErrorCode.none:
            # The join is refused: the conversion was only its premise, and goes with it
            # (its records are in no result): the classic group, untouched by it, takes
            # the id back.
            self.classic.groups[gid] = classic_group
            return result
        handed = self.classic.hand_over(classic_group)
        converted = self.consumer.groups[gid]
        sessions = [self.consumer.session_timer(gid, mid, now_ms, converted.members[mid])
                    for mid in classic_group.members if mid in converted.members]
        # Ours go first: the join's own timers (a replaced member's cancels) come after.
        result.records[:0] = conversion
        result.timers[:0] = handed.timers + sessions
        result.completed[:0] = handed.completed
        return result

    # == client-side assignors (coterie extension) =============================================
    def prepare_assignment(self, req: PrepareAssignmentRequest, now_ms: int) -> Result:
        if req.group_id in self._ctx.groups and req.group_id not in self.consumer.groups:
            return Result(PrepareAssignmentResponse(
                ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group."))
        return self.consumer.prepare_assignment(req, now_ms)

    def install_assignment(self, req: InstallAssignmentRequest, now_ms: int) -> Result:
        if req.group_id in self._ctx.groups and req.group_id not in self.consumer.groups:
            return Result(InstallAssignmentResponse(
                ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group."))
        return self.consumer.install_assignment(req, now_ms)

    def _upgrade_refusal(self, group_id: str) -> str | None:
        """Why the classic group with members under `group_id` cannot be upgraded (Kafka
        4.2's words), or None."""
        group = self.classic.groups[group_id]
        prefix = f"Cannot upgrade classic group {group_id} to consumer group because"
        if self.migration_policy not in UPGRADE_POLICIES:
            return f"{prefix} online upgrade is disabled."
        if group.protocol_type != PROTOCOL_TYPE:
            return f"{prefix} the group does not use the consumer embedded protocol."
        if len(group.members) > self.consumer.config.max_size:
            return f"{prefix} the group size exceeds the consumer group maximum size."
        return None

    # == downgrade ============================================================================
    def _maybe_downgrade(self, group_id: str, result: Result, now_ms: int) -> Result:
        """After `result` removed members of consumer group `group_id`: convert it to a
        classic group if only classic members remain (module docstring)."""
        if not any(isinstance(r.key, ConsumerGroupMemberMetadataKey) and r.value is None
                   and r.key.group_id == group_id for r in result.records):
            return result  # nobody left or was replaced in this step
        self.classic_members.prune(group_id)
        group = self.consumer.groups.get(group_id)
        if group is None or not group.members:
            return result
        if group.num_classic_members() != len(group.members):
            return result
        if self.migration_policy not in DOWNGRADE_POLICIES:
            return result
        if len(group.members) > self.classic.config.max_size:
            return result
        try:
            records = downgrade_records(group, self.consumer.image, now_ms)
        except ConversionRefused:
            return result
        stable = group.state() is ConsumerGroupState.STABLE
        timers: list[TimerOp] = []
        for member in group.members.values():
            timers += self.consumer.cancel_timers(group_id, member)
        timers += self.classic_members.forget_group(group_id)
        timers += self.consumer.forget_round(group_id)
        for record in records:
            self.replay(record)
        adopted = self.classic.adopt(group_id, now_ms, rebalance=not stable,
                                     why=f"downgrade of {group_id} from consumer to classic")
        result.records += records
        result.timers += timers + adopted.timers
        result.completed += adopted.completed
        return result

    # == timers =============================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        kind, group_id = key.kind, key.group_id
        if isinstance(kind, ClassicTimer):
            return self.classic.on_timer(key, now_ms)
        if kind in CLASSIC_MEMBER_TIMERS:
            result = self.classic_members.on_timer(key, now_ms)
        else:
            result = self.consumer.on_timer(key, now_ms)
        return self._maybe_downgrade(group_id, result, now_ms)

    # == describe =============================================================================
    def describe_group(self, req: DescribeGroupRequest, now_ms: int) -> Result:
        """DescribeGroups (module docstring)."""
        gid, version = req.group_id, req.version
        if not gid:
            return Result(DescribedGroup(ErrorCode.invalid_group_id, gid, "", "", ""))
        group = self._ctx.groups.get(gid)
        if group is not None and not isinstance(group, ClassicGroup):
            if version >= 6:
                return Result(DescribedGroup(
                    ErrorCode.group_id_not_found, gid, "Dead", "", "",
                    error_message=f"Group {shown(gid)} is not a classic group."))
            return Result(DescribedGroup(ErrorCode.none, gid, "Dead", "", ""))
        described = self.classic.describe(gid)
        if described.state != "Dead":
            return Result(described)
        if self._ctx.offsets.has_offsets(gid):
            return Result(DescribedGroup(described.error, gid, "Empty",
                                         described.protocol_type, described.protocol,
                                         described.members))
        if version >= 6:
            return Result(DescribedGroup(ErrorCode.group_id_not_found, gid, "Dead", "", "",
                                         error_message=f"Group {shown(gid)} not found."))
        return Result(described)

    def describe_consumer_group(self, req: ConsumerGroupDescribeRequest,
                                now_ms: int) -> Result:
        """ConsumerGroupDescribe (module docstring)."""
        gid = req.group_id
        if not gid:
            return Result(DescribedConsumerGroup(ErrorCode.invalid_group_id, gid))
        if gid not in self.consumer.groups and (
                gid in self._ctx.groups or self._ctx.offsets.has_offsets(gid)):
            return Result(DescribedConsumerGroup(
                ErrorCode.group_id_not_found, gid, f"Group {gid} is not a consumer group."))
        return Result(self.consumer.describe([gid])[0])


def _not_found(message: str) -> Result:
    return Result(ConsumerHeartbeatResponse(ErrorCode.group_id_not_found, message))
