"""Groups as an operator sees them: list every group of every type, and describe one group.

Why one shape for four protocols: classic groups are described by DescribeGroups, KIP-848
consumer groups by ConsumerGroupDescribe, share groups by ShareGroupDescribe and streams
groups by StreamsGroupDescribe, each with its own fields. An operator (and the CLI's columns,
and the console's pages) wants the same questions answered for all of them: which type and
state, which assignor, which epoch, which coordinator, and per member its id, client id, host,
instance id and partitions. `GroupDescription` is that answer; what a type does not have is
None (a classic group has no epoch in DescribeGroups; share members have no instance id).

How the type is found: as Kafka's AdminClient does, ConsumerGroupDescribe first, and on
GROUP_ID_NOT_FOUND ("not a consumer group", or no such group) DescribeGroups, then the share
and the streams describe. A group none of them knows does not exist (`GroupNotFoundError`).
A group that is only committed offsets (no members ever, or all gone) is described by its
coordinator as Empty, which is how `kafka-consumer-groups` shows it too.

Streams members are assigned tasks, not partitions: a task (subtopology, partition) is shown as
the partitions of that subtopology's source topics, which is what the member reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from coterie.admin.client import AdminClient, AdminError
from coterie.client.cluster import Node
from coterie.client.versions import ApiKey
from coterie.wire.consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolError, decode_assignment

__all__ = ["GroupDescription", "GroupListing", "GroupNotFoundError", "MemberDescription",
           "TopicPartition", "describe_group", "list_groups"]

GROUP_TYPES = ("classic", "consumer", "share", "streams")


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class GroupNotFoundError(AdminError):
    """No coordinator knows a group of this id."""


@dataclass(frozen=True, slots=True)
class GroupListing:
    """One row of ListGroups: a group's id, type, protocol type and state."""

    group_id: str
    type: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    assignment: tuple[TopicPartition, ...]
    epoch: int | None = None  # the member epoch (consumer, share, streams groups)
    target_assignment: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    type: str                # classic | consumer | share | streams
    state: str               # as the coordinator names it: Stable, Empty, Reconciling ...
    protocol_type: str       # "consumer" for consumers, "connect" ..., the type for others
    assignor: str            # the classic protocol (range, cooperative-sticky ...) or assignor
    epoch: int | None        # group epoch; None for classic groups (DescribeGroups has none)
    assignment_epoch: int | None
    coordinator: Node
    members: tuple[MemberDescription, ...]

    @property
    def partitions(self) -> tuple[TopicPartition, ...]:
        """Every partition assigned to a member, sorted."""
        return tuple(sorted({tp for m in self.members for tp in m.assignment}))

    @property
    def is_inactive(self) -> bool:
        """Empty or Dead: Kafka's condition for resetting or deleting its offsets."""
        return self.state in ("Empty", "Dead") and not self.members


def _error(response: Any) -> ErrorCode:
    return response.groups[0].error_code if response.groups else ErrorCode.none


def _failed(api: str, group_id: str, code: ErrorCode, message: str | None) -> AdminError:
    detail = f": {message}" if message else ""
    return AdminError(f"{api} of group {group_id!r} failed with {code.name.upper()}{detail}")


# -- list ------------------------------------------------------------------------------------
async def list_groups(admin: AdminClient, *, types: tuple[str, ...] = (),
                      states: tuple[str, ...] = ()) -> list[GroupListing]:
    """Every group on every broker (ListGroups goes to each, as each lists its own), sorted
    by id. `types` / `states` filter as ListGroups v5 does (case-insensitive)."""
    admin.start_operation()
    found: dict[str, GroupListing] = {}
    for node in await admin.brokers():
        response = await admin.to_node(node, ApiKey.LIST_GROUPS,
                                       {"states_filter": list(states),
                                        "types_filter": list(types)})
        if response.error_code != ErrorCode.none:
            raise AdminError(f"ListGroups on broker {node.node_id} failed with "
                             f"{response.error_code.name.upper()}")
        for g in response.groups:
            group_type = getattr(g, "group_type", "") or (
                "classic" if g.protocol_type else "consumer")
            found[g.group_id] = GroupListing(g.group_id, group_type.lower(), g.protocol_type,
                                             getattr(g, "group_state", "") or "")
    wanted_types = {t.lower() for t in types}
    wanted_states = {s.lower() for s in states}
    return sorted((g for g in found.values()
                   if (not wanted_types or g.type in wanted_types)
                   and (not wanted_states or g.state.lower() in wanted_states)),
                  key=lambda g: g.group_id)


# -- describe --------------------------------------------------------------------------------
def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    if assignment is None:
        return ()
    return tuple(sorted(TopicPartition(t.topic_name, int(p))
                        for t in assignment.topic_partitions for p in t.partitions))


def _classic_assignment(protocol_type: str, data: bytes) -> tuple[TopicPartition, ...]:
    if protocol_type != PROTOCOL_TYPE:
        return ()
    try:
        return tuple(sorted(TopicPartition(t, p)
                            for t, p in decode_assignment(bytes(data)).partitions))
    except ConsumerProtocolError:
        return ()


