"""Byte encoding of consumer-group records, compatible with Kafka 4.x's `__consumer_offsets`.

Like the classic records in `records/classic_codec.py`, each key and value starts with an
int16: for a key the record type (3, 5, 6, 7, 8, 16), for a value the value version (0 for
all of these).
Keys are non-flexible structs; values are flexible (compact strings and arrays, tagged
fields), exactly as Kafka's `ConsumerGroup*` coordinator record schemas say. The schemas are
kio entity dataclasses so kio's serializers do the byte work.

One field kio cannot express: `ConsumerGroupMemberMetadataValue.ClassicMemberMetadata` is a
*nullable* struct in a tagged field. Kafka writes that tag even when it is null (body: a
varint 0) and, when set, as a varint 1 followed by the struct. This module writes and reads
that tagged section by hand and lets kio do everything else.

Deliberately no ``from __future__ import annotations``: kio reads the field types at runtime.
"""

import io
import struct
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import (
    compact_array_reader,
    read_compact_string,
    read_compact_string_nullable,
    read_int32,
    read_unsigned_varint,
)
from kio.serial.writers import write_unsigned_varint
from kio.static.constants import EntityType
from kio.static.primitive import i16

from coterie.common.shared_table import shared_opt, shared_str
from coterie.group.records.classic_codec import (
    DECODE_ERRORS as _DECODE_ERRORS,
)
from coterie.group.records.classic_codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordType,
    schema_field,
)
from coterie.group.records.classic_codec import (
    prefixed as _prefixed,
)
from coterie.group.records.classic_codec import (
    read_entity as _read_entity,
)
from coterie.group.records.classic_codec import (
    read_version as _read_version,
)
from coterie.group.records.consumer import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CONSUMER_RECORD_KEY_TYPES,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    Partitions,
)
from coterie.group.records.key_schemas import GroupKey as _GroupKey
from coterie.group.records.key_schemas import MemberKey as _MemberKey
from coterie.group.records.partition_set import compact
from coterie.group.records.record import Record, RecordFamily
from coterie.wire.bounds import BoundsError, check_entity

__all__ = ["CONSUMER_RECORD_TYPES", "VALUE_VERSION", "decode", "encode"]

CONSUMER_RECORD_TYPES: Final = frozenset({
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
})
VALUE_VERSION: Final = 0


_f = schema_field


