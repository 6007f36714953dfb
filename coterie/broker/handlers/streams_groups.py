"""KIP-1071 streams group APIs: StreamsGroupHeartbeat v0 and StreamsGroupDescribe v0.

Each handler maps the wire onto the coordinator's values (`coterie.group`'s
StreamsHeartbeatRequest, StreamsGroupDescribeRequest), hands them to the group runtime's door
and maps the answer back, as Kafka 4.2's KafkaApis does:

- A heartbeat needs READ on the group (else GROUP_AUTHORIZATION_FAILED). A heartbeat that
  declares a topology (a member joining) is refused STREAMS_INVALID_TOPOLOGY when the
  topology names one of the broker's internal topics or an illegal topic name, and
  TOPIC_AUTHORIZATION_FAILED unless the principal may DESCRIBE every topic it names
  (sources, repartition topics, changelogs); the coordinator is not asked then.
- The coordinator may answer that the group needs internal topics that do not exist
  (repartition and changelog topics, with the partition counts and configs the topology
  asks for). The broker creates them, as Kafka's does, when the principal may CREATE on
  the cluster or on each topic; those it may not create are added to the answer's
  MISSING_INTERNAL_TOPICS status ("Unauthorized to CREATE on topics ..."). A single broker
  creates them before answering; a cluster broker in the background (the database is a
  round trip away). Either way the group sees them through the topic picture and assigns
  its tasks at a later heartbeat.
- StreamsGroupDescribe needs DESCRIBE on each group; a group whose topology names a topic
  the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED instead.

With `streams` left out of group.coordinator.rebalance.protocols, both APIs answer
UNSUPPORTED_VERSION, as Kafka's broker does.
"""

from __future__ import annotations

import datetime
import functools
import logging
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import host_of
from coterie.broker.context import RequestContext, millis
from coterie.broker.group_acls import (
    NOT_GIVEN,
    enforcing,
    group_operations,
    unauthorized_topics,
)
from coterie.group import (
    CopartitionGroup,
    DescribedStreamsGroup,
    DescribedStreamsMember,
    Endpoint,
    GroupStatus,
    InternalTopic,
    Requester,
    StreamsGroupDescribeRequest,
    StreamsGroupStatus,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
    StreamsSettledHeartbeat,
    StreamsTopicInfo,
    Subtopology,
    TaskOffset,
    TaskSet,
    Topology,
)
from coterie.log.errors import LogError
from coterie.log.names import is_internal_topic, validate_topic_name
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger("coterie.broker")
_UNCHANGED = datetime.timedelta(milliseconds=-1)  # RebalanceTimeoutMs -1: "unchanged"

def streams_enabled(ctx: RequestContext) -> bool:
    return _names_streams(ctx.services.config.props.get(
        "group.coordinator.rebalance.protocols", "classic,consumer,streams"))


@functools.cache
def _names_streams(protocols: str) -> bool:
    """Parsed once per value: every streams heartbeat asks."""
    return "streams" in {p.strip() for p in protocols.split(",")}


# -- wire -> core -----------------------------------------------------------------------------

def _topic_info(t: Any) -> StreamsTopicInfo:
    return StreamsTopicInfo(t.name, int(t.partitions), int(t.replication_factor),
                     tuple((c.key, c.value) for c in t.topic_configs))


def _topology(t: Any) -> Topology | None:
    if t is None:
        return None
    return Topology(int(t.epoch), tuple(
        Subtopology(
            subtopology_id=s.subtopology_id, source_topics=tuple(s.source_topics),
            source_topic_regex=tuple(s.source_topic_regex),
            state_changelog_topics=tuple(_topic_info(c) for c in s.state_changelog_topics),
            repartition_sink_topics=tuple(s.repartition_sink_topics),
            repartition_source_topics=tuple(_topic_info(r)
                                            for r in s.repartition_source_topics),
            copartition_groups=tuple(
                CopartitionGroup(tuple(int(i) for i in g.source_topics),
                                 tuple(int(i) for i in g.source_topic_regex),
                                 tuple(int(i) for i in g.repartition_source_topics))
                for g in s.copartition_groups))
        for s in t.subtopologies))


