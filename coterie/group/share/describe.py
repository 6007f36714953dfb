"""ShareGroupDescribe (Kafka 4.2's shareGroupDescribe and ShareGroup.asDescribedGroup).

An unknown id is GROUP_ID_NOT_FOUND "Group <id> not found.", an id held by a group of
another type (or with only committed offsets, which Kafka holds as a classic group) is
GROUP_ID_NOT_FOUND "Group <id> is not a share group."; an empty id is INVALID_GROUP_ID. A
member's assignment names its topics by id and by name (a topic deleted since is left out).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from coterie.group.records.share import Partitions
from coterie.group.share.group import ShareGroup
from coterie.group.share.messages import (
    DescribedShareGroup,
    DescribedShareMember,
    DescribedShareTopic,
)
from coterie.group.topic_image import TopicImage

ASSIGNOR_NAME = "simple"


def not_found(group_id: str, other_type: bool) -> DescribedShareGroup:
    message = (f"Group {group_id} is not a share group." if other_type
               else f"Group {group_id} not found.")
    return DescribedShareGroup(ErrorCode.group_id_not_found, group_id, message)


def described_topics(partitions: Partitions,
                     image: TopicImage) -> tuple[DescribedShareTopic, ...]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in partitions:
        by_topic.setdefault(topic_id, []).append(p)
    out = []
    for topic_id, ps in by_topic.items():
        name = image.name_of(topic_id)
        if name is not None:
            out.append(DescribedShareTopic(topic_id, name, tuple(sorted(ps))))
    return tuple(sorted(out, key=lambda t: t.topic_name))


def describe(group: ShareGroup, image: TopicImage) -> DescribedShareGroup:
    members = tuple(
        DescribedShareMember(
            member_id=mid, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed)),
            assignment=described_topics(m.assigned, image))
        for mid, m in sorted(group.members.items()))
    return DescribedShareGroup(
        ErrorCode.none, group.group_id, group_state=group.state(),
        group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
        assignor_name=ASSIGNOR_NAME, members=members)
