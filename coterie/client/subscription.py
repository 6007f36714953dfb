"""What a consumer subscribes to, and how a new assignment differs from what it owns.

A subscription is either a list of topic names or one pattern. A pattern is an RE2 regular
expression (the syntax KIP-848 adopted for SubscribedTopicRegex; Python's `re` differs in
corner cases) matched against the *whole* topic name: "orders-.*" matches "orders-eu" but
not "old-orders-eu". Internal topics (`__consumer_offsets`, whatever starts with "__") are
never matched, as Kafka's `exclude.internal.topics=true` default does. The consumer resolves
a pattern against the cluster's topic list before every JoinGroup and periodically in
between; the group sees the resolved names, since a classic subscription lists topic names.

`AssignmentChange` is KIP-429's step 2 on one member: compare the partitions the member owns
with the ones the leader just gave it; revoke only those that left, add only those that
came. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import re2


class TopicPartition(NamedTuple):
    """(topic, partition); equal to and hashed like the plain tuple."""

    topic: str
    partition: int


def internal_topic(name: str) -> bool:
    return name.startswith("__")


class TopicSubscription:
    """Topics by name, or by a whole-name RE2 pattern (exactly one of the two)."""

    def __init__(self, topics: Iterable[str] | None = None, pattern: str | None = None) -> None:
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe to either topics or a pattern")
        self.pattern = pattern
        self._regex = None
        if pattern is not None:
            try:
                self._regex = re2.compile(pattern)
            except re2.error as exc:
                raise ValueError(f"invalid RE2 pattern {pattern!r}: {exc}") from exc
            self.topics: frozenset[str] = frozenset()
        else:
            assert topics is not None
            names = frozenset(topics)
            if isinstance(topics, str) or not all(isinstance(t, str) and t for t in names):
                raise ValueError("topics must be a collection of non-empty topic names")
            self.topics = names

    @property
    def is_pattern(self) -> bool:
        return self._regex is not None

    def matches(self, topic: str) -> bool:
        if self._regex is None:
            return topic in self.topics
        return not internal_topic(topic) and self._regex.fullmatch(topic) is not None

    def resolve(self, cluster_topics: Iterable[str]) -> bool:
        """Pattern subscriptions: set `topics` to the matching names among `cluster_topics`.
        Returns whether the set changed (a name subscription never changes here)."""
        if self._regex is None:
            return False
        matched = frozenset(t for t in cluster_topics if self.matches(t))
        changed = matched != self.topics
        self.topics = matched
        return changed

    def __repr__(self) -> str:
        if self._regex is not None:
            return f"TopicSubscription(pattern={self.pattern!r}, matched={sorted(self.topics)})"
        return f"TopicSubscription(topics={sorted(self.topics)})"


@dataclass(frozen=True, slots=True)
class AssignmentChange:
    """How a member's partitions change with a new assignment."""

    revoked: frozenset[TopicPartition]  # owned, not in the new assignment
    added: frozenset[TopicPartition]  # in the new assignment, not owned
    kept: frozenset[TopicPartition]  # in both: never paused by a cooperative rebalance

    @classmethod
    def between(cls, owned: Iterable[tuple[str, int]],
                assigned: Iterable[tuple[str, int]]) -> AssignmentChange:
        old = frozenset(TopicPartition(*tp) for tp in owned)
        new = frozenset(TopicPartition(*tp) for tp in assigned)
        return cls(revoked=old - new, added=new - old, kept=old & new)