def _tasks(entries: Any) -> dict[str, list[int]] | None:
    if entries is None:
        return None
    out: dict[str, list[int]] = {}
    for e in entries:
        out.setdefault(e.subtopology_id, []).extend(int(p) for p in e.partitions)
    return out


def _owned(request: Any) -> TaskSet | None:
    """The owned tasks, when the member reported all three lists (Kafka reads them only
    together); None otherwise."""
    active, standby, warmup = (_tasks(request.active_tasks), _tasks(request.standby_tasks),
                               _tasks(request.warmup_tasks))
    if active is None or standby is None or warmup is None:
        return None
    return TaskSet.of(active, standby, warmup)


def _offsets(entries: Any) -> tuple[TaskOffset, ...] | None:
    if entries is None:
        return None
    return tuple(TaskOffset(e.subtopology_id, int(e.partition), int(e.offset)) for e in entries)



# -- core -> wire -----------------------------------------------------------------------------

def _task_ids(tasks: Any) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(p)} for s, p in sorted(tasks.items())]


def _status(statuses: tuple[GroupStatus, ...]) -> list[dict[str, Any]]:
    return [{"status_code": int(s.code), "status_detail": s.detail} for s in statuses]


def _heartbeat_answer(ctx: RequestContext, r: StreamsHeartbeatResponse) -> Any:
    """The answer; a settled member's (no error, status, tasks or endpoints) is kept
    encoded (`coterie.broker.steady_answers`)."""
    if (r.error == ErrorCode.none and r.assignment is None and r.endpoints is None
            and not r.status and r.error_message is None and not r.topics_to_create):
        return ctx.services.steady_answers.answer(
            (ctx.api_key, ctx.api_version, r.member_id, r.member_epoch,
             r.heartbeat_interval_ms, r.endpoint_information_epoch,
             r.acceptable_recovery_lag, r.task_offset_interval_ms), _answer, ctx, r)
    return _answer(ctx, r)


def _answer(ctx: RequestContext, r: StreamsHeartbeatResponse) -> Any:
    status = _status(r.status)
    a = r.assignment
    endpoints = None
    if r.endpoints is not None:
        endpoints = [{
            "user_endpoint": {"host": e.endpoint.host, "port": e.endpoint.port},
            "active_partitions": [{"topic": t, "partitions": list(p)} for t, p in e.active],
            "standby_partitions": [{"topic": t, "partitions": list(p)}
                                   for t, p in e.standby]}
            for e in r.endpoints]
    return ctx.respond({
        "error_code": r.error, "error_message": r.error_message, "member_id": r.member_id,
        "member_epoch": r.member_epoch, "heartbeat_interval": r.heartbeat_interval_ms,
        "acceptable_recovery_lag": r.acceptable_recovery_lag,
        "task_offset_interval": r.task_offset_interval_ms,
        "status": status if r.error == ErrorCode.none else None,
        "active_tasks": None if a is None else _task_ids(a.active),
        "standby_tasks": None if a is None else _task_ids(a.standby),
        "warmup_tasks": None if a is None else _task_ids(a.warmup),
        "endpoint_information_epoch": r.endpoint_information_epoch,
        "partitions_by_user_endpoint": endpoints,
    })


