"""Which group and which member a ConsumerGroupHeartbeat is about (step 1 of a heartbeat).

Groups. A join (member epoch 0) creates the group it names; any other request for an unknown
group is GROUP_ID_NOT_FOUND. A group at group.consumer.max.size members takes no new member
(GROUP_MAX_SIZE_REACHED).

Dynamic members (no instance id) are found by member id: a join creates one, any other epoch
must name a member of the group (UNKNOWN_MEMBER_ID), whose epoch is then checked
(`heartbeat_request.check_epoch`: ahead of ours, or behind and not the lost-answer case,
is FENCED_MEMBER_EPOCH).

Static members (an instance id, KIP-345 carried over by KIP-848) are found by instance id, so
that a restarted process keeps its partitions without a rebalance:
- a join under a new member id takes over the member holding the instance id if that one left
  temporarily (epoch -2, `leaving.static_leave`) or is a classic member of a mixed group: the
  new incarnation gets everything the old one had (epochs restart at 0; its target and its
  partitions carry over, `changes.replace_records`), and the old one is replaced;
- a join while the old member is still there is refused with UNRELEASED_INSTANCE_ID; the same
  member id joining again (after FENCED_MEMBER_EPOCH, say) is the same process, not a second
  instance, so nothing is released;
- any other heartbeat, or a leave, under another member id than the instance's is
  FENCED_INSTANCE_ID, and under an instance id nobody holds UNKNOWN_MEMBER_ID.

Lookups only: they return what they found or raise `Refused`, and change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kio.schema.errors import ErrorCode

from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.heartbeat_request import Refused, check_epoch
from coterie.group.consumer.member import JOIN_EPOCH, STATIC_LEAVE_EPOCH, ConsumerMember
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.records.consumer import Partitions


def heartbeat_group(groups: Mapping[str, ConsumerGroup], req: ConsumerHeartbeatRequest,
                    max_size: int) -> ConsumerGroup:
    """The group a (non-leaving) heartbeat is for; a join into an unknown group gets a new,
    empty one, which exists once its first record is applied."""
    group = groups.get(req.group_id)
    if group is None:
        if req.member_epoch != JOIN_EPOCH:
            raise Refused(ErrorCode.group_id_not_found,
                           f"Consumer group {req.group_id} not found.")
        group = ConsumerGroup(req.group_id)  # exists once its first record is applied
    if len(group.members) >= max_size and req.member_id not in group.members:
        raise Refused(ErrorCode.group_max_size_reached,
                       "The consumer group has reached its maximum capacity of "
                       f"{max_size} members.")
    return group


def heartbeat_member(group: ConsumerGroup, member_id: str, req: ConsumerHeartbeatRequest,
                     owned: Partitions | None) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The member a heartbeat is about (as it is now, or new), and the static member it
    replaces (if any)."""
    if req.instance_id is None:
        return dynamic_member(group, member_id, req.member_epoch, owned), None
    return static_member(group, member_id, req, owned)


def dynamic_member(group: ConsumerGroup, member_id: str, epoch: int,
                   owned: Partitions | None) -> ConsumerMember:
    member = group.members.get(member_id)
    if member is None:
        if epoch != JOIN_EPOCH:
            raise Refused(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not a member of group {group.group_id}.")
        return ConsumerMember(member_id)
    check_epoch(member, epoch, owned)
    return member


def static_member(group: ConsumerGroup, member_id: str, req: ConsumerHeartbeatRequest,
                  owned: Partitions | None) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The member a static heartbeat is about, and the member it replaces (if any)."""
    instance_id = req.instance_id
    assert instance_id is not None
    existing = group.static_member(instance_id)
    if req.member_epoch == JOIN_EPOCH:
        if existing is None:
            return group.members.get(member_id) or ConsumerMember(member_id), None
        if existing.member_id == member_id:
            # The same process joining again (e.g. after FENCED_MEMBER_EPOCH): not a
            # second instance, so nothing to release.
            return existing, None
        if existing.member_epoch != STATIC_LEAVE_EPOCH and not existing.uses_classic_protocol:
            raise Refused(ErrorCode.unreleased_instance_id,
                           f"Static member {member_id} with instance id {instance_id} "
                           "cannot join the group because the instance id is owned by "
                           f"{existing.member_id} member.")
        # The new incarnation takes over everything the old one had.
        return replace(existing, member_id=member_id, member_epoch=0,
                       previous_member_epoch=0), existing
    if existing is None:
        raise Refused(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise Refused(ErrorCode.fenced_instance_id,
                       f"Static member {member_id} with instance id {instance_id} was "
                       f"fenced by member {existing.member_id}.")
    check_epoch(existing, req.member_epoch, owned)
    return existing, None


def leaving_member(groups: Mapping[str, ConsumerGroup],
                   req: ConsumerHeartbeatRequest) -> tuple[ConsumerGroup, ConsumerMember]:
    """The group and the member a leave (epoch -1, or -2 for a static member) is about. A
    leave's epoch is not checked: a member may always go."""
    group = groups.get(req.group_id)
    if group is None:
        raise Refused(ErrorCode.group_id_not_found, f"Group {req.group_id} not found.")
    if req.instance_id is None:
        member = group.members.get(req.member_id)
        if member is None:
            raise Refused(ErrorCode.unknown_member_id,
                           f"Member {req.member_id} is not a member of group "
                           f"{group.group_id}.")
        return group, member
    found = group.static_member(req.instance_id)
    if found is None:
        raise Refused(ErrorCode.unknown_member_id,
                       f"Instance id {req.instance_id} is unknown.")
    if found.member_id != req.member_id:
        raise Refused(ErrorCode.fenced_instance_id,
                       f"Static member {req.member_id} with instance id "
                       f"{req.instance_id} was fenced by member {found.member_id}.")
    return group, found
