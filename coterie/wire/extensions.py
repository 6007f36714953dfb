"""Wire schemas of coterie's own APIs, declared the way kio declares Kafka's.

Why here. KIP-848 sketches two APIs for client-side assignors, ConsumerGroupPrepareAssignment
and ConsumerGroupInstallAssignment, that Apache Kafka never shipped, so kio has no codec for
them. Rather than write a second serialiser, the two request/response pairs are declared as
kio entity dataclasses (the same class attributes and field metadata kio's generated schema
classes carry), and kio's generic `entity_reader` / `entity_writer` read and write them like
any Kafka message. `coterie.wire.codec` looks a schema up here before it asks kio.

API keys are far outside Kafka's range (Kafka's keys are below 100), so a future Kafka API
can never collide with them; both are version 0 only and flexible (compact strings, tagged
fields), as every new Kafka API is. docs/extensions.md describes the fields and errors.

Deviations from the KIP's sketch: the prepare answer has no per-member assignor metadata
(reason, version, bytes): ConsumerGroupHeartbeat v0/v1 has no field to carry it to the
coordinator. The install request keeps the sketch's per-member MetadataVersion and
MetadataBytes so a client written against the KIP fits; coterie ignores them.

(No `from __future__ import annotations` here: kio reads the field types at run time.)
"""

import datetime
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

CONSUMER_GROUP_PREPARE_ASSIGNMENT = 32000
CONSUMER_GROUP_INSTALL_ASSIGNMENT = 32001

_PREPARE = i16(CONSUMER_GROUP_PREPARE_ASSIGNMENT)
_INSTALL = i16(CONSUMER_GROUP_INSTALL_ASSIGNMENT)
_V0 = i16(0)
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


# == ConsumerGroupPrepareAssignment v0 ==========================================================

@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPrepareAssignmentRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _PREPARE
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    """The group identifier."""
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member id assigned by the group coordinator."""
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The member epoch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedTopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _PREPARE
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic ID."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedMember:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _PREPARE
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member ID."""
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The member epoch."""
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The member instance ID, or null."""
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The member rack ID, or null."""
    subscribed_topic_ids: tuple[uuid.UUID | None, ...] = field(
        metadata={"kafka_type": "uuid"}, default=())
    """The IDs of the existing topics the member subscribes to."""
    topic_partitions: tuple[PreparedTopicPartitions, ...]
    """The member's current target partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _PREPARE
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic ID."""
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})
    """The number of partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPrepareAssignmentResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _PREPARE
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"},
                                        default=_NO_THROTTLE)
    """The duration in milliseconds for which the request was throttled, or zero."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The top-level error code, or 0 if there was no error."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The top-level error message, or null if there was no error."""
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The group epoch the assignment is for."""
    assignor_name: str = field(metadata={"kafka_type": "string"})
    """The client-side assignor to run (the name after "client:")."""
    members: tuple[PreparedMember, ...]
    """Every member of the group."""
    topics: tuple[PreparedTopic, ...]
    """Every existing topic some member subscribes to."""


# == ConsumerGroupInstallAssignment v0 ==========================================================

@dataclass(frozen=True, slots=True, kw_only=True)
class InstalledTopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _INSTALL
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic ID."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstalledMember:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _INSTALL
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member ID."""
    partitions: tuple[InstalledTopicPartitions, ...]
    """The topic-partitions assigned to the member."""
    metadata_version: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    """The assignor metadata version (ignored by coterie)."""
    metadata_bytes: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")
    """The assignor metadata bytes (ignored by coterie)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupInstallAssignmentRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _INSTALL
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    """The group identifier."""
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member id of the member that computed the assignment."""
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The member epoch."""
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The group epoch the assignment was computed for."""
    error: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    """The assignment error, or zero if the assignor succeeded."""
    members: tuple[InstalledMember, ...]
    """Each member's new target partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupInstallAssignmentResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _INSTALL
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"},
                                        default=_NO_THROTTLE)
    """The duration in milliseconds for which the request was throttled, or zero."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The top-level error code, or 0 if there was no error."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The top-level error message, or null if there was no error."""


# (api key, version) -> (request class, response class)
EXTENSION_SCHEMAS: dict[tuple[int, int], tuple[type, type]] = {
    (CONSUMER_GROUP_PREPARE_ASSIGNMENT, 0): (ConsumerGroupPrepareAssignmentRequest,
                                             ConsumerGroupPrepareAssignmentResponse),
    (CONSUMER_GROUP_INSTALL_ASSIGNMENT, 0): (ConsumerGroupInstallAssignmentRequest,
                                             ConsumerGroupInstallAssignmentResponse),
}


# A ConsumerGroupHeartbeat ServerAssignor of this form names a client-side assignor (seed 4):
# "client:<name>". Both the coordinator and the member library read it, so it is a wire
# convention and lives here rather than in either of them.
CLIENT_ASSIGNOR_PREFIX = "client:"
