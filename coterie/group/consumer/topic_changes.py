"""Topic changes (`ConsumerGroups.on_topics`): what a new picture of the broker's topics
means for consumer groups.

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
regex resolution names (the shard's `Topics` keeps that floor, raised by the replay of
resolutions), or a picture after a restart would look older than resolutions made before it.
"""

from __future__ import annotations

from collections.abc import Iterable

from coterie.group.consumer.changes import epoch_record
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.records.record import Record
from coterie.group.topic_image import TopicImage


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
