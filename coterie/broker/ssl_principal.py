"""Kafka's `ssl.principal.mapping.rules`: from a client certificate's subject to the name
of the connection's principal (issue 25, point 2).

The setting is a comma-separated list of rules, tried in order; the first that applies
names the principal (`User:<name>`):

* `DEFAULT`: the subject itself, in RFC 2253 form (`CN=alice,OU=eng,O=example`). The
  setting's default is this one rule.
* `RULE:<pattern>/<replacement>/[L|U]`: applies when the regular expression `<pattern>`
  matches the whole subject; the name is the subject with the matches of `<pattern>`
  replaced by `<replacement>`, where `$1`, `$2`, ... are the pattern's groups (a `$n`
  past the last group is kept as text, after Kafka's rule of reading `$12` as `$1` and
  `2` when there are fewer than twelve groups); `L` or `U` then puts the name in lower or
  upper case. A `/` inside a pattern or a replacement is written `\\/`.
  `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L` names `CN=Kafka-Svc,OU=ServiceUsers,O=x` as
  `User:kafka-svc`.

When no rule applies the client is not let in, as Kafka's authentication fails with
"No rules apply to <subject>". A list that cannot be read is refused when the broker starts.

The patterns are Kafka's, written for Java's regular expressions; Python's `re` reads the
ones such rules use (groups, lazy quantifiers, classes, anchors) the same way. RE2 is not
used here: these are the operator's own patterns, not a client's, and Java's syntax
(back references and look-arounds included) is closer to Python's than to RE2's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["NoRuleApplies", "PrincipalMapper", "RulesError", "principal_mapper"]

_BACK_REFERENCE = re.compile(r"\$(\d+)")


class RulesError(ValueError):
    """`ssl.principal.mapping.rules` that cannot be read, with where."""


class NoRuleApplies(ValueError):
    """No rule names a principal for this subject (the connection is refused)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        name = self.pattern.sub(self._expand, subject)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name

    def _expand(self, match: re.Match[str]) -> str:
        """The replacement for one match, read as Java's `replaceAll` reads it: `$n` is
        group n (a `$n` past the groups: Kafka's truncation, else the text itself), `\\x`
        is the character x."""
        groups = self.pattern.groups if self.pattern is not None else 0
        text = self.replacement
        out = []
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            ref = _BACK_REFERENCE.match(text, i) if c == "$" else None
            if ref is None:
                out.append(c)
                i += 1
                continue
            digits = ref.group(1)
            index = int(digits)
            while index > groups and index >= 10:
                index //= 10
            if groups == 0 or digits.startswith("0") or index > groups:
                out.append(ref.group(0))  # not a group: the text as written
                i = ref.end()
                continue
            used = len(str(index))
            out.append(match.group(index) or "")
            out.append(digits[used:])  # digits past the group number are text
            i = ref.end()
        return "".join(out)


class PrincipalMapper:
    """The rules of one listener; `name(subject)` is the principal's name."""

    __slots__ = ("_rules",)

    def __init__(self, rules: str | None = None) -> None:
        self._rules = _parse(rules if rules is not None else "DEFAULT")

    def name(self, subject: str) -> str:
        for rule in self._rules:
            found = rule.apply(subject)
            if found is not None:
                return found
        raise NoRuleApplies(f"No rules apply to {subject}")


def principal_mapper(props: Mapping[str, str], listener: str) -> PrincipalMapper:
    """The listener's mapper: `listener.name.<listener>.ssl.principal.mapping.rules`, else
    the broker-wide setting, else DEFAULT. RulesError when the rules cannot be read."""
    rules = props.get(f"listener.name.{listener.lower()}.ssl.principal.mapping.rules")
    if not rules:
        rules = props.get("ssl.principal.mapping.rules") or None
    try:
        return PrincipalMapper(rules)
    except RulesError as e:
        raise RulesError(f"listener {listener}: ssl.principal.mapping.rules: {e}") from None


def _parse(text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return rules
        if text.startswith("DEFAULT", i):
            rules.append(_Rule(None))
            i += len("DEFAULT")
        elif text.startswith("RULE:", i):
            pattern, i = _part(text, i + len("RULE:"))
            replacement, i = _part(text, i)
            case = ""
            if i < n and text[i] in "LU":
                case = text[i]
                i += 1
            try:
                compiled = re.compile(pattern)
            except re.error as e:
                raise RulesError(f"bad pattern {pattern!r}: {e}") from None
            rules.append(_Rule(compiled, replacement, case))
        else:
            end = text.find(",", i)
            raise RulesError(f"invalid rule: {text[i:end if end >= 0 else n]!r} (a rule is "
                             "DEFAULT or RULE:pattern/replacement/[LU])")
        while i < n and text[i].isspace():
            i += 1
        if i < n:
            if text[i] != ",":
                end = text.find(",", i)
                raise RulesError(f"unexpected {text[i:end if end >= 0 else n]!r} after a rule")
            i += 1


def _part(text: str, i: int) -> tuple[str, int]:
    """A rule's pattern or replacement from `i` to the next unescaped `/` (an escaped one,
    `\\/`, stays escaped: both Java's and Python's regular expressions read it as `/`)."""
    out = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            out.append(text[i:i + 2])
            i += 2
        elif c == "/":
            return "".join(out), i + 1
        else:
            out.append(c)
            i += 1
    raise RulesError(f"a RULE is missing its closing '/' in {text!r}")
