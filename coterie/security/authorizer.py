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
    ResourceType,
)

__all__ = ["AuthorizerSettings", "acl_decides", "authorize"]

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
