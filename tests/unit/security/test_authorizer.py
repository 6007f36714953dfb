"""The authorizer's rules (coterie.security.authorizer), as Kafka's StandardAuthorizer
decides: examples of each rule, then properties over random ACL sets, the indexed decision
checked against a scan of every ACL written from the rules alone."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.security import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclSet,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    authorize,
)

A = AclOperation
P = AclPermissionType
T = ResourceType
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"
DEFAULT = AuthorizerSettings()


def acl(name: str = "t", op: AclOperation = A.READ, perm: AclPermissionType = P.ALLOW,
        principal: str = ALICE, host: str = "*", pattern: PatternType = LIT,
        rtype: ResourceType = T.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def may(acls: list[AclBinding], op: AclOperation = A.READ, name: str = "t",
        principal: str = ALICE, host: str = HOST, rtype: ResourceType = T.TOPIC,
        s: AuthorizerSettings = DEFAULT) -> bool:
    return authorize(AclSet(acls), s, principal, host, op, rtype, name)


# -- examples of each rule ---------------------------------------------------------------
def test_no_acl_denies_unless_allow_everyone_if_no_acl_found() -> None:
    assert not may([])
    assert may([], s=AuthorizerSettings(allow_if_no_acl=True))


def test_acls_on_the_resource_for_others_still_deny_with_allow_everyone() -> None:
    # "no ACL found" is about the resource: bob's ACL on t means alice is denied.
    s = AuthorizerSettings(allow_if_no_acl=True)
    assert not may([acl(principal=BOB)], s=s)
    assert may([acl(name="other", principal=BOB)], s=s)


def test_super_users_may_do_anything_even_when_denied() -> None:
    s = AuthorizerSettings(super_users=frozenset({ALICE}))
    assert may([acl(op=A.ALL, perm=P.DENY)], op=A.ALTER, s=s)
    assert not may([], principal=BOB, s=s)


def test_literal_wildcard_and_prefixed_patterns() -> None:
    assert may([acl(name="t")], name="t")
    assert not may([acl(name="t")], name="tt")
    assert may([acl(name="*")], name="anything")
    assert may([acl(name="orders-", pattern=PRE)], name="orders-eu")
    assert may([acl(name="orders-eu", pattern=PRE)], name="orders-eu")
    assert not may([acl(name="orders-", pattern=PRE)], name="orders")
    # A prefixed "*" is a prefix like any other, not the wildcard.
    assert not may([acl(name="*", pattern=PRE)], name="t")
    assert may([acl(name="*", pattern=PRE)], name="*t")
    # Another resource type's ACLs are not this one's.
    assert not may([acl(name="*", rtype=T.GROUP)], name="t")


def test_wildcard_principal_and_host() -> None:
    assert may([acl(principal="User:*")])
    assert not may([acl(principal="Group:*")])
    assert may([acl(host=HOST)])
    assert not may([acl(host="10.0.0.2")])


def test_deny_wins() -> None:
    assert not may([acl(), acl(perm=P.DENY)])
    assert not may([acl(op=A.ALL), acl(name="*", perm=P.DENY, principal="User:*")])
    assert not may([acl(name="*"), acl(name="t", pattern=PRE, perm=P.DENY, op=A.ALL)])


def test_all_covers_every_operation() -> None:
    for op in (A.READ, A.WRITE, A.DESCRIBE, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE):
        assert may([acl(op=A.ALL)], op=op)
        assert not may([acl(op=A.ALL), acl(op=A.ALL, perm=P.DENY)], op=op)


def test_implied_operations_of_allows() -> None:
    for op in (A.READ, A.WRITE, A.DELETE, A.ALTER, A.DESCRIBE):
        assert may([acl(op=op)], op=A.DESCRIBE)
    for op in (A.CREATE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.CLUSTER_ACTION):
        assert not may([acl(op=op)], op=A.DESCRIBE), op
    assert may([acl(op=A.ALTER_CONFIGS)], op=A.DESCRIBE_CONFIGS)
    assert not may([acl(op=A.ALTER)], op=A.DESCRIBE_CONFIGS)
    # Implication goes one way: READ does not imply WRITE, DESCRIBE does not imply READ.
    assert not may([acl(op=A.READ)], op=A.WRITE)
    assert not may([acl(op=A.DESCRIBE)], op=A.READ)


def test_implications_are_for_allows_only() -> None:
    # A DENY of READ does not deny DESCRIBE (which WRITE's ALLOW implies).
    assert may([acl(op=A.WRITE), acl(op=A.READ, perm=P.DENY)], op=A.DESCRIBE)
    assert not may([acl(op=A.WRITE), acl(op=A.DESCRIBE, perm=P.DENY)], op=A.DESCRIBE)


# -- properties --------------------------------------------------------------------------
NAMES = ["t", "te", "tes", "test", "x", "*", "orders", "orders-eu"]
PRINCIPALS = [ALICE, BOB, "User:*", "Group:*"]
HOSTS = ["*", HOST, "10.0.0.2"]
OPS = [op for op in AclOperation if op not in (A.UNKNOWN, A.ANY)]
TYPES = [T.TOPIC, T.GROUP, T.CLUSTER]

acls_st = st.builds(AclBinding, st.sampled_from(TYPES), st.sampled_from(NAMES),
                    st.sampled_from([LIT, PRE]), st.sampled_from(PRINCIPALS),
                    st.sampled_from(HOSTS), st.sampled_from(OPS),
                    st.sampled_from([P.ALLOW, P.DENY]))
acl_lists = st.lists(acls_st, max_size=14)
settings_st = st.builds(AuthorizerSettings,
                        st.frozensets(st.sampled_from([ALICE, BOB]), max_size=1), st.booleans())
action_st = st.tuples(st.sampled_from([ALICE, BOB]), st.sampled_from([HOST, "10.0.0.2"]),
                      st.sampled_from(OPS), st.sampled_from(TYPES),
                      st.sampled_from([*NAMES, "test-1", "orders-us", ""]))


def reference(acls: list[AclBinding], s: AuthorizerSettings, principal: str, host: str,
              op: AclOperation, rtype: ResourceType, name: str) -> bool:
    """The rules of coterie.security.authorizer, read literally, over every ACL."""
    if principal in s.super_users:
        return True
    covering = [a for a in acls if a.resource_type == rtype and (
        (a.pattern_type == LIT and a.name in (name, "*"))
        or (a.pattern_type == PRE and name.startswith(a.name)))]
    mine = [a for a in covering
            if a.principal in (principal, "User:*") and a.host in (host, "*")]
    if any(a.permission == P.DENY and a.operation in (op, A.ALL) for a in mine):
        return False
    implied = {A.DESCRIBE: {A.READ, A.WRITE, A.DELETE, A.ALTER},
               A.DESCRIBE_CONFIGS: {A.ALTER_CONFIGS}}.get(op, set())
    if any(a.permission == P.ALLOW and a.operation in ({op, A.ALL} | implied) for a in mine):
        return True
    return s.allow_if_no_acl and not covering


@given(acl_lists, settings_st, action_st)
def test_the_index_decides_as_a_scan_of_every_acl(acls, s, action) -> None:
    assert authorize(AclSet(acls), s, *action) == reference(acls, s, *action)


@given(acl_lists, settings_st, action_st, st.randoms())
def test_the_decision_does_not_depend_on_the_order_of_the_acls(acls, s, action, rnd) -> None:
    shuffled = list(acls)
    rnd.shuffle(shuffled)
    assert authorize(AclSet(acls), s, *action) == authorize(AclSet(shuffled), s, *action)


@given(acl_lists, settings_st, action_st)
def test_a_matching_deny_wins_over_any_allows(acls, s, action) -> None:
    principal, host, op, rtype, name = action
    deny = AclBinding(rtype, name or "x", LIT, principal, host, op, P.DENY)
    allows = [AclBinding(rtype, name or "x", LIT, principal, host, op, P.ALLOW),
              AclBinding(rtype, "*", LIT, "User:*", "*", A.ALL, P.ALLOW)]
    got = authorize(AclSet([*acls, *allows, deny]), s, principal, host, op, rtype,
                    name or "x")
    assert got == (principal in s.super_users)


@given(acl_lists, settings_st, action_st)
def test_super_users_are_always_allowed(acls, s, action) -> None:
    _, host, op, rtype, name = action
    for su in s.super_users:
        assert authorize(AclSet(acls), s, su, host, op, rtype, name)


@given(acl_lists, settings_st, action_st, acls_st)
def test_adding_an_allow_never_denies_what_was_allowed(acls, s, action, extra) -> None:
    """Save where the allowance was `allow.everyone.if.no.acl.found`'s: as on Kafka, the
    first ACL on a resource ends "no ACL found" for every principal and operation
    (test_acls_on_the_resource_for_others_still_deny_with_allow_everyone)."""
    allow = AclBinding(extra.resource_type, extra.name, extra.pattern_type, extra.principal,
                       extra.host, extra.operation, P.ALLOW)
    _, _, _, rtype, name = action
    covered = any(AclSet(acls).applying_to(rtype, name))
    if authorize(AclSet(acls), s, *action) and (covered or not s.allow_if_no_acl):
        assert authorize(AclSet([*acls, allow]), s, *action)


@given(acl_lists, settings_st, action_st)
def test_implied_describe_and_describe_configs(acls, s, action) -> None:
    """Whoever may READ, WRITE, DELETE or ALTER a resource through an ALLOW may DESCRIBE it
    unless a DENY of DESCRIBE (or ALL) says otherwise; likewise ALTER_CONFIGS and
    DESCRIBE_CONFIGS."""
    principal, host, _, rtype, name = action
    name = name or "x"
    for strong, weak in ((A.READ, A.DESCRIBE), (A.WRITE, A.DESCRIBE), (A.DELETE, A.DESCRIBE),
                         (A.ALTER, A.DESCRIBE), (A.ALTER_CONFIGS, A.DESCRIBE_CONFIGS)):
        with_allow = [*acls, AclBinding(rtype, name, LIT, principal, host, strong, P.ALLOW)]
        denied_weak = any(
            a.permission == P.DENY and a.operation in (weak, A.ALL)
            for a in with_allow if a in set(AclSet(with_allow).applying_to(rtype, name))
            and a.principal in (principal, "User:*") and a.host in (host, "*"))
        assert authorize(AclSet(with_allow), s, principal, host, weak, rtype, name) == (
            not denied_weak or principal in s.super_users)


# -- scale -------------------------------------------------------------------------------
def test_a_check_against_ten_thousand_acls_is_cheap() -> None:
    acls = [acl(name=f"topic-{i}", principal=f"User:u{i % 100}") for i in range(9_000)]
    acls += [acl(name=f"team-{i}-", pattern=PRE, principal=f"User:u{i}") for i in range(999)]
    acls.append(acl(name="*", op=A.DESCRIBE, principal="User:*"))
    index = AclSet(acls)
    assert len(index) == 10_000
    start = time.perf_counter()
    for i in range(2_000):
        assert authorize(index, DEFAULT, f"User:u{i % 100}", HOST, A.READ, T.TOPIC,
                         f"topic-{i}")
    assert authorize(index, DEFAULT, "User:u7", HOST, A.READ, T.TOPIC, "team-7-orders")
    assert not authorize(index, DEFAULT, "User:u8", HOST, A.READ, T.TOPIC, "team-7-orders")
    per_check = (time.perf_counter() - start) / 2_000
    assert per_check < 200e-6, f"{per_check * 1e6:.0f} µs a check"


@settings(max_examples=30)
@given(acl_lists, acl_lists)
def test_adding_and_removing_make_the_sets_they_say(first, second) -> None:
    a = AclSet(first)
    assert a.adding(second) == AclSet([*first, *second])
    assert a.adding(second).removing(second) == AclSet(set(first) - set(second))