def _refused(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    return _answer(ctx, StreamsHeartbeatResponse(error, message, heartbeat_interval_ms=0,
                                                  acceptable_recovery_lag=0,
                                                  task_offset_interval_ms=0))


# -- StreamsGroupHeartbeat ----------------------------------------------------------------------

def _topology_refusal(ctx: RequestContext, authorizer: Any, topology: Topology) -> Any | None:
    """Kafka's checks of a declared topology before the coordinator sees it (module
    docstring), or None."""
    names = topology.named_topics()
    internal = [n for n in names if is_internal_topic(n)]
    if internal:
        return _refused(ctx, ErrorCode.streams_invalid_topology,
                        f"Use of Kafka internal topics {','.join(internal)} in a Kafka "
                        "Streams topology is prohibited.")
    invalid = [n for n in names if validate_topic_name(n) is not None]
    if invalid:
        return _refused(ctx, ErrorCode.streams_invalid_topology,
                        f"Topic names {','.join(invalid)} are not valid topic names.")
    if authorizer is not None and unauthorized_topics(ctx, AclOperation.DESCRIBE, names):
        return _refused(ctx, ErrorCode.topic_authorization_failed, None)
    return None


def streams_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    if not streams_enabled(ctx):
        return _refused(ctx, ErrorCode.unsupported_version, None)
    authorizer = enforcing(ctx)
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _refused(ctx, ErrorCode.group_authorization_failed,
                        "Group authorization failed.")
    if (request.member_epoch > 0 and request.topology is None
            and request.active_tasks is None and request.standby_tasks is None
            and request.warmup_tasks is None and request.instance_id is None
            and request.rack_id is None and request.rebalance_timeout == _UNCHANGED
            and request.process_id is None and request.user_endpoint is None
            and request.client_tags is None and request.task_offsets is None
            and request.task_end_offsets is None and not request.shutdown_application):
        # A heartbeat that sets no field but the endpoint epoch: most likely a settled
        # member's (the core decides).
        settled = ctx.services.groups.settled_heartbeat(StreamsSettledHeartbeat(
            request.group_id, request.member_id, request.member_epoch,
            request.endpoint_information_epoch, ctx.client_id or "", ctx.client_host))
        if settled is not None:
            return _heartbeat_answer(ctx, settled)
    topology = _topology(request.topology)
    if topology is not None:
        refused = _topology_refusal(ctx, authorizer, topology)
        if refused is not None:
            return refused
    endpoint = request.user_endpoint
    tags = request.client_tags
    req = StreamsHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch,
        endpoint_information_epoch=request.endpoint_information_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout), topology=topology,
        owned=_owned(request), process_id=request.process_id,
        user_endpoint=None if endpoint is None else Endpoint(endpoint.host, int(endpoint.port)),
        client_tags=None if tags is None else tuple((t.key, t.value) for t in tags),
        task_offsets=_offsets(request.task_offsets),
        task_end_offsets=_offsets(request.task_end_offsets),
        shutdown_application=bool(request.shutdown_application),
        client_id=ctx.client_id or "", client_host=ctx.client_host,
        requester=None if authorizer is None else Requester(ctx.principal, host_of(ctx)))
    r = ctx.services.groups.handle(req)
    if not r.topics_to_create:
        return _heartbeat_answer(ctx, r)
    return _create_then_answer(ctx, authorizer, r)


def _create_then_answer(ctx: RequestContext, authorizer: Any,
                        r: StreamsHeartbeatResponse) -> Any:
    """Create the internal topics the group needs (module docstring), then answer."""
    denied: set[str | None] = set()
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
        denied = unauthorized_topics(ctx, AclOperation.CREATE,
                                     [t.name for t in r.topics_to_create])
    for topic in r.topics_to_create:
        if topic.name not in denied:
            _create(ctx, topic)
    if denied:
        message = f"Unauthorized to CREATE on topics {', '.join(sorted(map(str, denied)))}."
        r = replace(r, status=_with_unauthorized(r.status, message))
    return _answer(ctx, r)


def _with_unauthorized(statuses: tuple[GroupStatus, ...],
                       message: str) -> tuple[GroupStatus, ...]:
    """The statuses with `message` added to MISSING_INTERNAL_TOPICS's detail (or as that
    status, when the coordinator gave none)."""
    missing = StreamsGroupStatus.MISSING_INTERNAL_TOPICS
    if not any(s.code == missing for s in statuses):
        return (*statuses, GroupStatus(missing, message))
    return tuple(GroupStatus(s.code, f"{s.detail}; {message}") if s.code == missing else s
                 for s in statuses)


