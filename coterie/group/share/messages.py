"""Version-independent ShareGroupHeartbeat and ShareGroupDescribe requests and answers.

The broker maps the wire (v1, the only version of Kafka 4.2) onto these and back; the core
never sees kio types. Heartbeat fields follow Kafka's convention: None means "unchanged
since my last heartbeat". Partitions travel by topic id, as on the wire.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ShareTopicPartitions:
    """One topic's partitions of an answer's assignment."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""

    def refused(self, code: ErrorCode) -> ShareHeartbeatResponse:
        return ShareHeartbeatResponse(code)


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    """The answer; on an error only `error` and `error_message` are set. `assignment`
    None: not sent (unchanged)."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[ShareTopicPartitions, ...] | None = None


@dataclass(frozen=True, slots=True)
class DescribedShareTopic:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[DescribedShareTopic, ...]


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    error: ErrorCode
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupDescribeRequest:
    """One group of a ShareGroupDescribe request."""

    group_id: str

    def refused(self, code: ErrorCode) -> DescribedShareGroup:
        return DescribedShareGroup(code, self.group_id)
