"""The durable state of KIP-848 consumer groups, as plain record values.

A consumer group is persisted as several small records rather than one blob (a classic group
is one `GroupMetadataValue`), so that a heartbeat that changes one member writes only what
changed. Their shapes follow Apache Kafka 4.x's coordinator records field for field, so the
mapping to bytes in `records/consumer_codec.py` is direct:

    record type  key                                       value
    3            ConsumerGroupMetadataKey(group)           group epoch, metadata hash
    5            ConsumerGroupMemberMetadataKey(g, m)      what the member asked for
    6            ConsumerGroupTargetAssignmentMetadataKey  target assignment epoch
    7            ConsumerGroupTargetAssignmentMemberKey    one member's target partitions
    8            ConsumerGroupCurrentMemberAssignmentKey   member epoch, state, partitions
    16           ConsumerGroupRegularExpressionKey(g, re)  topics a regex resolved to

(Type 4, `ConsumerGroupPartitionMetadata`, was replaced in Kafka 4.1 by the metadata hash in
the type 3 value and is neither written nor read.) A value of None is a tombstone. Removing a
member writes its type 8, 7 and 5 tombstones in that order; replay insists on it.

Partitions are named by topic *id* here, as in Kafka: a topic deleted and re-created under
the same name is a different topic, and a member must not keep partitions of the old one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from coterie.group.records.partition_set import EMPTY, PartitionSet

TopicIdPartition = tuple[uuid.UUID, int]
"""(topic id, partition index)."""

Partitions = frozenset[TopicIdPartition] | PartitionSet
"""A set of partitions. What members keep for long (targets, assigned partitions, the records
holding them) is a `PartitionSet` (`partition_set.py`: a sorted tuple, a fifth of a frozenset's
size); transient sets (a heartbeat's owned partitions, reconciliation's intermediate results)
are frozensets. The two compare equal and combine as sets."""

NO_PARTITIONS: Partitions = EMPTY

# Record types (the int16 version prefix of the key), as Kafka 4.x numbers them.
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    # A hash of the metadata (names, ids, partition counts) of every topic the group
    # subscribes to: when it changes the group needs a new assignment (KIP-1101).
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Set for a classic-protocol member living in a consumer group (mixed groups,
    `mixed/classic_members.py`); None for members speaking ConsumerGroupHeartbeat. The protocols
    are the member's JoinGroup protocols in its order of preference."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState value: 0 stable, 1 unrevoked, 2 unreleased, 127 unknown
    assigned: Partitions
    pending_revocation: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regex: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int  # the metadata version the regex was resolved against
    timestamp_ms: int


ConsumerRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)

CONSUMER_RECORD_KEY_TYPES: tuple[type, ...] = (
    ConsumerGroupMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)


def group_of(key: ConsumerRecordKey) -> str:
    """The group a consumer-group record belongs to."""
    return key.group_id
