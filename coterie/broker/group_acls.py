"""ACL checks of the group and transaction APIs, between the wire handlers and the shards.

Why here and not in the coordinators: coterie.group and coterie.txn are pure (they know no
principal, no authorizer); Kafka, too, authorizes in KafkaApis before a request reaches its
coordinator and filters the answers after. The handlers ask `enforcing(ctx)` once per
request: None when no authorizer is configured, and then they skip every check, so the hot
paths (Heartbeat, ConsumerGroupHeartbeat, OffsetCommit) pay one attribute test.

What each API needs (docs/security.md has the table): READ on the group to be a member
or commit, DESCRIBE to see it, DELETE to delete it or its offsets; READ (commits) or
DESCRIBE (fetches) on each topic named; WRITE on a transactional id to use it, DESCRIBE to
see it; CLUSTER_ACTION (or ALTER) on the cluster for WriteTxnMarkers, the brokers' own
request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coterie.broker.acls import denied, enforcing
from coterie.broker.authorized import NOT_GIVEN, SUPPORTED, bitfield, operations
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["ALL_GROUP_OPERATIONS", "GROUP_OPERATIONS", "NOT_GIVEN", "enforcing",
           "group_operations", "may", "may_on_cluster", "unauthorized_topics"]

# The operations a GROUP supports and their all-allowed field (3400), and the field's
# "omitted" value: coterie.broker.authorized's, which every authorized-operations field uses.
GROUP_OPERATIONS = SUPPORTED[ResourceType.GROUP]
ALL_GROUP_OPERATIONS = bitfield(GROUP_OPERATIONS)


def may(ctx: Any, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """May the request's principal perform `operation` on (`resource_type`, `name`)? True
    without an authorizer. For the rarer APIs; the hot ones call `enforcing` once."""
    authorizer = enforcing(ctx)
    return authorizer is None or authorizer.authorize(ctx, operation, resource_type, name)


def may_on_cluster(ctx: Any, operation: AclOperation) -> bool:
    """`may` on the cluster resource (`kafka-cluster`)."""
    return may(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def unauthorized_topics(ctx: Any, operation: AclOperation,
                        names: Iterable[str | None]) -> set[str | None]:
    """The names among `names` the principal may not perform `operation` on (each asked
    once, as Kafka's filterByAuthorized: coterie.broker.acls.denied). A null name is never
    authorized."""
    listed = list(names)
    refused: set[str | None] = set(denied(ctx, operation, ResourceType.TOPIC, listed))
    if None in listed:
        refused.add(None)
    return refused


def group_operations(ctx: Any, group_id: str) -> int:
    """What the principal may do to the group, as the wire's 32-bit field (bit n for ACL
    operation code n): every operation a group supports without an authorizer (3400, as
    Kafka answers), else those the ACLs allow."""
    return operations(ctx, ResourceType.GROUP, group_id)
