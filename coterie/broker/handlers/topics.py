"""CreateTopics, DeleteTopics and CreatePartitions on a single node.

Replication factors other than 1 (or -1 for the default) cannot be honoured by one broker
and are refused with INVALID_REPLICATION_FACTOR, as Kafka does when there are fewer brokers
than replicas. Manual replica assignments may only name this broker.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.log.config import validate_topic_configs
from coterie.log.errors import LogError
from coterie.log.names import validate_topic_name


def _check_new_topic(ctx: RequestContext, t: Any) -> tuple[ErrorCode, str | None, int]:
    broker = ctx.broker
    problem = validate_topic_name(t.name)
    if problem is not None:
        return ErrorCode.invalid_topic_exception, problem, -1
    if t.name in broker.logs.topics:
        return ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.", -1
    node = broker.config.node_id
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
        partitions = broker.config.num_partitions if t.num_partitions == -1 else t.num_partitions
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
    broker = ctx.broker
    names = [t.name for t in request.topics]
    results = []
    for t in request.topics:
        if names.count(t.name) > 1:
            results.append({"name": t.name, "error_code": ErrorCode.invalid_request,
                            "error_message": "Duplicate topic name in request."})
            continue
        code, message, partitions = _check_new_topic(ctx, t)
        entry: dict[str, Any] = {"name": t.name, "error_code": code, "error_message": message,
                                 "num_partitions": -1, "replication_factor": -1}
        if code == ErrorCode.none:
            entry.update(num_partitions=partitions, replication_factor=1)
            if not request.validate_only:
                configs = {c.name: c.value for c in t.configs}
                try:
                    info = broker.create_topic(t.name, partitions, configs)
                except (LogError, OSError) as e:
                    entry.update(error_code=ErrorCode.unknown_server_error, error_message=str(e))
                else:
                    entry["topic_id"] = info.topic_id
        results.append(entry)
    return ctx.respond({"topics": results})


def delete_topics(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    logs = broker.logs
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        info = logs.topics.get(name) if name is not None else logs.topic_by_id(topic_id)
        if info is None:
            code = ErrorCode.unknown_topic_id if name is None else (
                ErrorCode.unknown_topic_or_partition)
            results.append({"name": name, "topic_id": topic_id, "error_code": code,
                            "error_message": "This server does not host this topic."})
            continue
        broker.delete_topic(info.name)
        results.append({"name": info.name, "topic_id": info.topic_id,
                        "error_code": ErrorCode.none})
    return ctx.respond({"responses": results})


def create_partitions(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    logs = broker.logs
    results = []
    for t in request.topics:
        info = logs.topics.get(t.name)
        if info is None:
            results.append({"name": t.name, "error_code": ErrorCode.unknown_topic_or_partition,
                            "error_message": f"The topic '{t.name}' does not exist."})
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
        if not request.validate_only:
            broker.create_partitions(t.name, t.count)
        results.append({"name": t.name, "error_code": ErrorCode.none})
    return ctx.respond({"results": results})
