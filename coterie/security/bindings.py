"""ACL bindings and binding filters: the values CreateAcls stores and DescribeAcls and
DeleteAcls select, with Kafka's checks and matching rules.

A binding is Kafka's AclBinding flattened: the resource pattern (type, name, pattern type)
and the entry (principal, host, operation, permission). `binding_from_wire` turns a
CreateAcls creation into one or says, in Kafka 4.2's words, why it cannot be stored
(`InvalidAcl`, answered INVALID_REQUEST); `AclBindingFilter.matches` is Kafka's
ResourcePatternFilter and AccessControlEntryFilter matching, which decides what
DescribeAcls lists and DeleteAcls removes.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from coterie.security.codes import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["AclBinding", "AclBindingFilter", "InvalidAcl", "binding_from_wire",
           "filter_from_wire", "parse_principal"]


class InvalidAcl(ValueError):
    """Why a binding cannot be stored or a filter cannot be used (Kafka's message)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: `principal` may (ALLOW) or may not (DENY) do `operation` from `host` to the
    resources `name` and `pattern_type` select of `resource_type`. Only valid bindings are
    built (`binding_from_wire`, or code that checked its values)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def key(self) -> tuple[int, str, int, str, str, int, int]:
        """A sort key: the order DescribeAcls lists and the file stores bindings in."""
        return (self.resource_type, self.name, self.pattern_type, self.principal, self.host,
                self.operation, self.permission)


def parse_principal(text: str) -> tuple[str, str]:
    """A principal's type and name ("User:alice" -> ("User", "alice")), split at its first
    colon as Kafka does; InvalidAcl without one (Kafka 4.2's message)."""
    kind, colon, name = text.partition(":")
    if not colon:
        raise InvalidAcl(f"Could not parse principal from `{text}` (no colon is present "
                         "separating the principal type from the principal name)")
    return kind, name


def _check_host(host: str) -> None:
    """An ACL's host is `*` or a client's IP address: Kafka compares it with the address
    of the connection, so a host name would never match. (Kafka stores one anyway; coterie
    refuses it rather than keep an ACL that can never apply.)"""
    if host == WILDCARD:
        return
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise InvalidAcl(f"Invalid host {host!r}: an ACL's host is '*' or an IP "
                         "address") from None


def binding_from_wire(resource_type: int, name: str | None, pattern_type: int,
                      principal: str | None, host: str | None, operation: int,
                      permission: int) -> AclBinding:
    """A CreateAcls creation as a binding, checked as Kafka 4.2 checks it (the broker's
    CLUSTER and empty-name checks, then the controller's `validateNewAcl`), in that order,
    so that the first reason Kafka would give is the one given. Filter-only values (a
    resource type or permission ANY, a pattern type ANY or MATCH, operation ANY) are
    refused with the controller's words too, where Kafka's broker fails the whole request
    (docs/security.md)."""
    rtype = ResourceType.of(resource_type)
    ptype = PatternType.of(pattern_type)
    op = AclOperation.of(operation)
    perm = AclPermissionType.of(permission)
    name = name or ""
    if rtype == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not name:
        raise InvalidAcl("Invalid empty resource name")
    if rtype in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {rtype.name}")
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {ptype.name}")
    if op in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {op.name}")
    if perm not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl(f"Invalid permissionType {perm.name}")
    parse_principal(principal or "")
    _check_host(host or "")
    return AclBinding(rtype, name, ptype, principal or "", host or "", op, perm)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None (a name, principal or host) and ANY
    (a type, operation or permission) take every value; pattern type MATCH takes every
    binding that would apply to a resource named `name` (its literal binding, the `*`
    wildcard, the prefixed bindings of its prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b) and self.matches_entry(b)

    def matches_pattern(self, b: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        ptype = self.pattern_type
        if ptype not in (PatternType.ANY, PatternType.MATCH) and ptype != b.pattern_type:
            return False
        if self.name is None:
            return True
        if ptype == PatternType.ANY or ptype == b.pattern_type:
            return self.name == b.name
        # MATCH: would the binding apply to a resource of this name?
        if b.pattern_type == PatternType.LITERAL:
            return self.name == b.name or b.name == WILDCARD
        return self.name.startswith(b.name)

    def matches_entry(self, b: AclBinding) -> bool:
        """Kafka's AccessControlEntryFilter.matches: exact values, no implied operations."""
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == AclOperation.ANY or self.operation == b.operation)
                and (self.permission == AclPermissionType.ANY
                     or self.permission == b.permission))


def filter_from_wire(resource_type: int, name: str | None, pattern_type: int,
                     principal: str | None, host: str | None, operation: int,
                     permission: int) -> AclBindingFilter:
    """A DescribeAcls or DeleteAcls filter; InvalidAcl (Kafka's controller's words) when a
    part of it is UNKNOWN (code 0, or a code Kafka does not know)."""
    f = AclBindingFilter(ResourceType.of(resource_type), name, PatternType.of(pattern_type),
                         principal, host, AclOperation.of(operation),
                         AclPermissionType.of(permission))
    if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
        raise InvalidAcl("Unknown patternFilter.")
    if f.operation == AclOperation.UNKNOWN or f.permission == AclPermissionType.UNKNOWN:
        raise InvalidAcl("Unknown entryFilter.")
    return f
