"""Metadata v0-v13: this process is the only broker, controller and partition leader.

Auto-creation happens here (as in Kafka), synchronously, so the answer already lists the new
topic's partitions instead of making the client retry on LEADER_NOT_AVAILABLE. If creating
fails on disk nothing is left behind and the topic is answered KAFKA_STORAGE_ERROR (a
retriable error: the client asks again).

`is_internal` is true exactly for coterie's internal topics (coterie.log.names), as Kafka
marks exactly its own. A missing internal topic is never auto-created: Kafka creates one with
its coordinator's settings, and coterie's coordinators create theirs at start-up, so a
missing one belongs to a feature that is off or not there yet (group events disabled,
transactions); creating it under the broker defaults would leave that feature a log with the
wrong partition count. It is answered UNKNOWN_TOPIC_OR_PARTITION, as with auto-creation off.

Authorized operations, when the client asks (v8+ for topics, v8-v10 for the cluster: later
versions dropped the cluster's field), are what coterie.broker.authorized allows the
principal, as Kafka answers them: every topic entry carries its topic's operations, whether
the topic exists, was just created or is refused (unknown, invalid name), except an unknown
topic id's, which names no topic, and a topic refused for authorization: those keep "not
given", as in Kafka. The cluster's are 0 for a principal that may not DESCRIBE the cluster.

ACLs (when an authorizer is configured), as Kafka's KafkaApis checks them: an all-topics
request lists only the topics the principal may DESCRIBE, silently; a topic named and not
describable is TOPIC_AUTHORIZATION_FAILED whether or not it exists (its existence is not
disclosed: no id, no partitions, not internal), and one named by id is answered with the id
and no name. A describable topic that does not exist is auto-created only for a principal
that may CREATE on the cluster or on the topic; otherwise TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import BrokerAuthorizer, enforcing, host_of
from coterie.broker.authorized import NOT_GIVEN, cluster_operations, topic_operations
from coterie.broker.context import LEADER_EPOCH, RequestContext
from coterie.log.errors import LogError
from coterie.log.names import is_internal_topic, validate_topic_name
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType
from coterie.wire.codec import encode_body_once

_TOPIC_AUTHORIZATION_FAILED = ErrorCode.topic_authorization_failed


def topic_entry(ctx: RequestContext, info: Any) -> dict[str, Any]:
    node = ctx.services.config.node_id
    cluster = ctx.services.cluster
    if cluster is not None:
        return _cluster_topic_entry(cluster, info)
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": is_internal_topic(info.name),
        "partitions": [
            {"error_code": ErrorCode.none, "partition_index": p, "leader_id": node,
             "leader_epoch": LEADER_EPOCH, "replica_nodes": [node], "isr_nodes": [node],
             "offline_replicas": []}
            for p in range(info.partitions)
        ],
    }


def _cluster_topic_entry(cluster: Any, info: Any) -> dict[str, Any]:
    """A cluster broker's view: each partition's leader and epoch are its lease's; a
    partition nobody leads yet (its broker just died, the topic is new) is
    LEADER_NOT_AVAILABLE, which clients retry. The database is the only replica."""
    partitions = []
    for p in range(info.partitions):
        lease = cluster.leader(info.name, p, info.topic_id)
        if lease is None:
            partitions.append({"error_code": ErrorCode.leader_not_available,
                               "partition_index": p, "leader_id": -1, "leader_epoch": -1,
                               "replica_nodes": [], "isr_nodes": [], "offline_replicas": []})
        else:
            partitions.append({"error_code": ErrorCode.none, "partition_index": p,
                               "leader_id": lease.owner, "leader_epoch": lease.epoch,
                               "replica_nodes": [lease.owner], "isr_nodes": [lease.owner],
                               "offline_replicas": []})
    return {"error_code": ErrorCode.none, "name": info.name, "topic_id": info.topic_id,
            "is_internal": is_internal_topic(info.name), "partitions": partitions}


def brokers(ctx: RequestContext) -> list[dict[str, Any]]:
    """The live brokers, at their addresses on the listener the request came in on: this
    one alone, or a cluster's as of its last round."""
    services = ctx.services
    cluster = services.cluster
    if cluster is None or not cluster.brokers:
        host, port = services.address(ctx.listener)
        return [{"node_id": services.config.node_id, "host": host, "port": port,
                 "rack": None}]
    out = []
    for b in cluster.brokers:
        found = b.address(ctx.listener)
        if found is not None:  # a broker without this listener is not listed (Kafka)
            out.append({"node_id": b.node_id, "host": found[0], "port": found[1],
                        "rack": b.rack})
    return out


