"""Classic group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups.

Each handler translates the wire version into the coordinator's version-free values, hands
them to the group runtime's door (`GroupRuntime.handle`: the loading answer, then the shard
of the group's `__consumer_offsets` partition, which persists before anything is answered)
and translates the answer back. Every rule is the coordinator's (`coterie.group`): which
group type serves a request, what DescribeGroups says of a consumer group or an id with only
offsets, what ListGroups lists, what DeleteGroups may delete. This one broker is the
coordinator of every group.

ACLs (coterie.broker.group_acls, Kafka's KafkaApis checks): FindCoordinator needs DESCRIBE
on the group or transactional id; JoinGroup, SyncGroup, Heartbeat and LeaveGroup READ on the
group (else GROUP_AUTHORIZATION_FAILED and the coordinator is not asked); DescribeGroups
DESCRIBE and DeleteGroups DELETE per group; ListGroups lists every group with DESCRIBE on
the cluster, else only the groups the principal may DESCRIBE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import Parked, RequestContext, millis
from coterie.broker.group_acls import (
    NOT_GIVEN,
    enforcing,
    group_operations,
    may,
    may_on_cluster,
)
from coterie.broker.large import LARGE, in_slices
from coterie.broker.offsets_topic import OFFSETS_TOPIC
from coterie.broker.transactions import TXN_TOPIC
from coterie.common.shared_table import shared_str
from coterie.group import (
    DeleteGroupRequest,
    DescribeGroupRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coterie.security import AclOperation, ResourceType


def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    cfg = ctx.services.config
    key_type = getattr(request, "key_type", 0)
    keys = list(request.coordinator_keys) if ctx.api_version >= 4 else [request.key]
    entries = []
    authorizer = enforcing(ctx)
    for key in keys:
        if authorizer is not None and key_type in (0, 1) and not authorizer.authorize(
                ctx, AclOperation.DESCRIBE, _KEY_RESOURCE[key_type], key):
            error = _KEY_REFUSAL[key_type]
            entries.append({"key": key, "error_code": error,
                            "error_message": _AUTH_MESSAGES[error], "node_id": -1,
                            "host": "", "port": -1})
        elif key_type not in (0, 1):  # groups and transactions; not share groups yet
            entries.append({"key": key, "error_code": ErrorCode.coordinator_not_available,
                            "error_message": "coterie coordinates groups and transactions "
                            "only", "node_id": -1, "host": "", "port": -1})
        elif ctx.services.cluster is not None:
            entries.append(_cluster_coordinator(ctx, key, key_type))
        else:
            host, port = ctx.services.address(ctx.listener)
            entries.append({"key": key, "error_code": ErrorCode.none, "node_id": cfg.node_id,
                            "host": host, "port": port})
    if ctx.api_version >= 4:
        return ctx.respond({"coordinators": entries})
    return ctx.respond(entries[0])


# FindCoordinator's key types (0 a group, 1 a transactional id): the resource DESCRIBE is
# asked on, and the error when the principal may not.
_KEY_RESOURCE = {0: ResourceType.GROUP, 1: ResourceType.TRANSACTIONAL_ID}
_KEY_REFUSAL = {0: ErrorCode.group_authorization_failed,
                1: ErrorCode.transactional_id_authorization_failed}
# Kafka's messages of these errors (Errors.message), for the answers that carry one.
_AUTH_MESSAGES = {ErrorCode.group_authorization_failed: "Group authorization failed.",
                  ErrorCode.transactional_id_authorization_failed:
                      "Transactional Id authorization failed."}
GROUP_REFUSED = _AUTH_MESSAGES[ErrorCode.group_authorization_failed]


def _may_read(ctx: RequestContext, group_id: str) -> bool:
    """READ on the group: what Kafka asks of every member's request (join, sync, heartbeat,
    leave, commit). True without an authorizer, at the cost of one attribute test."""
    authorizer = enforcing(ctx)
    return authorizer is None or authorizer.authorize(ctx, AclOperation.READ,
                                                      ResourceType.GROUP, group_id)


def _cluster_coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    """A cluster's coordinator of a group (or a transactional id): the broker leading its
    partition of __consumer_offsets (or __transaction_state), by its lease, as on Kafka."""
    services = ctx.services
    cluster = services.cluster
    unavailable = {"key": key, "error_code": ErrorCode.coordinator_not_available,
                   "node_id": -1, "host": "", "port": -1}
    if key_type == 1:
        topic, partition = TXN_TOPIC, services.transactions.partition_of(key)
    else:
        topic, partition = OFFSETS_TOPIC, services.groups.partition_of(key)
    info = services.logs.topics.get(topic)
    lease = None if info is None else cluster.leader(topic, partition, info.topic_id)
    owner = None if lease is None else next(
        (b for b in cluster.brokers if b.node_id == lease.owner), None)
    address = None if owner is None else owner.address(ctx.listener)
    if lease is None or address is None:
        return {**unavailable, "error_message": f"no live broker leads {topic}-{partition} "
                "now"}
    return {"key": key, "error_code": ErrorCode.none, "node_id": lease.owner,
            "host": address[0], "port": address[1]}


def _join_answer(ctx: RequestContext, r: JoinGroupResponse) -> Any:
    if r.reason:
        ctx.refusal = r.reason  # logged with an INVALID_REQUEST (the wire has no message)
    return ctx.respond({
        "error_code": r.error, "generation_id": r.generation_id,
        "protocol_type": r.protocol_type, "protocol_name": r.protocol_name,
        "leader": r.leader, "skip_assignment": r.skip_assignment, "member_id": r.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "metadata": m.metadata} for m in r.members],
    })


def join_group(ctx: RequestContext, request: Any) -> Any:
    if not _may_read(ctx, request.group_id):
        return ctx.respond({"error_code": ErrorCode.group_authorization_failed,
                            "generation_id": -1, "protocol_type": None, "protocol_name": "",
                            "leader": "", "member_id": "", "members": []})
    runtime = ctx.services.groups
    session = millis(request.session_timeout)
    rebalance = millis(request.rebalance_timeout) if ctx.api_version >= 1 else session
    token, fut = runtime.park()
    # Strings the member keeps and its group's members share are kept once (shared_str,
    # bounded): at 10,000 members each copy would cost about 60 bytes a member.
    core = JoinGroupRequest(
        group_id=shared_str(request.group_id), member_id=request.member_id,
        protocol_type=shared_str(request.protocol_type),
        protocols=tuple((shared_str(p.name), bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=session,
        # JoinGroup v0 has no rebalance timeout; the session timeout stands in (never -1).
        rebalance_timeout_ms=rebalance if rebalance > 0 else session,
        group_instance_id=getattr(request, "group_instance_id", None),
        require_known_member_id=ctx.api_version >= 4,
        client_id=shared_str(ctx.client_id or ""), client_host=ctx.client_host,
        reason=getattr(request, "reason", None), token=token,
        supports_skip_assignment=ctx.api_version >= 9,
    )
    return _answer_or_park(ctx, core, token, fut, _join_answer)


def _sync_answer(ctx: RequestContext, r: SyncGroupResponse) -> Any:
    return ctx.respond({"error_code": r.error, "assignment": r.assignment,
                        "protocol_type": r.protocol_type, "protocol_name": r.protocol_name})


def sync_group(ctx: RequestContext, request: Any) -> Any:
    # Kafka answers a v5+ request without its protocol type and name
    # INCONSISTENT_GROUP_PROTOCOL before it asks for READ: the coordinator says that here.
    incomplete = ctx.api_version >= 5 and (request.protocol_type is None
                                           or request.protocol_name is None)
    if not incomplete and not _may_read(ctx, request.group_id):
        return ctx.respond({"error_code": ErrorCode.group_authorization_failed,
                            "assignment": b"", "protocol_type": None, "protocol_name": None})
    runtime = ctx.services.groups
    token, fut = runtime.park()
    core = SyncGroupRequest(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None), token=token,
    )
    return _answer_or_park(ctx, core, token, fut, _sync_answer)


def _answer_or_park(ctx: RequestContext, core: Any, token: int, fut: Any,
                    answer: Callable[[RequestContext, Any], Any]) -> Any:
    """Answer now if the coordinator has this request's answer, else once the parked
    request's future has it (the server waits, coterie.broker.context)."""
    runtime = ctx.services.groups
    response = runtime.handle(core)
    if response is not None:
        runtime.forget(token)
        return answer(ctx, response)
    return Parked(fut, ctx, answer)


