"""Kafka's ACLs, pure: their values (`codes`, `bindings`), the indexed set of them
(`acl_set`) and the authorizer's decision (`authorizer`). No sockets, files, clocks or
threads: the broker stores the ACLs (coterie.broker.acls) and asks `authorize`."""

from coterie.security.acl_set import AclSet
from coterie.security.authorizer import (
    AuthorizerSettings,
    acl_decides,
    authorize,
    authorize_any,
)
from coterie.security.bindings import (
    AclBinding,
    AclBindingFilter,
    InvalidAcl,
    binding_from_wire,
    filter_from_wire,
    parse_principal,
)
from coterie.security.codes import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["CLUSTER_NAME", "WILDCARD", "WILDCARD_PRINCIPAL", "AclBinding", "AclBindingFilter",
           "AclOperation", "AclPermissionType", "AclSet", "AuthorizerSettings", "InvalidAcl",
           "PatternType", "ResourceType", "acl_decides", "authorize", "authorize_any",
           "binding_from_wire", "filter_from_wire", "parse_principal"]
