"""KIP-932 share groups of one shard: the `GroupKind` (Kafka 4.2's share parts of
GroupMetadataManager), pure like the other cores: requests and `now_ms` in, `Result` out,
state changed only by replaying the records it returns.

A ShareGroupHeartbeat, step by step (`heartbeat`):
1. Face checks (`_validate`: INVALID_REQUEST with Kafka's messages). A leave (epoch -1) is
   `_leave`.
2. The group: an id held by a group of another type, or with only committed offsets (Kafka
   holds those as an empty classic group), is GROUP_ID_NOT_FOUND "Group <id> is not a share
   group."; an unknown id is created by a join (epoch 0) and otherwise GROUP_ID_NOT_FOUND
   "Share group <id> not found.". A share group never replaces a group of another type, nor
   is replaced by one. A full group (group.share.max.size) refuses any member it does not
   have, GROUP_MAX_SIZE_REACHED.
3. The member: a join creates it under the id the client chose; otherwise it must exist
   (UNKNOWN_MEMBER_ID). Its epoch must be its current one or the one before
   (FENCED_MEMBER_EPOCH otherwise, Kafka's messages; a member that lost an answer comes
   back with the previous epoch).
4. Its metadata from the request (None: unchanged; client id and host are always the
   request's); a change writes the member record, and a change of its subscribed topic
   names bumps the group epoch with the new metadata hash of the group's subscribed topics.
5. If the group epoch is ahead of the target's, a new target assignment for every member
   (`coterie.assign.share_simple`; records only for members whose target changed, then the
   target epoch).
6. The member takes its target at once (no revocation: several members may hold one
   partition): a new current-assignment record when its epoch or partitions change.
7. The partitions of the group's subscribed topics are recorded as initialized
   (`ShareGroupStatePartitionMetadata`), the simplification of docs/share-groups.md.
8. The answer: member epoch, heartbeat interval, and the assignment when the member joined,
   sent its subscription, or its partitions changed. Its session timer is re-armed.

Topic changes (`on_topics`): a group whose subscribed topics hash differently gets its group
epoch bumped at once (Kafka marks the group for a metadata refresh and bumps at its next
heartbeat; as for streams groups, bumping at once is simpler and the same to members), and
its state-partition record follows the topics (new partitions added, deleted topics
dropped).

Timers: SHARE_SESSION fences the member (its tombstones, a group epoch bump).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign import share_simple
from coterie.group.kind import Handler, ShardContext
from coterie.group.limits import MAX_STRING_BYTES, first_too_long, invalid_group_id, too_long
from coterie.group.records.record import Record
from coterie.group.records.share import (
    SHARE_RECORD_KEY_TYPES,
    InitTopic,
    Partitions,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from coterie.group.result import Result, TimerOp
from coterie.group.share.config import ShareGroupConfig
from coterie.group.share.describe import describe, not_found
from coterie.group.share.group import ShareGroup, ShareReplayError
from coterie.group.share.kinds import ShareTimer
from coterie.group.share.member import JOIN_EPOCH, LEAVE_EPOCH, ShareMember
from coterie.group.share.messages import (
    ShareGroupDescribeRequest,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareTopicPartitions,
)
from coterie.group.timers import TimerKey
from coterie.group.topic_image import TopicImage
from coterie.group.typed_groups import GroupsOf

# A group's own settings (the GROUP config resource) that share groups read.
SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
GROUP_CONFIG_KEYS = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL)

_JAVA_TRIMMED = "".join(map(chr, range(33)))  # what Java's String.trim() removes


class Refused(Exception):
    """The heartbeat is answered with an error; nothing of it was applied."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _blank(value: str) -> bool:
    return not value.strip(_JAVA_TRIMMED)


