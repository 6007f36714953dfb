"""CreateAcls v2-v3, DescribeAcls v2-v3 and DeleteAcls v2-v3 (Kafka 4.x serves no older
versions), with Kafka 4.2's answers.

- No authorizer configured (`authorizer.class.name` empty): SECURITY_DISABLED, "No
  Authorizer is configured." (every creation or filter) or, for DescribeAcls, "No
  Authorizer is configured on the broker".
- The request's principal needs ALTER on the cluster to create or delete ACLs and DESCRIBE
  to list them, as on Kafka: else CLUSTER_AUTHORIZATION_FAILED. A `super.users` principal
  always may.
- A creation Kafka would not store is answered INVALID_REQUEST with Kafka's reason
  (coterie.security.bindings); the others are stored (one already there is no change and
  no error). A filter with an UNKNOWN part is INVALID_REQUEST ("Unknown patternFilter.",
  "Unknown entryFilter."). A DeleteAcls that would remove more than 10,000 ACLs removes
  none: every filter is INVALID_REQUEST, Kafka's bound on one metadata operation.

A single broker writes its ACL file before answering (coterie.broker.acls); a cluster
broker writes the database first and then tells the other brokers
(coterie.broker.cluster `create_acls`, `delete_acls`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.log.errors import StorageError
from coterie.security import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    InvalidAcl,
    ResourceType,
    binding_from_wire,
    filter_from_wire,
)

NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NOT_AUTHORIZED = "Cluster authorization failed."
# Kafka's bound on the records of one controller operation (MAX_RECORDS_PER_USER_OP).
MAX_DELETIONS = 10_000
TOO_MANY_DELETIONS = (f"Cannot remove more than {MAX_DELETIONS} acls in a single delete "
                      "operation.")

_Answer = tuple[ErrorCode, str | None]
_OK: _Answer = (ErrorCode.none, None)


def _refusal(ctx: RequestContext, operation: AclOperation, disabled: str) -> _Answer | None:
    """Why the whole request is refused: no authorizer, or the principal may not perform
    `operation` on the cluster."""
    authorizer = ctx.services.authorizer
    if authorizer is None or not authorizer.enabled:
        return ErrorCode.security_disabled, disabled
    if not authorizer.authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED
    return None


def _storage_failure(e: Exception) -> _Answer:
    return ErrorCode.kafka_storage_error, f"cannot store the ACLs: {e}"


# -- CreateAcls --------------------------------------------------------------------------
def create_acls(ctx: RequestContext, request: Any) -> Any:
    creations = request.creations or ()
    refused = _refusal(ctx, AclOperation.ALTER, NO_AUTHORIZER)
    if refused is not None:
        return _created(ctx, [refused] * len(creations))
    answers: list[_Answer] = []
    valid: list[tuple[int, AclBinding]] = []
    for i, c in enumerate(creations):
        try:
            valid.append((i, binding_from_wire(c.resource_type, c.resource_name,
                                               c.resource_pattern_type, c.principal, c.host,
                                               c.operation, c.permission_type)))
            answers.append(_OK)
        except InvalidAcl as e:
            answers.append((ErrorCode.invalid_request, str(e)))
    if not valid:
        return _created(ctx, answers)
    bindings = [b for _, b in valid]
    if ctx.services.cluster is not None:
        return _create_in_cluster(ctx, answers, valid)
    try:
        ctx.services.authorizer.create(bindings)
    except OSError as e:
        for i, _ in valid:
            answers[i] = _storage_failure(e)
    return _created(ctx, answers)


async def _create_in_cluster(ctx: RequestContext, answers: list[_Answer],
                             valid: list[tuple[int, AclBinding]]) -> Any:
    try:
        await ctx.services.cluster.create_acls([b for _, b in valid])
    except (StorageError, OSError) as e:
        for i, _ in valid:
            answers[i] = _storage_failure(e)
    return _created(ctx, answers)


def _created(ctx: RequestContext, answers: list[_Answer]) -> Any:
    return ctx.respond({"results": [{"error_code": code, "error_message": message}
                                    for code, message in answers]})


# -- DescribeAcls ------------------------------------------------------------------------
def describe_acls(ctx: RequestContext, request: Any) -> Any:
    refused = _refusal(ctx, AclOperation.DESCRIBE, NO_AUTHORIZER_DESCRIBE)
    if refused is None:
        try:
            f = filter_from_wire(request.resource_type_filter, request.resource_name_filter,
                                 request.pattern_type_filter, request.principal_filter,
                                 request.host_filter, request.operation,
                                 request.permission_type)
        except InvalidAcl as e:
            refused = ErrorCode.invalid_request, str(e)
    if refused is not None:
        return ctx.respond({"error_code": refused[0], "error_message": refused[1],
                            "resources": []})
    resources: list[dict[str, Any]] = []
    last: tuple[int, str, int] | None = None
    for b in ctx.services.authorizer.describe(f):  # sorted: one pattern's ACLs together
        pattern = (b.resource_type, b.name, b.pattern_type)
        if pattern != last:
            resources.append({"resource_type": b.resource_type, "resource_name": b.name,
                              "pattern_type": b.pattern_type, "acls": []})
            last = pattern
        resources[-1]["acls"].append({"principal": b.principal, "host": b.host,
                                      "operation": b.operation,
                                      "permission_type": b.permission})
    return ctx.respond({"error_code": ErrorCode.none, "error_message": None,
                        "resources": resources})


# -- DeleteAcls --------------------------------------------------------------------------
def delete_acls(ctx: RequestContext, request: Any) -> Any:
    wire_filters = request.filters or ()
    refused = _refusal(ctx, AclOperation.ALTER, NO_AUTHORIZER)
    if refused is not None:
        return _deleted(ctx, [(refused, [])] * len(wire_filters))
    filters: list[AclBindingFilter | InvalidAcl] = []
    for w in wire_filters:
        try:
            filters.append(filter_from_wire(w.resource_type_filter, w.resource_name_filter,
                                            w.pattern_type_filter, w.principal_filter,
                                            w.host_filter, w.operation, w.permission_type))
        except InvalidAcl as e:
            filters.append(e)
    valid = [f for f in filters if isinstance(f, AclBindingFilter)]
    if ctx.services.cluster is not None and valid:
        return _delete_in_cluster(ctx, filters, valid)
    authorizer = ctx.services.authorizer
    matched = authorizer.matching(valid)
    gone = {b for found in matched for b in found}
    if len(gone) > MAX_DELETIONS:
        return _too_many(ctx, filters)
    failure: _Answer | None = None
    try:
        authorizer.delete(gone)
    except OSError as e:
        failure = _storage_failure(e)
    return _deleted(ctx, _results(filters, matched, failure))


async def _delete_in_cluster(ctx: RequestContext, filters: list[AclBindingFilter | InvalidAcl],
                             valid: list[AclBindingFilter]) -> Any:
    try:
        matched = await ctx.services.cluster.delete_acls(valid, MAX_DELETIONS)
    except (StorageError, OSError) as e:
        return _deleted(ctx, _results(filters, [[] for _ in valid], _storage_failure(e)))
    if matched is None:
        return _too_many(ctx, filters)
    return _deleted(ctx, _results(filters, matched, None))


def _too_many(ctx: RequestContext, filters: list[Any]) -> Any:
    return _deleted(ctx, [((ErrorCode.invalid_request, TOO_MANY_DELETIONS), [])] * len(filters))


def _results(filters: list[AclBindingFilter | InvalidAcl], matched: list[list[AclBinding]],
             failure: _Answer | None) -> list[tuple[_Answer, list[AclBinding]]]:
    """Each filter's answer: its error, or what it removed (`matched`, in the order of the
    valid filters)."""
    found = iter(matched)
    out: list[tuple[_Answer, list[AclBinding]]] = []
    for f in filters:
        if isinstance(f, InvalidAcl):
            out.append(((ErrorCode.invalid_request, str(f)), []))
        elif failure is not None:
            next(found)
            out.append((failure, []))
        else:
            out.append((_OK, next(found)))
    return out


def _deleted(ctx: RequestContext, results: list[tuple[_Answer, list[AclBinding]]]) -> Any:
    return ctx.respond({"filter_results": [
        {"error_code": code, "error_message": message, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None,
             "resource_type": b.resource_type, "resource_name": b.name,
             "pattern_type": b.pattern_type, "principal": b.principal, "host": b.host,
             "operation": b.operation, "permission_type": b.permission}
            for b in removed]}
        for (code, message), removed in results]})
