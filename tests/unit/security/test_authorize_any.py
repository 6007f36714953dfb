"""`authorize_any` (coterie.security.authorizer): Kafka's authorizeByResourceType, which an
idempotent InitProducerId asks ("may this principal WRITE some topic?"): examples of each
rule, and the property that a principal allowed to write one named topic may write some."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.security import (
    AclBinding,
    AclOperation,
    AclSet,
    AuthorizerSettings,
    authorize,
    authorize_any,
)
from tests.unit.security.test_authorizer import (
    ALICE,
    BOB,
    DEFAULT,
    HOST,
    LIT,
    NAMES,
    PRE,
    A,
    P,
    T,
    acl,
    acls_st,
)


def any_topic(acls: list[AclBinding], op: AclOperation = A.WRITE, principal: str = ALICE,
              host: str = HOST, s: AuthorizerSettings = DEFAULT) -> bool:
    return authorize_any(AclSet(acls), s, principal, host, op, T.TOPIC)


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found() -> None:
    assert not any_topic([])
    assert any_topic([], s=AuthorizerSettings(allow_if_no_acl=True))


def test_super_users_may_whatever_the_denies() -> None:
    assert any_topic([acl("*", A.WRITE, P.DENY)], s=AuthorizerSettings(frozenset({ALICE})))


def test_an_allow_on_one_topic_or_prefix_is_enough() -> None:
    assert any_topic([acl("orders", A.WRITE)])
    assert any_topic([acl("orders-", A.WRITE, pattern=PRE)])
    assert any_topic([acl("*", A.ALL)])
    assert any_topic([acl("orders", A.WRITE, principal="User:*")])


def test_only_the_operation_itself_or_all_count() -> None:
    assert not any_topic([acl("orders", A.READ)])
    assert not any_topic([acl("orders", A.WRITE, principal=BOB)])
    assert not any_topic([acl("orders", A.WRITE, host="10.9.9.9")])
    assert not any_topic([acl("orders", A.WRITE, rtype=T.GROUP)])


def test_dominating_denies() -> None:
    # A literal `*` DENY denies everything; a literal DENY of the same name dominates a
    # literal ALLOW; a PREFIXED DENY of a prefix dominates either.
    assert not any_topic([acl("orders", A.WRITE), acl("*", A.WRITE, P.DENY)])
    assert not any_topic([acl("orders", A.WRITE), acl("orders", A.WRITE, P.DENY)])
    assert not any_topic([acl("orders", A.WRITE), acl("ord", A.ALL, P.DENY, pattern=PRE)])
    assert not any_topic([acl("orders-", A.WRITE, pattern=PRE),
                          acl("orders-", A.WRITE, P.DENY, pattern=PRE)])
    # A literal DENY does not dominate a PREFIXED ALLOW (other names remain), nor a DENY of
    # a longer prefix.
    assert any_topic([acl("orders", A.WRITE, pattern=PRE),
                      acl("orders", A.WRITE, P.DENY)])
    assert any_topic([acl("orders", A.WRITE, pattern=PRE),
                      acl("orders-eu", A.WRITE, P.DENY, pattern=PRE)])
    # One undominated ALLOW among dominated ones is enough.
    assert any_topic([acl("orders", A.WRITE), acl("orders", A.WRITE, P.DENY),
                      acl("x", A.WRITE, pattern=LIT)])


@settings(max_examples=300, deadline=None)
@given(st.lists(acls_st, max_size=12), st.booleans(), st.sampled_from([HOST, "10.0.0.2"]))
def test_a_principal_that_may_write_a_named_topic_may_write_some(acls, allow_if_no_acl,
                                                                 host) -> None:
    s = AuthorizerSettings(allow_if_no_acl=allow_if_no_acl)
    acl_set = AclSet(acls)
    if any(authorize(acl_set, s, ALICE, host, A.WRITE, T.TOPIC, n)
           for n in [*NAMES, "test-1", "orders-us"] if n != "*"):
        assert authorize_any(acl_set, s, ALICE, host, A.WRITE, T.TOPIC)