# --------------------------------------------------------------------------------------------
# Keys (non-flexible, version 0 of each key schema): the group and member keys are
# `key_schemas`'; the regex key is this family's own.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _RegexKey:
    """Type 16: group id and the regular expression."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = _f("string")
    regular_expression: str = _f("string")


# --------------------------------------------------------------------------------------------
# Values (flexible, version 0).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupMetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: int = _f("int32")
    metadata_hash: int = field(metadata={"kafka_type": "int64", "tag": 0}, default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadataValue:
    """Every field but the tagged ClassicMemberMetadata, which is handled by hand."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = _f("string")
    rack_id: str | None = _f("string")
    client_id: str = _f("string")
    client_host: str = _f("string")
    subscribed_topic_names: tuple[str, ...] = _f("string")
    subscribed_topic_regex: str | None = _f("string")
    rebalance_timeout_ms: int = _f("int32")
    server_assignor: str | None = _f("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class _ClassicProtocol:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = _f("string")
    metadata: bytes = _f("bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class _ClassicMemberMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    session_timeout_ms: int = _f("int32")
    supported_protocols: tuple[_ClassicProtocol, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _TargetAssignmentMetadataValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    assignment_epoch: int = _f("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicPartitions:
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
    partitions_pending_revocation: tuple[_TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _RegularExpressionValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topics: tuple[str, ...] = _f("string")
    version: int = _f("int64")
    timestamp: int = _f("int64")


# --------------------------------------------------------------------------------------------
# Partition sets <-> Kafka's per-topic lists.
# --------------------------------------------------------------------------------------------


def _to_topic_partitions(partitions: Partitions) -> tuple[_TopicPartitions, ...]:
    """Group by topic, topics and partitions sorted, so equal sets give equal bytes."""
    by_topic: dict[uuid.UUID, list[int]] = defaultdict(list)
    for topic_id, partition in partitions:
        by_topic[topic_id].append(partition)
    return tuple(_TopicPartitions(topic_id=t, partitions=tuple(sorted(by_topic[t])))
                 for t in sorted(by_topic))


def _from_topic_partitions(entries: Iterable[Any] | None, what: str) -> Partitions:
    if entries is None:
        raise RecordDecodeError(f"{what} is null")
    out = []
    for entry in entries:
        if entry.partitions is None:
            raise RecordDecodeError(f"{what}: partitions of {entry.topic_id} are null")
        out.extend((entry.topic_id, int(p)) for p in entry.partitions)
    return compact(out)  # kept in the group and the durable map: the compact form


# --------------------------------------------------------------------------------------------
# Encoding.
# --------------------------------------------------------------------------------------------



def _encode_key(key: object) -> bytes:
    match key:
        case ConsumerGroupMetadataKey(group_id=g):
            return _prefixed(CONSUMER_GROUP_METADATA, _GroupKey, _GroupKey(group_id=g))
        case ConsumerGroupTargetAssignmentMetadataKey(group_id=g):
            return _prefixed(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, _GroupKey,
                             _GroupKey(group_id=g))
        case ConsumerGroupMemberMetadataKey(group_id=g, member_id=m):
            return _prefixed(CONSUMER_GROUP_MEMBER_METADATA, _MemberKey,
                             _MemberKey(group_id=g, member_id=m))
        case ConsumerGroupTargetAssignmentMemberKey(group_id=g, member_id=m):
            return _prefixed(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, _MemberKey,
                             _MemberKey(group_id=g, member_id=m))
        case ConsumerGroupCurrentMemberAssignmentKey(group_id=g, member_id=m):
            return _prefixed(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, _MemberKey,
                             _MemberKey(group_id=g, member_id=m))
        case ConsumerGroupRegularExpressionKey(group_id=g, regex=r):
            return _prefixed(CONSUMER_GROUP_REGULAR_EXPRESSION, _RegexKey,
                             _RegexKey(group_id=g, regular_expression=r))
    raise RecordEncodeError(f"not a consumer-group record key: {key!r}")


def _encode_member_metadata(value: ConsumerGroupMemberMetadataValue) -> bytes:
    main = _prefixed(VALUE_VERSION, _MemberMetadataValue, _MemberMetadataValue(
        instance_id=value.instance_id,
        rack_id=value.rack_id,
        client_id=value.client_id,
        client_host=value.client_host,
        subscribed_topic_names=tuple(value.subscribed_topic_names),
        subscribed_topic_regex=value.subscribed_topic_regex,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        server_assignor=value.server_assignor,
    ))
    # kio ended the struct with an empty tagged-field section (a single 0x00); replace it
    # with Kafka's: one field, tag 0, holding the nullable ClassicMemberMetadata.
    assert main[-1] == 0
    body = io.BytesIO()
    classic = value.classic_member_metadata
    if classic is None:
        write_unsigned_varint(body, 0)
    else:
        write_unsigned_varint(body, 1)
        entity_writer(_ClassicMemberMetadata)(body, _ClassicMemberMetadata(
            session_timeout_ms=classic.session_timeout_ms,
            supported_protocols=tuple(_ClassicProtocol(name=n, metadata=m)
                                      for n, m in classic.supported_protocols),
        ))
    out = io.BytesIO()
    out.write(main[:-1])
    write_unsigned_varint(out, 1)  # number of tagged fields
    write_unsigned_varint(out, 0)  # tag
    write_unsigned_varint(out, len(body.getvalue()))
    out.write(body.getvalue())
    return out.getvalue()


def _encode_value(key: object, value: object) -> bytes:
    match key, value:
        case ConsumerGroupMetadataKey(), ConsumerGroupMetadataValue() as v:
            return _prefixed(VALUE_VERSION, _GroupMetadataValue, _GroupMetadataValue(
                epoch=v.epoch, metadata_hash=v.metadata_hash))
        case ConsumerGroupMemberMetadataKey(), ConsumerGroupMemberMetadataValue() as v:
            return _encode_member_metadata(v)
        case (ConsumerGroupTargetAssignmentMetadataKey(),
              ConsumerGroupTargetAssignmentMetadataValue() as v):
            return _prefixed(VALUE_VERSION, _TargetAssignmentMetadataValue,
                             _TargetAssignmentMetadataValue(assignment_epoch=v.assignment_epoch))
        case (ConsumerGroupTargetAssignmentMemberKey(),
              ConsumerGroupTargetAssignmentMemberValue() as v):
            return _prefixed(VALUE_VERSION, _TargetAssignmentMemberValue,
                             _TargetAssignmentMemberValue(
                                 topic_partitions=_to_topic_partitions(v.partitions)))
        case (ConsumerGroupCurrentMemberAssignmentKey(),
              ConsumerGroupCurrentMemberAssignmentValue() as v):
            return _prefixed(VALUE_VERSION, _CurrentMemberAssignmentValue,
                             _CurrentMemberAssignmentValue(
                                 member_epoch=v.member_epoch,
                                 previous_member_epoch=v.previous_member_epoch,
                                 state=v.state,
                                 assigned_partitions=_to_topic_partitions(v.assigned),
                                 partitions_pending_revocation=_to_topic_partitions(
                                     v.pending_revocation),
                             ))
        case ConsumerGroupRegularExpressionKey(), ConsumerGroupRegularExpressionValue() as v:
            return _prefixed(VALUE_VERSION, _RegularExpressionValue, _RegularExpressionValue(
                topics=tuple(v.topics), version=v.version, timestamp=v.timestamp_ms))
    raise RecordEncodeError(
        f"{type(value).__name__} cannot be the value of a {type(key).__name__}")


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a consumer-group record; a tombstone has value None."""
    try:
        key = _encode_key(record.key)
        if record.value is None:
            return key, None
        return key, _encode_value(record.key, record.value)
    except RecordEncodeError:
        raise
    except (SerialError, struct.error, OverflowError, TypeError, UnicodeEncodeError) as exc:
        raise RecordEncodeError(
            f"cannot encode {type(record.key).__name__} record: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Decoding.
# --------------------------------------------------------------------------------------------





def _value_body(value: bytes, what: str) -> bytes:
    version = _read_version(value, what)
    if version != VALUE_VERSION:
        raise RecordDecodeError(f"unsupported {what} version {version}")
    return value


_read_names = compact_array_reader(read_compact_string)


def _decode_member_metadata(value: bytes) -> ConsumerGroupMemberMetadataValue:
    what = "ConsumerGroupMemberMetadataValue"
    _value_body(value, what)
    try:
        pos = 2
        instance_id, n = read_compact_string_nullable(value, pos)
        pos += n
        rack_id, n = read_compact_string_nullable(value, pos)
        pos += n
        client_id, n = read_compact_string(value, pos)
        pos += n
        client_host, n = read_compact_string(value, pos)
        pos += n
        names, n = _read_names(value, pos)
        pos += n
        regex, n = read_compact_string_nullable(value, pos)
        pos += n
        rebalance_timeout, n = read_int32(value, pos)
        pos += n
        assignor, n = read_compact_string_nullable(value, pos)
        pos += n
        classic = None
        count, n = read_unsigned_varint(value, pos)
        pos += n
        for _ in range(count):
            tag, n = read_unsigned_varint(value, pos)
            pos += n
            size, n = read_unsigned_varint(value, pos)
            pos += n
            end = pos + size
            if end > len(value):
                raise RecordDecodeError(f"{what}: tagged field {tag} overruns the value")
            if tag == 0:
                classic = _read_classic(value[pos:end], what)
            # Unknown tags are skipped, as Kafka keeps them opaque.
            pos = end
    except RecordDecodeError:
        raise
    except _DECODE_ERRORS as exc:
        raise RecordDecodeError(f"malformed {what}: {exc!r}") from exc
    if pos != len(value):
        raise RecordDecodeError(f"{len(value) - pos} trailing bytes after {what}")
    if names is None:
        raise RecordDecodeError(f"{what}.SubscribedTopicNames is null")
    # Values many members repeat are shared (`shared.py`): the loaded record stays in the
    # shard's durable map, beside the member built from it.
    return ConsumerGroupMemberMetadataValue(
        instance_id=instance_id, rack_id=shared_opt(rack_id), client_id=shared_str(client_id),
        client_host=shared_str(client_host),
        subscribed_topic_names=tuple(shared_str(n) for n in names),
        subscribed_topic_regex=shared_opt(regex), rebalance_timeout_ms=int(rebalance_timeout),
        server_assignor=shared_opt(assignor), classic_member_metadata=classic,
    )


def _read_classic(body: bytes, what: str) -> ClassicMemberMetadata | None:
    present, n = read_unsigned_varint(body, 0)
    if present == 0:
        if n != len(body):
            raise RecordDecodeError(f"{what}: trailing bytes after a null ClassicMemberMetadata")
        return None
    try:  # the declared counts held against the bytes first (`classic_codec.read_entity`)
        check_entity(body, n, _ClassicMemberMetadata)
    except BoundsError as exc:
        raise RecordDecodeError(f"{what}: malformed ClassicMemberMetadata: {exc}") from exc
    entity, size = entity_reader(_ClassicMemberMetadata)(body, n)
    if n + size != len(body) or entity.supported_protocols is None:
        raise RecordDecodeError(f"{what}: malformed ClassicMemberMetadata")
    return ClassicMemberMetadata(
        session_timeout_ms=int(entity.session_timeout_ms),
        supported_protocols=tuple((p.name, bytes(p.metadata))
                                  for p in entity.supported_protocols),
    )


def _decode_value(record_type: int, value: bytes) -> object:
    if record_type == CONSUMER_GROUP_MEMBER_METADATA:
        return _decode_member_metadata(value)
    if record_type == CONSUMER_GROUP_METADATA:
        what = "ConsumerGroupMetadataValue"
        v = _read_entity(_value_body(value, what), _GroupMetadataValue, what)
        return ConsumerGroupMetadataValue(epoch=int(v.epoch), metadata_hash=int(v.metadata_hash))
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        what = "ConsumerGroupTargetAssignmentMetadataValue"
        v = _read_entity(_value_body(value, what), _TargetAssignmentMetadataValue, what)
        return ConsumerGroupTargetAssignmentMetadataValue(int(v.assignment_epoch))
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        what = "ConsumerGroupTargetAssignmentMemberValue"
        v = _read_entity(_value_body(value, what), _TargetAssignmentMemberValue, what)
        return ConsumerGroupTargetAssignmentMemberValue(
            _from_topic_partitions(v.topic_partitions, what))
    if record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        what = "ConsumerGroupCurrentMemberAssignmentValue"
        v = _read_entity(_value_body(value, what), _CurrentMemberAssignmentValue, what)
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=int(v.member_epoch),
            previous_member_epoch=int(v.previous_member_epoch),
            state=int(v.state),
            assigned=_from_topic_partitions(v.assigned_partitions, what),
            pending_revocation=_from_topic_partitions(v.partitions_pending_revocation, what),
        )
    what = "ConsumerGroupRegularExpressionValue"
    v = _read_entity(_value_body(value, what), _RegularExpressionValue, what)
    if v.topics is None:
        raise RecordDecodeError(f"{what}.Topics is null")
    return ConsumerGroupRegularExpressionValue(
        topics=tuple(v.topics), version=int(v.version), timestamp_ms=int(v.timestamp))


def _decode_key(record_type: int, key: bytes) -> object:
    if record_type == CONSUMER_GROUP_METADATA:
        return ConsumerGroupMetadataKey(_read_entity(key, _GroupKey, "key").group_id)
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        return ConsumerGroupTargetAssignmentMetadataKey(
            _read_entity(key, _GroupKey, "key").group_id)
    if record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        k = _read_entity(key, _RegexKey, "key")
        return ConsumerGroupRegularExpressionKey(k.group_id, k.regular_expression)
    k = _read_entity(key, _MemberKey, "key")
    member_key = {
        CONSUMER_GROUP_MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
    }[record_type]
    return member_key(k.group_id, k.member_id)


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode a consumer-group record; `UnknownRecordType` for any other record type."""
    key = bytes(key)
    record_type = _read_version(key, "record key")
    if record_type not in CONSUMER_RECORD_TYPES:
        raise UnknownRecordType(record_type)
    decoded_key = _decode_key(record_type, key)
    if value is None:
        return Record(decoded_key, None)  # type: ignore[arg-type]
    return Record(decoded_key, _decode_value(record_type, bytes(value)))  # type: ignore[arg-type]


# The consumer-group records' family, registered by the group kind serving consumer groups.
FAMILY: Final = RecordFamily("consumer groups (KIP-848)", CONSUMER_RECORD_TYPES,
                             CONSUMER_RECORD_KEY_TYPES, encode, decode)
