"""Assertions every assignor's properties share: completeness, subscribers only, balance,
movement."""

from __future__ import annotations

from collections import Counter

from coterie.assign.spec import AssignmentSpec, GroupAssignment, TopicPartition, subscribers


def subscribed_partitions(spec: AssignmentSpec) -> set[TopicPartition]:
    """Every partition of an existing topic that at least one member subscribes to."""
    return {(t, p) for t in subscribers(spec) for p in range(spec.topics[t].partitions)}


def assert_valid(spec: AssignmentSpec, assignment: GroupAssignment, copies: int = 1) -> None:
    """One entry per member; each subscribed partition given `copies` times (to distinct
    members, since partitions are sets), only to members subscribed to its topic, and
    nothing else given."""
    assert set(assignment.members) == set(spec.members)
    given = Counter(tp for a in assignment.members.values() for tp in a.partitions)
    expected = subscribed_partitions(spec)
    assert set(given) == expected
    assert all(n == copies for n in given.values()), given
    for mid, a in assignment.members.items():
        for topic, _ in a.partitions:
            assert topic in spec.members[mid].subscribed_topics, (mid, topic)


def loads(assignment: GroupAssignment) -> dict[str, int]:
    return {mid: len(a.partitions) for mid, a in assignment.members.items()}


def assert_within_one(counts: dict[str, int] | list[int]) -> None:
    values = list(counts.values()) if isinstance(counts, dict) else counts
    if values:
        assert max(values) - min(values) <= 1, counts


def lost(before: GroupAssignment, after: GroupAssignment) -> dict[str, set[TopicPartition]]:
    """Member -> partitions it had before and no longer has (members present in both)."""
    return {mid: set(before.members[mid].partitions) - set(after.members[mid].partitions)
            for mid in before.members if mid in after.members}
