"""DescribeUserScramCredentials (v0) and AlterUserScramCredentials (v0): the users of the
SCRAM mechanisms, as `kafka-configs --entity-type users` and the admin clients manage them.

Kafka 4's answers (its controller's ScramControlManager and the brokers' ScramImage):

* Describe: each user named (all users with a credential when none are named) with the
  mechanism and iterations of each credential, never the keys; a user without any is
  RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.
* Alter: each user's result; the checks are coterie.broker.scram_credentials `plan`, and the
  changes that pass are made together. A single broker writes them to its data directory
  before answering; a cluster broker writes them to the database
  (coterie.broker.cluster `alter_scram_credentials`), which the other brokers adopt at once
  (NOTIFY). A store that cannot be written answers KAFKA_STORAGE_ERROR for every change
  that was to be made, and nothing is changed.

ACLs (when an authorizer is configured), as Kafka 4.2 checks them: Describe needs DESCRIBE
on the cluster, else the answer is CLUSTER_AUTHORIZATION_FAILED with a result of that error
for each user named (Kafka's error response, whose results name no user); Alter needs ALTER
on the cluster, else each user named is answered CLUSTER_AUTHORIZATION_FAILED (once, in name
order) and nothing is changed.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import enforcing
from coterie.broker.context import RequestContext
from coterie.broker.scram_credentials import Plan, Upsertion, plan
from coterie.log.errors import StorageError
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

DESCRIBE_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single " \
                     "request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
NOT_AUTHORIZED = "Cluster authorization failed."


def _may(ctx: RequestContext, operation: AclOperation) -> bool:
    """Whether the principal may perform `operation` on the cluster (always, without an
    authorizer)."""
    authorizer = enforcing(ctx)
    return authorizer is None or authorizer.authorize(ctx, operation, ResourceType.CLUSTER,
                                                      CLUSTER_NAME)


def describe_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    if not _may(ctx, AclOperation.DESCRIBE):
        code = ErrorCode.cluster_authorization_failed
        return ctx.respond({"error_code": code, "error_message": NOT_AUTHORIZED, "results": [
            {"user": "", "error_code": code, "error_message": NOT_AUTHORIZED,
             "credential_infos": []} for _ in request.users or ()]})
    store = ctx.services.scram_credentials
    named: list[str] = []  # each user once, in the request's order
    twice: set[str] = set()
    if not request.users:  # null or empty: every user with a credential
        named = store.users()
    for u in request.users or ():
        if u.name in named:
            twice.add(u.name)
        else:
            named.append(u.name)
    results = []
    for user in named:
        found = store.of(user)
        if user in twice:
            code, message = ErrorCode.duplicate_resource, DESCRIBE_DUPLICATE + user
        elif not found:
            code, message = ErrorCode.resource_not_found, DESCRIBE_MISSING + user
        else:
            code, message = ErrorCode.none, None
        infos = [] if code != ErrorCode.none else [
            {"mechanism": m, "iterations": c.iterations} for m, c in found.items()]
        results.append({"user": user, "error_code": code, "error_message": message,
                        "credential_infos": infos})
    return ctx.respond({"error_code": ErrorCode.none, "error_message": None,
                        "results": results})


def alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    if not _may(ctx, AclOperation.ALTER):
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return ctx.respond({"results": [
            {"user": user, "error_code": ErrorCode.cluster_authorization_failed,
             "error_message": NOT_AUTHORIZED} for user in users]})
    changes = plan(((d.name, d.mechanism) for d in request.deletions),
                   (Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt),
                              bytes(u.salted_password)) for u in request.upsertions))
    if not changes.upserts and not changes.deletions:
        return ctx.respond({"results": changes.results()})
    if ctx.services.cluster is not None:
        return _alter_in_cluster(ctx, changes)
    try:
        ctx.services.scram_credentials.apply(changes)
    except OSError as e:
        _storage_failed(changes, f"cannot write the SCRAM credentials: {e}")
    return ctx.respond({"results": changes.results()})


async def _alter_in_cluster(ctx: RequestContext, changes: Plan) -> Any:
    try:
        missing = await ctx.services.cluster.alter_scram_credentials(
            changes.upserts, changes.deletions)
    except StorageError as e:
        _storage_failed(changes, str(e))
    else:
        changes.not_found(missing)
    return ctx.respond({"results": changes.results()})


def _storage_failed(changes: Plan, why: str) -> None:
    """Nothing was changed: every change to be made is answered KAFKA_STORAGE_ERROR."""
    for user, _ in [*changes.deletions, *changes.upserts]:
        changes.errors[user] = (ErrorCode.kafka_storage_error, why)
    changes.deletions.clear()
    changes.upserts.clear()
