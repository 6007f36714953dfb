"""DescribeClientQuotas (v0-v1): coterie keeps no client quotas, and says so as Kafka would
about a cluster where none was set.

Why serve it at all: `kafka-configs --describe --entity-type users` (and `clients`, `ips`)
asks it before anything else, and without it the tool stops before it describes the users'
SCRAM credentials. So the answer is Kafka's for a cluster without quotas: no entries. The
filter is checked as a Kafka 4.2 broker checks it (its ClientQuotasImage): an entity type
named twice, an empty one, or `ip` together with `user` or `client-id` is INVALID_REQUEST; a
type other than `user`, `client-id` and `ip` is UNSUPPORTED_VERSION; and a component's match
must fit its match type (a name for MATCH_EXACT, none for MATCH_DEFAULT and MATCH_ANY).
AlterClientQuotas is not offered: coterie enforces no quotas, and a quota it took would be a
promise it does not keep (docs/decisions.md).

ACLs (when an authorizer is configured): DESCRIBE_CONFIGS on the cluster, else
CLUSTER_AUTHORIZATION_FAILED, as Kafka checks it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import enforcing
from coterie.broker.context import RequestContext
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

ENTITY_TYPES = ("user", "client-id", "ip")
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def describe_client_quotas(ctx: RequestContext, request: Any) -> Any:
    authorizer = enforcing(ctx)
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return _answer(ctx, ErrorCode.cluster_authorization_failed,
                       "Cluster authorization failed.")
    refused = filter_error(request.components)
    if refused is not None:
        return _answer(ctx, *refused)
    return ctx.respond({"error_code": ErrorCode.none, "error_message": None, "entries": []})


def filter_error(components: Any) -> tuple[ErrorCode, str] | None:
    """Why a quota filter is refused (Kafka's error and words), or None."""
    seen: set[str] = set()
    for c in components:
        kind = c.entity_type
        if kind == "":
            return ErrorCode.invalid_request, "Unexpected empty filter component entity type"
        if kind in seen:
            return ErrorCode.invalid_request, f"Duplicate {kind} filter component entity type"
        if kind not in ENTITY_TYPES:
            return ErrorCode.unsupported_version, f"Custom entity type {kind} not supported"
        seen.add(kind)
        if c.match_type == MATCH_EXACT and c.match is None:
            return ErrorCode.invalid_request, \
                f"The {kind} filter component matches exactly but names nothing"
        if c.match_type in (MATCH_DEFAULT, MATCH_ANY) and c.match is not None:
            return ErrorCode.invalid_request, \
                f"The {kind} filter component names {c.match!r} but matches by default or any"
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return ErrorCode.invalid_request, f"Unknown match type {c.match_type}"
    if "ip" in seen and len(seen) > 1:
        return ErrorCode.invalid_request, (
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component.")
    return None


def _answer(ctx: RequestContext, code: ErrorCode, message: str) -> Any:
    return ctx.respond({"error_code": code, "error_message": message, "entries": None})