def _create(ctx: RequestContext, topic: InternalTopic) -> None:
    services = ctx.services
    if topic.name in services.logs.topics:
        return
    partitions = topic.partitions if topic.partitions > 0 else services.config.num_partitions
    configs = dict(topic.configs)
    if services.cluster is not None:
        services.cluster.create_soon(topic.name, partitions, configs)
        return
    try:
        services.topics.create_topic(topic.name, partitions, configs)
    except (LogError, OSError) as e:
        log.warning("could not create the internal topic %s of a streams group: %s",
                    topic.name, e)


# -- StreamsGroupDescribe -----------------------------------------------------------------------

def _wire_topic(t: StreamsTopicInfo) -> dict[str, Any]:
    return {"name": t.name, "partitions": t.partitions,
            "replication_factor": t.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in t.topic_configs]}


def _described_topology(t: Topology | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"epoch": t.epoch, "subtopologies": [
        {"subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
         "repartition_sink_topics": list(s.repartition_sink_topics),
         "state_changelog_topics": [_wire_topic(c) for c in s.state_changelog_topics],
         "repartition_source_topics": [_wire_topic(r) for r in s.repartition_source_topics]}
        for s in t.subtopologies]}


def _assignment(tasks: TaskSet) -> dict[str, Any]:
    return {"active_tasks": _task_ids(tasks.active), "standby_tasks": _task_ids(tasks.standby),
            "warmup_tasks": _task_ids(tasks.warmup)}


def _member(m: DescribedStreamsMember) -> dict[str, Any]:
    endpoint = m.user_endpoint
    return {
        "member_id": m.member_id, "member_epoch": m.member_epoch,
        "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
        "client_host": m.client_host, "topology_epoch": m.topology_epoch,
        "process_id": m.process_id,
        "user_endpoint": None if endpoint is None else {"host": endpoint.host,
                                                        "port": endpoint.port},
        "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
        "task_offsets": [], "task_end_offsets": [],
        "assignment": _assignment(m.assignment),
        "target_assignment": _assignment(m.target_assignment),
        "is_classic": False,
    }


def _group(d: DescribedStreamsGroup) -> dict[str, Any]:
    return {"error_code": d.error, "error_message": d.error_message, "group_id": d.group_id,
            "group_state": d.group_state, "group_epoch": d.group_epoch,
            "assignment_epoch": d.assignment_epoch,
            "topology": _described_topology(d.topology),
            "members": [_member(m) for m in d.members],
            "authorized_operations": NOT_GIVEN}


def _described(ctx: RequestContext, authorizer: Any, group_id: str,
               operations: bool) -> dict[str, Any]:
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"group_id": group_id, "error_code": ErrorCode.group_authorization_failed,
                "error_message": "Group authorization failed.", "group_state": "",
                "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
                "authorized_operations": NOT_GIVEN}
    d = ctx.services.groups.handle(StreamsGroupDescribeRequest(group_id))
    if d.error != ErrorCode.none:
        return _group(d)
    if authorizer is not None and d.topology is not None and unauthorized_topics(
            ctx, AclOperation.DESCRIBE, d.topology.named_topics()):
        return {**_group(DescribedStreamsGroup(ErrorCode.topic_authorization_failed,
                                               group_id, "Topic authorization failed.")),
                "topology": None}
    return {**_group(d), "authorized_operations":
            group_operations(ctx, group_id) if operations else NOT_GIVEN}


def streams_group_describe(ctx: RequestContext, request: Any) -> Any:
    if not streams_enabled(ctx):
        return ctx.respond({"groups": [
            {"group_id": g, "error_code": ErrorCode.unsupported_version,
             "error_message": None, "group_state": "", "group_epoch": 0,
             "assignment_epoch": 0, "topology": None, "members": [],
             "authorized_operations": NOT_GIVEN} for g in request.group_ids]})
    authorizer = enforcing(ctx)
    operations = bool(getattr(request, "include_authorized_operations", False))
    return ctx.respond({"groups": [_described(ctx, authorizer, group_id, operations)
                                   for group_id in request.group_ids]})
