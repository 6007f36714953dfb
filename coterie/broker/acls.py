"""The broker's authorizer: Kafka's `authorizer.class.name`, `super.users` and
`allow.everyone.if.no.acl.found`, and the ACLs, durable.

**How the enforcement uses it.** Every handler reaches it as `ctx.services.authorizer` and
asks `authorizer.authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name)` before acting
on a resource: True when the request's principal may (always True when no authorizer is
configured, as on a Kafka broker without one), False when the handler must answer the
resource's authorization error (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED, ...). `authorize_principal` asks the same without a request
(the principal and host given). The decision is coterie.security.authorize over the ACLs
of the moment (`acls`, an immutable AclSet: a handler that asks twice in one turn of the
loop sees one set). `authorize_any` asks whether the principal may perform an operation
on some resource of a type (Kafka's authorizeByResourceType). The group and transaction
APIs check through coterie.broker.group_acls, the data, topic and config APIs through
`enforcing` and `denied` below (docs/security.md lists what each API needs).

**Where the ACLs last.** A single broker keeps them in `acls.json` in its data directory,
replaced atomically before a change is answered (coterie.log.files.atomic_write); a broker
of a cluster keeps them in the database's `acls` table (coterie.storage.acl_rows), and every
broker `adopt`s the table at each of its rounds (coterie.broker.cluster), promptly after a
change since the broker that made it NOTIFYs the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from coterie.log.files import atomic_write
from coterie.security import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclSet,
    AuthorizerSettings,
    InvalidAcl,
    PatternType,
    ResourceType,
    authorize,
    authorize_any,
    parse_principal,
)

__all__ = ["ACL_FILE", "AUTHORIZER_CLASSES", "AuthorizerConfigError", "BrokerAuthorizer",
           "authorizer_settings", "denied", "enforcing", "host_of"]

ACL_FILE = "acls.json"
# The authorizer classes a Kafka server.properties may name; all mean coterie's authorizer,
# which follows Kafka's StandardAuthorizer (KRaft's) and reads the same two settings.
AUTHORIZER_CLASSES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",  # ZooKeeper-era Kafka's, same rules
})


class AuthorizerConfigError(ValueError):
    """`authorizer.class.name` or `super.users` cannot be used: said at start."""


def authorizer_settings(props: Mapping[str, str]) -> AuthorizerSettings | None:
    """The authorizer's settings, or None when `authorizer.class.name` is empty (no
    authorizer: every principal may do everything, and the ACL APIs answer
    SECURITY_DISABLED, as Kafka's)."""
    name = props.get("authorizer.class.name", "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise AuthorizerConfigError(
            f"authorizer.class.name={name}: coterie's authorizer is Kafka's StandardAuthorizer "
            "(org.apache.kafka.metadata.authorizer.StandardAuthorizer, or the older "
            "kafka.security.authorizer.AclAuthorizer); other classes cannot be loaded")
    supers = set()
    for item in props.get("super.users", "").split(";"):
        principal = item.strip()
        if principal:
            try:
                parse_principal(principal)
            except InvalidAcl:
                raise AuthorizerConfigError(
                    f"super.users: {principal!r} is not a principal (Type:name, such as "
                    "User:admin)") from None
            supers.add(principal)
    # Kafka's Boolean.parseBoolean: "true" in any case is true, anything else false.
    allow = props.get("allow.everyone.if.no.acl.found", "false").strip().lower() == "true"
    return AuthorizerSettings(frozenset(supers), allow)


def host_of(ctx: Any) -> str:
    """The client's IP address, as ACL hosts name it (also part of the key of any answer
    cached per principal: an ACL may name a host)."""
    connection = getattr(ctx, "connection", None)
    ip = getattr(connection, "ip", None)
    if isinstance(ip, str):
        return ip
    return ctx.peer.rsplit(":", 1)[0].strip("[]")


def _to_json(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.resource_type.name, "name": b.name,
            "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permission": b.permission.name}


def _from_json(d: Mapping[str, str]) -> AclBinding:
    return AclBinding(ResourceType[d["resource_type"]], d["name"],
                      PatternType[d["pattern_type"]], d["principal"], d["host"],
                      AclOperation[d["operation"]], AclPermissionType[d["permission"]])


