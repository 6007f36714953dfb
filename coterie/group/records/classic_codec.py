"""Byte encoding of coordinator records, compatible with Kafka's `__consumer_offsets` topic.

Each record is a Kafka log record whose key and value are both "version-prefixed": an int16
followed by the fields of the message at that version. For keys, the int16 is really the
record *type* (0 and 1 are both offset commits, 2 is group metadata; Kafka's newer coordinator
uses 3+ for consumer-group, share-group and streams-group records). A null value is a tombstone.

Writing the exact bytes Kafka writes means a `__consumer_offsets` partition written by coterie
can be read by Kafka tooling (and the other way around), so the formats are taken field for
field from Kafka's `OffsetCommitKey`, `OffsetCommitValue`, `GroupMetadataKey` and
`GroupMetadataValue` message schemas. The schema shapes below are kio entity dataclasses so
the byte-level work is done by kio's (tested, native) serializers rather than by hand.

We write the same versions a current Kafka broker writes for classic groups (offset commit
value v3, or v1 when an explicit expire timestamp must be kept; group metadata value v3) and
read every version Kafka has ever written.

This module deliberately does not use ``from __future__ import annotations``: kio inspects the
dataclass field types at runtime and needs real types, not strings.
"""

import io
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import read_int16
from kio.serial.writers import write_int16
from kio.static.constants import EntityType
from kio.static.primitive import i16

from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from coterie.group.records.offsets import OffsetCommitKey, OffsetCommitValue
from coterie.group.records.record import Record, RecordFamily
from coterie.wire.bounds import BoundsError, check_entity

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE",
    "RecordCodecError",
    "RecordDecodeError",
    "RecordEncodeError",
    "UnknownRecordType",
    "decode",
    "encode",
]


class RecordCodecError(ValueError):
    """Base of the errors raised by this module."""


class RecordDecodeError(RecordCodecError):
    """The bytes are not a valid record of the type their key version announces.

    Unlike `UnknownRecordType` this means corruption (or a value version newer than we know),
    so a loader must not silently skip it: that could lose committed offsets.
    """


class UnknownRecordType(RecordCodecError):
    """The key version names a record type this codec does not handle.

    Kafka's `__consumer_offsets` also holds consumer-group (KIP-848), share-group, streams and
    transaction-related records; a loader skips those rather than failing, as Kafka does.
    Deliberately not a subclass of `RecordDecodeError`, so that catching decode errors does
    not accidentally swallow these (or the other way round).
    """

    def __init__(self, version: int) -> None:
        super().__init__(f"unknown coordinator record type (key version {version})")
        self.version = version


class RecordEncodeError(RecordCodecError):
    """A record holds a value that cannot be represented in Kafka's format.

    For example an int outside int32 range, a string longer than 32767 UTF-8 bytes, or a key
    paired with the wrong kind of value.
    """


# Versions written by `encode`. Kafka's OffsetCommitKey/GroupMetadataKey record types.
OFFSET_COMMIT_KEY_VERSION: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
# v3 is what Kafka (2.1+, until topic ids were added in 4.1) writes for an ordinary commit;
# v1 is the only version that can carry an explicit expire timestamp.
OFFSET_COMMIT_VALUE_VERSION: Final = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE: Final = 1
GROUP_METADATA_VALUE_VERSION: Final = 3


# --------------------------------------------------------------------------------------------
# Schema shapes. One dataclass per distinct layout; versions sharing a layout share a class.
# Field order is wire order. `kafka_type` is the type from Kafka's JSON schema.
# --------------------------------------------------------------------------------------------


def schema_field(kafka_type: str, **kwargs: Any) -> Any:
    """A kio schema field: `kafka_type` drives kio's choice of reader/writer."""
    return field(metadata={"kafka_type": kafka_type}, **kwargs)


