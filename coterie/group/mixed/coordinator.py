"""One coordinator shard's groups, classic and consumer (KIP-848), mixed groups included.

Why a facade. A group id names one group, of one type at a time, but the two protocols'
requests can reach either type: a classic consumer sends JoinGroup to a consumer group in
the middle of an online upgrade, a new consumer sends ConsumerGroupHeartbeat to a classic
group and so starts one. This class owns the `ClassicGroups` and the
`ConsumerCoordinator` of a shard, routes every group request to the group that holds the id,
and converts a group from one type to the other when Apache Kafka 4.x would (seed 3; the
record order is in `mixed/conversion.py`, the classic members' handlers in
`mixed/classic_members.py`). It is pure like the cores: requests and `now_ms` in, `Result` out.

Routing:
- JoinGroup: checked like any JoinGroup first (group id, session timeout bounds, metadata
  size). A consumer group with members takes the member in as a classic member; an *empty*
  consumer group is deleted (tombstones first) and a classic group is created, as in Kafka.
  Otherwise the classic core.
- SyncGroup, Heartbeat, LeaveGroup: the consumer group's classic-member handlers if the id is
  a consumer group, else the classic core.
- ConsumerGroupHeartbeat: checked on its face first (`ConsumerCoordinator.check`). For an id
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

Timers are routed by the kind of their key (`coterie.group.timers`): SESSION, JOIN, SYNC,
PENDING are the classic core's; CONSUMER_SESSION, CONSUMER_REVOCATION,
CONSUMER_CLIENT_ASSIGNMENT, CONSUMER_REGEX the consumer core's; CONSUMER_JOIN, CONSUMER_SYNC
the classic members of consumer groups'.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

from kio.schema.errors import ErrorCode

from coterie.group.classic.groups import ClassicGroups
from coterie.group.classic.membership import ClassicState
from coterie.group.classic.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from coterie.group.consumer.client_assignment import (
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
)
from coterie.group.consumer.coordinator import ConsumerCoordinator
from coterie.group.consumer.group import ConsumerGroupState
from coterie.group.consumer.member import JOIN_EPOCH
from coterie.group.consumer.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from coterie.group.group import Group
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
from coterie.group.timers import TimerKey, TimerKind
from coterie.group.topic_image import TopicImage, TopicInfo
from coterie.wire.consumer_protocol import PROTOCOL_TYPE

UPGRADE_POLICIES = frozenset({"bidirectional", "upgrade"})
DOWNGRADE_POLICIES = frozenset({"bidirectional", "downgrade"})
CONSUMER_TIMERS = frozenset({TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REVOCATION,
                             TimerKind.CONSUMER_CLIENT_ASSIGNMENT, TimerKind.CONSUMER_REGEX})
CLASSIC_MEMBER_TIMERS = frozenset({TimerKind.CONSUMER_JOIN, TimerKind.CONSUMER_SYNC})


class GroupCoordinator:
    """Classic and consumer groups of one coordinator shard (module docstring)."""

    def __init__(self, classic: ClassicGroups, consumer: ConsumerCoordinator) -> None:
        self.classic = classic
        self.consumer = consumer
        self.classic_members = ClassicMembers(consumer)

    @property
    def migration_policy(self) -> str:
        return self.consumer.config.migration_policy

    def group(self, group_id: str) -> Group | None:
        """The group holding `group_id`, of either type."""
        group: Group | None = self.consumer.groups.get(group_id)
        return group if group is not None else self.classic.groups.get(group_id)

    def groups(self) -> Iterator[Group]:
        """Every group, classic ones first."""
        yield from self.classic.groups.values()
        yield from self.consumer.groups.values()

    def group_type(self, group_id: str) -> str | None:
        """"consumer", "classic", or None for an id no group holds."""
        if group_id in self.consumer.groups:
            return "consumer"
        if group_id in self.classic.groups:
            return "classic"
        return None

    # == loading ==============================================================================
    def replay(self, record: Record) -> None:
        """Apply one group record (classic or consumer) to the core that owns it; offset
        commits are not groups' and are ignored here."""
        if isinstance(record.key, GroupMetadataKey):
            self.classic.replay(record)
        elif isinstance(record.key, CONSUMER_RECORD_KEY_TYPES):
            self.consumer.replay(record)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        return self.classic.timers_after_load(now_ms) + self.consumer.timers_after_load(now_ms)

    # == JoinGroup / SyncGroup / Heartbeat / LeaveGroup =======================================
    def join_group(self, req: JoinGroupRequest, now_ms: int) -> Result:
        refusal = self.classic.validate_join(req)
        if refusal is not None:
            return Result(refusal)
        gid = req.group_id
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
        _, tombstones = self.consumer.delete_group(gid)
        result = self.classic.join_group(req, now_ms)
        result.records[:0] = tombstones
        result.timers[:0] = self.classic_members.forget_group(gid)
        return result

    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> Result:
        if req.group_id in self.consumer.groups:
            return self.classic_members.sync(req, now_ms)
        return self.classic.sync_group(req, now_ms)

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Result:
        if req.group_id in self.consumer.groups:
            return self.classic_members.heartbeat(req, now_ms)
        return self.classic.heartbeat(req, now_ms)

    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> Result:
        if req.group_id in self.consumer.groups:
            result = self.classic_members.leave(req, now_ms)
            return self._maybe_downgrade(req.group_id, result, now_ms)
        return self.classic.leave_group(req, now_ms)

    # == ConsumerGroupHeartbeat ===============================================================
    def consumer_settled_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                   client_id: str, client_host: str,
                                   now_ms: int) -> Result | None:
        """A ConsumerGroupHeartbeat that sets no field, from a settled member of a consumer
        group: its answer, or None to send the request through `consumer_heartbeat`
        (`ConsumerCoordinator.settled_heartbeat`)."""
        return self.consumer.settled_heartbeat(group_id, member_id, member_epoch, client_id,
                                               client_host, now_ms)

    def consumer_heartbeat(self, req: ConsumerHeartbeatRequest, now_ms: int) -> Result:
        invalid = self.consumer.check(req)
        if invalid is not None:
            return Result(invalid)
        gid = req.group_id
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
            # The join is refused: nothing changes, the classic group stays as it was.
            self.consumer.groups.pop(gid, None)
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
        if req.group_id in self.classic.groups:
            return Result(PrepareAssignmentResponse(
                ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group."))
        return self.consumer.prepare_assignment(req, now_ms)

    def install_assignment(self, req: InstallAssignmentRequest, now_ms: int) -> Result:
        if req.group_id in self.classic.groups:
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

    # == timers and topics ====================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        kind, group_id = key.kind, key.group_id
        if kind in CONSUMER_TIMERS:
            return self._maybe_downgrade(group_id, self.consumer.on_timer(key, now_ms), now_ms)
        if kind in CLASSIC_MEMBER_TIMERS:
            result = self.classic_members.on_timer(key, now_ms)
            return self._maybe_downgrade(group_id, result, now_ms)
        return self.classic.on_timer(key, now_ms)

    def on_metadata_change(self, topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo]
                           | TopicImage,
                           now_ms: int, version: int | None = None) -> Result:
        return self.consumer.on_metadata_change(topics, now_ms, version)

    # == admin ================================================================================
    def delete_group(self, group_id: str, now_ms: int) -> tuple[ErrorCode, list[Record]]:
        if group_id in self.consumer.groups:
            return self.consumer.delete_group(group_id)
        return self.classic.delete_group(group_id, now_ms)


def _not_found(message: str) -> Result:
    return Result(ConsumerHeartbeatResponse(ErrorCode.group_id_not_found, message))

