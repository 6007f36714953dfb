"""Regular-expression subscriptions (KIP-848 `SubscribedTopicRegex`), with RE2 semantics.

Kafka compiles a member's regex with RE2/J and subscribes the member to every topic whose
*whole* name matches; coterie uses Google's RE2 (the `google-re2` binding) the same way, so
patterns run in linear time whatever a client sends. RE2 and RE2/J accept the same syntax
apart from rare corners (RE2/J lacks a few Perl classes), so a pattern Kafka accepts is
accepted here.

Compiled patterns are cached: every member of a group usually sends the same pattern, and a
metadata change re-resolves every pattern in use.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad client pattern is the client's problem, not our stderr's


class InvalidRegex(ValueError):
    """Not a valid RE2 pattern; the message says why."""


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re2._Regexp:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidRegex(str(reason)) from None


def resolve(pattern: str, topics: Iterable[str]) -> tuple[str, ...]:
    """The topics whose whole name matches `pattern`, sorted."""
    compiled = compile_regex(pattern)
    return tuple(sorted(t for t in topics if compiled.fullmatch(t) is not None))
