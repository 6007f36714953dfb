"""DescribeCluster v0-v2: this broker, as the whole cluster (Kafka 4.2's answers).

Admin clients and consoles ask it on every page. The answer names this node as the one
broker and the controller. The cluster's authorized operations, when asked, are what
coterie.broker.authorized allows the principal: with no authorizer every operation on a
cluster (Kafka without one answers the same bitfield, 8096); with one, those the ACLs allow,
and 0 for a principal that may not DESCRIBE the cluster; when not asked, Kafka's "not
given" value. The answer itself needs no ACL (Kafka 4.2's AuthHelper checks only for the
operations). A request for the controllers' endpoints is MISMATCHED_ENDPOINT_TYPE, as a Kafka
broker answers it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.authorized import NOT_GIVEN, cluster_operations
from coterie.broker.context import RequestContext
from coterie.broker.handlers.metadata import brokers

BROKERS, CONTROLLERS = 1, 2


def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    endpoint = getattr(request, "endpoint_type", BROKERS)
    if endpoint != BROKERS:
        return ctx.respond({
            "error_code": ErrorCode.mismatched_endpoint_type,
            "error_message": "The request was sent to an endpoint of type BROKER, but we "
                             "wanted an endpoint of type CONTROLLER",
            "endpoint_type": BROKERS, "cluster_id": "", "controller_id": -1, "brokers": [],
            "cluster_authorized_operations": NOT_GIVEN})
    config = ctx.services.config
    asked = request.include_cluster_authorized_operations
    return ctx.respond({
        "error_code": ErrorCode.none, "error_message": None, "endpoint_type": BROKERS,
        "cluster_id": ctx.services.cluster_id, "controller_id": config.node_id,
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
                     "rack": b["rack"], "is_fenced": False} for b in brokers(ctx)],
        "cluster_authorized_operations": cluster_operations(ctx) if asked else NOT_GIVEN})