def _validate(req: ShareHeartbeatRequest) -> None:
    """Kafka 4.2's throwIfShareGroupHeartbeatRequestIsInvalid."""
    bad = ErrorCode.invalid_request
    if _blank(req.member_id):
        raise Refused(bad, "MemberId can't be empty.")
    if _blank(req.group_id):
        raise Refused(bad, "GroupId can't be empty.")
    if req.rack_id is not None and _blank(req.rack_id):
        raise Refused(bad, "RackId can't be empty.")
    # What no record could hold (coterie's bound, as for the other group types).
    if too_long(req.group_id):
        raise Refused(ErrorCode.invalid_group_id,
                      f"GroupId is longer than {MAX_STRING_BYTES} bytes.")
    too_long_field = first_too_long([
        ("MemberId", req.member_id), ("RackId", req.rack_id),
        *(("A subscribed topic name", name) for name in req.subscribed_topic_names or ())])
    if too_long_field is not None:
        raise Refused(bad, too_long_field)
    if req.member_epoch == JOIN_EPOCH:
        if not req.subscribed_topic_names:
            raise Refused(bad, "SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        raise Refused(bad, "MemberEpoch is invalid.")


def _check_epoch(member: ShareMember, epoch: int) -> None:
    """Kafka 4.2's throwIfShareGroupMemberEpochIsInvalid."""
    current = member.member_epoch
    if epoch > current:
        raise Refused(ErrorCode.fenced_member_epoch,
                      f"The share group member has a greater member epoch ({epoch}) than the "
                      f"one known by the group coordinator ({current}). The member must "
                      "abandon all its partitions and rejoin.")
    if epoch < current and epoch != member.previous_member_epoch:
        raise Refused(ErrorCode.fenced_member_epoch,
                      f"The share group member has a smaller member epoch ({epoch}) than the "
                      f"one known by the group coordinator ({current}). The member must "
                      "abandon all its partitions and rejoin.")


class ShareGroups:
    """Share groups of one shard (module docstring): a `GroupKind`."""

    record_keys = SHARE_RECORD_KEY_TYPES
    timer_kinds = (ShareTimer,)

    def __init__(self, ctx: ShardContext) -> None:
        self._ctx = ctx
        self.groups: GroupsOf[ShareGroup] = GroupsOf(ctx.groups, ShareGroup)
        self.config: ShareGroupConfig = getattr(ctx.config, "share", ShareGroupConfig())
        # Per-group overrides (set_group_config), kept for ids without a group too.
        self.group_configs: dict[str, dict[str, int]] = {}

    @property
    def image(self) -> TopicImage:
        return self._ctx.topics.image

    def requests(self) -> Mapping[type, Handler]:
        return {ShareHeartbeatRequest: self.heartbeat,
                ShareGroupDescribeRequest: self.describe}

    # == settings ==============================================================================
    def set_group_config(self, group_id: str, config: Mapping[str, Any]) -> None:
        own = {k: int(config[k]) for k in GROUP_CONFIG_KEYS if config.get(k) is not None}
        if own:
            self.group_configs[group_id] = own
        else:
            self.group_configs.pop(group_id, None)

    def session_timeout_of(self, group_id: str) -> int:
        return self.group_configs.get(group_id, {}).get(SESSION_TIMEOUT,
                                                         self.config.session_timeout_ms)

    def heartbeat_interval_of(self, group_id: str) -> int:
        return self.group_configs.get(group_id, {}).get(HEARTBEAT_INTERVAL,
                                                         self.config.heartbeat_interval_ms)

    # == records ===============================================================================
    def replay(self, record: Record) -> None:
        """Apply one share record: the only way share groups change."""
        group = self.groups.for_record(record, ShareGroupMetadataKey, ShareGroup,
                                       ShareReplayError, "share")
        if group is None:
            return
        key, value = record.key, record.value
        match key:
            case ShareGroupMetadataKey():
                group.apply_metadata(value)  # type: ignore[arg-type]
            case ShareGroupMemberMetadataKey(member_id=member_id):
                group.apply_member_metadata(member_id, value)  # type: ignore[arg-type]
            case ShareGroupTargetAssignmentMetadataKey():
                group.apply_target_epoch(value)  # type: ignore[arg-type]
            case ShareGroupTargetAssignmentMemberKey(member_id=member_id):
                group.apply_target_member(member_id, value)  # type: ignore[arg-type]
            case ShareGroupCurrentMemberAssignmentKey(member_id=member_id):
                group.apply_current_assignment(member_id, value)  # type: ignore[arg-type]
            case ShareGroupStatePartitionMetadataKey():
                group.apply_state_partitions(value)  # type: ignore[arg-type]

    def _apply(self, records: list[Record]) -> None:
        for record in records:
            self.replay(record)

    def _session(self, group_id: str, member_id: str, now_ms: int) -> TimerOp:
        return TimerOp(TimerKey(ShareTimer.SHARE_SESSION, group_id, member_id),
                       now_ms + self.session_timeout_of(group_id))

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Every member's session deadline (none is durable)."""
        return [self._session(g.group_id, mid, now_ms)
                for g in self.groups.values() for mid in g.members]

    def after_rebuild(self, group_id: str, failed: list[Record], now_ms: int) -> Result:
        """The group was rebuilt from its durable records (it has no volatile table):
        deadlines as after a load."""
        group = self.groups.get(group_id)
        if group is None:
            return Result()
        return Result(timers=[self._session(group_id, mid, now_ms) for mid in group.members])

    # == topics ================================================================================
    def on_topics(self, previous: TopicImage, now_ms: int) -> Result:
        """Groups whose subscribed topics changed: group epoch bumped; their state-partition
        record following the topics."""
        records: list[Record] = []
        for group in list(self.groups.values()):
            names = group.subscribed_topics()
            metadata_hash = self.image.metadata_hash(names) if names else 0
            if group.members and metadata_hash != group.metadata_hash:
                records.append(_metadata_record(group.group_id, group.group_epoch + 1,
                                                metadata_hash))
            state = self._state_record(group, names)
            if state is not None:
                records.append(state)
        self._apply(records)
        return Result(records=records)

    def _state_record(self, group: ShareGroup, names: set[str]) -> Record | None:
        """The state-partition record when what it should say changed: every partition of
        the subscribed topics initialized (simplification: no share coordinator yet),
        topics deleted since left out; None when it is as recorded."""
        image = self.image
        initialized = {tid: t for tid, t in group.initialized.items()
                       if image.name_of(tid) is not None}
        for name in sorted(names):
            info = image.by_name.get(name)
            if info is None or info.partitions <= 0:
                continue
            had = initialized.get(info.topic_id)
            wanted = frozenset(range(info.partitions))
            if had is None or not wanted <= had.partitions:
                initialized[info.topic_id] = InitTopic(
                    name, wanted | (had.partitions if had else frozenset()))
        if group.has_state_record and initialized == group.initialized:
            return None
        if not group.has_state_record and not initialized:
            return None
        return Record(ShareGroupStatePartitionMetadataKey(group.group_id),
                      ShareGroupStatePartitionMetadataValue(
                          initializing_topics=dict(group.initializing),
                          initialized_topics=initialized,
                          deleting_topics=dict(group.deleting)))

    # == ShareGroupHeartbeat ===================================================================
    def heartbeat(self, req: ShareHeartbeatRequest, now_ms: int) -> Result:
        try:
            _validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                return self._leave(req)
            return self._heartbeat(req, now_ms)
        except Refused as refused:
            return Result(ShareHeartbeatResponse(refused.code, refused.message))

    def _group(self, req: ShareHeartbeatRequest) -> ShareGroup:
        """The heartbeat's group (step 2)."""
        gid, mid = req.group_id, req.member_id
        held = self._ctx.groups.get(gid)
        if isinstance(held, ShareGroup):
            if len(held.members) >= self.config.max_size and mid not in held.members:
                raise Refused(ErrorCode.group_max_size_reached,
                              "The share group has reached its maximum capacity of "
                              f"{self.config.max_size} members.")
            return held
        if held is not None or self._ctx.offsets.has_offsets(gid):
            raise Refused(ErrorCode.group_id_not_found, f"Group {gid} is not a share group.")
        if req.member_epoch != JOIN_EPOCH:
            raise Refused(ErrorCode.group_id_not_found, f"Share group {gid} not found.")
        return ShareGroup(gid)

    def _heartbeat(self, req: ShareHeartbeatRequest, now_ms: int) -> Result:
        group = self._group(req)
        gid, mid = req.group_id, req.member_id
        joining = req.member_epoch == JOIN_EPOCH
        member = group.members.get(mid)
        new_member = member is None
        if member is None:
            if not joining:
                raise Refused(ErrorCode.unknown_member_id,
                              f"Member {mid} is not a member of group {gid}.")
            member = ShareMember(mid)
        _check_epoch(member, req.member_epoch)

        records: list[Record] = []
        # Step 4: the member's metadata.
        names = req.subscribed_topic_names
        updated = ShareMember(
            mid, member.rack_id if req.rack_id is None else req.rack_id, req.client_id,
            req.client_host, member.subscribed if names is None else frozenset(names),
            member.member_epoch, member.previous_member_epoch, member.state, member.assigned)
        if new_member or not updated.same_metadata(member):
            records.append(Record(ShareGroupMemberMetadataKey(gid, mid),
                                  updated.metadata_value()))
        members = dict(group.members)
        members[mid] = updated
        subscribed = {t for m in members.values() for t in m.subscribed}
        group_epoch = group.group_epoch
        if new_member or updated.subscribed != member.subscribed:
            group_epoch += 1
            records.append(_metadata_record(gid, group_epoch,
                                            self.image.metadata_hash(subscribed)))

        # Step 5: the target.
        if group_epoch > group.assignment_epoch:
            targets, target_records = self._target(gid, group, members, group_epoch)
            records += target_records
            target_epoch, my_target = group_epoch, targets[mid]
        else:
            target_epoch, my_target = group.assignment_epoch, group.target_of(mid)

        # Step 6: the member takes its target.
        reconciled = updated
        if (new_member or updated.member_epoch != target_epoch
                or updated.assigned != my_target):
            reconciled = ShareMember(
                mid, updated.rack_id, updated.client_id, updated.client_host,
                updated.subscribed, target_epoch, updated.member_epoch, updated.state,
                my_target)
            records.append(Record(ShareGroupCurrentMemberAssignmentKey(gid, mid),
                                  reconciled.assignment_value()))

        # Step 7: the partitions' share state (the group as the records leave it).
        state = self._state_record(group, subscribed)
        if state is not None:
            records.append(state)

        self._apply(records)
        assignment = None
        if joining or names is not None or reconciled.assigned != member.assigned:
            assignment = _wire_assignment(reconciled.assigned)
        response = ShareHeartbeatResponse(
            ErrorCode.none, member_id=mid, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_of(gid), assignment=assignment)
        return Result(response, records, [self._session(gid, mid, now_ms)])

    def _target(self, gid: str, group: ShareGroup, members: Mapping[str, ShareMember],
                epoch: int) -> tuple[dict[str, Partitions], list[Record]]:
        """A new target assignment at `epoch` for `members` (step 5): the records of the
        members whose target changed, then the target epoch."""
        image = self.image
        counts = {name: info.partitions for name, info in image.by_name.items()}
        current: dict[str, set[tuple[str, int]]] = {}
        for mid in members:
            held: set[tuple[str, int]] = set()
            for topic_id, p in group.target_of(mid):
                name = image.name_of(topic_id)
                if name is not None:
                    held.add((name, p))
            current[mid] = held
        assigned = share_simple.assign({mid: m.subscribed for mid, m in members.items()},
                                       counts, current)
        targets: dict[str, Partitions] = {}
        records: list[Record] = []
        for mid in sorted(assigned):
            partitions = frozenset(image.by_name[t].tp(p) for t, p in assigned[mid])
            targets[mid] = partitions
            if mid not in group.targets or group.targets[mid] != partitions:
                records.append(Record(ShareGroupTargetAssignmentMemberKey(gid, mid),
                                      ShareGroupTargetAssignmentMemberValue(partitions)))
        records.append(Record(ShareGroupTargetAssignmentMetadataKey(gid),
                              ShareGroupTargetAssignmentMetadataValue(epoch)))
        return targets, records

    # == leaving and fencing ===================================================================
    def _leave(self, req: ShareHeartbeatRequest) -> Result:
        gid, mid = req.group_id, req.member_id
        held = self._ctx.groups.get(gid)
        if not isinstance(held, ShareGroup):
            if held is None and not self._ctx.offsets.has_offsets(gid):
                raise Refused(ErrorCode.group_id_not_found, f"Group {gid} not found.")
            raise Refused(ErrorCode.group_id_not_found, f"Group {gid} is not a share group.")
        member = held.members.get(mid)
        if member is None:
            raise Refused(ErrorCode.unknown_member_id,
                          f"Member {mid} is not a member of group {gid}.")
        result = self.fence(held, member)
        result.response = ShareHeartbeatResponse(ErrorCode.none, member_id=mid,
                                                 member_epoch=LEAVE_EPOCH)
        return result

    def fence(self, group: ShareGroup, member: ShareMember) -> Result:
        """Remove a member (left, session expired): its tombstones in Kafka's order, and a
        group epoch bump with the metadata hash of what the others subscribe to."""
        gid, mid = group.group_id, member.member_id
        records = [Record(ShareGroupCurrentMemberAssignmentKey(gid, mid), None),
                   Record(ShareGroupTargetAssignmentMemberKey(gid, mid), None),
                   Record(ShareGroupMemberMetadataKey(gid, mid), None)]
        others = {t for m in group.members.values() if m.member_id != mid
                  for t in m.subscribed}
        metadata_hash = self.image.metadata_hash(others) if others else 0
        records.append(_metadata_record(gid, group.group_epoch + 1, metadata_hash))
        self._apply(records)
        return Result(records=records,
                      timers=[TimerOp(TimerKey(ShareTimer.SHARE_SESSION, gid, mid), None)])

    # == timers ================================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        group = self.groups.get(key.group_id)
        if group is None:
            return Result()
        member = group.members.get(key.member_id or "")
        if member is None:
            return Result()
        return self.fence(group, member)

    # == describe ==============================================================================
    def describe(self, req: ShareGroupDescribeRequest, now_ms: int) -> Result:
        gid = req.group_id
        if invalid_group_id(gid):
            return Result(req.refused(ErrorCode.invalid_group_id))
        group = self.groups.get(gid)
        if group is None:
            other = gid in self._ctx.groups or self._ctx.offsets.has_offsets(gid)
            return Result(not_found(gid, other))
        return Result(describe(group, self.image))


def _metadata_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return Record(ShareGroupMetadataKey(group_id),
                  ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def _wire_assignment(partitions: Partitions) -> tuple[ShareTopicPartitions, ...]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in partitions:
        by_topic.setdefault(topic_id, []).append(p)
    return tuple(ShareTopicPartitions(t, tuple(sorted(ps)))
                 for t, ps in sorted(by_topic.items(), key=lambda e: str(e[0])))

