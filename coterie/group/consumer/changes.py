"""The records a consumer group's changes are written as (Kafka 4.2's record types), built
in one place so that every step that changes a member, the group epoch or a static member's
incarnation, removes a member or deletes the group writes the same keys in the order replay
accepts: a member goes as its assignment, its target, then its metadata; a group's last
record is its metadata tombstone, once every member and target is gone."""

from __future__ import annotations

from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.member import ConsumerMember
from coterie.group.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
)
from coterie.group.records.record import Record


def metadata_record(group_id: str, member: ConsumerMember) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id, member.member_id),
                  member.metadata_value())


def assignment_record(group_id: str, member: ConsumerMember) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
                  member.assignment_value())


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch,
                                                                                 metadata_hash))


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member removed: its assignment, its target, then its metadata (the order replay
    insists on)."""
    return [
        Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def replace_records(group: ConsumerGroup, old: ConsumerMember,
                     new: ConsumerMember) -> list[Record]:
    """A static member's new incarnation replaces the old one: the old member's tombstones
    (in the order replay insists on), then the new member with the old one's target and
    partitions."""
    gid, old_id, new_id = group.group_id, old.member_id, new.member_id
    return [
        *member_tombstones(gid, old_id),
        metadata_record(gid, new),
        Record(ConsumerGroupTargetAssignmentMemberKey(gid, new_id),
               ConsumerGroupTargetAssignmentMemberValue(group.target_of(old_id))),
        assignment_record(gid, new),
    ]


def regex_record(group_id: str, regex: str,
                 value: ConsumerGroupRegularExpressionValue) -> Record:
    """A regex's resolution: the topics it matched, against which image version, when."""
    return Record(ConsumerGroupRegularExpressionKey(group_id, regex), value)


def regex_tombstone(group_id: str, regex: str) -> Record:
    """A regex nobody subscribes with any more: its resolution goes."""
    return Record(ConsumerGroupRegularExpressionKey(group_id, regex), None)