_f = schema_field


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitKeySchema:
    """OffsetCommitKey, record types 0 and 1 (identical layouts)."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group: str = _f("string")
    topic: str = _f("string")
    partition: int = _f("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupMetadataKeySchema:
    """GroupMetadataKey, record type 2."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group: str = _f("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitValueV0:
    """OffsetCommitValue v0 and v2: no leader epoch, no expire timestamp."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    offset: int = _f("int64")
    metadata: str = _f("string")
    commit_timestamp: int = _f("int64")


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitValueV1:
    """OffsetCommitValue v1: the only version with an explicit expire timestamp."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    offset: int = _f("int64")
    metadata: str = _f("string")
    commit_timestamp: int = _f("int64")
    expire_timestamp: int = _f("int64")


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitValueV3:
    """OffsetCommitValue v3: adds the leader epoch (KIP-320), drops expire timestamp."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    offset: int = _f("int64")
    leader_epoch: int = _f("int32")
    metadata: str = _f("string")
    commit_timestamp: int = _f("int64")


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitValueV4:
    """OffsetCommitValue v4: v3 made flexible (compact strings, tagged fields).

    Kafka 4.1+ writes v4 with the topic id as tagged field 0; we read and drop it, because
    coterie identifies partitions by topic name.
    """

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    offset: int = _f("int64")
    leader_epoch: int = _f("int32")
    metadata: str = _f("string")
    commit_timestamp: int = _f("int64")
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid", "tag": 0}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadataV0:
    """GroupMetadataValue.MemberMetadata v0: no rebalance timeout yet."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    member_id: str = _f("string")
    client_id: str = _f("string")
    client_host: str = _f("string")
    session_timeout: int = _f("int32")
    subscription: bytes = _f("bytes")
    assignment: bytes = _f("bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadataV1:
    """MemberMetadata v1 and v2: adds the rebalance timeout (KIP-62)."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    member_id: str = _f("string")
    client_id: str = _f("string")
    client_host: str = _f("string")
    rebalance_timeout: int = _f("int32")
    session_timeout: int = _f("int32")
    subscription: bytes = _f("bytes")
    assignment: bytes = _f("bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadataV3:
    """MemberMetadata v3: adds the static membership instance id (KIP-345)."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    member_id: str = _f("string")
    group_instance_id: str | None = _f("string")
    client_id: str = _f("string")
    client_host: str = _f("string")
    rebalance_timeout: int = _f("int32")
    session_timeout: int = _f("int32")
    subscription: bytes = _f("bytes")
    assignment: bytes = _f("bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadataV4:
    """MemberMetadata v4: v3 made flexible."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    member_id: str = _f("string")
    group_instance_id: str | None = _f("string")
    client_id: str = _f("string")
    client_host: str = _f("string")
    rebalance_timeout: int = _f("int32")
    session_timeout: int = _f("int32")
    subscription: bytes = _f("bytes")
    assignment: bytes = _f("bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupMetadataValueV0:
    """GroupMetadataValue v0."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = _f("string")
    generation: int = _f("int32")
    protocol: str | None = _f("string")
    leader: str | None = _f("string")
    members: tuple[_MemberMetadataV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupMetadataValueV1:
    """GroupMetadataValue v1: members gain the rebalance timeout."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = _f("string")
    generation: int = _f("int32")
    protocol: str | None = _f("string")
    leader: str | None = _f("string")
    members: tuple[_MemberMetadataV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupMetadataValueV2:
    """GroupMetadataValue v2: adds the current state timestamp (KIP-211)."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = _f("string")
    generation: int = _f("int32")
    protocol: str | None = _f("string")
    leader: str | None = _f("string")
    current_state_timestamp: int = _f("int64")
    members: tuple[_MemberMetadataV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupMetadataValueV3:
    """GroupMetadataValue v3: members gain the group instance id."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = _f("string")
    generation: int = _f("int32")
    protocol: str | None = _f("string")
    leader: str | None = _f("string")
    current_state_timestamp: int = _f("int64")
    members: tuple[_MemberMetadataV3, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupMetadataValueV4:
    """GroupMetadataValue v4: v3 made flexible."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    protocol_type: str = _f("string")
    generation: int = _f("int32")
    protocol: str | None = _f("string")
    leader: str | None = _f("string")
    current_state_timestamp: int = _f("int64")
    members: tuple[_MemberMetadataV4, ...]


# --------------------------------------------------------------------------------------------
# Conversions between schema shapes and coterie's records.
# --------------------------------------------------------------------------------------------


def _offset_value_from_schema(schema: Any) -> OffsetCommitValue:
    """Fill in Kafka's defaults for fields the version lacks (-1 for epoch and expiry)."""
    return OffsetCommitValue(
        offset=int(schema.offset),
        leader_epoch=int(getattr(schema, "leader_epoch", -1)),
        metadata=schema.metadata,
        commit_timestamp_ms=int(schema.commit_timestamp),
        expire_timestamp_ms=int(getattr(schema, "expire_timestamp", -1)),
    )


def _member_from_schema(schema: Any) -> MemberMetadata:
    session_timeout = int(schema.session_timeout)
    return MemberMetadata(
        member_id=schema.member_id,
        group_instance_id=getattr(schema, "group_instance_id", None),
        client_id=schema.client_id,
        client_host=schema.client_host,
        # v0 predates a separate rebalance timeout: the session timeout served as both, and
        # Kafka's loader substitutes it the same way.
        rebalance_timeout_ms=int(getattr(schema, "rebalance_timeout", session_timeout)),
        session_timeout_ms=session_timeout,
        subscription=bytes(schema.subscription),
        assignment=bytes(schema.assignment),
    )


def _group_value_from_schema(schema: Any) -> GroupMetadataValue:
    if schema.members is None:
        # kio reads a -1 (or compact 0) array length as None; Kafka's schema says the array
        # is not nullable, and Kafka's reader refuses it too.
        raise RecordDecodeError("GroupMetadataValue.members is null")
    return GroupMetadataValue(
        protocol_type=schema.protocol_type,
        generation=int(schema.generation),
        protocol=schema.protocol,
        leader=schema.leader,
        current_state_timestamp_ms=int(getattr(schema, "current_state_timestamp", -1)),
        members=tuple(_member_from_schema(m) for m in schema.members),
    )


# Value schema per version, per record kind: what `decode` accepts.
_OFFSET_COMMIT_VALUE_SCHEMAS: Final[dict[int, type]] = {
    0: _OffsetCommitValueV0,
    1: _OffsetCommitValueV1,
    2: _OffsetCommitValueV0,
    3: _OffsetCommitValueV3,
    4: _OffsetCommitValueV4,
}
_GROUP_METADATA_VALUE_SCHEMAS: Final[dict[int, type]] = {
    0: _GroupMetadataValueV0,
    1: _GroupMetadataValueV1,
    2: _GroupMetadataValueV2,
    3: _GroupMetadataValueV3,
    4: _GroupMetadataValueV4,
}


# --------------------------------------------------------------------------------------------
# Encoding.
# --------------------------------------------------------------------------------------------


def prefixed(version: int, schema_type: type, entity: object) -> bytes:
    """An int16 version (a value's) or record type (a key's), then the entity: every
    family's keys and values start so."""
    buffer = io.BytesIO()
    write_int16(buffer, i16(version))
    entity_writer(schema_type)(buffer, entity)
    return buffer.getvalue()


def _encode_key(key: object) -> bytes:
    match key:
        case OffsetCommitKey(group_id=group, topic=topic, partition=partition):
            schema = _OffsetCommitKeySchema(group=group, topic=topic, partition=partition)
            return prefixed(OFFSET_COMMIT_KEY_VERSION, _OffsetCommitKeySchema, schema)
        case GroupMetadataKey(group_id=group):
            return prefixed(
                GROUP_METADATA_KEY_VERSION,
                _GroupMetadataKeySchema,
                _GroupMetadataKeySchema(group=group),
            )
    raise RecordEncodeError(f"not a coordinator record key: {key!r}")


def _encode_offset_value(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp_ms != -1:
        # Only v1 can hold an explicit expiry; it has no leader epoch, so that is dropped
        # (Kafka makes the same trade-off).
        return prefixed(
            OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE,
            _OffsetCommitValueV1,
            _OffsetCommitValueV1(
                offset=value.offset,
                metadata=value.metadata,
                commit_timestamp=value.commit_timestamp_ms,
                expire_timestamp=value.expire_timestamp_ms,
            ),
        )
    return prefixed(
        OFFSET_COMMIT_VALUE_VERSION,
        _OffsetCommitValueV3,
        _OffsetCommitValueV3(
            offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp=value.commit_timestamp_ms,
        ),
    )


def _encode_group_value(value: GroupMetadataValue) -> bytes:
    members = tuple(
        _MemberMetadataV3(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        for m in value.members
    )
    return prefixed(
        GROUP_METADATA_VALUE_VERSION,
        _GroupMetadataValueV3,
        _GroupMetadataValueV3(
            protocol_type=value.protocol_type,
            generation=value.generation,
            protocol=value.protocol,
            leader=value.leader,
            current_state_timestamp=value.current_state_timestamp_ms,
            members=members,
        ),
    )


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """Encode `record` as the (key, value) bytes of a `__consumer_offsets` log record.

    A tombstone (value None) encodes to a None value, which is how the log marks deletion
    for compaction. An OffsetCommitValue with an explicit expire timestamp is written as v1,
    which cannot carry the leader epoch: it decodes with leader_epoch -1.
    """
    try:
        key = _encode_key(record.key)
        if record.value is None:
            return key, None
        match record.key, record.value:
            case OffsetCommitKey(), OffsetCommitValue() as offset_value:
                return key, _encode_offset_value(offset_value)
            case GroupMetadataKey(), GroupMetadataValue() as group_value:
                return key, _encode_group_value(group_value)
        raise RecordEncodeError(
            f"{type(record.value).__name__} cannot be the value of a {type(record.key).__name__}"
        )
    except RecordEncodeError:
        raise
    except (SerialError, struct.error, OverflowError, TypeError, UnicodeEncodeError) as exc:
        # kio/struct refuse out-of-range ints, over-long strings and unencodable text;
        # report those uniformly so callers need one except clause.
        raise RecordEncodeError(f"cannot encode {type(record.key).__name__} record: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Decoding.
# --------------------------------------------------------------------------------------------


def read_version(data: bytes, what: str) -> int:
    """The int16 a key or value starts with (every family's codec reads it so)."""
    try:
        version, _ = read_int16(data, 0)
    except (SerialError, ValueError, IndexError) as exc:
        raise RecordDecodeError(f"{what} too short to hold a version: {data!r}") from exc
    return int(version)


# What kio raises on bytes that do not decode (KeyError: an unknown tagged field; a
# UnicodeDecodeError is a ValueError).
DECODE_ERRORS = (SerialError, ValueError, IndexError, KeyError, TypeError, OverflowError)


def read_entity(data: bytes, schema_type: type, what: str) -> Any:
    """Read `schema_type` after the 2-byte version; insist it spans exactly the rest.
    Every length and count the bytes declare is held against the bytes first
    (`coterie.wire.bounds`, as for requests): kio's native reader reserves an array's
    declared element count before reading one, and a count near 2**32 in a damaged record
    would abort the process (a broker loading its partition) where no `except` reaches."""
    try:
        check_entity(data, 2, schema_type)
    except BoundsError as exc:
        raise RecordDecodeError(f"malformed {what}: {exc}") from exc
    try:
        entity, size = entity_reader(schema_type)(data, 2)
    except DECODE_ERRORS as exc:
        # KeyError is how kio reports an unknown tagged field.
        raise RecordDecodeError(f"malformed {what}: {exc!r}") from exc
    if 2 + size != len(data):
        raise RecordDecodeError(f"{len(data) - 2 - size} trailing bytes after {what}")
    return entity


def _decode_value(
    value: bytes,
    schemas: dict[int, type],
    convert: Callable[[Any], Any],
    what: str,
) -> Any:
    version = read_version(value, what)
    schema_type = schemas.get(version)
    if schema_type is None:
        # A known record type with an unknown value version is not skippable: Kafka fails
        # the load here too, rather than silently dropping state.
        raise RecordDecodeError(f"unsupported {what} version {version}")
    return convert(read_entity(value, schema_type, f"{what} v{version}"))


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode the key and value bytes of a `__consumer_offsets` log record.

    Raises `UnknownRecordType` for record types this codec does not model (the loader
    should skip those), and `RecordDecodeError` for anything malformed.
    """
    key = bytes(key)
    record_type = read_version(key, "record key")
    if record_type in (0, 1):
        key_schema = read_entity(key, _OffsetCommitKeySchema, "OffsetCommitKey")
        offset_key = OffsetCommitKey(
            group_id=key_schema.group,
            topic=key_schema.topic,
            partition=int(key_schema.partition),
        )
        if value is None:
            return Record(offset_key, None)
        return Record(
            offset_key,
            _decode_value(
                bytes(value),
                _OFFSET_COMMIT_VALUE_SCHEMAS,
                _offset_value_from_schema,
                "OffsetCommitValue",
            ),
        )
    if record_type == 2:
        key_schema = read_entity(key, _GroupMetadataKeySchema, "GroupMetadataKey")
        group_key = GroupMetadataKey(group_id=key_schema.group)
        if value is None:
            return Record(group_key, None)
        return Record(
            group_key,
            _decode_value(
                bytes(value),
                _GROUP_METADATA_VALUE_SCHEMAS,
                _group_value_from_schema,
                "GroupMetadataValue",
            ),
        )
    raise UnknownRecordType(record_type)


# Offset commits (record types 0 and 1) and classic groups (2): one family, one codec, as in
# Kafka's oldest format. Registered by the group kind serving classic groups; the shard
# itself replays the offset commits.
FAMILY: Final = RecordFamily("offset commits and classic groups", frozenset({0, 1, 2}),
                             (OffsetCommitKey, GroupMetadataKey), encode, decode)
