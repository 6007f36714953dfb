"""Coterie's extension APIs for client-side assignors (KIP-848's sketch, never shipped by
Apache Kafka): ConsumerGroupPrepareAssignment (api key 32000) and
ConsumerGroupInstallAssignment (32001), version 0.

Each handler maps the kio entity (`coterie.wire.extensions`) onto the coordinator's
version-free values, hands them to the group runtime's door (`GroupRuntime.handle`), which
persists whatever records they make (an install writes the new target, a refused one the
fallback's) before answering, and maps the answer back.
The rules live in the core; docs/extensions.md describes the APIs for client authors.
"""

from __future__ import annotations

from typing import Any

from coterie.broker.context import ZERO_UUID, RequestContext
from coterie.group import (
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    InstalledMember,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    TopicPartitions,
)


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
    return _prepare_answer(ctx, ctx.services.groups.handle(PrepareAssignmentRequest(
        request.group_id, request.member_id, int(request.member_epoch))))


def _install_answer(ctx: RequestContext, r: InstallAssignmentResponse) -> Any:
    return ctx.respond({"error_code": r.error, "error_message": r.error_message})


def install_assignment(ctx: RequestContext, request: Any) -> Any:
    req = InstallAssignmentRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=int(request.member_epoch), group_epoch=int(request.group_epoch),
        error=int(request.error),
        members=tuple(InstalledMember(m.member_id, tuple(
            TopicPartitions(t.topic_id or ZERO_UUID, tuple(int(p) for p in t.partitions))
            for t in m.partitions)) for m in request.members))
    return _install_answer(ctx, ctx.services.groups.handle(req))
