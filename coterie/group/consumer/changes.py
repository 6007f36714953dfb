"""The records a consumer group's changes are written as (Kafka 4.2's record types), built
in one place so that every step that changes a member, the group epoch or a static member's
incarnation writes the same keys in the order replay accepts."""

from __future__ import annotations

from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.member import ConsumerMember
from coterie.group.records.classic import Record
from coterie.group.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
)


def metadata_record(group_id: str, member: ConsumerMember) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id, member.member_id),
                  member.metadata_value())


def assignment_record(group_id: str, member: ConsumerMember) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
                  member.assignment_value())


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch,
                                                                                 metadata_hash))


def replace_records(group: ConsumerGroup, old: ConsumerMember,
                     new: ConsumerMember) -> list[Record]:
    """A static member's new incarnation replaces the old one: the old member's tombstones
    (in the order replay insists on), then the new member with the old one's target and
    partitions."""
    gid, old_id, new_id = group.group_id, old.member_id, new.member_id
    return [
        Record(ConsumerGroupCurrentMemberAssignmentKey(gid, old_id), None),
        Record(ConsumerGroupTargetAssignmentMemberKey(gid, old_id), None),
        Record(ConsumerGroupMemberMetadataKey(gid, old_id), None),
        metadata_record(gid, new),
        Record(ConsumerGroupTargetAssignmentMemberKey(gid, new_id),
               ConsumerGroupTargetAssignmentMemberValue(group.target_of(old_id))),
        assignment_record(gid, new),
    ]
