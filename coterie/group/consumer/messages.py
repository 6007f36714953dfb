"""Version-independent ConsumerGroupHeartbeat and ConsumerGroupDescribe requests and answers.

The broker maps each wire version onto these and back; the core never sees kio types. Where
behaviour depends on the version (v1 wants a client-generated member id and may carry a
regex), the request carries `version`.

Heartbeat fields follow Kafka's convention: None (or -1 for the rebalance timeout) means
"unchanged since my last heartbeat". `owned` None means the member did not report its owned
partitions this time.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode


class Requester(NamedTuple):
    """Who sent a heartbeat, as the authorizer knows them: the principal and the client's
    address (given only when an authorizer is configured)."""

    principal: str
    host: str


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    """A ConsumerGroupHeartbeat of any version (module docstring has the conventions)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[TopicPartitions, ...] | None = None
    version: int = 1
    client_id: str = ""
    client_host: str = ""
    # Who sent it, when the broker authorizes: a resolution of the group's regexes this
    # heartbeat asks for keeps only the topics they may describe (Kafka 4.2).
    requester: Requester | None = None

    def refused(self, code: ErrorCode) -> ConsumerHeartbeatResponse:
        return ConsumerHeartbeatResponse(code)


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResponse:
    """The answer; on an error only `error` and `error_message` are set."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None: "no change" (not sent); otherwise every partition the member may use now.
    assignment: tuple[TopicPartitions, ...] | None = None


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = MEMBER_TYPE_CONSUMER


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    """One group of a ConsumerGroupDescribe answer (v0 and v1: v0 drops member_type)."""

    error: ErrorCode
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeRequest:
    """One group of a ConsumerGroupDescribe request."""

    group_id: str

    def refused(self, code: ErrorCode) -> DescribedConsumerGroup:
        return DescribedConsumerGroup(code, self.group_id)


class SettledHeartbeat(NamedTuple):
    """A ConsumerGroupHeartbeat that sets no field (member epoch > 0, every other field
    null or -1), which is what a settled member sends: the broker sees that on the wire
    request and sends this instead of the full request, which the core answers without the
    general path's steps when it can (`ConsumerGroups.settled_heartbeat`). A NamedTuple:
    one is built for most heartbeats a broker answers."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str

    def refused(self, code: ErrorCode) -> ConsumerHeartbeatResponse:
        return ConsumerHeartbeatResponse(code)