def heartbeat(ctx: RequestContext, request: Any) -> Any:
    if not _may_read(ctx, request.group_id):
        return ctx.respond({"error_code": ErrorCode.group_authorization_failed})
    return ctx.respond({"error_code": ctx.services.groups.handle(HeartbeatRequest(
        request.group_id, request.generation_id, request.member_id,
        getattr(request, "group_instance_id", None)))})


def leave_group(ctx: RequestContext, request: Any) -> Any:
    if not _may_read(ctx, request.group_id):
        return ctx.respond({"error_code": ErrorCode.group_authorization_failed,
                            "members": []})
    runtime = ctx.services.groups
    if ctx.api_version >= 3:
        members = tuple(LeavingMember(m.member_id, m.group_instance_id,
                                      getattr(m, "reason", None)) for m in request.members)
    else:
        members = (LeavingMember(request.member_id),)
    answer = runtime.handle(LeaveGroupRequest(request.group_id, members))
    if ctx.api_version < 3:
        return ctx.respond({"error_code": answer.members[0][1] if answer.members else
                            answer.error})
    return ctx.respond({"error_code": answer.error, "members": [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
         "error_code": code} for m, code in answer.members]})


def _asks_operations(ctx: RequestContext, request: Any) -> bool:
    return ctx.api_version >= 3 and bool(getattr(request, "include_authorized_operations",
                                                 False))


