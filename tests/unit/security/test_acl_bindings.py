"""ACL bindings and filters (coterie.security.bindings): what CreateAcls refuses, with Kafka
4.2's messages, and what DescribeAcls and DeleteAcls filters match."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.security import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
    binding_from_wire,
    filter_from_wire,
)

A, P, T = AclOperation, AclPermissionType, ResourceType
LIT, PRE, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, \
    PatternType.MATCH
GOOD = dict(resource_type=2, name="t", pattern_type=3, principal="User:alice", host="*",
            operation=3, permission=3)


def _make(**changes: object) -> AclBinding:
    return binding_from_wire(**{**GOOD, **changes})  # type: ignore[arg-type]


def test_a_valid_creation_is_a_binding() -> None:
    assert _make() == AclBinding(T.TOPIC, "t", LIT, "User:alice", "*", A.READ, P.ALLOW)
    assert _make(host="10.1.2.3", pattern_type=4).host == "10.1.2.3"
    assert _make(host="::1").host == "::1"
    assert _make(resource_type=4, name="kafka-cluster").resource_type == T.CLUSTER
    assert _make(name="*", pattern_type=4).name == "*"  # a prefix "*", as Kafka keeps it


@pytest.mark.parametrize(("changes", "message"), [
    ({"resource_type": 4, "name": "c"},
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    ({"name": ""}, "Invalid empty resource name"),
    ({"resource_type": 0}, "Invalid resourceType UNKNOWN"),
    ({"resource_type": 99}, "Invalid resourceType UNKNOWN"),
    ({"resource_type": 1}, "Invalid resourceType ANY"),
    ({"pattern_type": 2}, "Invalid patternType MATCH"),
    ({"pattern_type": 1}, "Invalid patternType ANY"),
    ({"pattern_type": 0}, "Invalid patternType UNKNOWN"),
    ({"operation": 1}, "Invalid operation ANY"),
    ({"operation": 0}, "Invalid operation UNKNOWN"),
    ({"permission": 1}, "Invalid permissionType ANY"),
    ({"permission": 0}, "Invalid permissionType UNKNOWN"),
    ({"principal": "alice"}, "Could not parse principal from `alice` (no colon is present "
                             "separating the principal type from the principal name)"),
    ({"host": "localhost"}, "Invalid host 'localhost': an ACL's host is '*' or an IP address"),
])
def test_invalid_creations_say_why_as_kafka(changes: dict, message: str) -> None:
    with pytest.raises(InvalidAcl) as refused:
        _make(**changes)
    assert str(refused.value) == message


def test_unknown_filter_parts_are_refused() -> None:
    with pytest.raises(InvalidAcl, match=r"^Unknown patternFilter\.$"):
        filter_from_wire(0, None, 1, None, None, 1, 1)
    with pytest.raises(InvalidAcl, match=r"^Unknown patternFilter\.$"):
        filter_from_wire(1, None, 0, None, None, 1, 1)
    with pytest.raises(InvalidAcl, match=r"^Unknown entryFilter\.$"):
        filter_from_wire(1, None, 1, None, None, 77, 1)
    with pytest.raises(InvalidAcl, match=r"^Unknown entryFilter\.$"):
        filter_from_wire(1, None, 1, None, None, 1, 0)


def b(name: str, pattern: PatternType = LIT, rtype: ResourceType = T.TOPIC,
      principal: str = "User:alice", op: AclOperation = A.READ,
      perm: AclPermissionType = P.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


STORED = [b("orders"), b("orders", PRE), b("ord", PRE), b("*"), b("orders-eu"),
          b("orders", rtype=T.GROUP), b("x", PRE)]


def _names(f: AclBindingFilter) -> set[tuple[str, PatternType, ResourceType]]:
    return {(x.name, x.pattern_type, x.resource_type) for x in STORED if f.matches(x)}


def test_pattern_filters_as_kafka_matches_them() -> None:
    assert len(_names(AclBindingFilter())) == len(STORED)  # ANY of everything
    assert _names(AclBindingFilter(T.TOPIC, "orders", ANY)) == {
        ("orders", LIT, T.TOPIC), ("orders", PRE, T.TOPIC)}  # ANY: exact names only
    assert _names(AclBindingFilter(T.ANY, "orders", LIT)) == {
        ("orders", LIT, T.TOPIC), ("orders", LIT, T.GROUP)}
    assert _names(AclBindingFilter(T.TOPIC, None, PRE)) == {
        ("orders", PRE, T.TOPIC), ("ord", PRE, T.TOPIC), ("x", PRE, T.TOPIC)}
    # MATCH: every ACL that would apply to a topic named "orders".
    assert _names(AclBindingFilter(T.TOPIC, "orders", MATCH)) == {
        ("orders", LIT, T.TOPIC), ("orders", PRE, T.TOPIC), ("ord", PRE, T.TOPIC),
        ("*", LIT, T.TOPIC)}
    assert _names(AclBindingFilter(T.TOPIC, "orders-eu", MATCH)) == {
        ("orders-eu", LIT, T.TOPIC), ("orders", PRE, T.TOPIC), ("ord", PRE, T.TOPIC),
        ("*", LIT, T.TOPIC)}
    # A literal filter of a name does not take the "*" ACL (only MATCH does).
    assert _names(AclBindingFilter(T.TOPIC, "orders-eu", LIT)) == {("orders-eu", LIT, T.TOPIC)}
    assert _names(AclBindingFilter(T.TOPIC, None, MATCH)) == {
        (x.name, x.pattern_type, x.resource_type) for x in STORED if x.resource_type == T.TOPIC}


def test_entry_filters_match_exact_values() -> None:
    acl = b("t", principal="User:bob", op=A.WRITE, perm=P.DENY, host="10.0.0.1")
    assert AclBindingFilter(principal="User:bob", host="10.0.0.1", operation=A.WRITE,
                            permission=P.DENY).matches(acl)
    assert not AclBindingFilter(principal="User:*").matches(acl)
    assert not AclBindingFilter(host="*").matches(acl)
    assert not AclBindingFilter(operation=A.DESCRIBE).matches(acl)  # no implication here
    assert not AclBindingFilter(operation=A.ALL).matches(acl)
    assert not AclBindingFilter(permission=P.ALLOW).matches(acl)


names = st.sampled_from(["a", "ab", "abc", "b", "*"])
bindings = st.builds(b, names, st.sampled_from([LIT, PRE]))


@given(bindings, names)
def test_match_takes_what_would_apply_to_the_resource(binding: AclBinding, name: str) -> None:
    would_apply = (binding.name in (name, "*") if binding.pattern_type == LIT
                   else name.startswith(binding.name))
    assert AclBindingFilter(T.TOPIC, name, MATCH).matches(binding) == would_apply
