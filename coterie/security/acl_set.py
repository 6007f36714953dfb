"""The ACLs, indexed for the question an authorizer asks on every request: which ACLs
apply to the resource (type, name)?

Kafka's StandardAuthorizer keeps its ACLs in one sorted set (by type, then name in reverse)
and walks it from the resource's name towards its prefixes. coterie keeps three maps
instead, each rebuilt whole when the ACLs change (rarely; a check is what must be cheap):

- literal ACLs by (type, name), the `*` wildcard among them under the name `*`;
- prefixed ACLs by (type, prefix);
- per type, the lengths of the prefixes present, shortest first.

The ACLs applying to a resource are then its literal ones, the wildcard ones, and the
prefixed ones under `name[:n]` for each length n present: a few dictionary lookups,
whether there are ten ACLs or a hundred thousand (tests/unit/security: the same answers
as a scan of every ACL).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from coterie.security.bindings import AclBinding, AclBindingFilter
from coterie.security.codes import WILDCARD, PatternType, ResourceType

__all__ = ["AclSet"]

_Key = tuple[ResourceType, str]


class AclSet:
    """An immutable set of ACL bindings with the index above. Changes make a new set
    (`adding`, `removing`), so a reader holding one never sees a half-made change."""

    __slots__ = ("_all", "_by_type", "_lengths", "_literal", "_prefixed")

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._all: frozenset[AclBinding] = frozenset(bindings)
        literal: dict[_Key, list[AclBinding]] = {}
        prefixed: dict[_Key, list[AclBinding]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for b in self._all:
            by_type.setdefault(b.resource_type, []).append(b)
            key = (b.resource_type, b.name)
            if b.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(key, []).append(b)
                lengths.setdefault(b.resource_type, set()).add(len(b.name))
            else:
                literal.setdefault(key, []).append(b)
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._lengths = {t: tuple(sorted(n)) for t, n in lengths.items()}
        self._by_type = {t: tuple(v) for t, v in by_type.items()}

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(self._all)

    def __contains__(self, binding: object) -> bool:
        return binding in self._all

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AclSet) and self._all == other._all

    def __hash__(self) -> int:
        return hash(self._all)

    def __repr__(self) -> str:
        return f"AclSet({len(self._all)} bindings)"

    @property
    def bindings(self) -> frozenset[AclBinding]:
        return self._all

    def adding(self, bindings: Iterable[AclBinding]) -> AclSet:
        """This set and `bindings` (those already here are no change, as in Kafka)."""
        new = self._all.union(bindings)
        return self if len(new) == len(self._all) else AclSet(new)

    def removing(self, bindings: Iterable[AclBinding]) -> AclSet:
        new = self._all.difference(bindings)
        return self if len(new) == len(self._all) else AclSet(new)

    def applying_to(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """Every ACL whose pattern covers the resource (type, name): its literal ACLs, the
        type's `*` ACLs, and the prefixed ACLs of each prefix of `name` (the name itself
        included). Principals, hosts and operations are not looked at here."""
        literal = self._literal
        yield from literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from literal.get((resource_type, WILDCARD), ())
        lengths = self._lengths.get(resource_type)
        if lengths:
            prefixed = self._prefixed
            size = len(name)
            for n in lengths:
                if n > size:
                    break
                yield from prefixed.get((resource_type, name[:n]), ())

    def of_type(self, resource_type: ResourceType) -> tuple[AclBinding, ...]:
        """Every ACL on resources of `resource_type`, whatever their pattern: what Kafka's
        authorizeByResourceType walks ("may this principal WRITE some topic?")."""
        return self._by_type.get(resource_type, ())

    def select(self, f: AclBindingFilter) -> list[AclBinding]:
        """The bindings `f` matches (DescribeAcls, DeleteAcls), in `AclBinding.key` order."""
        return sorted((b for b in self._all if f.matches(b)), key=AclBinding.key)
