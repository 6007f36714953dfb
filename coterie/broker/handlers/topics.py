"""CreateTopics, DeleteTopics and CreatePartitions on a single node.

Replication factors other than 1 (or -1 for the default) cannot be honoured by one broker
and are refused with INVALID_REPLICATION_FACTOR, as Kafka does when there are fewer brokers
than replicas. Manual replica assignments may only name this broker.

Every refusal is decided before anything is written:

* Internal topics (coterie.log.names) cannot be deleted or given more partitions:
  INVALID_TOPIC_EXCEPTION, "Cannot delete internal topic <name>". Kafka 4.x itself accepts
  both (and then fails every commit); coterie refuses them the way Kafka's broker refuses
  writes and record deletions on internal topics.
* A request that would create more than `max.partitions.per.request` partitions, all its
  topics together, is refused for each of those topics with POLICY_VIOLATION and a message
  naming the setting (Kafka's controller refuses any operation of more than 10,000 records,
  one per partition, with POLICY_VIOLATION). validate_only requests get the same answer.

ACLs (when an authorizer is configured), as Kafka 4.2's controller (ControllerApis) checks
them, each before anything else but a duplicate name:

* CreateTopics: CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED
  ("Authorization failed."). A topic created (or validated) for a principal that may not
  DESCRIBE_CONFIGS it is answered without its partition count and replication factor, and
  with topic_config_error_code TOPIC_AUTHORIZATION_FAILED (v5+).
* DeleteTopics: DELETE on the cluster, or on the topic. By name, a topic the principal may
  not even DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether it exists or not (its existence is
  not disclosed); a describable one that does not exist is UNKNOWN_TOPIC_OR_PARTITION, one
  that exists but may not be deleted TOPIC_AUTHORIZATION_FAILED. By id, an unknown id is
  UNKNOWN_TOPIC_ID; a known one that may not be deleted is TOPIC_AUTHORIZATION_FAILED, with
  the topic's name only when the principal may DESCRIBE it.
* CreatePartitions: ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED.

What fails while writing (EMFILE, ENOSPC, ...) leaves nothing behind (LogManager creates
all-or-nothing) and is answered KAFKA_STORAGE_ERROR with the cause.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import BrokerAuthorizer, denied, enforcing
from coterie.broker.context import RequestContext
from coterie.broker.handlers.known_topics import after_topics_known
from coterie.common.limits import shown
from coterie.log.config import validate_topic_configs
from coterie.log.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogError,
    StorageError,
    TopicExistsError,
    UnknownTopicError,
)
from coterie.log.names import internal_topic_refusal, is_internal_topic, validate_topic_name
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger("coterie.topics")

_AUTHORIZATION_FAILED = "Authorization failed."  # CreateTopics' words (ControllerApis)
_TOPIC_AUTHORIZATION_FAILED = "Topic authorization failed."  # Kafka's default message


def _allowed_on_cluster(ctx: RequestContext, authorizer: BrokerAuthorizer | None,
                        operation: AclOperation) -> bool:
    """Whether `operation` on the cluster covers every topic (as CREATE does for
    CreateTopics, DELETE for DeleteTopics); True without an authorizer."""
    return authorizer is None or authorizer.authorize(ctx, operation, ResourceType.CLUSTER,
                                                      CLUSTER_NAME)

_ERROR_CODES: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (TopicExistsError, ErrorCode.topic_already_exists),
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (InvalidPartitionsError, ErrorCode.invalid_partitions),
    (InvalidConfigError, ErrorCode.invalid_config),
    (UnknownTopicError, ErrorCode.unknown_topic_or_partition),
    (StorageError, ErrorCode.kafka_storage_error),
    (OSError, ErrorCode.kafka_storage_error),
)


def error_code_for(error: Exception) -> ErrorCode:
    """The Kafka error code that tells a client what a failed topic operation hit."""
    for cls, code in _ERROR_CODES:
        if isinstance(error, cls):
            return code
    return ErrorCode.unknown_server_error


def _within_partition_cap(ctx: RequestContext, accepted: list[tuple[Any, dict[str, Any], int]]
                          ) -> list[tuple[Any, dict[str, Any], int]]:
    """`accepted` (topic, its answer, partitions it would create), or, when together they
    would create more than `max.partitions.per.request`, nothing: each of them is then
    answered POLICY_VIOLATION before anything is written."""
    requested = sum(partitions for _, _, partitions in accepted)
    limit = ctx.services.config.max_partitions_per_request
    if requested <= limit:
        return accepted
    message = (f"This request would create {requested} partitions, more than "
               f"max.partitions.per.request ({limit}) allows in one request.")
    for _, entry, _ in accepted:
        entry.update(error_code=ErrorCode.policy_violation, error_message=message)
    return []


def _check_new_topic(ctx: RequestContext, t: Any) -> tuple[ErrorCode, str | None, int]:
    services = ctx.services
    problem = validate_topic_name(t.name)
    if problem is not None:
        return ErrorCode.invalid_topic_exception, problem, -1
    if t.name in services.logs.topics:
        return ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.", -1
    node = services.config.node_id
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            return (ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set.",
                    -1)
        if any(list(a.broker_ids) != [node] for a in t.assignments):
            return (ErrorCode.invalid_replica_assignment,
                    f"Replica assignments may only name broker {node}.", -1)
        partitions = len(t.assignments)
    else:
        partitions = services.config.num_partitions if t.num_partitions == -1 else t.num_partitions
        if partitions <= 0:
            return (ErrorCode.invalid_partitions,
                    "Number of partitions must be larger than 0.", -1)
        if t.replication_factor not in (-1, 1):
            return (ErrorCode.invalid_replication_factor,
                    f"Unable to replicate the partition {t.replication_factor} time(s): "
                    "the number of available brokers is 1.", -1)
    problem = validate_topic_configs({c.name: c.value for c in t.configs})
    if problem is not None:
        return ErrorCode.invalid_config, problem, -1
    return ErrorCode.none, None, partitions


def create_topics(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    names = Counter(t.name for t in request.topics)
    authorizer = enforcing(ctx)
    uncreatable: frozenset[str] = frozenset()
    if not _allowed_on_cluster(ctx, authorizer, AclOperation.CREATE):
        uncreatable = denied(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    results = []
    accepted: list[tuple[Any, dict[str, Any], int]] = []  # (topic, its entry, partitions)
    for t in request.topics:
        if names[t.name] > 1:
            log.warning("%s: CreateTopics answered INVALID_REQUEST for %r: duplicate topic "
                        "name in request", ctx.who, t.name)
            results.append({"name": t.name, "error_code": ErrorCode.invalid_request,
                            "error_message": "Duplicate topic name in request."})
            continue
        if t.name in uncreatable:
            results.append({"name": t.name, "error_code": ErrorCode.topic_authorization_failed,
                            "error_message": _AUTHORIZATION_FAILED})
            continue
        code, message, partitions = _check_new_topic(ctx, t)
        if code == ErrorCode.invalid_request:
            log.warning("%s: CreateTopics answered INVALID_REQUEST for %r: %s", ctx.who,
                        t.name, message)
        entry: dict[str, Any] = {"name": t.name, "error_code": code, "error_message": message,
                                 "num_partitions": -1, "replication_factor": -1}
        if code == ErrorCode.none:
            accepted.append((t, entry, partitions))
        results.append(entry)
    accepted = _within_partition_cap(ctx, accepted)
    hidden = denied(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                    (t.name for t, _, _ in accepted))
    for t, entry, partitions in accepted:
        if t.name in hidden:
            # Kafka's controller shows a topic's settings only to who may describe them.
            entry["topic_config_error_code"] = ErrorCode.topic_authorization_failed
        else:
            entry.update(num_partitions=partitions, replication_factor=1)
    if request.validate_only:
        return ctx.respond({"topics": results})
    if services.cluster is not None:
        return _create_in_cluster(ctx, accepted, results)
    for t, entry, partitions in accepted:
        configs = {c.name: c.value for c in t.configs}
        try:
            info = services.topics.create_topic(t.name, partitions, configs)
        except (LogError, OSError) as e:
            entry.update(error_code=error_code_for(e), error_message=str(e),
                         num_partitions=-1, replication_factor=-1)
            entry.pop("topic_config_error_code", None)
        else:
            entry["topic_id"] = info.topic_id
    return ctx.respond({"topics": results})


async def _create_in_cluster(ctx: RequestContext, accepted: list[tuple[Any, dict, int]],
                             results: list[dict[str, Any]]) -> Any:
    """CreateTopics on a cluster broker: each topic created in the database (another broker
    may have created it first: TOPIC_ALREADY_EXISTS), then known here."""
    for t, entry, partitions in accepted:
        configs = {c.name: c.value for c in t.configs}
        try:
            info = await ctx.services.cluster.create_topic(t.name, partitions, configs)
        except (LogError, OSError) as e:
            entry.update(error_code=error_code_for(e), error_message=str(e),
                         num_partitions=-1, replication_factor=-1)
            entry.pop("topic_config_error_code", None)
        else:
            entry["topic_id"] = info.topic_id
    return ctx.respond({"topics": results})


def _delete_refusal(ctx: RequestContext, authorizer: BrokerAuthorizer | None, name: str,
                    by_id: bool, known: bool) -> dict[str, Any] | None:
    """What DeleteTopics answers for `name` when the ACLs refuse it (module docstring), or
    None when the principal may delete it or the handler's own checks decide (an unknown
    name the principal may describe)."""
    if authorizer is None:
        return None
    describable = authorizer.authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    if not by_id and not describable:
        return {"name": name, "error_code": ErrorCode.topic_authorization_failed,
                "error_message": _TOPIC_AUTHORIZATION_FAILED}
    if not known or authorizer.authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
        return None
    return {"name": name if describable else None,
            "error_code": ErrorCode.topic_authorization_failed,
            "error_message": _TOPIC_AUTHORIZATION_FAILED}


def delete_topics(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    return after_topics_known(ctx, (n for n, _ in wanted), lambda: _delete(ctx, wanted),
                              ids=(i for n, i in wanted if n is None))


def _delete(ctx: RequestContext, wanted: list[tuple[str | None, Any]]) -> Any:
    services = ctx.services
    logs = services.logs
    results = []
    doomed: list[dict[str, Any]] = []  # a cluster broker's deletions, done with an await
    authorizer = enforcing(ctx)
    if _allowed_on_cluster(ctx, authorizer, AclOperation.DELETE):
        authorizer = None  # DELETE on the cluster: every topic may be deleted
    for name, topic_id in wanted:
        info = logs.topics.get(name) if name is not None else logs.topic_by_id(topic_id)
        if authorizer is not None and (name is not None or info is not None):
            refusal = _delete_refusal(ctx, authorizer, name if name is not None else info.name,
                                      by_id=name is None, known=info is not None)
            if refusal is not None:
                results.append({**refusal, "topic_id": None if name is not None else topic_id})
                continue
        if info is None:
            code = ErrorCode.unknown_topic_id if name is None else (
                ErrorCode.unknown_topic_or_partition)
            results.append({"name": name, "topic_id": topic_id, "error_code": code,
                            "error_message": "This server does not host this topic."})
            continue
        entry = {"name": info.name, "topic_id": info.topic_id, "error_code": ErrorCode.none}
        if is_internal_topic(info.name):
            entry.update(error_code=ErrorCode.invalid_topic_exception,
                         error_message=internal_topic_refusal("delete", info.name))
        elif services.cluster is not None:
            doomed.append(entry)
        else:
            try:
                services.topics.delete_topic(info.name)
            except (LogError, OSError) as e:
                entry.update(error_code=error_code_for(e), error_message=str(e))
        results.append(entry)
    if doomed:
        return _delete_in_cluster(ctx, doomed, results)
    return ctx.respond({"responses": results})


async def _delete_in_cluster(ctx: RequestContext, doomed: list[dict[str, Any]],
                             results: list[dict[str, Any]]) -> Any:
    for entry in doomed:
        try:
            await ctx.services.cluster.delete_topic(entry["name"])
        except (LogError, OSError) as e:
            entry.update(error_code=error_code_for(e), error_message=str(e))
    return ctx.respond({"responses": results})


def create_partitions(ctx: RequestContext, request: Any) -> Any:
    return after_topics_known(ctx, (t.name for t in request.topics),
                              lambda: _grow(ctx, request))


def _grow(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    logs = services.logs
    # A name given twice is answered once, with INVALID_REQUEST, and grows nothing (Kafka's
    # ControllerApis.createPartitions); the others go on.
    seen: set[str] = set()
    duplicated = [t.name for t in request.topics if t.name in seen or seen.add(t.name)]
    results: list[dict[str, Any]] = [
        {"name": name, "error_code": ErrorCode.invalid_request,
         "error_message": "Duplicate topic name."} for name in dict.fromkeys(duplicated)]
    accepted: list[tuple[Any, dict[str, Any], int]] = []  # (topic, its entry, new partitions)
    unalterable = denied(ctx, AclOperation.ALTER, ResourceType.TOPIC,
                         (t.name for t in request.topics))
    for t in request.topics:
        if t.name in duplicated:
            continue
        if t.name in unalterable:
            results.append({"name": t.name, "error_code": ErrorCode.topic_authorization_failed,
                            "error_message": None})
            continue
        info = logs.topics.get(t.name)
        if info is None:
            results.append({"name": t.name, "error_code": ErrorCode.unknown_topic_or_partition,
                            "error_message": f"The topic '{shown(t.name)}' does not exist."})
            continue
        if is_internal_topic(t.name):
            results.append({"name": t.name, "error_code": ErrorCode.invalid_topic_exception,
                            "error_message": internal_topic_refusal("add partitions to",
                                                                    t.name)})
            continue
        if t.count <= info.partitions:
            results.append({"name": t.name, "error_code": ErrorCode.invalid_partitions,
                            "error_message": f"Topic currently has {info.partitions} "
                                             f"partitions, which is higher than or equal to the "
                                             f"requested {t.count}."})
            continue
        if t.assignments is not None and len(t.assignments) != t.count - info.partitions:
            results.append({"name": t.name, "error_code": ErrorCode.invalid_replica_assignment,
                            "error_message": "Assignments must cover exactly the new partitions."})
            continue
        entry: dict[str, Any] = {"name": t.name, "error_code": ErrorCode.none}
        accepted.append((t, entry, t.count - info.partitions))
        results.append(entry)
    accepted = _within_partition_cap(ctx, accepted)
    if request.validate_only:
        return ctx.respond({"results": results})
    if services.cluster is not None:
        return _grow_in_cluster(ctx, accepted, results)
    for t, entry, _ in accepted:
        try:
            services.topics.create_partitions(t.name, t.count)
        except (LogError, OSError) as e:
            entry.update(error_code=error_code_for(e), error_message=str(e))
    return ctx.respond({"results": results})


async def _grow_in_cluster(ctx: RequestContext, accepted: list[tuple[Any, dict, int]],
                           results: list[dict[str, Any]]) -> Any:
    for t, entry, _ in accepted:
        try:
            await ctx.services.cluster.create_partitions(t.name, t.count)
        except (LogError, OSError) as e:
            entry.update(error_code=error_code_for(e), error_message=str(e))
    return ctx.respond({"results": results})
