"""ConsumerGroupDescribe: a consumer group as the admin API shows it (members sorted by id,
partitions with their topic names; topics no longer known are left out)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.heartbeat_request import wire_partitions
from coterie.group.consumer.member import ConsumerMember
from coterie.group.consumer.messages import (
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from coterie.group.records.consumer import Partitions
from coterie.group.topic_image import TopicImage


def describe_groups(groups: Mapping[str, ConsumerGroup], image: TopicImage,
                assignors: tuple[str, ...],
                group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
    """ConsumerGroupDescribe. A group this coordinator does not know is GROUP_ID_NOT_FOUND
    (the broker answers the same for a classic group of that name)."""
    out = []
    for group_id in group_ids:
        group = groups.get(group_id)
        if group is None:
            out.append(DescribedConsumerGroup(ErrorCode.group_id_not_found, group_id,
                                              f"Group {group_id} not found."))
            continue
        members = tuple(_describe_member(group, m, image)
                        for m in sorted(group.members.values(), key=lambda m: m.member_id))
        out.append(DescribedConsumerGroup(
            ErrorCode.none, group_id, group_state=group.state().value,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=group.preferred_assignor(assignors),
            members=members))
    return out

def _describe_member(group: ConsumerGroup, m: ConsumerMember,
                 image: TopicImage) -> DescribedConsumerMember:
    return DescribedConsumerMember(
        member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
        member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=_named(m.assigned, image),
        target_assignment=_named(group.target_of(m.member_id), image),
        member_type=0 if m.uses_classic_protocol else 1,
    )

def _named(partitions: Partitions, image: TopicImage) -> tuple[DescribedTopicPartitions, ...]:
    """Partitions with their topic names; topics no longer known are left out."""
    out = []
    for entry in wire_partitions(partitions):
        name = image.name_of(entry.topic_id)
        if name is not None:
            out.append(DescribedTopicPartitions(entry.topic_id, name, entry.partitions))
    return tuple(out)
