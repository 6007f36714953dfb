"""Byte encoding of streams-group records, compatible with Kafka 4.2's `__consumer_offsets`.

As for the consumer-group records (`records/consumer_codec.py`), each key and value starts
with an int16: for a key the record type (17, 19, 20, 21, 22, 23), for a value the value
version (0 for all of these). Keys are non-flexible structs; values are flexible (compact
strings and arrays, tagged fields), exactly as Kafka 4.2's `StreamsGroup*` coordinator
record schemas say. The schemas are kio entity dataclasses so kio's serializers do the byte
work, tagged fields included: kio leaves a tagged field out when it holds its default and
writes a null array as Kafka does, so no section needs writing by hand.

Two schema rules kio does not check are checked here. Kafka cannot read back a string longer
than 32,767 bytes even where the format is a compact string, so such a record is refused at
encoding (`RecordEncodeError`), not left to fail Kafka's loading. And a task list's
AssignmentEpochs must be as long as its Partitions, which Kafka insists on when reading.

A null where a tagged array is optional (LastAssignmentConfigs, AssignmentEpochs) reads as
the empty default: Kafka never writes one, and both mean "none recorded".

Deliberately no ``from __future__ import annotations``: kio reads the field types at runtime.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from kio.static.constants import EntityType
from kio.static.primitive import i16

from coterie.common.shared_table import shared_opt, shared_str
from coterie.group.records.classic_codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordType,
    schema_field,
)
from coterie.group.records.classic_codec import (
    read_entity as _read_entity,
)
from coterie.group.records.classic_codec import (
    read_version as _read_version,
)
from coterie.group.records.flexible_codec import encode_record, non_null
from coterie.group.records.key_schemas import GroupKey as _GroupKey
from coterie.group.records.key_schemas import MemberKey as _MemberKey
from coterie.group.records.key_schemas import key_entity
from coterie.group.records.record import Record, RecordFamily
from coterie.group.records.streams import (
    NO_EPOCHS,
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    STREAMS_GROUP_MEMBER_METADATA,
    STREAMS_GROUP_METADATA,
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
    STREAMS_GROUP_TOPOLOGY,
    STREAMS_RECORD_KEY_TYPES,
    AssignmentEpochs,
    CopartitionGroup,
    Endpoint,
    Pairs,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    Subtopology,
    TopicInfo,
)
from coterie.group.records.tasks import Tasks, TaskSet, tasks

__all__ = ["FAMILY", "STREAMS_RECORD_TYPES", "VALUE_VERSION", "decode", "encode"]

STREAMS_RECORD_TYPES: Final = frozenset({
    STREAMS_GROUP_METADATA,
    STREAMS_GROUP_MEMBER_METADATA,
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    STREAMS_GROUP_TOPOLOGY,
})
VALUE_VERSION: Final = 0


_f = schema_field


def _tag(kafka_type: str | None, tag: int, default: Any) -> Any:
    """A tagged schema field; kio writes it only when it differs from `default`."""
    metadata: dict[str, Any] = {"tag": tag}
    if kafka_type is not None:
        metadata["kafka_type"] = kafka_type
    return field(metadata=metadata, default=default)


# --------------------------------------------------------------------------------------------
# Keys: `key_schemas` (the group id, or the group id and a member id).
# Values (flexible, version 0).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _KeyValue:
    """The (key, value) struct of LastAssignmentConfig, KeyValue (client tags) and
    TopicConfig: three names in Kafka, one layout."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    key: str = _f("string")
    value: str = _f("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class _MetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: int = _f("int32")
    metadata_hash: int = _f("int64")
    validated_topology_epoch: int = _tag("int32", 0, -1)
    last_assignment_configs: tuple[_KeyValue, ...] | None = _tag(None, 1, ())


@dataclass(frozen=True, slots=True, kw_only=True)
class _Endpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    host: str = _f("string")
    port: int = _f("uint16")


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = _f("string")
    rack_id: str | None = _f("string")
    client_id: str = _f("string")
    client_host: str = _f("string")
    rebalance_timeout_ms: int = _f("int32")
    topology_epoch: int = _f("int32")
    process_id: str = _f("string")
    user_endpoint: _Endpoint | None  # a nullable struct: an int8 -1 (null) or 1 before it
    client_tags: tuple[_KeyValue, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _TargetAssignmentMetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    assignment_epoch: int = _f("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class _TaskIds:
    """StreamsGroupTargetAssignmentMemberValue.TaskIds."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    subtopology_id: str = _f("string")
    partitions: tuple[int, ...] = _f("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class _TargetAssignmentMemberValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    active_tasks: tuple[_TaskIds, ...]
    standby_tasks: tuple[_TaskIds, ...]
    warmup_tasks: tuple[_TaskIds, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _EpochTaskIds:
    """StreamsGroupCurrentMemberAssignmentValue.TaskIds: TaskIds with the tagged epochs."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    subtopology_id: str = _f("string")
    partitions: tuple[int, ...] = _f("int32")
    assignment_epochs: tuple[int, ...] | None = _tag("int32", 0, ())


@dataclass(frozen=True, slots=True, kw_only=True)
class _CurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: int = _f("int32")
    previous_member_epoch: int = _f("int32")
    state: int = _f("int8")
    active_tasks: tuple[_EpochTaskIds, ...]
    standby_tasks: tuple[_EpochTaskIds, ...]
    warmup_tasks: tuple[_EpochTaskIds, ...]
    active_tasks_pending_revocation: tuple[_EpochTaskIds, ...]
    standby_tasks_pending_revocation: tuple[_EpochTaskIds, ...]
    warmup_tasks_pending_revocation: tuple[_EpochTaskIds, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = _f("string")
    partitions: int = _f("int32")
    replication_factor: int = _f("int16")
    topic_configs: tuple[_KeyValue, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _CopartitionGroup:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    source_topics: tuple[int, ...] = _f("int16")
    source_topic_regex: tuple[int, ...] = _f("int16")
    repartition_source_topics: tuple[int, ...] = _f("int16")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Subtopology:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    subtopology_id: str = _f("string")
    source_topics: tuple[str, ...] = _f("string")
    source_topic_regex: tuple[str, ...] = _f("string")
    state_changelog_topics: tuple[_TopicInfo, ...]
    repartition_sink_topics: tuple[str, ...] = _f("string")
    repartition_source_topics: tuple[_TopicInfo, ...]
    copartition_groups: tuple[_CopartitionGroup, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopologyValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: int = _f("int32")
    subtopologies: tuple[_Subtopology, ...]


# --------------------------------------------------------------------------------------------
# Plain values -> schema entities.
# --------------------------------------------------------------------------------------------


def _pairs(pairs: Pairs) -> tuple[_KeyValue, ...]:
    return tuple(_KeyValue(key=k, value=v) for k, v in pairs)


def _task_ids(t: Tasks) -> tuple[_TaskIds, ...]:
    """Subtopologies and partitions sorted, as Kafka writes them, so equal sets give equal
    bytes."""
    return tuple(_TaskIds(subtopology_id=s, partitions=tuple(sorted(t[s]))) for s in sorted(t))


def _epoch_task_ids(t: Tasks, epochs: AssignmentEpochs = NO_EPOCHS,
                    what: str = "") -> tuple[_EpochTaskIds, ...]:
    """As `_task_ids`, each subtopology with its partitions' epochs when it has them."""
    stray = set(epochs) - set(t)
    if stray:
        raise RecordEncodeError(f"{what}: assignment epochs for subtopologies without tasks: "
                                f"{sorted(stray)}")
    out = []
    for s in sorted(t):
        partitions = tuple(sorted(t[s]))
        by_partition = epochs.get(s)
        if not by_partition:
            out.append(_EpochTaskIds(subtopology_id=s, partitions=partitions))
            continue
        if set(by_partition) != set(partitions):
            raise RecordEncodeError(f"{what}: the assignment epochs of subtopology {s!r} are not "
                                    f"for exactly its partitions")
        out.append(_EpochTaskIds(subtopology_id=s, partitions=partitions,
                                 assignment_epochs=tuple(by_partition[p] for p in partitions)))
    return tuple(out)


def _topic_infos(infos: Iterable[TopicInfo]) -> tuple[_TopicInfo, ...]:
    return tuple(_TopicInfo(name=i.name, partitions=i.partitions,
                            replication_factor=i.replication_factor,
                            topic_configs=_pairs(i.topic_configs)) for i in infos)


def _subtopology(s: Subtopology) -> _Subtopology:
    return _Subtopology(
        subtopology_id=s.subtopology_id,
        source_topics=tuple(s.source_topics),
        source_topic_regex=tuple(s.source_topic_regex),
        state_changelog_topics=_topic_infos(s.state_changelog_topics),
        repartition_sink_topics=tuple(s.repartition_sink_topics),
        repartition_source_topics=_topic_infos(s.repartition_source_topics),
        copartition_groups=tuple(
            _CopartitionGroup(source_topics=tuple(g.source_topics),
                              source_topic_regex=tuple(g.source_topic_regex),
                              repartition_source_topics=tuple(g.repartition_source_topics))
            for g in s.copartition_groups),
    )


def _value_entity(key: object, value: object) -> tuple[type, object]:
    """The schema entity for `value`, and its type (what kio writes it by)."""
    match key, value:
        case StreamsGroupMetadataKey(), StreamsGroupMetadataValue() as v:
            return _MetadataValue, _MetadataValue(
                epoch=v.epoch, metadata_hash=v.metadata_hash,
                validated_topology_epoch=v.validated_topology_epoch,
                last_assignment_configs=_pairs(v.last_assignment_configs))
        case StreamsGroupMemberMetadataKey(), StreamsGroupMemberMetadataValue() as v:
            endpoint = v.user_endpoint
            return _MemberMetadataValue, _MemberMetadataValue(
                instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                client_host=v.client_host, rebalance_timeout_ms=v.rebalance_timeout_ms,
                topology_epoch=v.topology_epoch, process_id=v.process_id,
                user_endpoint=None if endpoint is None else _Endpoint(host=endpoint.host,
                                                                      port=endpoint.port),
                client_tags=_pairs(v.client_tags))
        case (StreamsGroupTargetAssignmentMetadataKey(),
              StreamsGroupTargetAssignmentMetadataValue() as v):
            return _TargetAssignmentMetadataValue, _TargetAssignmentMetadataValue(
                assignment_epoch=v.assignment_epoch)
        case (StreamsGroupTargetAssignmentMemberKey(),
              StreamsGroupTargetAssignmentMemberValue() as v):
            return _TargetAssignmentMemberValue, _TargetAssignmentMemberValue(
                active_tasks=_task_ids(v.tasks.active),
                standby_tasks=_task_ids(v.tasks.standby),
                warmup_tasks=_task_ids(v.tasks.warmup))
        case (StreamsGroupCurrentMemberAssignmentKey(),
              StreamsGroupCurrentMemberAssignmentValue() as v):
            what = "StreamsGroupCurrentMemberAssignmentValue"
            assigned, pending = v.assigned_tasks, v.tasks_pending_revocation
            return _CurrentMemberAssignmentValue, _CurrentMemberAssignmentValue(
                member_epoch=v.member_epoch,
                previous_member_epoch=v.previous_member_epoch,
                state=v.state,
                active_tasks=_epoch_task_ids(assigned.active, v.active_tasks_epochs, what),
                standby_tasks=_epoch_task_ids(assigned.standby),
                warmup_tasks=_epoch_task_ids(assigned.warmup),
                active_tasks_pending_revocation=_epoch_task_ids(
                    pending.active, v.active_tasks_pending_revocation_epochs, what),
                standby_tasks_pending_revocation=_epoch_task_ids(pending.standby),
                warmup_tasks_pending_revocation=_epoch_task_ids(pending.warmup))
        case StreamsGroupTopologyKey(), StreamsGroupTopologyValue() as v:
            return _TopologyValue, _TopologyValue(
                epoch=v.epoch, subtopologies=tuple(_subtopology(s) for s in v.subtopologies))
    raise RecordEncodeError(
        f"{type(value).__name__} cannot be the value of a {type(key).__name__}")


_RECORD_TYPES: Final[dict[type, int]] = {
    StreamsGroupMetadataKey: STREAMS_GROUP_METADATA,
    StreamsGroupTargetAssignmentMetadataKey: STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
    StreamsGroupTopologyKey: STREAMS_GROUP_TOPOLOGY,
    StreamsGroupMemberMetadataKey: STREAMS_GROUP_MEMBER_METADATA,
    StreamsGroupTargetAssignmentMemberKey: STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
    StreamsGroupCurrentMemberAssignmentKey: STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT,
}


def _key_entity(key: object) -> tuple[int, type, object]:
    return key_entity(key, _RECORD_TYPES, "streams-group")


# --------------------------------------------------------------------------------------------
# Encoding.
# --------------------------------------------------------------------------------------------


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a streams-group record; a tombstone has value None."""
    return encode_record(record, _key_entity, _value_entity, VALUE_VERSION)


# --------------------------------------------------------------------------------------------
# Decoding.
# --------------------------------------------------------------------------------------------


def _read_pairs(entries: Any, what: str) -> Pairs:
    return tuple((e.key, e.value) for e in non_null(entries, what))


def _read_tasks(entries: Any, what: str) -> Tasks:
    by_subtopology: dict[str, set[int]] = {}
    for entry in non_null(entries, what):
        by_subtopology.setdefault(entry.subtopology_id, set()).update(
            int(p) for p in non_null(entry.partitions, f"{what}.Partitions"))
    return tasks(by_subtopology)


def _read_epochs(entries: Any, what: str) -> AssignmentEpochs:
    out: dict[str, dict[int, int]] = {}
    for entry in entries:  # already checked by _read_tasks
        epochs = entry.assignment_epochs
        if not epochs:
            continue
        if len(epochs) != len(entry.partitions):
            raise RecordDecodeError(
                f"{what}: {len(epochs)} assignment epochs for {len(entry.partitions)} "
                f"partitions of subtopology {entry.subtopology_id!r}")
        out.setdefault(entry.subtopology_id, {}).update(
            (int(p), int(e)) for p, e in zip(entry.partitions, epochs, strict=True))
    return out


def _read_topic_infos(entries: Any, what: str) -> tuple[TopicInfo, ...]:
    return tuple(TopicInfo(name=i.name, partitions=int(i.partitions),
                           replication_factor=int(i.replication_factor),
                           topic_configs=_read_pairs(i.topic_configs, f"{what}.TopicConfigs"))
                 for i in non_null(entries, what))


def _read_subtopology(s: Any, what: str) -> Subtopology:
    return Subtopology(
        subtopology_id=s.subtopology_id,
        source_topics=tuple(non_null(s.source_topics, f"{what}.SourceTopics")),
        source_topic_regex=tuple(non_null(s.source_topic_regex, f"{what}.SourceTopicRegex")),
        state_changelog_topics=_read_topic_infos(s.state_changelog_topics,
                                                 f"{what}.StateChangelogTopics"),
        repartition_sink_topics=tuple(non_null(s.repartition_sink_topics,
                                           f"{what}.RepartitionSinkTopics")),
        repartition_source_topics=_read_topic_infos(s.repartition_source_topics,
                                                    f"{what}.RepartitionSourceTopics"),
        copartition_groups=tuple(
            CopartitionGroup(
                source_topics=tuple(int(i) for i in non_null(g.source_topics, what)),
                source_topic_regex=tuple(int(i) for i in non_null(g.source_topic_regex, what)),
                repartition_source_topics=tuple(
                    int(i) for i in non_null(g.repartition_source_topics, what)))
            for g in non_null(s.copartition_groups, f"{what}.CopartitionGroups")),
    )


def _decode_metadata(v: Any) -> StreamsGroupMetadataValue:
    configs = v.last_assignment_configs
    return StreamsGroupMetadataValue(
        epoch=int(v.epoch), metadata_hash=int(v.metadata_hash),
        validated_topology_epoch=int(v.validated_topology_epoch),
        last_assignment_configs=() if configs is None else _read_pairs(
            configs, "StreamsGroupMetadataValue.LastAssignmentConfigs"))


def _decode_member_metadata(v: Any) -> StreamsGroupMemberMetadataValue:
    endpoint = v.user_endpoint
    # Values many members repeat are shared (`shared_table.py`): the loaded record stays in
    # the shard's durable map, beside the member built from it.
    return StreamsGroupMemberMetadataValue(
        instance_id=v.instance_id, rack_id=shared_opt(v.rack_id),
        client_id=shared_str(v.client_id), client_host=shared_str(v.client_host),
        rebalance_timeout_ms=int(v.rebalance_timeout_ms), topology_epoch=int(v.topology_epoch),
        process_id=shared_str(v.process_id),
        user_endpoint=None if endpoint is None else Endpoint(shared_str(endpoint.host),
                                                             int(endpoint.port)),
        client_tags=_read_pairs(v.client_tags, "StreamsGroupMemberMetadataValue.ClientTags"))


def _decode_target_member(v: Any) -> StreamsGroupTargetAssignmentMemberValue:
    what = "StreamsGroupTargetAssignmentMemberValue"
    return StreamsGroupTargetAssignmentMemberValue(TaskSet(
        _read_tasks(v.active_tasks, f"{what}.ActiveTasks"),
        _read_tasks(v.standby_tasks, f"{what}.StandbyTasks"),
        _read_tasks(v.warmup_tasks, f"{what}.WarmupTasks")))


def _decode_current_assignment(v: Any) -> StreamsGroupCurrentMemberAssignmentValue:
    what = "StreamsGroupCurrentMemberAssignmentValue"
    active = _read_tasks(v.active_tasks, f"{what}.ActiveTasks")
    pending_active = _read_tasks(v.active_tasks_pending_revocation,
                                 f"{what}.ActiveTasksPendingRevocation")
    return StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=int(v.member_epoch),
        previous_member_epoch=int(v.previous_member_epoch),
        state=int(v.state),
        assigned_tasks=TaskSet(
            active,
            _read_tasks(v.standby_tasks, f"{what}.StandbyTasks"),
            _read_tasks(v.warmup_tasks, f"{what}.WarmupTasks")),
        tasks_pending_revocation=TaskSet(
            pending_active,
            _read_tasks(v.standby_tasks_pending_revocation,
                        f"{what}.StandbyTasksPendingRevocation"),
            _read_tasks(v.warmup_tasks_pending_revocation,
                        f"{what}.WarmupTasksPendingRevocation")),
        # Kafka reads (and ignores) epochs on the standby and warm-up lists; so does this.
        active_tasks_epochs=_read_epochs(v.active_tasks, f"{what}.ActiveTasks"),
        active_tasks_pending_revocation_epochs=_read_epochs(
            v.active_tasks_pending_revocation, f"{what}.ActiveTasksPendingRevocation"),
    )


def _decode_topology(v: Any) -> StreamsGroupTopologyValue:
    what = "StreamsGroupTopologyValue.Subtopologies"
    return StreamsGroupTopologyValue(
        epoch=int(v.epoch),
        subtopologies=tuple(_read_subtopology(s, what) for s in non_null(v.subtopologies, what)))


_VALUES: Final[Mapping[int, tuple[str, type, Callable[[Any], object]]]] = {
    STREAMS_GROUP_METADATA: ("StreamsGroupMetadataValue", _MetadataValue, _decode_metadata),
    STREAMS_GROUP_MEMBER_METADATA: ("StreamsGroupMemberMetadataValue", _MemberMetadataValue,
                                    _decode_member_metadata),
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: (
        "StreamsGroupTargetAssignmentMetadataValue", _TargetAssignmentMetadataValue,
        lambda v: StreamsGroupTargetAssignmentMetadataValue(int(v.assignment_epoch))),
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: (
        "StreamsGroupTargetAssignmentMemberValue", _TargetAssignmentMemberValue,
        _decode_target_member),
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: (
        "StreamsGroupCurrentMemberAssignmentValue", _CurrentMemberAssignmentValue,
        _decode_current_assignment),
    STREAMS_GROUP_TOPOLOGY: ("StreamsGroupTopologyValue", _TopologyValue, _decode_topology),
}

_KEYS: Final[Mapping[int, Callable[[Any], object]]] = {
    STREAMS_GROUP_METADATA: lambda k: StreamsGroupMetadataKey(k.group_id),
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
        lambda k: StreamsGroupTargetAssignmentMetadataKey(k.group_id),
    STREAMS_GROUP_TOPOLOGY: lambda k: StreamsGroupTopologyKey(k.group_id),
    STREAMS_GROUP_MEMBER_METADATA: lambda k: StreamsGroupMemberMetadataKey(k.group_id,
                                                                           k.member_id),
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER:
        lambda k: StreamsGroupTargetAssignmentMemberKey(k.group_id, k.member_id),
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        lambda k: StreamsGroupCurrentMemberAssignmentKey(k.group_id, k.member_id),
}

_GROUP_KEY_TYPES: Final = frozenset({STREAMS_GROUP_METADATA,
                                     STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA,
                                     STREAMS_GROUP_TOPOLOGY})


def _decode_value(record_type: int, value: bytes) -> object:
    what, schema_type, build = _VALUES[record_type]
    version = _read_version(value, what)
    if version != VALUE_VERSION:
        raise RecordDecodeError(f"unsupported {what} version {version}")
    return build(_read_entity(value, schema_type, what))


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode a streams-group record; `UnknownRecordType` for any other record type."""
    key = bytes(key)
    record_type = _read_version(key, "record key")
    if record_type not in STREAMS_RECORD_TYPES:
        raise UnknownRecordType(record_type)
    schema_type = _GroupKey if record_type in _GROUP_KEY_TYPES else _MemberKey
    decoded_key = _KEYS[record_type](_read_entity(key, schema_type, "key"))
    if value is None:
        return Record(decoded_key, None)
    return Record(decoded_key, _decode_value(record_type, bytes(value)))


# The streams-group records' family, for the group kind that will serve streams groups to
# register (`coterie.group.registry`).
FAMILY: Final = RecordFamily("streams groups (KIP-1071)", STREAMS_RECORD_TYPES,
                             STREAMS_RECORD_KEY_TYPES, encode, decode)
