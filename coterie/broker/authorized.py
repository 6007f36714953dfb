"""The operations a principal may perform on a resource, as Kafka's answers encode them.

Metadata (v8+, topics; v8-v10, the cluster) and DescribeCluster answer "authorized
operations" when the client asks: a 32-bit field with bit n set when the principal may
perform the ACL operation whose code is n (coterie.security's AclOperation, Kafka's codes).
Kafka starts from the operations the resource's type supports (`SUPPORTED`) and keeps those
its authorizer allows, each asked as an action on the resource's own name; with no
authorizer configured it keeps them all: 3576 for any topic, 8096 for the cluster (checked
against Kafka 4.2.1 in tests/reference). coterie asks its authorizer
(coterie.broker.acls) the same questions, so the answers follow the ACLs.

Handlers ask through `topic_operations`, `cluster_operations` and `operations` with the
request's context, which carries the principal and the client's address. An answer that
holds these fields and is cached across requests (the all-topics Metadata answer) must be
cached per principal and host, and per ACL set. When a client did not ask, the field
carries `NOT_GIVEN`, the schema's default.
"""

from __future__ import annotations

from collections.abc import Iterable

from coterie.broker.acls import enforcing
from coterie.broker.context import RequestContext
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

# Kafka's "authorized operations omitted" value (Integer.MIN_VALUE), the fields' default.
NOT_GIVEN = -(2**31)

_OP = AclOperation

# The operations each resource type supports, as Kafka 4.2 lists them
# (AclEntry.supportedOperations): what an authorizer may allow there, and so what a
# principal may do when nothing is denied. Kept in code order: the order the authorizer is
# asked in does not change the answer, but a fixed one keeps it reproducible.
SUPPORTED: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_OP.READ, _OP.WRITE, _OP.CREATE, _OP.DELETE, _OP.ALTER, _OP.DESCRIBE,
                         _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_OP.CREATE, _OP.ALTER, _OP.DESCRIBE, _OP.CLUSTER_ACTION,
                           _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS, _OP.IDEMPOTENT_WRITE),
    ResourceType.GROUP: (_OP.READ, _OP.DELETE, _OP.DESCRIBE, _OP.DESCRIBE_CONFIGS,
                         _OP.ALTER_CONFIGS),
}


def bitfield(operations: Iterable[AclOperation]) -> int:
    """The wire's 32-bit field for a set of operations: bit n for operation code n."""
    field = 0
    for op in operations:
        field |= 1 << op
    return field


ALL_TOPIC_OPERATIONS = bitfield(SUPPORTED[ResourceType.TOPIC])  # 3576
ALL_CLUSTER_OPERATIONS = bitfield(SUPPORTED[ResourceType.CLUSTER])  # 8096
_ALL = {kind: bitfield(ops) for kind, ops in SUPPORTED.items()}


def operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """What the request's principal may do to the resource (`resource_type`, `name`), as the
    wire's bitfield: every supported operation the authorizer allows; all of them when no
    authorizer is configured. Whether the resource exists does not matter, as in Kafka."""
    authorizer = enforcing(ctx)
    if authorizer is None:
        return _ALL[resource_type]
    return bitfield(op for op in SUPPORTED[resource_type]
                    if authorizer.authorize(ctx, op, resource_type, name))


def topic_operations(ctx: RequestContext, topic: str) -> int:
    """What the request's principal may do to `topic`, as the wire's bitfield."""
    return operations(ctx, ResourceType.TOPIC, topic)


def cluster_operations(ctx: RequestContext) -> int:
    """What the request's principal may do to the cluster, as the wire's bitfield, as
    Metadata and DescribeCluster answer it: 0 for a principal that may not DESCRIBE the
    cluster (Kafka answers nothing else then, whatever else it may do)."""
    authorizer = enforcing(ctx)
    if authorizer is None:
        return ALL_CLUSTER_OPERATIONS
    if not authorizer.authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER,
                                CLUSTER_NAME):
        return 0
    return operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
