"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat v0-v1 and ConsumerGroupDescribe v0-v1.

Each handler maps the wire version onto the coordinator's version-free values, hands them to
the group runtime's door (`GroupRuntime.handle`: a classic group of the same id is converted
when the migration policy allows it, never overwritten by mistake; the records are persisted
before anything is answered), and maps the answer back. Partitions travel by topic id: the
broker's own stable ids (`TopicInfo.topic_id`), which the coordinator also learns through
`GroupRuntime.topics_changed`.

A settled member's heartbeat sets no field; the handler sees that on the wire request and
sends the coordinator a `SettledHeartbeat` instead of the full request, and a settled
member's answer is the same every time: its encoded body is kept
(`coterie.broker.steady_answers`).

ACLs (coterie.broker.group_acls), as Kafka 4.2's KafkaApis: a heartbeat needs READ on the
group (else GROUP_AUTHORIZATION_FAILED, the settled member's too) and, when it names its
subscribed topics, DESCRIBE on every one of them (else TOPIC_AUTHORIZATION_FAILED, naming
them, and the coordinator is not asked). ConsumerGroupDescribe needs DESCRIBE per group, and
a group whose members' assignments name a topic the principal may not DESCRIBE is answered
TOPIC_AUTHORIZATION_FAILED instead of described.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import host_of
from coterie.broker.context import ZERO_UUID, RequestContext, millis
from coterie.broker.group_acls import (
    NOT_GIVEN,
    enforcing,
    group_operations,
    unauthorized_topics,
)
from coterie.broker.large import LARGE
from coterie.group import (
    ConsumerGroupDescribeRequest,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
    Requester,
    SettledHeartbeat,
    TopicPartitions,
)
from coterie.security import AclOperation, ResourceType

_UNCHANGED = datetime.timedelta(milliseconds=-1)  # RebalanceTimeoutMs -1: "unchanged"


# -- ConsumerGroupHeartbeat ---------------------------------------------------------------------

def _owned(entries: Any) -> tuple[TopicPartitions, ...] | None:
    if entries is None:
        return None
    return tuple(TopicPartitions(e.topic_id or ZERO_UUID, tuple(int(p) for p in e.partitions))
                 for e in entries)


def _heartbeat_answer(ctx: RequestContext, r: ConsumerHeartbeatResponse) -> Any:
    if r.assignment is None and r.error == ErrorCode.none and r.error_message is None:
        return ctx.services.steady_answers.answer(
            (ctx.api_key, ctx.api_version, r.member_id, r.member_epoch, r.heartbeat_interval_ms),
            _build_answer, ctx, r)
    return _build_answer(ctx, r)


def _build_answer(ctx: RequestContext, r: ConsumerHeartbeatResponse) -> Any:
    assignment = None
    if r.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
            for tp in r.assignment]}
    return ctx.respond({
        "error_code": r.error, "error_message": r.error_message, "member_id": r.member_id,
        "member_epoch": r.member_epoch, "heartbeat_interval": r.heartbeat_interval_ms,
        "assignment": assignment,
    })


def _refused(ctx: RequestContext, error: ErrorCode, message: str) -> Any:
    return ctx.respond({"error_code": error, "error_message": message, "member_id": None,
                        "member_epoch": 0, "heartbeat_interval": 0, "assignment": None})


def _heartbeat_refusal(ctx: RequestContext, authorizer: Any, request: Any) -> Any | None:
    """The answer to a heartbeat the principal may not send (module docstring), or None."""
    if not authorizer.authorize(ctx, AclOperation.READ, ResourceType.GROUP,
                                request.group_id):
        return _refused(ctx, ErrorCode.group_authorization_failed,
                        "Group authorization failed.")
    names = request.subscribed_topic_names
    if names:
        denied = unauthorized_topics(ctx, AclOperation.DESCRIBE, names)
        if denied:
            shown = ", ".join(sorted(str(n) for n in denied))
            return _refused(ctx, ErrorCode.topic_authorization_failed,
                            f"Not authorized to access topics: [{shown}]")
    return None


def consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    runtime = ctx.services.groups
    authorizer = enforcing(ctx)
    if authorizer is not None:
        refused = _heartbeat_refusal(ctx, authorizer, request)
        if refused is not None:
            return refused
    if (request.member_epoch > 0 and request.topic_partitions is None
            and request.subscribed_topic_names is None and request.instance_id is None
            and request.rack_id is None and request.server_assignor is None
            and request.rebalance_timeout == _UNCHANGED
            and getattr(request, "subscribed_topic_regex", None) is None):
        # A heartbeat that sets no field: most likely a settled member's (the core decides).
        settled = runtime.settled_heartbeat(SettledHeartbeat(
            request.group_id, request.member_id, request.member_epoch, ctx.client_id or "",
            ctx.client_host))
        if settled is not None:
            return _heartbeat_answer(ctx, settled)
    names = request.subscribed_topic_names
    req = ConsumerHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=_owned(request.topic_partitions), version=ctx.api_version,
        client_id=ctx.client_id or "", client_host=ctx.client_host,
        requester=None if authorizer is None else Requester(ctx.principal, host_of(ctx)),
    )
    return _heartbeat_answer(ctx, runtime.handle(req))


# -- ConsumerGroupDescribe ----------------------------------------------------------------------

def _topics(entries: tuple[DescribedTopicPartitions, ...]) -> dict[str, Any]:
    return {"topic_partitions": [
        {"topic_id": t.topic_id, "topic_name": t.topic_name, "partitions": list(t.partitions)}
        for t in entries]}


def _member(m: DescribedConsumerMember) -> dict[str, Any]:
    return {
        "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
        "member_epoch": m.member_epoch, "client_id": m.client_id,
        "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "assignment": _topics(m.assignment), "target_assignment": _topics(m.target_assignment),
        "member_type": m.member_type,
    }


def _group(d: DescribedConsumerGroup) -> dict[str, Any]:
    return {
        "error_code": d.error, "error_message": d.error_message, "group_id": d.group_id,
        "group_state": d.group_state, "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch, "assignor_name": d.assignor_name,
        "members": [_member(m) for m in d.members],
    }


def _described(ctx: RequestContext, authorizer: Any, group_id: str,
               operations: bool) -> dict[str, Any]:
    """One group of the answer, with Kafka's checks (module docstring) when `authorizer`;
    its authorized operations when asked, on a group described without error."""
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"group_id": group_id, "error_code": ErrorCode.group_authorization_failed,
                "error_message": "Group authorization failed.", "members": []}
    d = ctx.services.groups.handle(ConsumerGroupDescribeRequest(group_id))
    if d.error != ErrorCode.none:
        return _group(d)
    if authorizer is not None:
        topics = {t.topic_name for m in d.members
                  for t in (*m.assignment, *m.target_assignment)}
        if unauthorized_topics(ctx, AclOperation.DESCRIBE, topics):
            return {"group_id": group_id, "error_code": ErrorCode.topic_authorization_failed,
                    "error_message": "Topic authorization failed.", "members": []}
    return {**_group(d), "authorized_operations":
            group_operations(ctx, group_id) if operations else NOT_GIVEN}


def consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    authorizer = enforcing(ctx)
    operations = bool(getattr(request, "include_authorized_operations", False))
    groups = [_described(ctx, authorizer, group_id, operations)
              for group_id in request.group_ids]
    data = {"groups": groups}
    # A group of thousands of members (the console's page of a 10,000-member group) is
    # built and encoded off the loop (coterie.broker.large): on it, that held every other
    # connection for ~0.3 s per describe.
    if sum(len(g["members"]) for g in groups) >= LARGE:
        return ctx.respond_off_loop(data)
    return ctx.respond(data)
