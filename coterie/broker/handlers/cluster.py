"""DescribeCluster v0-v2: this broker, as the whole cluster (Kafka 4.2's answers).

Admin clients and consoles ask it on every page. The answer names this node as the one
broker and the controller. The cluster's authorized operations, when asked, are every
operation on a cluster (coterie has no authorizer: Kafka without one answers the same
bitfield, 8096); when not asked, Kafka's "not given" value. A request for the controllers'
endpoints is MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext

BROKERS, CONTROLLERS = 1, 2
NOT_GIVEN = -(2**31)
# CREATE (5), ALTER (7), DESCRIBE (8), CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10),
# ALTER_CONFIGS (11), IDEMPOTENT_WRITE (12): Kafka's operations on a cluster, one bit each.
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


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
        "brokers": [{"broker_id": config.node_id, "host": config.advertised_host,
                     "port": config.advertised_port, "rack": None, "is_fenced": False}],
        "cluster_authorized_operations": ALL_CLUSTER_OPERATIONS if asked else NOT_GIVEN})