class BrokerAuthorizer:
    """The authorizer and the ACLs of one broker (module docstring). `settings` None: no
    authorizer is configured."""

    def __init__(self, settings: AuthorizerSettings | None, data_dir: Path,
                 in_data_dir: bool = True) -> None:
        self.settings = settings
        self._path = data_dir / ACL_FILE
        self._in_data_dir = in_data_dir
        self.acls = AclSet()
        if in_data_dir and self._path.exists():  # else: a cluster's, from its database
            stored = json.loads(self._path.read_text())
            self.acls = AclSet(_from_json(d) for d in stored["acls"])

    @property
    def enabled(self) -> bool:
        """Whether `authorizer.class.name` is set: ACLs are kept and decide."""
        return self.settings is not None

    def authorize(self, ctx: Any, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """May the request's principal (`ctx.principal`, from the client's address) perform
        `operation` on the resource (`resource_type`, `name`)? True when no authorizer is
        configured."""
        if self.settings is None:
            return True
        return authorize(self.acls, self.settings, ctx.principal, host_of(ctx), operation,
                         resource_type, name)

    def authorize_principal(self, principal: str, host: str, operation: AclOperation,
                            resource_type: ResourceType, name: str) -> bool:
        """As `authorize`, for a principal and host given."""
        if self.settings is None:
            return True
        return authorize(self.acls, self.settings, principal, host, operation,
                         resource_type, name)

    def describable(self, principal: str, host: str, topics: Iterable[str]) -> frozenset[str]:
        """Of `topics`, those `principal` (from `host`) may DESCRIBE: what a consumer
        group's regex resolution keeps (coterie.group.consumer.config.TopicAccess). Every
        topic when no authorizer is configured."""
        return frozenset(t for t in topics if self.authorize_principal(
            principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, t))

    def authorize_any(self, ctx: Any, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """May the request's principal perform `operation` on some resource of
        `resource_type`? Kafka's authorizeByResourceType (coterie.security.authorize_any),
        which an idempotent InitProducerId asks with WRITE on TOPIC. True when no
        authorizer is configured."""
        if self.settings is None:
            return True
        return authorize_any(self.acls, self.settings, ctx.principal, host_of(ctx),
                             operation, resource_type)

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return self.acls.select(f)

    def matching(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """What each filter of a DeleteAcls matches now (each against the same set: a
        binding two filters match is in both answers, as in Kafka)."""
        return [self.acls.select(f) for f in filters]

    def create(self, bindings: Iterable[AclBinding]) -> None:
        """A single broker's CreateAcls: written durably, then in force."""
        self._replace(self.acls.adding(bindings))

    def delete(self, bindings: Iterable[AclBinding]) -> None:
        """A single broker's DeleteAcls: written durably, then out of force."""
        self._replace(self.acls.removing(bindings))

    def adopt(self, bindings: Iterable[AclBinding]) -> None:
        """A cluster broker: the database's ACLs become this broker's (in memory only: the
        database is where they last). The index is rebuilt only when they changed."""
        stored = frozenset(bindings)
        if stored != self.acls.bindings:
            self.acls = AclSet(stored)

    def _replace(self, acls: AclSet) -> None:
        if acls is self.acls:
            return
        if self._in_data_dir:
            rows = [_to_json(b) for b in sorted(acls, key=AclBinding.key)]
            atomic_write(self._path, json.dumps({"version": 1, "acls": rows},
                                                indent=0).encode())
        self.acls = acls


# -- helpers for the handlers' checks ----------------------------------------------------------
# Shared by every handler that enforces ACLs (the data, topic and config APIs; the group and
# transaction APIs may use them too). Why these two: a handler on a hot path (Produce,
# Fetch, Heartbeat) asks `enforcing` once per request and skips all checking when it is
# None, so a broker without an authorizer pays one attribute test a request; with one, it
# asks `denied` once per request with the request's distinct names, one decision a name.


def enforcing(ctx: Any) -> BrokerAuthorizer | None:
    """The request's authorizer when one is configured (`authorizer.class.name` set), else
    None: then every principal may do everything and the handler checks nothing. (Services
    made up without an authorizer, as unit tests make them, count as none configured.)"""
    authorizer = getattr(ctx.services, "authorizer", None)
    if authorizer is None or authorizer.settings is None:
        return None
    return authorizer


def denied(ctx: Any, operation: AclOperation, resource_type: ResourceType,
           names: Iterable[str | None]) -> frozenset[str]:
    """The names among `names` on which the request's principal may not perform
    `operation` (each decided once, however often it is named; None names are skipped,
    left to the handler's own checks); empty at once when no authorizer is configured. The
    handler answers each of them with the resource's authorization error
    (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, ...)."""
    authorizer = enforcing(ctx)
    if authorizer is None:
        return frozenset()
    return frozenset(name for name in set(names) if name is not None
                     and not authorizer.authorize(ctx, operation, resource_type, name))