def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    logs = services.logs
    version = ctx.api_version
    asked = _asked(version, request)
    requested = request.topics
    authorizer = enforcing(ctx)
    if requested is None or (version == 0 and not requested):
        return _all_topics(ctx, asked, authorizer)
    allow_auto = getattr(request, "allow_auto_topic_creation", True)
    auto_create = bool(allow_auto and services.config.auto_create_topics)
    may_create_any: bool | None = None  # CREATE on the cluster, asked once if needed
    topics = []
    for t in requested:
        name = t.name
        if name is None:
            info = logs.topic_by_id(t.topic_id)
            if info is None:
                topics.append({"error_code": ErrorCode.unknown_topic_id, "name": None,
                               "topic_id": t.topic_id})
                continue
            if authorizer is not None and not authorizer.authorize(
                    ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                # Kafka: topic ids are not secret, so the id is answered, never the name.
                topics.append({"error_code": _TOPIC_AUTHORIZATION_FAILED, "name": None,
                               "topic_id": t.topic_id, "is_internal": False})
                continue
            topics.append(topic_entry(ctx, info))
            continue
        if authorizer is not None and not authorizer.authorize(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append({"error_code": _TOPIC_AUTHORIZATION_FAILED, "name": name,
                           "is_internal": False})
            continue
        info = logs.topics.get(name)
        if info is None:
            if auto_create and authorizer is not None:
                if may_create_any is None:
                    may_create_any = authorizer.authorize(
                        ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                if not may_create_any and not authorizer.authorize(
                        ctx, AclOperation.CREATE, ResourceType.TOPIC, name):
                    # Kafka decides this before it looks at the name or whether the topic
                    # is internal.
                    topics.append({"error_code": _TOPIC_AUTHORIZATION_FAILED, "name": name,
                                   "is_internal": is_internal_topic(name)})
                    continue
            problem = validate_topic_name(name)
            if problem is not None:
                topics.append({"error_code": ErrorCode.invalid_topic_exception, "name": name})
                continue
            internal = is_internal_topic(name)
            if internal or not auto_create:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition,
                               "name": name, "is_internal": internal})
                continue
            if services.cluster is not None:
                # Created through the database (an await): asked again, the client finds it.
                services.cluster.create_soon(name, services.config.num_partitions)
                topics.append({"error_code": ErrorCode.leader_not_available, "name": name})
                continue
            try:
                info = services.topics.create_topic(name, services.config.num_partitions, {})
            except (LogError, OSError):
                # Logged by the broker; nothing was created.
                topics.append({"error_code": ErrorCode.kafka_storage_error, "name": name})
                continue
        topics.append(topic_entry(ctx, info))
    return _answer(ctx, topics, asked)


def _asked(version: int, request: Any) -> tuple[bool, bool]:
    """Whether the request asks for (the topics', the cluster's) authorized operations: a
    flag the request's version does not carry, or its answer cannot, counts as not asked."""
    return (version >= 8 and bool(request.include_topic_authorized_operations),
            8 <= version <= 10 and bool(request.include_cluster_authorized_operations))


# The all-topics answer per (broker, listener, version, authorized operations asked), with
# the topics it was made from (each listener's answer names its own addresses): clients and
# consoles ask for it over and over, and a client that pipelines it could otherwise keep the
# broker busy building the same megabyte again and again. The asked flags select the
# encoding, so an answer made with the operations never serves a request without them, nor
# the other way round. With an authorizer the answer depends on who asks (the topics it may
# describe, its operations), so the key also holds the principal and the client's host (an
# ACL may name a host) and the stamp the ACL set it was decided under: an ACL change makes
# every such answer stale. Bounded, since hosts are many: the oldest goes first.
_ALL_TOPICS: dict[tuple, tuple[Any, tuple, Any]] = {}
_MAX_CACHED = 256


def _all_topics(ctx: RequestContext, asked: tuple[bool, bool],
                authorizer: BrokerAuthorizer | None) -> Any:
    services = ctx.services
    stamp: tuple = (tuple((info.name, info.topic_id, info.partitions)
                          for info in services.logs.topics.values()),
                    None if services.cluster is None else services.cluster.version)
    key: tuple = (id(services), ctx.listener, ctx.api_version, *asked)
    if authorizer is not None:
        key += (ctx.principal, host_of(ctx))
        stamp += (authorizer.acls,)
    cached = _ALL_TOPICS.get(key)
    if cached is not None and cached[0] is services and cached[1] == stamp:
        return cached[2]
    shown = [info for info in list(services.logs.topics.values())
             if authorizer is None or authorizer.authorize(
                 ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name)]
    answer = encode_body_once(_answer(ctx, [topic_entry(ctx, info) for info in shown], asked))
    _ALL_TOPICS.pop(key, None)
    while len(_ALL_TOPICS) >= _MAX_CACHED:
        del _ALL_TOPICS[next(iter(_ALL_TOPICS))]
    _ALL_TOPICS[key] = (services, stamp, answer)
    return answer


# Entries that keep "not given" operations: they name no topic, or one refused to the
# principal (Kafka fills the field only for the topics it describes).
_NO_OPERATIONS = frozenset({ErrorCode.unknown_topic_id, _TOPIC_AUTHORIZATION_FAILED})


def _answer(ctx: RequestContext, topics: list[dict[str, Any]],
            asked: tuple[bool, bool]) -> Any:
    services = ctx.services
    cfg = services.config
    topic_ops, cluster_ops = asked
    if topic_ops:
        for entry in topics:
            if entry["error_code"] not in _NO_OPERATIONS:
                entry["topic_authorized_operations"] = topic_operations(ctx, entry["name"])
    return ctx.respond({
        "brokers": brokers(ctx),
        "cluster_id": services.cluster_id,
        "controller_id": cfg.node_id,
        "cluster_authorized_operations": cluster_operations(ctx) if cluster_ops else NOT_GIVEN,
        "topics": topics,
    })