async def _described_one(admin: AdminClient, group_id: str, api_key: ApiKey, name: str,
                         ids_field: str) -> tuple[Any, Any] | None:
    """Ask the group's coordinator with a describe API of one group type: (the group's
    entry, the coordinator), None when that type has no such group, AdminError on any
    other error."""
    response, node = await admin.to_coordinator(
        group_id, api_key, {ids_field: [group_id], "include_authorized_operations": False},
        _error)
    g = response.groups[0]
    if g.error_code == ErrorCode.group_id_not_found:
        return None
    if g.error_code != ErrorCode.none:
        raise _failed(name, group_id, g.error_code, getattr(g, "error_message", None))
    return g, node


async def _describe_consumer(admin: AdminClient, group_id: str) -> GroupDescription | None:
    found = await _described_one(admin, group_id, ApiKey.CONSUMER_GROUP_DESCRIBE,
                                 "ConsumerGroupDescribe", "group_ids")
    if found is None:
        return None
    g, node = found
    members = tuple(MemberDescription(
        member_id=m.member_id, client_id=m.client_id, host=m.client_host,
        instance_id=m.instance_id, assignment=_partitions(m.assignment),
        epoch=int(m.member_epoch), target_assignment=_partitions(m.target_assignment))
        for m in g.members)
    return GroupDescription(group_id, "consumer", g.group_state, PROTOCOL_TYPE,
                            g.assignor_name, int(g.group_epoch), int(g.assignment_epoch),
                            node, members)


async def _describe_classic(admin: AdminClient, group_id: str) -> GroupDescription | None:
    found = await _described_one(admin, group_id, ApiKey.DESCRIBE_GROUPS, "DescribeGroups",
                                 "groups")
    if found is None or found[0].group_state == "Dead":
        return None
    g, node = found
    members = tuple(MemberDescription(
        member_id=m.member_id, client_id=m.client_id, host=m.client_host,
        instance_id=getattr(m, "group_instance_id", None),
        assignment=_classic_assignment(g.protocol_type, m.member_assignment))
        for m in g.members)
    return GroupDescription(group_id, "classic", g.group_state, g.protocol_type,
                            g.protocol_data, None, None, node, members)


async def _describe_share(admin: AdminClient, group_id: str) -> GroupDescription | None:
    found = await _described_one(admin, group_id, ApiKey.SHARE_GROUP_DESCRIBE,
                                 "ShareGroupDescribe", "group_ids")
    if found is None:
        return None
    g, node = found
    members = tuple(MemberDescription(
        member_id=m.member_id, client_id=m.client_id, host=m.client_host, instance_id=None,
        assignment=_partitions(m.assignment), epoch=int(m.member_epoch))
        for m in g.members)
    return GroupDescription(group_id, "share", g.group_state, "share", g.assignor_name,
                            int(g.group_epoch), int(g.assignment_epoch), node, members)


def _task_partitions(assignment: Any, sources: dict[str, tuple[str, ...]]
                     ) -> tuple[TopicPartition, ...]:
    if assignment is None:
        return ()
    return tuple(sorted({TopicPartition(topic, int(p))
                         for task in assignment.active_tasks
                         for topic in sources.get(task.subtopology_id, ())
                         for p in task.partitions}))


async def _describe_streams(admin: AdminClient, group_id: str) -> GroupDescription | None:
    found = await _described_one(admin, group_id, ApiKey.STREAMS_GROUP_DESCRIBE,
                                 "StreamsGroupDescribe", "group_ids")
    if found is None:
        return None
    g, node = found
    sources = {s.subtopology_id: tuple(s.source_topics)
               for s in ((g.topology.subtopologies or ()) if g.topology else ())}
    members = tuple(MemberDescription(
        member_id=m.member_id, client_id=m.client_id, host=m.client_host,
        instance_id=m.instance_id, assignment=_task_partitions(m.assignment, sources),
        epoch=int(m.member_epoch), target_assignment=_task_partitions(m.target_assignment,
                                                                      sources))
        for m in g.members)
    return GroupDescription(group_id, "streams", g.group_state, "streams", "",
                            int(g.group_epoch), int(g.assignment_epoch), node, members)


_DESCRIBERS = (
    (ApiKey.CONSUMER_GROUP_DESCRIBE, _describe_consumer),
    (ApiKey.DESCRIBE_GROUPS, _describe_classic),
    (ApiKey.SHARE_GROUP_DESCRIBE, _describe_share),
    (ApiKey.STREAMS_GROUP_DESCRIBE, _describe_streams),
)


async def describe_group(admin: AdminClient, group_id: str) -> GroupDescription:
    """The group of that id, whatever its type; `GroupNotFoundError` if there is none."""
    admin.start_operation()
    if not group_id:
        raise AdminError("the group id is empty")
    coordinator = await admin.coordinator(group_id)
    for api_key, describer in _DESCRIBERS:
        if not await admin.supports(coordinator, api_key):
            continue  # an older broker without that group type
        described = await describer(admin, group_id)
        if described is not None:
            return described
    raise GroupNotFoundError(f"group {group_id!r} does not exist")