def describe_groups(ctx: RequestContext, request: Any) -> Any:
    if len(request.groups) >= DESCRIBE_LARGE:
        return _describe_groups_large(ctx, request)
    operations = _asks_operations(ctx, request)
    return ctx.respond({"groups": [_described(ctx, g, operations) for g in request.groups]})


# Groups per DescribeGroups from which the answer is read in slices and encoded off the loop
# (a group's description carries every member's metadata and assignment).
DESCRIBE_LARGE = 100


async def _describe_groups_large(ctx: RequestContext, request: Any) -> Any:
    operations = _asks_operations(ctx, request)
    groups = await in_slices(request.groups, lambda g: _described(ctx, g, operations),
                             DESCRIBE_LARGE)
    return ctx.respond_off_loop({"groups": groups})


def _described(ctx: RequestContext, group_id: str, operations: bool = False) -> dict:
    """One group of a DescribeGroups answer: GROUP_AUTHORIZATION_FAILED (and nothing of
    the group) without DESCRIBE on it; with `operations` (v3+ asking), what the principal
    may do to it, on a group described without error, as Kafka."""
    if not may(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"error_code": ErrorCode.group_authorization_failed,
                "error_message": GROUP_REFUSED, "group_id": group_id, "group_state": "",
                "protocol_type": "", "protocol_data": "", "members": []}
    d = ctx.services.groups.handle(DescribeGroupRequest(group_id, ctx.api_version))
    return {
        "authorized_operations": (group_operations(ctx, group_id)
                                  if operations and d.error == ErrorCode.none else NOT_GIVEN),
        "error_code": d.error, "error_message": d.error_message, "group_id": group_id,
        "group_state": d.state, "protocol_type": d.protocol_type,
        "protocol_data": d.protocol,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "member_metadata": m.metadata, "member_assignment": m.assignment}
                    for m in d.members],
    }


def list_groups(ctx: RequestContext, request: Any) -> Any:
    states = tuple(getattr(request, "states_filter", ()) or ())
    types = tuple(getattr(request, "types_filter", ()) or ())
    groups = ctx.services.groups.list_groups(states, types)
    if groups is None:
        return ctx.respond({"error_code": ErrorCode.coordinator_load_in_progress,
                            "groups": []})
    authorizer = enforcing(ctx)
    if authorizer is not None and not may_on_cluster(ctx, AclOperation.DESCRIBE):
        # Without DESCRIBE on the cluster, only the groups the principal may DESCRIBE.
        groups = [g for g in groups if authorizer.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    listed = [{"group_id": g.group_id, "protocol_type": g.protocol_type,
               "group_state": g.state, "group_type": g.group_type} for g in groups]
    data = {"error_code": ErrorCode.none, "groups": listed}
    return ctx.respond_off_loop(data) if len(listed) >= LARGE else ctx.respond(data)


async def delete_groups(ctx: RequestContext, request: Any) -> Any:
    runtime = ctx.services.groups
    results = [
        {"group_id": group_id, "error_code":
            runtime.handle(DeleteGroupRequest(group_id))
            if may(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id)
            else ErrorCode.group_authorization_failed}
        for group_id in request.groups_names]
    shares = ctx.services.share_partitions
    if shares is not None:  # a deleted share group's share-partition state goes with it
        for r in results:
            if r["error_code"] == ErrorCode.none:
                await shares.delete_group(r["group_id"])
    return ctx.respond({"results": results})
