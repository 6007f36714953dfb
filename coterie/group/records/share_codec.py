"""Byte encoding of share-group records, compatible with Kafka 4.2's `__consumer_offsets`.

As for the consumer- and streams-group records, each key and value starts with an int16: for a
key the record type (10 to 15), for a value the value version (0 for all of these). Keys are
non-flexible structs; values are flexible (compact strings and arrays, tagged fields), exactly
as Kafka 4.2's `ShareGroup*` coordinator record schemas say. The schemas are kio entity
dataclasses so kio's serializers do the byte work; none of them has a tagged field yet, so
every struct ends with an empty tagged-field section, and an unknown tagged field in one read
is refused (kio's KeyError), as for the other families.

One schema rule kio does not check is checked here: Kafka cannot read back a string longer
than 32,767 bytes even where the format is a compact string, so such a record is refused at
encoding (`RecordEncodeError`), not left to fail Kafka's loading.

Sets are written sorted (topics by id, partitions ascending) so equal values give equal
bytes; a topic listed twice in one record is refused on reading, as Kafka never writes one
and would not know which entry to keep either.

Deliberately no ``from __future__ import annotations``: kio reads the field types at runtime.
"""

import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
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
from coterie.group.records.classic_codec import read_entity as _read_entity
from coterie.group.records.classic_codec import read_version as _read_version
from coterie.group.records.flexible_codec import encode_record, non_null
from coterie.group.records.key_schemas import GroupKey as _GroupKey
from coterie.group.records.key_schemas import MemberKey as _MemberKey
from coterie.group.records.key_schemas import key_entity
from coterie.group.records.partition_set import compact
from coterie.group.records.record import Record, RecordFamily
from coterie.group.records.share import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    SHARE_RECORD_KEY_TYPES,
    InitTopic,
    Partitions,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)

__all__ = ["FAMILY", "SHARE_RECORD_TYPES", "VALUE_VERSION", "decode", "encode"]

SHARE_RECORD_TYPES: Final = frozenset({
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_STATE_PARTITION_METADATA,
})
VALUE_VERSION: Final = 0

_f = schema_field


