"""Coterie's extension APIs for client-side assignors (KIP-848's sketch, never shipped by
Apache Kafka): ConsumerGroupPrepareAssignment (api key 32000) and
ConsumerGroupInstallAssignment (32001), version 0.

Each handler maps the kio entity (`coterie.wire.extensions`) onto the coordinator's
version-free values, hands them to the group runtime's door (`GroupRuntime.handle`), which
persists whatever records they make (an install writes the new target, a refused one the
fallback's) before answering, and maps the answer back.
The rules live in the core; docs/extensions.md describes the APIs for client authors.

ACLs: both need READ on the group, as ConsumerGroupHeartbeat (the member that prepares and
installs an assignment is a member of the group, and its heartbeat already needed READ);
else GROUP_AUTHORIZATION_FAILED and the coordinator is not asked. The prepared assignment
names the group's subscribed topics, which the members' heartbeats were allowed to
DESCRIBE: no topic check is added (docs/security.md).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import ZERO_UUID, RequestContext
from coterie.broker.group_acls import may
from coterie.group import (
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    InstalledMember,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    TopicPartitions,
)
from coterie.security import AclOperation, ResourceType

_REFUSED = "Group authorization failed."


def _prepare_answer(ctx: RequestContext, r: PrepareAssignmentResponse) -> Any:
    return ctx.respond({
        "error_code": r.error, "error_message": r.error_message, "group_epoch": r.group_epoch,
        "assignor_name": r.assignor_name,
        "members": [{
            "member_id": m.member_id, "member_epoch": m.member_epoch,
            "instance_id": m.instance_id, "rack_id": m.rack_id,
            "subscribed_topic_ids": list(m.subscribed_topic_ids),
            "topic_partitions": [{"topic_id": t.topic_id, "partitions": list(t.partitions)}
                                 for t in m.target],
        } for m in r.members],
        "topics": [{"topic_id": t.topic_id, "topic_name": t.name,
                    "num_partitions": t.partitions} for t in r.topics],
    })


def prepare_assignment(ctx: RequestContext, request: Any) -> Any:
    if not may(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond({"error_code": ErrorCode.group_authorization_failed,
                            "error_message": _REFUSED, "group_epoch": -1,
                            "assignor_name": "", "members": [], "topics": []})
    return _prepare_answer(ctx, ctx.services.groups.handle(PrepareAssignmentRequest(
        request.group_id, request.member_id, int(request.member_epoch))))


def _install_answer(ctx: RequestContext, r: InstallAssignmentResponse) -> Any:
    return ctx.respond({"error_code": r.error, "error_message": r.error_message})


def install_assignment(ctx: RequestContext, request: Any) -> Any:
    if not may(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond({"error_code": ErrorCode.group_authorization_failed,
                            "error_message": _REFUSED})
    req = InstallAssignmentRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=int(request.member_epoch), group_epoch=int(request.group_epoch),
        error=int(request.error),
        members=tuple(InstalledMember(m.member_id, tuple(
            TopicPartitions(t.topic_id or ZERO_UUID, tuple(int(p) for p in t.partitions))
            for t in m.partitions)) for m in request.members))
    return _install_answer(ctx, ctx.services.groups.handle(req))
