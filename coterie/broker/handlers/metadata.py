"""Metadata v0-v13: this process is the only broker, controller and partition leader.

Auto-creation happens here (as in Kafka), synchronously, so the answer already lists the new
topic's partitions instead of making the client retry on LEADER_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.log.names import validate_topic_name

LEADER_EPOCH = 0


def topic_entry(ctx: RequestContext, info: Any) -> dict[str, Any]:
    node = ctx.broker.config.node_id
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.name.startswith("__"),
        "partitions": [
            {"error_code": ErrorCode.none, "partition_index": p, "leader_id": node,
             "leader_epoch": LEADER_EPOCH, "replica_nodes": [node], "isr_nodes": [node],
             "offline_replicas": []}
            for p in range(info.partitions)
        ],
    }


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    logs = broker.logs
    version = ctx.api_version
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        topics = [topic_entry(ctx, info) for info in list(logs.topics.values())]
    else:
        allow_auto = getattr(request, "allow_auto_topic_creation", True)
        topics = []
        for t in requested:
            name = t.name
            if name is None:
                info = logs.topic_by_id(t.topic_id)
                if info is None:
                    topics.append({"error_code": ErrorCode.unknown_topic_id, "name": None,
                                   "topic_id": t.topic_id})
                    continue
                topics.append(topic_entry(ctx, info))
                continue
            info = logs.topics.get(name)
            if info is None:
                problem = validate_topic_name(name)
                if problem is not None:
                    topics.append({"error_code": ErrorCode.invalid_topic_exception, "name": name})
                    continue
                if not (allow_auto and broker.config.auto_create_topics):
                    topics.append({"error_code": ErrorCode.unknown_topic_or_partition,
                                   "name": name})
                    continue
                info = broker.create_topic(name, broker.config.num_partitions, {})
            topics.append(topic_entry(ctx, info))
    cfg = broker.config
    return ctx.respond({
        "brokers": [{"node_id": cfg.node_id, "host": cfg.advertised_host,
                     "port": cfg.advertised_port}],
        "cluster_id": broker.cluster_id,
        "controller_id": cfg.node_id,
        "topics": topics,
    })
