"""StreamsGroupDescribe (Kafka 4.2's streamsGroupDescribe and StreamsGroup.asDescribedGroup).

An unknown id is GROUP_ID_NOT_FOUND "Group <id> not found.", an id held by a group of
another type (or with only committed offsets, which Kafka holds as a classic group) is
GROUP_ID_NOT_FOUND "Group <id> is not a streams group."; an empty id is INVALID_GROUP_ID.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coterie.group.streams.group import StreamsGroup
from coterie.group.streams.messages import DescribedStreamsGroup, DescribedStreamsMember


def not_found(group_id: str, other_type: bool) -> DescribedStreamsGroup:
    message = (f"Group {group_id} is not a streams group." if other_type
               else f"Group {group_id} not found.")
    return DescribedStreamsGroup(ErrorCode.group_id_not_found, group_id, message)


def describe(group: StreamsGroup) -> DescribedStreamsGroup:
    members = tuple(
        DescribedStreamsMember(
            member_id=mid, member_epoch=m.member_epoch,
            instance_id=m.metadata.instance_id, rack_id=m.metadata.rack_id,
            client_id=m.metadata.client_id, client_host=m.metadata.client_host,
            topology_epoch=m.metadata.topology_epoch, process_id=m.metadata.process_id,
            user_endpoint=m.metadata.user_endpoint, client_tags=m.metadata.client_tags,
            assignment=m.assigned, target_assignment=group.target_of(mid))
        for mid, m in sorted(group.members.items()))
    return DescribedStreamsGroup(
        ErrorCode.none, group.group_id, group_state=group.state(),
        group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
        topology=group.topology, members=members)
