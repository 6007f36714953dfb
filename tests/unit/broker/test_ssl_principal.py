"""Kafka's ssl.principal.mapping.rules (coterie.broker.ssl_principal): what each rule makes
of a certificate's subject, the order rules are tried in, and the settings refused."""

from __future__ import annotations

import pytest

from coterie.broker.ssl_principal import (
    NoRuleApplies,
    PrincipalMapper,
    RulesError,
    principal_mapper,
)
from coterie.broker.tls import principal_of

SUBJECT = "CN=Kafka-Svc,OU=ServiceUsers,O=Example,L=Paris,C=FR"


def test_default_is_the_subject_itself() -> None:
    assert PrincipalMapper().name(SUBJECT) == SUBJECT
    assert PrincipalMapper("DEFAULT").name(SUBJECT) == SUBJECT


def test_a_rule_rewrites_a_subject_it_matches_whole_and_cases_it() -> None:
    rules = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT")
    assert rules.name(SUBJECT) == "kafka-svc"
    upper = PrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/U")
    assert upper.name(SUBJECT) == "KAFKA-SVC@SERVICEUSERS"
    # A pattern that matches only part of the subject does not apply: the next rule does.
    partial = PrincipalMapper("RULE:CN=(.*?),/$1/,DEFAULT")
    assert partial.name(SUBJECT) == SUBJECT


def test_the_first_rule_that_applies_wins_and_none_refuses() -> None:
    rules = PrincipalMapper("RULE:^CN=([^,]*),OU=Admins,.*$/admin-$1/,"
                            "RULE:^CN=([^,]*),.*$/$1/")
    assert rules.name("CN=bob,OU=Admins,O=x") == "admin-bob"
    assert rules.name("CN=bob,OU=Eng,O=x") == "bob"
    strict = PrincipalMapper("RULE:^CN=([^,]*),OU=Admins,.*$/$1/")
    with pytest.raises(NoRuleApplies, match="No rules apply to CN=bob,OU=Eng"):
        strict.name("CN=bob,OU=Eng,O=x")
    with pytest.raises(NoRuleApplies):
        principal_of({"subject": ((("commonName", "bob"),),)}, strict)
    # Without a certificate there is nothing to map: ANONYMOUS, as on Kafka.
    assert principal_of(None, strict) == "User:ANONYMOUS"


def test_replacements_read_as_javas() -> None:
    # A `/` inside a pattern or a replacement is escaped; `\x` in a replacement is x.
    assert PrincipalMapper(r"RULE:^CN=(.*)$/a\/$1\$/").name("CN=x") == "a/x$"
    # `$12` with one group is group 1 and the text "2"; `$3` past the groups is text.
    assert PrincipalMapper("RULE:^CN=(.*)$/$12-$3/").name("CN=x") == "x2-$3"
    # A pattern without groups keeps its `$n` as written.
    assert PrincipalMapper("RULE:^CN=x$/user$1/").name("CN=x") == "user$1"


@pytest.mark.parametrize("rules", [
    "RULE:^CN=(.*)$/$1",  # no closing '/'
    "DEFALT",  # not a rule
    "RULE:^CN=(.*$/$1/",  # not a regular expression
    "RULE:^CN=(.*)$/$1/X",  # an unknown case flag
    "DEFAULT junk",
])
def test_rules_that_cannot_be_read_are_refused(rules: str) -> None:
    with pytest.raises(RulesError):
        PrincipalMapper(rules)


def test_a_listeners_own_rules_win_and_errors_name_it() -> None:
    props = {"ssl.principal.mapping.rules": "RULE:^CN=([^,]*).*$/$1/",
             "listener.name.internal.ssl.principal.mapping.rules": "DEFAULT"}
    assert principal_mapper(props, "SSL").name("CN=a,O=b") == "a"
    assert principal_mapper(props, "INTERNAL").name("CN=a,O=b") == "CN=a,O=b"
    with pytest.raises(RulesError, match=r"listener SSL: ssl\.principal\.mapping\.rules"):
        principal_mapper({"ssl.principal.mapping.rules": "nonsense"}, "SSL")
