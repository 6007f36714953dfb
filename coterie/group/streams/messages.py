"""Version-independent StreamsGroupHeartbeat and StreamsGroupDescribe requests and answers.

The broker maps the wire (v0, the only version of Kafka 4.2) onto these and back; the core
never sees kio types. Heartbeat fields follow Kafka's convention: None (or -1 for the
rebalance timeout) means "unchanged since my last heartbeat". `owned` is None unless the
member reported all three of its owned task lists (Kafka reads them only together).

A heartbeat's answer may name internal topics the group needs and the topic picture lacks
(`topics_to_create`): Kafka's coordinator hands those to the broker, which creates them
(with the requester's CREATE authorization) before answering; they never reach the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from coterie.group.consumer.messages import Requester
from coterie.group.records.tasks import TaskSet
from coterie.group.streams.configured_topology import InternalTopic
from coterie.group.streams.status import GroupStatus
from coterie.group.streams.topology import Topology


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A member's endpoint for Interactive Queries."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class TaskOffset:
    subtopology_id: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatRequest:
    """A StreamsGroupHeartbeat (module docstring has the conventions)."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    owned: TaskSet | None = None
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: tuple[TaskOffset, ...] | None = None
    task_end_offsets: tuple[TaskOffset, ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    requester: Requester | None = None

    def refused(self, code: ErrorCode) -> StreamsHeartbeatResponse:
        return StreamsHeartbeatResponse(code)


class StreamsSettledHeartbeat(NamedTuple):
    """A StreamsGroupHeartbeat that sets no field but the endpoint epoch (member epoch > 0,
    no topology, no owned tasks, no member metadata, no task offsets, no shutdown), which is
    what a settled Kafka Streams member sends: the broker sees that on the wire request and
    sends this instead of the full request; the core answers it without the general path's
    steps when it can (`StreamsGroups.settled_heartbeat`). A NamedTuple: one is built for
    most heartbeats a streams application sends."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int
    client_id: str
    client_host: str

    def refused(self, code: ErrorCode) -> StreamsHeartbeatResponse:
        return StreamsHeartbeatResponse(code)


@dataclass(frozen=True, slots=True)
class EndpointPartitions:
    """Which partitions a member's endpoint serves (Interactive Queries)."""

    endpoint: Endpoint
    active: tuple[tuple[str, tuple[int, ...]], ...]
    standby: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResponse:
    """The answer; on an error only `error` and `error_message` are set. `assignment` None:
    unchanged (not sent). `endpoints` None: the member's endpoint epoch is current."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    acceptable_recovery_lag: int = 10000
    task_offset_interval_ms: int = 60000
    status: tuple[GroupStatus, ...] = ()
    assignment: TaskSet | None = None
    endpoint_information_epoch: int = 0
    endpoints: tuple[EndpointPartitions, ...] | None = None
    # For the broker, never the client: internal topics to create before answering.
    topics_to_create: tuple[InternalTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedStreamsMember:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: tuple[tuple[str, str], ...]
    assignment: TaskSet
    target_assignment: TaskSet


@dataclass(frozen=True, slots=True)
class DescribedStreamsGroup:
    """One group of a StreamsGroupDescribe answer. `topology` None: the group has none
    yet."""

    error: ErrorCode
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    members: tuple[DescribedStreamsMember, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupDescribeRequest:
    """One group of a StreamsGroupDescribe request."""

    group_id: str

    def refused(self, code: ErrorCode) -> DescribedStreamsGroup:
        return DescribedStreamsGroup(code, self.group_id)
