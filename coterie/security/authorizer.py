"""The authorizer: may this principal, from this host, perform this operation on this
resource? A pure function of its inputs, with Kafka's StandardAuthorizer's rules:

1. A super user (`super.users`) may do anything.
2. The ACLs considered are those whose pattern covers the resource (`AclSet.applying_to`),
   and of those the ones for the principal itself or for `User:*`, whose host is the
   client's address or `*`.
3. A DENY for the operation (or for ALL) decides: denied, whatever ALLOWs there are and in
   whatever order the ACLs came.
4. Else an ALLOW decides: allowed. An ALLOW of ALL covers every operation; an ALLOW of
   READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one of ALTER_CONFIGS also
   DESCRIBE_CONFIGS. These implications are for ALLOWs only: a DENY of READ does not deny
   DESCRIBE.
5. Else, if no ACL at all covers the resource (for anyone),
   `allow.everyone.if.no.acl.found` decides; if some do, denied.
"""

from __future__ import annotations

from dataclasses import dataclass

from coterie.security.acl_set import AclSet
from coterie.security.bindings import AclBinding
from coterie.security.codes import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["AuthorizerSettings", "acl_decides", "authorize", "authorize_any"]

# The operations an ALLOW of which also allows DESCRIBE, and DESCRIBE_CONFIGS.
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS,
                                      AclOperation.ALTER_CONFIGS})
_NOT_ACTIONS = (AclOperation.UNKNOWN, AclOperation.ANY)


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    """`super.users` (principals, `User:admin`) and `allow.everyone.if.no.acl.found`."""

    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False


def acl_decides(acl: AclBinding, principal: str, host: str,
                operation: AclOperation) -> AclPermissionType | None:
    """What one ACL (already known to cover the resource) says of the action: ALLOW, DENY,
    or None when it is for another principal, host or operation."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != host and acl.host != WILDCARD:
        return None
    op = acl.operation
    if op != AclOperation.ALL and op != operation:
        if acl.permission != AclPermissionType.ALLOW:
            return None
        if operation == AclOperation.DESCRIBE:
            if op not in IMPLIES_DESCRIBE:
                return None
        elif operation == AclOperation.DESCRIBE_CONFIGS:
            if op not in IMPLIES_DESCRIBE_CONFIGS:
                return None
        else:
            return None
    return acl.permission


def authorize(acls: AclSet, settings: AuthorizerSettings, principal: str, host: str,
              operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """True when `principal` (`User:alice`) connected from `host` (an IP address) may
    perform `operation` on the resource (`resource_type`, `name`: a real name, never a
    pattern), by the rules of the module docstring."""
    if operation in _NOT_ACTIONS:
        raise ValueError(f"{operation.name} is not an operation a principal performs")
    if principal in settings.super_users:
        return True
    covered = allowed = False
    for acl in acls.applying_to(resource_type, name):
        covered = True
        said = acl_decides(acl, principal, host, operation)
        if said == AclPermissionType.DENY:
            return False
        if said == AclPermissionType.ALLOW:
            allowed = True
    if allowed:
        return True
    return settings.allow_if_no_acl and not covered


# The name Kafka's authorizeByResourceType asks about first, so that a super user (and
# `allow.everyone.if.no.acl.found` with no ACL in the way) is allowed whatever else is there.
PROBE_NAME = "hardcode"


def authorize_any(acls: AclSet, settings: AuthorizerSettings, principal: str, host: str,
                  operation: AclOperation, resource_type: ResourceType) -> bool:
    """May `principal` perform `operation` on *some* resource of `resource_type`? Kafka's
    `Authorizer.authorizeByResourceType` (StandardAuthorizer keeps the interface's default),
    which an idempotent InitProducerId asks with WRITE on TOPIC: a producer that may write
    to any topic may have a producer id.

    As Kafka: allowed if the principal may perform it on a resource named `hardcode` (super
    users; the no-ACL default); else, over the type's ACLs for the principal (or `User:*`),
    its host (or `*`) and the operation itself or ALL (no implied operations): a literal `*`
    DENY denies, a literal `*` ALLOW allows, and otherwise some ALLOW pattern must not be
    dominated by a DENY: a literal ALLOW by a literal DENY of the same name, any ALLOW by a
    PREFIXED DENY of one of its prefixes (itself included)."""
    if authorize(acls, settings, principal, host, operation, resource_type, PROBE_NAME):
        return True
    deny_literal: set[str] = set()
    deny_prefixed: set[str] = set()
    allows: list[tuple[PatternType, str]] = []
    wildcard_allow = False
    for acl in acls.of_type(resource_type):
        if acl.host != host and acl.host != WILDCARD:
            continue
        if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
            continue
        if acl.operation != operation and acl.operation != AclOperation.ALL:
            continue
        literal = acl.pattern_type == PatternType.LITERAL
        if acl.permission == AclPermissionType.DENY:
            if literal and acl.name == WILDCARD:
                return False
            (deny_literal if literal else deny_prefixed).add(acl.name)
        elif acl.permission == AclPermissionType.ALLOW:
            if literal and acl.name == WILDCARD:
                wildcard_allow = True
            else:
                allows.append((acl.pattern_type, acl.name))
    if wildcard_allow:
        return True
    for pattern_type, name in allows:
        if pattern_type == PatternType.LITERAL and name in deny_literal:
            continue
        if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
            return True
    return False
