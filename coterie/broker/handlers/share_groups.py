"""KIP-932 share group APIs: ShareGroupHeartbeat v1 and ShareGroupDescribe v1.

Each handler maps the wire (v1, the only version Kafka 4.2 has: v0 was 4.0's early access)
onto the coordinator's values (`coterie.group`'s ShareHeartbeatRequest,
ShareGroupDescribeRequest), hands them to the group runtime's door and maps the answer back,
with Kafka 4.2's KafkaApis checks in KafkaApis' order:

- A heartbeat needs READ on the group (else GROUP_AUTHORIZATION_FAILED "Group authorization
  failed."); then its member id must be 1 to 36 characters (else INVALID_REQUEST, with no
  message, as a 4.2.1 broker answers: share consumers generate a UUID); then, when it names its
  subscribed topics, the principal must be allowed to DESCRIBE every one of them (else
  TOPIC_AUTHORIZATION_FAILED, with no message, as Kafka); only then is the coordinator
  asked.
- ShareGroupDescribe needs DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED); a group
  whose members' assignments name a topic the principal may not DESCRIBE is answered
  TOPIC_AUTHORIZATION_FAILED "The group has described topic(s) that the client is not
  authorized to describe." with no members.

ShareFetch and ShareAcknowledge (coterie.broker.handlers.share_fetch) serve the records;
this module serves the group membership.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.group_acls import (
    NOT_GIVEN,
    enforcing,
    group_operations,
    unauthorized_topics,
)
from coterie.group import (
    DescribedShareGroup,
    DescribedShareMember,
    ShareGroupDescribeRequest,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
)
from coterie.security import AclOperation, ResourceType

MAX_MEMBER_ID_CHARS = 36  # Kafka 4.2's KafkaApis.isMemberIdValid


# -- ShareGroupHeartbeat ------------------------------------------------------------------------

def _answer(ctx: RequestContext, r: ShareHeartbeatResponse) -> Any:
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


def _heartbeat_answer(ctx: RequestContext, r: ShareHeartbeatResponse) -> Any:
    """The answer; a settled member's (no error, no assignment) is kept encoded
    (`coterie.broker.steady_answers`)."""
    if r.assignment is None and r.error == ErrorCode.none and r.error_message is None:
        return ctx.services.steady_answers.answer(
            (ctx.api_key, ctx.api_version, r.member_id, r.member_epoch,
             r.heartbeat_interval_ms), _answer, ctx, r)
    return _answer(ctx, r)


def _refused(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    return _answer(ctx, ShareHeartbeatResponse(error, message))


def share_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    authorizer = enforcing(ctx)
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _refused(ctx, ErrorCode.group_authorization_failed,
                        "Group authorization failed.")
    if not request.member_id or len(request.member_id) > MAX_MEMBER_ID_CHARS:
        # Kafka 4.2.1 sends this refusal without its message.
        return _refused(ctx, ErrorCode.invalid_request, None)
    names = request.subscribed_topic_names
    if authorizer is not None and names and unauthorized_topics(
            ctx, AclOperation.DESCRIBE, names):
        return _refused(ctx, ErrorCode.topic_authorization_failed, None)
    req = ShareHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.client_id or "", client_host=ctx.client_host)
    return _heartbeat_answer(ctx, ctx.services.groups.handle(req))


# -- ShareGroupDescribe -------------------------------------------------------------------------

def _member(m: DescribedShareMember) -> dict[str, Any]:
    return {
        "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
        "client_id": m.client_id, "client_host": m.client_host,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "assignment": {"topic_partitions": [
            {"topic_id": t.topic_id, "topic_name": t.topic_name,
             "partitions": list(t.partitions)} for t in m.assignment]},
    }


def _group(d: DescribedShareGroup) -> dict[str, Any]:
    return {
        "error_code": d.error, "error_message": d.error_message, "group_id": d.group_id,
        "group_state": d.group_state, "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch, "assignor_name": d.assignor_name,
        "members": [_member(m) for m in d.members], "authorized_operations": NOT_GIVEN,
    }


def _described(ctx: RequestContext, authorizer: Any, group_id: str,
               operations: bool) -> dict[str, Any]:
    """One group of the answer, with Kafka's checks (module docstring) when `authorizer`;
    its authorized operations when asked, on a group described without error."""
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _group(DescribedShareGroup(ErrorCode.group_authorization_failed, group_id,
                                          "Group authorization failed."))
    d = ctx.services.groups.handle(ShareGroupDescribeRequest(group_id))
    if d.error != ErrorCode.none:
        return _group(d)
    if authorizer is not None:
        topics = {t.topic_name for m in d.members for t in m.assignment}
        if topics and unauthorized_topics(ctx, AclOperation.DESCRIBE, topics):
            return _group(DescribedShareGroup(
                ErrorCode.topic_authorization_failed, group_id,
                "The group has described topic(s) that the client is not authorized to "
                "describe."))
    return {**_group(d), "authorized_operations":
            group_operations(ctx, group_id) if operations else NOT_GIVEN}


def share_group_describe(ctx: RequestContext, request: Any) -> Any:
    authorizer = enforcing(ctx)
    operations = bool(getattr(request, "include_authorized_operations", False))
    return ctx.respond({"groups": [_described(ctx, authorizer, group_id, operations)
                                   for group_id in request.group_ids]})
