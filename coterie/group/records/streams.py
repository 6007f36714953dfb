"""The durable state of KIP-1071 streams groups, as plain record values.

Like a consumer group (`records/consumer.py`), a streams group is persisted as several small
records so that a heartbeat changing one member writes only what changed, plus one record
for the topology the members run. Their shapes follow the `StreamsGroup*` coordinator records
of Apache Kafka 4.2 field for field, so the mapping to bytes in `records/streams_codec.py` is
direct:

    record type  key                                     value
    17           StreamsGroupMetadataKey(group)          group epoch, metadata hash, ...
    19           StreamsGroupMemberMetadataKey(g, m)     what the member told us of itself
    20           StreamsGroupTargetAssignmentMetadataKey target assignment epoch
    21           StreamsGroupTargetAssignmentMemberKey   one member's target tasks
    22           StreamsGroupCurrentMemberAssignmentKey  member epoch, state, tasks
    23           StreamsGroupTopologyKey(group)          the topology and its epoch

(Type 18, `StreamsGroupPartitionMetadata`, was replaced by the metadata hash in the type 17
value before Kafka 4.2 and is neither written nor read.) A value of None is a tombstone.

Tasks are kept per subtopology (`coterie.group.records.tasks`); a member's three task roles
(active, standby, warm-up) travel together as a `TaskSet`, which is how the group uses them,
so the six task lists of Kafka's current-assignment record are two `TaskSet`s here.
Key/value lists (assignment and topic configs, client tags) are tuples of pairs in the order
they were written, not mappings: Kafka writes assignment configs in hash-map order, so only
the order read keeps the bytes of a record read and written again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from coterie.group.records.tasks import NO_TASKS, TaskSet

# Record types (the int16 version prefix of the key), as Kafka 4.2 numbers them.
STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23

Pairs = tuple[tuple[str, str], ...]
"""(key, value) pairs, in their written order."""

AssignmentEpochs = Mapping[str, Mapping[int, int]]
"""subtopology id -> partition -> the member epoch an active task was assigned at."""

NO_EPOCHS: AssignmentEpochs = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataValue:
    epoch: int
    # A hash of the metadata of every topic the topology names: when it changes, the
    # topology must be configured again and the tasks reassigned.
    metadata_hash: int = 0
    # The topology epoch whose topics were last found present and valid; -1 when none was.
    validated_topology_epoch: int = -1
    # The assignment configs (e.g. num.standby.replicas) the last target assignment used, so
    # that a change of them is noticed after a restart and triggers a new assignment.
    last_assignment_configs: Pairs = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a member serves interactive queries; handed to the other members so they can
    find which instance holds which task's state."""

    host: str
    port: int  # uint16


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    # Several members (stream threads) of one Kafka Streams instance share a process id: the
    # assignor keeps a task's active and standby copies on different processes.
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: Pairs = ()  # for rack-aware standby placement; Kafka writes them by key


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberValue:
    """Kafka's ActiveTasks, StandbyTasks and WarmupTasks."""

    tasks: TaskSet


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    """`assigned_tasks` holds Kafka's ActiveTasks, StandbyTasks and WarmupTasks;
    `tasks_pending_revocation` its ActiveTasksPendingRevocation, StandbyTasksPendingRevocation
    and WarmupTasksPendingRevocation.

    The two epoch maps are the AssignmentEpochs Kafka 4.2 writes beside each active task
    (current and pending revocation), so that an offset commit from a member that has since
    lost the task can be fenced. A subtopology has epochs for all its active partitions or
    none: records written before the field existed carry none, and Kafka then takes the
    member epoch for them."""

    member_epoch: int
    previous_member_epoch: int
    # Kafka's streams MemberState value: 1 stable, 2 unrevoked tasks, 3 unreleased tasks,
    # 127 unknown (not the consumer group's 0, 1, 2).
    state: int
    assigned_tasks: TaskSet = NO_TASKS
    tasks_pending_revocation: TaskSet = NO_TASKS
    active_tasks_epochs: AssignmentEpochs = field(default_factory=dict)
    active_tasks_pending_revocation_epochs: AssignmentEpochs = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic the group's members need (a changelog or repartition topic), so
    the coordinator can check or create it. `partitions` is 0 when the topology does not fix
    the count (always, for changelogs); `replication_factor` 0 means the broker's default."""

    name: str
    partitions: int
    replication_factor: int  # int16
    topic_configs: Pairs = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Topics that must have equal partition counts, as indexes into the subtopology's
    `source_topics`, `source_topic_regex` and `repartition_source_topics` (int16 each)."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyValue:
    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()


StreamsRecordKey = (
    StreamsGroupMetadataKey
    | StreamsGroupMemberMetadataKey
    | StreamsGroupTargetAssignmentMetadataKey
    | StreamsGroupTargetAssignmentMemberKey
    | StreamsGroupCurrentMemberAssignmentKey
    | StreamsGroupTopologyKey
)

STREAMS_RECORD_KEY_TYPES: tuple[type, ...] = (
    StreamsGroupMetadataKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupTopologyKey,
)
