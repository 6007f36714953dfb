"""DescribeClientQuotas (v0-v1): coterie keeps no client quotas, so it describes none.

Why serve it at all: Kafka's `kafka-configs --describe --entity-type users` (and `--entity-type
clients`) asks DescribeClientQuotas before it describes the users' SCRAM credentials, and
gives up when the broker does not serve it, so without this API the tool could not describe
a user on coterie. The answer is the one Kafka 4.2 gives for a filter no quota matches: no
entries. (AlterClientQuotas stays unserved: a quota that would not be enforced must not be
accepted.)

As Kafka checks it: DESCRIBE_CONFIGS on the cluster (when an authorizer is configured), else
CLUSTER_AUTHORIZATION_FAILED (and no message); then the filter is validated as Kafka's
metadata image does (each refusal INVALID_REQUEST with Kafka's words, an unknown entity type
UNSUPPORTED_VERSION), an error answer carrying no entries (null). A success carries the empty
string as its message, not null, as Kafka 4.2.1's does (tests/reference/
test_reference_security.py compares code, message and entries with Kafka's, filter by
filter, in both versions). An entity type is quoted in a message only in part when
long (coterie.common.limits `shown`): v0's message has an int16 length.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import enforcing
from coterie.broker.context import RequestContext
from coterie.common.limits import shown
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

ENTITY_TYPES = ("user", "client-id", "ip")
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def _refusal(components: Any) -> tuple[ErrorCode, str] | None:
    """Why Kafka refuses the filter, or None when it is a valid one."""
    seen: set[str] = set()
    for c in components:
        if not c.entity_type:
            return ErrorCode.invalid_request, "Invalid empty entity type."
        if c.entity_type in seen:
            return ErrorCode.invalid_request, \
                f"Entity type {shown(c.entity_type)} cannot appear more than once in the filter."
        if c.entity_type not in ENTITY_TYPES:
            return ErrorCode.unsupported_version, f"Unsupported entity type {shown(c.entity_type)}"
        if c.match_type == MATCH_EXACT and c.match is None:
            return ErrorCode.invalid_request, \
                "Request specified MATCH_TYPE_EXACT, but set match string to null."
        if c.match_type == MATCH_DEFAULT and c.match is not None:
            return ErrorCode.invalid_request, \
                "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
        if c.match_type == MATCH_SPECIFIED and c.match is not None:
            return ErrorCode.invalid_request, \
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            return ErrorCode.invalid_request, f"Unknown match type {c.match_type}"
        seen.add(c.entity_type)
    if "ip" in seen and seen & {"user", "client-id"}:
        return ErrorCode.invalid_request, \
            "Invalid entity filter component combination. IP filter component should not " \
            "be used with user or clientId filter component."
    return None


def describe_client_quotas(ctx: RequestContext, request: Any) -> Any:
    authorizer = enforcing(ctx)
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        refusal: tuple[ErrorCode, str | None] | None = (
            ErrorCode.cluster_authorization_failed, None)
    else:
        refusal = _refusal(request.components)
    if refusal is not None:
        return ctx.respond({"error_code": refusal[0], "error_message": refusal[1],
                            "entries": None})
    return ctx.respond({"error_code": ErrorCode.none, "error_message": "", "entries": []})
