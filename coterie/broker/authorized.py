"""The operations a principal may perform on a resource, as Kafka's answers encode them.

Metadata (v8+, topics; v8-v10, the cluster) and DescribeCluster answer "authorized
operations" when the client asks: a 32-bit field with bit n set when the principal may
perform the ACL operation whose code is n (Kafka's AclOperation codes, below). Kafka starts
from the operations the resource's type supports (`SUPPORTED`) and keeps those its authorizer
allows; with no authorizer configured it keeps them all. coterie has no authorizer, so every
principal may perform every supported operation, and the answers equal Kafka's without one:
3576 for any topic, 8096 for the cluster (checked against Kafka 4.2.1 in tests/reference).

Handlers ask through `topic_operations` and `cluster_operations` with the request's context,
which is where the principal will be: when ACLs come, only this module (and the callers that
cache answers across requests, such as the all-topics Metadata answer) has to change.
When a client did not ask, the field carries `NOT_GIVEN`, the schema's default.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from coterie.broker.context import RequestContext

# Kafka's "authorized operations omitted" value (Integer.MIN_VALUE), the fields' default.
NOT_GIVEN = -(2**31)


class Operation(IntEnum):
    """Kafka's ACL operations that name something a principal does (codes 0-2, UNKNOWN, ANY
    and ALL, are filters, never set in an authorized-operations field)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    """The resource types whose authorized operations coterie answers (Kafka's codes)."""

    TOPIC = 2
    CLUSTER = 4


# The operations each resource type supports, as Kafka 4.2 lists them: what an authorizer
# may allow there, and so what a principal may do when nothing is denied.
SUPPORTED: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({
        Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
        Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({
        Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE}),
}


def bitfield(operations: Iterable[Operation]) -> int:
    """The wire's 32-bit field for a set of operations: bit n for operation code n."""
    field = 0
    for op in operations:
        field |= 1 << op
    return field


ALL_TOPIC_OPERATIONS = bitfield(SUPPORTED[ResourceType.TOPIC])  # 3576
ALL_CLUSTER_OPERATIONS = bitfield(SUPPORTED[ResourceType.CLUSTER])  # 8096


def topic_operations(ctx: RequestContext, topic: str) -> int:
    """What the request's principal may do to `topic`, as the wire's bitfield: everything a
    topic supports (no authorizer), whether or not the topic exists, as Kafka answers."""
    return ALL_TOPIC_OPERATIONS


def cluster_operations(ctx: RequestContext) -> int:
    """What the request's principal may do to the cluster, as the wire's bitfield."""
    return ALL_CLUSTER_OPERATIONS
