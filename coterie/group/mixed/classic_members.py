"""Classic-protocol members living inside a KIP-848 consumer group (mixed groups, seed 3).

Why this exists. During an online upgrade (or a rolling downgrade) a consumer group holds
members of both protocols: consumers speaking ConsumerGroupHeartbeat and consumers still
speaking JoinGroup / SyncGroup / Heartbeat / LeaveGroup. The coordinator drives both kinds
with the *same* epochs, target assignment and revoke-before-assign reconciliation; for a
classic member the generation id is its member epoch and "rejoin" is how it reconciles.

Theory of operation (Apache Kafka 4.x's behaviour, restated):

- JoinGroup runs a heartbeat's steps 3 to 5 (`ConsumerGroups.update_member`): the
  member's subscription is decoded from its first protocol's metadata (topic names, rack,
  and the partitions it owns: KIP-429 cooperative members list them, eager members revoke
  everything before they rejoin and list none), the group epoch is bumped if the
  subscription changed, the target is recomputed if the group epoch is ahead of it, and
  the member is reconciled. The answer comes at once (nothing parks): generation = the
  member's epoch after reconciling, protocol = the member's first protocol, no leader and no
  member list (the member is a follower, its assignment comes from the coordinator).
  A dynamic member without an id gets MEMBER_ID_REQUIRED with a fresh id (JoinGroup v4+);
  nothing is kept for it until it comes back with that id.
- SyncGroup answers the partitions the member may use now (`assigned`, never the ones still
  held by others or being revoked), encoded as a consumer-protocol Assignment in the version
  of the member's subscription. If the group epoch moved past the member meanwhile (and the
  member is not in the middle of revoking), REBALANCE_IN_PROGRESS: rejoin first.
- Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch is
  ahead of its epoch, or it has partitions to revoke, or the partitions it was waiting for
  have all been released. Otherwise NONE.
- LeaveGroup removes the named members (any member of the group, as an admin removal may
  name consumer-protocol members too) and bumps the group epoch once.

Timers (`coterie.group.timers`), besides the session timer (the member's own JoinGroup
session timeout, under the consumer core's CONSUMER_SESSION (group, member) key):
- CONSUMER_JOIN (group, member): armed when the member is told REBALANCE_IN_PROGRESS and
  no join timer is armed yet; if it has not sent JoinGroup within its rebalance timeout it
  is fenced. (Classic members have no revocation timer: this is it.)
- CONSUMER_SYNC (group, member): armed by JoinGroup; no SyncGroup within the rebalance
  timeout fences the member. While it is armed the member is what seed 3 calls
  "CompletingRebalance"; after its SyncGroup it is "Stable".
Both are live-only, like Kafka's: after a restart only session timers are armed again.

Where this differs from Kafka 4.2 (docs/decisions.md "Mixed groups"): a join whose protocols
must be shared with the *other* classic members (Kafka counts the joining member's previous
protocols too); a known member id under an instance id held by another member is
FENCED_INSTANCE_ID (Kafka replaces the other member); an undecodable subscription is
INCONSISTENT_GROUP_PROTOCOL (Kafka: UNKNOWN_SERVER_ERROR).
"""

from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from coterie.common.shared_table import shared_str
from coterie.group.classic.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.groups import ConsumerGroups
from coterie.group.consumer.heartbeat_request import Refused
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.member import ConsumerMember, MemberState, shared_names
from coterie.group.mixed.conversion import by_id, by_name
from coterie.group.records.consumer import ClassicMemberMetadata
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey, TimerKind
from coterie.wire.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_subscription,
    encode_assignment,
)