# --------------------------------------------------------------------------------------------
# Keys: `key_schemas` (the group id, or the group id and a member id).
# Values (flexible, version 0).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    rack_id: str | None = _f("string")
    client_id: str = _f("string")
    client_host: str = _f("string")
    subscribed_topic_names: tuple[str, ...] = _f("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class _MetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: int = _f("int32")
    metadata_hash: int = _f("int64")


@dataclass(frozen=True, slots=True, kw_only=True)
class _TargetAssignmentMetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    assignment_epoch: int = _f("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicPartitions:
    """The (TopicId, Partitions) struct of the target and current assignment values: two
    names in Kafka (TopicPartition, TopicPartitions), one layout."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[int, ...] = _f("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class _TargetAssignmentMemberValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_partitions: tuple[_TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _CurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: int = _f("int32")
    previous_member_epoch: int = _f("int32")
    state: int = _f("int8")
    assigned_partitions: tuple[_TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicPartitionsInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = _f("string")
    partitions: tuple[int, ...] = _f("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = _f("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class _StatePartitionMetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    initializing_topics: tuple[_TopicPartitionsInfo, ...]
    initialized_topics: tuple[_TopicPartitionsInfo, ...]
    deleting_topics: tuple[_TopicInfo, ...]


# --------------------------------------------------------------------------------------------
# Plain values -> schema entities.
# --------------------------------------------------------------------------------------------


def _topic_partitions(partitions: Partitions) -> tuple[_TopicPartitions, ...]:
    """Grouped by topic, topics and partitions sorted, so equal sets give equal bytes."""
    by_topic: dict[uuid.UUID, list[int]] = defaultdict(list)
    for topic_id, partition in partitions:
        by_topic[topic_id].append(partition)
    return tuple(_TopicPartitions(topic_id=t, partitions=tuple(sorted(by_topic[t])))
                 for t in sorted(by_topic))


def _init_topics(topics: Mapping[uuid.UUID, InitTopic]) -> tuple[_TopicPartitionsInfo, ...]:
    return tuple(_TopicPartitionsInfo(topic_id=t, topic_name=topics[t].topic_name,
                                      partitions=tuple(sorted(topics[t].partitions)))
                 for t in sorted(topics))


def _value_entity(key: object, value: object) -> tuple[type, object]:
    """The schema entity for `value`, and its type (what kio writes it by)."""
    match key, value:
        case ShareGroupMemberMetadataKey(), ShareGroupMemberMetadataValue() as v:
            return _MemberMetadataValue, _MemberMetadataValue(
                rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
                subscribed_topic_names=tuple(v.subscribed_topic_names))
        case ShareGroupMetadataKey(), ShareGroupMetadataValue() as v:
            return _MetadataValue, _MetadataValue(epoch=v.epoch, metadata_hash=v.metadata_hash)
        case (ShareGroupTargetAssignmentMetadataKey(),
              ShareGroupTargetAssignmentMetadataValue() as v):
            return _TargetAssignmentMetadataValue, _TargetAssignmentMetadataValue(
                assignment_epoch=v.assignment_epoch)
        case ShareGroupTargetAssignmentMemberKey(), ShareGroupTargetAssignmentMemberValue() as v:
            return _TargetAssignmentMemberValue, _TargetAssignmentMemberValue(
                topic_partitions=_topic_partitions(v.partitions))
        case (ShareGroupCurrentMemberAssignmentKey(),
              ShareGroupCurrentMemberAssignmentValue() as v):
            return _CurrentMemberAssignmentValue, _CurrentMemberAssignmentValue(
                member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                state=v.state, assigned_partitions=_topic_partitions(v.assigned))
        case (ShareGroupStatePartitionMetadataKey(),
              ShareGroupStatePartitionMetadataValue() as v):
            deleting = v.deleting_topics
            return _StatePartitionMetadataValue, _StatePartitionMetadataValue(
                initializing_topics=_init_topics(v.initializing_topics),
                initialized_topics=_init_topics(v.initialized_topics),
                deleting_topics=tuple(_TopicInfo(topic_id=t, topic_name=deleting[t])
                                      for t in sorted(deleting)))
    raise RecordEncodeError(
        f"{type(value).__name__} cannot be the value of a {type(key).__name__}")


_RECORD_TYPES: Final[dict[type, int]] = {
    ShareGroupMetadataKey: SHARE_GROUP_METADATA,
    ShareGroupTargetAssignmentMetadataKey: SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    ShareGroupStatePartitionMetadataKey: SHARE_GROUP_STATE_PARTITION_METADATA,
    ShareGroupMemberMetadataKey: SHARE_GROUP_MEMBER_METADATA,
    ShareGroupTargetAssignmentMemberKey: SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    ShareGroupCurrentMemberAssignmentKey: SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
}


def _key_entity(key: object) -> tuple[int, type, object]:
    return key_entity(key, _RECORD_TYPES, "share-group")


# --------------------------------------------------------------------------------------------
# Encoding.
# --------------------------------------------------------------------------------------------


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a share-group record; a tombstone has value None."""
    return encode_record(record, _key_entity, _value_entity, VALUE_VERSION)


# --------------------------------------------------------------------------------------------
# Decoding.
# --------------------------------------------------------------------------------------------


def _read_partitions(entries: Any, what: str) -> Partitions:
    out = []
    for entry in non_null(entries, what):
        out.extend((entry.topic_id, int(p))
                   for p in non_null(entry.partitions, f"{what}.Partitions"))
    return compact(out)  # kept in the group and the durable map: the compact form


def _by_topic(entries: Any, what: str) -> dict[uuid.UUID, Any]:
    """Entries keyed by topic id; a topic listed twice is refused (module docstring)."""
    out: dict[uuid.UUID, Any] = {}
    for entry in non_null(entries, what):
        if entry.topic_id in out:
            raise RecordDecodeError(f"{what}: topic {entry.topic_id} listed twice")
        out[entry.topic_id] = entry
    return out


def _read_init_topics(entries: Any, what: str) -> dict[uuid.UUID, InitTopic]:
    return {t: InitTopic(shared_str(e.topic_name),
                         frozenset(int(p) for p in non_null(e.partitions, f"{what}.Partitions")))
            for t, e in _by_topic(entries, what).items()}


def _decode_member_metadata(v: Any) -> ShareGroupMemberMetadataValue:
    # Values many members repeat are shared (`shared_table.py`): the loaded record stays in
    # the shard's durable map, beside the member built from it.
    what = "ShareGroupMemberMetadataValue.SubscribedTopicNames"
    return ShareGroupMemberMetadataValue(
        rack_id=shared_opt(v.rack_id), client_id=shared_str(v.client_id),
        client_host=shared_str(v.client_host),
        subscribed_topic_names=tuple(shared_str(t) for t in non_null(v.subscribed_topic_names,
                                                                  what)))


def _decode_current_assignment(v: Any) -> ShareGroupCurrentMemberAssignmentValue:
    return ShareGroupCurrentMemberAssignmentValue(
        member_epoch=int(v.member_epoch), previous_member_epoch=int(v.previous_member_epoch),
        state=int(v.state),
        assigned=_read_partitions(v.assigned_partitions,
                                  "ShareGroupCurrentMemberAssignmentValue.AssignedPartitions"))


def _decode_state_partitions(v: Any) -> ShareGroupStatePartitionMetadataValue:
    what = "ShareGroupStatePartitionMetadataValue"
    return ShareGroupStatePartitionMetadataValue(
        initializing_topics=_read_init_topics(v.initializing_topics,
                                              f"{what}.InitializingTopics"),
        initialized_topics=_read_init_topics(v.initialized_topics, f"{what}.InitializedTopics"),
        deleting_topics={t: shared_str(e.topic_name) for t, e in
                         _by_topic(v.deleting_topics, f"{what}.DeletingTopics").items()})


_VALUES: Final[Mapping[int, tuple[str, type, Callable[[Any], object]]]] = {
    SHARE_GROUP_MEMBER_METADATA: ("ShareGroupMemberMetadataValue", _MemberMetadataValue,
                                  _decode_member_metadata),
    SHARE_GROUP_METADATA: (
        "ShareGroupMetadataValue", _MetadataValue,
        lambda v: ShareGroupMetadataValue(int(v.epoch), int(v.metadata_hash))),
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: (
        "ShareGroupTargetAssignmentMetadataValue", _TargetAssignmentMetadataValue,
        lambda v: ShareGroupTargetAssignmentMetadataValue(int(v.assignment_epoch))),
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: (
        "ShareGroupTargetAssignmentMemberValue", _TargetAssignmentMemberValue,
        lambda v: ShareGroupTargetAssignmentMemberValue(_read_partitions(
            v.topic_partitions, "ShareGroupTargetAssignmentMemberValue.TopicPartitions"))),
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: (
        "ShareGroupCurrentMemberAssignmentValue", _CurrentMemberAssignmentValue,
        _decode_current_assignment),
    SHARE_GROUP_STATE_PARTITION_METADATA: (
        "ShareGroupStatePartitionMetadataValue", _StatePartitionMetadataValue,
        _decode_state_partitions),
}

_KEYS: Final[Mapping[int, Callable[[Any], object]]] = {
    SHARE_GROUP_MEMBER_METADATA: lambda k: ShareGroupMemberMetadataKey(k.group_id, k.member_id),
    SHARE_GROUP_METADATA: lambda k: ShareGroupMetadataKey(k.group_id),
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
        lambda k: ShareGroupTargetAssignmentMetadataKey(k.group_id),
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
        lambda k: ShareGroupTargetAssignmentMemberKey(k.group_id, k.member_id),
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        lambda k: ShareGroupCurrentMemberAssignmentKey(k.group_id, k.member_id),
    SHARE_GROUP_STATE_PARTITION_METADATA:
        lambda k: ShareGroupStatePartitionMetadataKey(k.group_id),
}

_GROUP_KEY_TYPES: Final = frozenset({SHARE_GROUP_METADATA,
                                     SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
                                     SHARE_GROUP_STATE_PARTITION_METADATA})


def _decode_value(record_type: int, value: bytes) -> object:
    what, schema_type, build = _VALUES[record_type]
    version = _read_version(value, what)
    if version != VALUE_VERSION:
        raise RecordDecodeError(f"unsupported {what} version {version}")
    return build(_read_entity(value, schema_type, what))


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode a share-group record; `UnknownRecordType` for any other record type."""
    key = bytes(key)
    record_type = _read_version(key, "record key")
    if record_type not in SHARE_RECORD_TYPES:
        raise UnknownRecordType(record_type)
    schema_type = _GroupKey if record_type in _GROUP_KEY_TYPES else _MemberKey
    decoded_key = _KEYS[record_type](_read_entity(key, schema_type, "key"))
    if value is None:
        return Record(decoded_key, None)
    return Record(decoded_key, _decode_value(record_type, bytes(value)))


# The share-group records' family, for the group kind that will serve share groups to
# register (`coterie.group.registry`); none does yet, so nothing registers it.
FAMILY: Final = RecordFamily("share groups (KIP-932)", SHARE_RECORD_TYPES,
                             SHARE_RECORD_KEY_TYPES, encode, decode)
