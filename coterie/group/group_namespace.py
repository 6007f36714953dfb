"""One group id names one group: the rules between classic and consumer (KIP-848) groups.

A coordinator holds classic groups (`ClassicCoordinator`) and consumer groups
(`ConsumerCoordinator`) in one namespace, as Kafka 4.x does. The two cores know nothing of
each other; the requests that can cross the line come through here:

- ConsumerGroupHeartbeat for an id held by a classic group. A request invalid on its face is
  refused first (Kafka validates before it looks the group up). Otherwise anything but a join
  (epoch 0) is GROUP_ID_NOT_FOUND "Group <id> is not a consumer group."; a join replaces an
  *empty* classic group (its tombstone goes first, its committed offsets stay); a join into a
  classic group with members would be an online upgrade (seed 3), which is the mixed-groups
  step: until then GROUP_ID_NOT_FOUND with the message Kafka gives when it cannot upgrade.
- JoinGroup for an id held by a consumer group. An empty consumer group is replaced by the
  classic group the join creates (Kafka does the same); one with members would take the
  joining member in as a classic member of a mixed group, which is again the mixed-groups
  step: until then INCONSISTENT_GROUP_PROTOCOL, which Kafka answers when a consumer group
  cannot take a classic member in.
- OffsetCommit and OffsetFetch: a consumer group checks the member and its epoch
  (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; a commit below OffsetCommit v9 from a member of the
  consumer protocol is UNSUPPORTED_VERSION), a classic group its generation, as Kafka 4.2's
  `ConsumerGroup.validateOffsetCommit` / `validateOffsetFetch` do.

`GroupNamespace` is what the broker's runtime talks to for every group request, timer, topic
change and loaded record: it routes each to the core that holds the group id.

Seam for mixed groups: `_upgrade_refusal` and `_classic_join_refusal` are the two places where
a conversion (upgrade) or a classic member inside a consumer group gets in, and SyncGroup,
Heartbeat and LeaveGroup of classic members inside a consumer group would be routed here too.
A facade with mixed groups can replace this class as long as it keeps these method names.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coterie.group.classic_coordinator import ClassicCoordinator
from coterie.group.classic_group import ClassicGroup, ClassicState
from coterie.group.classic_messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from coterie.group.consumer_coordinator import REVOCATION, SESSION, ConsumerCoordinator
from coterie.group.consumer_group import ConsumerGroup
from coterie.group.consumer_member import JOIN_EPOCH
from coterie.group.consumer_messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from coterie.group.consumer_protocol import subscribed_topics
from coterie.group.consumer_records import CONSUMER_RECORD_KEY_TYPES
from coterie.group.records import GroupMetadataKey, Record
from coterie.group.results import Result, TimerOp
from coterie.group.topic_image import TopicInfo

CONSUMER_PROTOCOL_TYPE = "consumer"
UPGRADE_POLICIES = ("bidirectional", "upgrade")


@dataclass(frozen=True, slots=True)
class Refusal:
    """An offsets request refused for the whole group: the code and Kafka's message."""

    code: ErrorCode
    message: str