class ClassicMembers:
    """The classic-protocol requests of members of consumer groups (module docstring)."""

    def __init__(self, core: ConsumerGroups) -> None:
        self.core = core

    # == queries =============================================================================
    def awaiting_sync(self, group_id: str, member_id: str) -> bool:
        """Whether the member has joined but not yet collected its assignment (seed 3's
        "CompletingRebalance" for a classic member)."""
        group = self.core.groups.get(group_id)
        return group is not None and member_id in (group.classic_sync_deadlines or ())

    def supports(self, group: ConsumerGroup, protocol_type: str,
                 protocols: tuple[tuple[str, bytes], ...], member_id: str) -> bool:
        """Can a classic member with these protocols be in the group: protocol type
        "consumer", and one protocol every *other* classic member supports too."""
        if protocol_type != PROTOCOL_TYPE or not protocols:
            return False
        others = [set(name for name, _ in m.classic.supported_protocols)
                  for m in group.members.values()
                  if m.classic is not None and m.member_id != member_id]
        return any(all(name in names for names in others) for name, _ in protocols)

    # == JoinGroup ===========================================================================
    def join(self, req: JoinGroupRequest, now_ms: int) -> Result:
        group = self.core.groups.get(req.group_id)
        if group is None:
            return Result(JoinGroupResponse(ErrorCode.unknown_member_id, member_id=req.member_id))
        try:
            return self._join(group, req, now_ms)
        except Refused as refused:
            return Result(JoinGroupResponse(refused.code, member_id=req.member_id))

    def _join(self, group: ConsumerGroup, req: JoinGroupRequest, now_ms: int) -> Result:
        core = self.core
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        member_id = core.new_member_id() if unknown else req.member_id
        if len(group.members) >= core.config.max_size and member_id not in group.members:
            raise Refused(ErrorCode.group_max_size_reached,
                          "The consumer group has reached its maximum capacity of "
                          f"{core.config.max_size} members.")
        if not self.supports(group, req.protocol_type, req.protocols, member_id):
            raise Refused(ErrorCode.inconsistent_group_protocol,
                          f"Member {member_id}'s protocols are not supported.")
        if unknown and req.group_instance_id is None and req.require_known_member_id:
            # KIP-394: the member comes back with this id; nothing is kept until it does.
            return Result(JoinGroupResponse(ErrorCode.member_id_required, member_id=member_id))
        try:
            sub = decode_subscription(req.protocols[0][1])
        except ConsumerProtocolError as exc:
            raise Refused(ErrorCode.inconsistent_group_protocol,
                          f"Member {member_id}'s subscription is malformed: {exc}") from None
        member, replaced = self._member_for_join(group, member_id, req, unknown)
        updated = replace(
            member,
            instance_id=req.group_instance_id if req.group_instance_id is not None
            else member.instance_id,
            rack_id=shared_str(sub.rack_id) if sub.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=shared_names(sub.topics),
            subscribed_topic_regex=None,  # classic members cannot subscribe with a regex
            client_id=shared_str(req.client_id),
            client_host=shared_str(req.client_host),
            classic=ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols)),
        )
        owned = by_id(sub.owned_partitions, core.image)
        reconciled, records, timers = core.update_member(group, member, updated, replaced,
                                                          owned, now_ms)
        gid = group.group_id
        _deadlines(group, ConsumerTimer.CONSUMER_JOIN).pop(member_id, None)
        deadline = now_ms + max(reconciled.rebalance_timeout_ms, 0)
        _deadlines(group, ConsumerTimer.CONSUMER_SYNC)[member_id] = deadline
        timers += [TimerOp(TimerKey(ConsumerTimer.CONSUMER_JOIN, gid, member_id), None),
                   TimerOp(TimerKey(ConsumerTimer.CONSUMER_SYNC, gid, member_id), deadline)]
        if replaced is not None:
            _forget(group, replaced.member_id)
        return Result(JoinGroupResponse(
            ErrorCode.none, generation_id=reconciled.member_epoch, protocol_type=PROTOCOL_TYPE,
            protocol_name=req.protocols[0][0], leader="", member_id=member_id,
        ), records=records, timers=timers)

    def _member_for_join(self, group: ConsumerGroup, member_id: str, req: JoinGroupRequest,
                         unknown: bool) -> tuple[ConsumerMember, ConsumerMember | None]:
        """The member a JoinGroup is about, and the static member it replaces (if any)."""
        instance_id = req.group_instance_id
        existing = None if instance_id is None else group.static_member(instance_id)
        if existing is None:
            return group.members.get(member_id) or ConsumerMember(member_id), None
        if existing.member_id == member_id:
            return existing, None
        if not unknown:
            raise Refused(ErrorCode.fenced_instance_id,
                          f"Static member {member_id} with instance id {instance_id} was "
                          f"fenced by member {existing.member_id}.")
        # A restarted instance takes over its predecessor, whichever protocol that spoke,
        # with its target and partitions (no rebalance unless its subscription changed).
        return replace(existing, member_id=member_id, member_epoch=0,
                       previous_member_epoch=0), existing

    # == SyncGroup ===========================================================================
    def sync(self, req: SyncGroupRequest, now_ms: int) -> Result:
        group = self.core.groups.get(req.group_id)
        if group is None or not group.members:
            return Result(SyncGroupResponse(ErrorCode.unknown_member_id))
        try:
            member = self._classic_member(group, req.member_id, req.group_instance_id)
            if req.generation_id != member.member_epoch:
                raise Refused(ErrorCode.illegal_generation,
                              f"The request generation id {req.generation_id} is not equal to "
                              f"the member epoch {member.member_epoch} of member "
                              f"{member.member_id}.")
            protocol_name = _first_protocol(member)[0]
            if (req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE) or (
                    req.protocol_name is not None and req.protocol_name != protocol_name):
                raise Refused(ErrorCode.inconsistent_group_protocol,
                              f"The protocol of member {member.member_id}'s SyncGroup is not "
                              f"{PROTOCOL_TYPE}/{protocol_name}.")
        except Refused as refused:
            return Result(SyncGroupResponse(refused.code))
        gid, mid = group.group_id, member.member_id
        if (group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS):
            # A new epoch began after this member joined: it rejoins to catch up. (A member
            # still revoking rejoins anyway once it has revoked.)
            return Result(SyncGroupResponse(ErrorCode.rebalance_in_progress),
                          timers=self._arm_join(gid, member, now_ms))
        _deadlines(group, ConsumerTimer.CONSUMER_SYNC).pop(mid, None)
        return Result(
            SyncGroupResponse(ErrorCode.none, assignment=self.assignment_bytes(member),
                              protocol_type=PROTOCOL_TYPE, protocol_name=protocol_name),
            timers=[TimerOp(TimerKey(ConsumerTimer.CONSUMER_SYNC, gid, mid), None),
                    self.core.session_timer(gid, mid, now_ms, member)])

    def assignment_bytes(self, member: ConsumerMember) -> bytes:
        """The member's usable partitions as a consumer-protocol Assignment, in the version
        of the subscription it sent (topics no longer known are left out)."""
        return encode_assignment(Assignment(
            by_name(member.assigned, self.core.image),
            version=min(_subscription(member).version, 3)))

    # == Heartbeat ===========================================================================
    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Result:
        group = self.core.groups.get(req.group_id)
        if group is None:
            return Result(ErrorCode.unknown_member_id)
        try:
            member = self._classic_member(group, req.member_id, req.group_instance_id)
        except Refused as refused:
            return Result(refused.code)
        if req.generation_id != member.member_epoch:
            return Result(ErrorCode.illegal_generation)
        gid = group.group_id
        timers = [self.core.session_timer(gid, member.member_id, now_ms, member)]
        if self.must_rejoin(group, member):
            return Result(ErrorCode.rebalance_in_progress,
                          timers=timers + self._arm_join(gid, member, now_ms))
        return Result(ErrorCode.none, timers=timers)

    @staticmethod
    def must_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
        """A new epoch to catch up with, partitions to revoke, or every partition it was
        waiting for released: the member's next step needs a JoinGroup."""
        if member.member_epoch < group.group_epoch:
            return True
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            waiting = group.target_of(member.member_id) - member.assigned
            return not any(tp in group.partition_epochs for tp in waiting)
        return False

    # == LeaveGroup ==========================================================================
    def leave(self, req: LeaveGroupRequest, now_ms: int) -> Result:
        group = self.core.groups.get(req.group_id)
        outcome: list[tuple[LeavingMember, ErrorCode]] = []
        leaving: dict[str, ConsumerMember] = {}
        for lm in req.members:
            member = None
            code = ErrorCode.unknown_member_id
            if group is not None and lm.group_instance_id is None:
                member = group.members.get(lm.member_id)
            elif group is not None:
                member = group.static_member(lm.group_instance_id)  # type: ignore[arg-type]
                if member is not None and lm.member_id not in (UNKNOWN_MEMBER_ID,
                                                               member.member_id):
                    member, code = None, ErrorCode.fenced_instance_id
            if member is None:
                outcome.append((lm, code))
                continue
            outcome.append((lm, ErrorCode.none))
            leaving[member.member_id] = member
        result = Result()
        if group is not None and leaving:
            result = self.core.fence_members(group, list(leaving.values()))
            for mid in leaving:
                _forget(group, mid)
        result.response = LeaveGroupResponse(ErrorCode.none, tuple(outcome))
        return result

    # == timers ==============================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        kind, group_id, member_id = key.kind, key.group_id, key.member_id
        group = self.core.groups.get(group_id)
        if group is None or member_id is None:
            return Result()
        if _deadlines(group, kind).pop(member_id, None) is None:
            return Result()  # cancelled, or not ours
        member = group.members.get(member_id)
        if member is None or not member.uses_classic_protocol:
            return Result()
        _forget(group, member_id)
        return self.core.fence(group, member)

    def _arm_join(self, group_id: str, member: ConsumerMember, now_ms: int) -> list[TimerOp]:
        """Arm the member's join timer unless one is already running (it is not extended)."""
        group = self.core.groups[group_id]
        joins = _deadlines(group, ConsumerTimer.CONSUMER_JOIN)
        if member.member_id in joins:
            return []
        deadline = now_ms + max(member.rebalance_timeout_ms, 0)
        joins[member.member_id] = deadline
        return [TimerOp(TimerKey(ConsumerTimer.CONSUMER_JOIN, group_id, member.member_id),
                        deadline)]

    def prune(self, group_id: str) -> None:
        """Forget the live timers of members the group no longer has as classic members
        (removed by a timer of the consumer core, or replaced by a consumer-protocol
        incarnation); their timer cancellations went out with their removal."""
        group = self.core.groups.get(group_id)
        if group is None:
            return
        for kind in (ConsumerTimer.CONSUMER_JOIN, ConsumerTimer.CONSUMER_SYNC):
            deadlines = _deadlines(group, kind)
            for member_id in list(deadlines):
                member = group.members.get(member_id)
                if member is None or not member.uses_classic_protocol:
                    del deadlines[member_id]

    def forget_group(self, group_id: str) -> list[TimerOp]:
        """The group stops being a consumer group: drop its live timers."""
        group = self.core.groups.get(group_id)
        if group is None:
            return []
        ops = []
        for kind in (ConsumerTimer.CONSUMER_JOIN, ConsumerTimer.CONSUMER_SYNC):
            deadlines = _deadlines(group, kind)
            ops += [TimerOp(TimerKey(kind, group_id, mid), None) for mid in deadlines]
            deadlines.clear()
        return ops

    # == helpers =============================================================================
    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerMember:
        """Kafka's member lookup for SyncGroup and Heartbeat: by instance id when one is
        given (FENCED_INSTANCE_ID if it belongs to another member id), else by member id;
        the member must speak the classic protocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise Refused(ErrorCode.unknown_member_id,
                              f"Member {member_id} is not a member of group {group.group_id}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise Refused(ErrorCode.unknown_member_id,
                              f"Member with instance id {instance_id} is not a member of "
                              f"group {group.group_id}.")
            if member.member_id != member_id:
                raise Refused(ErrorCode.fenced_instance_id,
                              f"Static member {member_id} with instance id {instance_id} was "
                              f"fenced by member {member.member_id}.")
        if not member.uses_classic_protocol:
            raise Refused(ErrorCode.unknown_member_id,
                          f"Member {member.member_id} does not use the classic protocol.")
        return member


def _first_protocol(member: ConsumerMember) -> tuple[str, bytes]:
    assert member.classic is not None
    return member.classic.supported_protocols[0]


def _subscription(member: ConsumerMember) -> Subscription:
    """The member's subscription as it sent it (decodable: JoinGroup checked it)."""
    try:
        return decode_subscription(_first_protocol(member)[1])
    except ConsumerProtocolError:
        return Subscription(topics=tuple(sorted(member.subscribed_topic_names)), version=0)



def _deadlines(group: ConsumerGroup, kind: TimerKind) -> dict[str, int]:
    """The deadlines of the group's armed join (or sync) timers of classic members, by
    member: in the group's volatile table, so a rebuilt group starts without them."""
    if kind is ConsumerTimer.CONSUMER_JOIN:
        if group.classic_join_deadlines is None:
            group.classic_join_deadlines = {}
        return group.classic_join_deadlines
    if group.classic_sync_deadlines is None:
        group.classic_sync_deadlines = {}
    return group.classic_sync_deadlines


def _forget(group: ConsumerGroup, member_id: str) -> None:
    for deadlines in (group.classic_join_deadlines, group.classic_sync_deadlines):
        if deadlines is not None:
            deadlines.pop(member_id, None)
