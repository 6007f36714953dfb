"""Topic changes (`ConsumerCoordinator.on_metadata_change`): the coordinator's picture of the
broker's topics, its versions, and the groups a change concerns.

A change resolves no regex (Kafka's onNewMetadataImage): a created topic only makes the next
heartbeat allowed to refresh a group's regexes do so (`subscriptions.regex_refresh` compares
the version of the last picture that created a topic with the version each resolution names);
a deleted topic stays in a resolution until the next, and is simply not assigned. Every group
whose subscribed topics changed (partition count, topic created or deleted: their hash,
`TopicImage.metadata_hash`, moved) gets a new group epoch; its target is recomputed at the
next heartbeat.

Versions. Every picture has a version above the last one (the broker builds one picture per
change for all shards). Image versions restart with the process, whereas Kafka's are
metadata offsets, which do not; so a new version must also be above every version a loaded
regex resolution names (`next_version`'s `floor`), or a picture after a restart would look
older than resolutions made before it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from coterie.group.consumer.changes import epoch_record
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.records.record import Record
from coterie.group.topic_image import TopicImage, TopicInfo


def next_version(image: TopicImage, floor: int) -> int:
    """The version a new topic picture must have: above the current one (`image`) and above
    `floor`, the highest version a loaded regex resolution names."""
    return max(image.version, floor) + 1


def picture(topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo] | TopicImage,
            version: int) -> TopicImage:
    """The new picture: `topics` itself if it is one (built once for every shard), else
    the broker's topics (name -> (topic id, partition count)) at `version`."""
    if isinstance(topics, TopicImage):
        return topics
    return TopicImage.of(topics, version)


def creates_topics(old: TopicImage, new: TopicImage) -> bool:
    """Whether `new` has a topic (by id: a re-created topic is a new one) `old` had not."""
    return not new.by_id.keys() <= old.by_id.keys()


def epoch_bumps(groups: Iterable[ConsumerGroup], image: TopicImage) -> list[Record]:
    """A new group epoch for every group whose subscribed topics look different in
    `image` (their hash moved)."""
    records: list[Record] = []
    for group in groups:
        metadata_hash = image.metadata_hash(group.subscribed_topics())
        if metadata_hash != group.metadata_hash:
            records.append(epoch_record(group.group_id, group.group_epoch + 1, metadata_hash))
    return records
