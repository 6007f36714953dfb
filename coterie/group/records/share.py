"""The durable state of KIP-932 share groups, as plain record values.

A share group is persisted the way a consumer group is (`records/consumer.py`): several small
records, so that a heartbeat changing one member writes only what changed. What a share group
adds is the record of which partitions have had their share-partition state set up with the
share coordinator: a share group's consumers may fetch a partition only once its state exists,
and deleting the group (or a topic) must delete that state too. The shapes follow the
`ShareGroup*` coordinator records of Apache Kafka 4.2 field for field, so the mapping to bytes
in `records/share_codec.py` is direct:

    record type  key                                       value
    10           ShareGroupMemberMetadataKey(g, m)         what the member told us of itself
    11           ShareGroupMetadataKey(group)              group epoch, metadata hash
    12           ShareGroupTargetAssignmentMetadataKey     target assignment epoch
    13           ShareGroupTargetAssignmentMemberKey       one member's target partitions
    14           ShareGroupCurrentMemberAssignmentKey      member epoch, state, partitions
    15           ShareGroupStatePartitionMetadataKey(g)    share-partition state set up or not

(Type 9, `ShareGroupPartitionMetadata`, was dropped before Kafka 4.2 in favour of the metadata
hash in the type 11 value and is neither written nor read.) A value of None is a tombstone.

Unlike a consumer group's, a share group's members are not given partitions exclusively: the
records carry no partitions pending revocation, because several members may consume one
partition at once and the share-partition leader arbitrates record by record.

Partitions are named by topic id, as in Kafka: a topic deleted and re-created under the same
name is a different topic, with share-partition state of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from coterie.group.records.partition_set import EMPTY, PartitionSet

# Record types (the int16 version prefix of the key), as Kafka 4.2 numbers them.
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15

TopicIdPartition = tuple[uuid.UUID, int]
"""(topic id, partition index)."""

Partitions = frozenset[TopicIdPartition] | PartitionSet
"""A set of partitions: a frozenset, or the compact `PartitionSet` decoding hands back (what
members keep for long, `partition_set.py`); the two compare equal."""

NO_PARTITIONS: Partitions = EMPTY


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    """A share member names topics only (no regex, no assignor of its own, no instance id:
    KIP-932 has no static membership), and has no rebalance timeout, as nothing is revoked."""

    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    # A hash of the metadata of every topic the group subscribes to: when it changes the
    # group needs a new assignment (KIP-1101, as for consumer groups).
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    # Kafka's MemberState value. A share member has nothing to revoke or release, so it is
    # stable (0) in what Kafka writes; the codec keeps any int8 as read.
    state: int
    assigned: Partitions = NO_PARTITIONS


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class InitTopic:
    """One topic's partitions in the state record: their share-partition state is being (or
    has been) set up. The name travels with the id so that the state can be described and
    deleted even after the topic itself is gone."""

    topic_name: str
    partitions: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    """Which topics' share-partition state exists, by topic id.

    A partition moves from `initializing_topics` (the coordinator asked the share
    coordinator to set its state up and awaits the answer) to `initialized_topics`; a topic
    whose state is being deleted is in `deleting_topics` (id -> name) until that is done, so
    that a crash in between resumes the work rather than forgetting it.

    Mappings, not lists: Kafka writes them from hash maps, in no meaningful order, and keeps
    them as maps; the codec writes topics by id and partitions in ascending order."""

    initializing_topics: Mapping[uuid.UUID, InitTopic] = field(default_factory=dict)
    initialized_topics: Mapping[uuid.UUID, InitTopic] = field(default_factory=dict)
    deleting_topics: Mapping[uuid.UUID, str] = field(default_factory=dict)


ShareRecordKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)

SHARE_RECORD_KEY_TYPES: tuple[type, ...] = (
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupStatePartitionMetadataKey,
)