class GroupNamespace:
    """The classic and the consumer groups of one coordinator, one id each (module
    docstring has the rules)."""

    def __init__(self, classic: ClassicCoordinator, consumer: ConsumerCoordinator) -> None:
        self.classic = classic
        self.consumer = consumer

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

    def on_timer(self, key: tuple, now_ms: int) -> Result:
        core = self.consumer if key[0] in (SESSION, REVOCATION) else self.classic
        return core.on_timer(key, now_ms)

    def on_metadata_change(self, topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo],
                           now_ms: int) -> Result:
        return self.consumer.on_metadata_change(topics, now_ms)

    # == ConsumerGroupHeartbeat ===============================================================
    def consumer_heartbeat(self, req: ConsumerHeartbeatRequest, now_ms: int) -> Result:
        """A ConsumerGroupHeartbeat, with the group id checked against classic groups."""
        invalid = self.consumer.check(req)
        if invalid is not None:
            return Result(invalid)
        group = self.classic.groups.get(req.group_id)
        if group is None:
            return self.consumer.heartbeat(req, now_ms)
        if req.member_epoch != JOIN_EPOCH:
            return _not_found(f"Group {req.group_id} is not a consumer group.")
        if not group.is_(ClassicState.EMPTY):
            return _not_found(_upgrade_refusal(group, self.consumer))
        # An empty classic group gives way; only if the join itself goes through.
        result = self.consumer.heartbeat(req, now_ms)
        if result.response is None or result.response.error != ErrorCode.none:
            return result
        _, tombstones = self.classic.delete_group(req.group_id, now_ms)
        result.records[:0] = tombstones
        return result

    # == classic APIs =========================================================================
    def join_group(self, req: JoinGroupRequest, now_ms: int) -> Result:
        """A JoinGroup, with the group id checked against consumer groups."""
        group = self.consumer.groups.get(req.group_id)
        if group is None:
            return self.classic.join_group(req, now_ms)
        if group.members:
            return Result(JoinGroupResponse(_classic_join_refusal(group, req),
                                            member_id=req.member_id))
        _, tombstones = self.consumer.delete_group(req.group_id)
        result = self.classic.join_group(req, now_ms)
        result.records[:0] = tombstones
        return result

    # Without mixed groups no classic member lives in a consumer group, so the classic core
    # answers these (for a consumer group's id: as for any group it does not know).
    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> Result:
        return self.classic.sync_group(req, now_ms)

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Result:
        return self.classic.heartbeat(req, now_ms)

    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> Result:
        return self.classic.leave_group(req, now_ms)

    # == admin ================================================================================
    def delete_group(self, group_id: str, now_ms: int) -> tuple[ErrorCode, list[Record]]:
        if group_id in self.consumer.groups:
            return self.consumer.delete_group(group_id)
        return self.classic.delete_group(group_id, now_ms)

    def empty_since(self) -> dict[str, int | None]:
        """For offset expiry: classic groups as the classic core says; consumer groups with
        members keep their offsets (None); empty consumer groups are left out, so their
        offsets expire by commit time, as Kafka bases consumer groups' expiry on it."""
        out = self.classic.empty_since()
        out.update({gid: None for gid, g in self.consumer.groups.items() if g.members})
        return out

    def subscribed_topics(self, group_id: str) -> set[str]:
        """Topics a group with members subscribes to (OffsetDelete refuses those)."""
        modern = self.consumer.groups.get(group_id)
        if modern is not None:
            return modern.subscribed_topics() if modern.members else set()
        group = self.classic.groups.get(group_id)
        if group is None or not group.members or group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return set()
        topics: set[str] = set()
        for m in group.members.values():
            topics |= subscribed_topics(m.metadata_for(group.protocol))
        return topics

    # == offsets ==============================================================================
    def validate_commit(self, group_id: str, member_id: str, epoch: int,
                        instance_id: str | None, version: int = 9) -> Refusal | None:
        """OffsetCommit fencing for any group (Kafka 4.2's rules); None means the commit may
        go ahead. `epoch` is the request's generation id or member epoch."""
        group = self.consumer.groups.get(group_id)
        if group is not None:
            if epoch < 0 and not group.members:
                return None  # an admin tool or a consumer outside group management
            member = group.members.get(member_id)
            if member is None:
                return Refusal(ErrorCode.unknown_member_id,
                               f"Member {member_id} is not a member of group {group_id}.")
            if not member.uses_classic_protocol and version < 9:
                return Refusal(ErrorCode.unsupported_version,
                               "OffsetCommit version 9 or above must be used by members using "
                               "the modern group protocol")
            return _epoch_refusal(epoch, member.member_epoch, member.uses_classic_protocol)
        if group_id not in self.classic.groups and epoch >= 0 and version >= 9:
            return Refusal(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        code = self.classic.validate_commit(group_id, member_id, epoch, instance_id)
        return None if code is None else Refusal(code, code.name)

    def validate_fetch(self, group_id: str, member_id: str | None,
                       epoch: int) -> Refusal | None:
        """OffsetFetch (v9+) of a consumer group by one of its members: the member must
        exist and name its current epoch. Classic groups, and fetches without a member,
        pass."""
        group = self.consumer.groups.get(group_id)
        if group is None or (member_id is None and epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return Refusal(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not a member of group {group_id}.")
        return _epoch_refusal(epoch, member.member_epoch, member.uses_classic_protocol)


# -- the mixed-groups seam ----------------------------------------------------------------------

def _upgrade_refusal(group: ClassicGroup, consumer: ConsumerCoordinator) -> str:
    """Why a classic group with members is not converted (mixed-groups seam: the online
    upgrade of seed 3 goes here, for groups of the consumer protocol when the migration
    policy allows it). Kafka's checks, in Kafka's order and words."""
    gid = group.group_id
    if consumer.config.migration_policy not in UPGRADE_POLICIES:
        return (f"Cannot upgrade classic group {gid} to consumer group because online upgrade "
                "is disabled.")
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group does "
                "not use the consumer embedded protocol.")
    return (f"Cannot upgrade classic group {gid} to consumer group: coterie does not convert "
            "groups with members online yet.")


def _classic_join_refusal(group: ConsumerGroup, req: JoinGroupRequest) -> ErrorCode:
    """Mixed-groups seam: a classic member of the consumer protocol joins a consumer group
    with members here (JoinGroup runs the consumer group's update, target and reconcile
    steps). Until then every such join is refused, as Kafka refuses protocols the group
    cannot take."""
    return ErrorCode.inconsistent_group_protocol


# -- helpers ------------------------------------------------------------------------------------

def _not_found(message: str) -> Result:
    return Result(ConsumerHeartbeatResponse(ErrorCode.group_id_not_found, message))


def _epoch_refusal(received: int, expected: int, classic_member: bool) -> Refusal | None:
    if received == expected:
        return None
    if classic_member:
        return Refusal(ErrorCode.illegal_generation,
                       f"The received generation id {received} does not match the expected "
                       f"member epoch {expected}.")
    return Refusal(ErrorCode.stale_member_epoch,
                   f"The received member epoch {received} does not match the expected member "
                   f"epoch {expected}.")
