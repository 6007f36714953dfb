"""A compact, immutable set of (topic id, partition): what a member's target keeps for years.

Every member of a consumer group keeps its target assignment (usually also its assigned
partitions, the same object) for as long as the group is stable. As a `frozenset`, ten
partitions cost about 712 bytes: above eight elements a frozenset has a separate 32-slot
table. A `PartitionSet` is a sorted tuple of the same pairs, 136 bytes for ten.

It behaves as a frozenset wherever the coordinator uses one: equality with a frozenset or
another `PartitionSet` (equal sets are equal whatever their type, with frozenset's hash),
`in`, `len`, iteration, the comparisons (`<=` is "subset") and the set operators, whose
results are frozensets, and `isdisjoint`/`issubset`/`issuperset`. Those operators build a
frozenset first, so they cost more than a frozenset's; they run when an assignment changes
(target computation, reconciliation), not on a settled member's heartbeat, which reads no
partition at all. Equal or identical operands have fast paths (a member usually shares one
object between its target and its partitions).

Iteration order is sorted (by topic id, then partition); nothing relies on it except equality
between two `PartitionSet`s, which is then a tuple comparison.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Set
from typing import Any

TopicIdPartition = tuple[Any, int]

_SETS = (set, frozenset)


def _as_set(other: Any) -> Any:
    """`other` as a set or frozenset, or None if it is no set at all (the operators answer
    NotImplemented for such operands, as frozenset's do). A plain tuple is refused outright:
    answering NotImplemented would let tuple's own (lexicographic) comparison decide."""
    if isinstance(other, PartitionSet):
        return frozenset(other)
    if isinstance(other, _SETS):
        return other
    if isinstance(other, Set):
        return frozenset(other)
    if isinstance(other, tuple):
        raise TypeError(f"a set of partitions does not combine with a tuple: {other!r}")
    return None


class PartitionSet(tuple):  # type: ignore[type-arg]
    """A sorted tuple of distinct (topic id, partition) with frozenset semantics (module
    docstring)."""

    __slots__ = ()

    def __new__(cls, partitions: Iterable[TopicIdPartition] = ()) -> PartitionSet:
        distinct = partitions if isinstance(partitions, _SETS) else set(partitions)
        return tuple.__new__(cls, sorted(distinct))

    def __contains__(self, tp: object) -> bool:
        # Sorted, so a binary search; an element that does not compare with pairs (no
        # partition at all) falls back on tuple's scan, which says False as a set would.
        try:
            i = bisect_left(self, tp)  # type: ignore[call-overload]
        except TypeError:
            return tuple.__contains__(self, tp)
        return i < len(self) and self[i] == tp

    # -- equality and hashing, as a frozenset's --------------------------------------------
    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, PartitionSet):
            return tuple.__eq__(self, other)
        if isinstance(other, _SETS):
            # Distinct elements: equal sizes and every element in `other` is equality.
            return len(self) == len(other) and all(tp in other for tp in self)
        if isinstance(other, Set):
            return frozenset(self) == other
        if isinstance(other, tuple):
            return False  # a set never equals a tuple (tuple's == would compare items)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(frozenset(self))

    # -- subset comparisons ------------------------------------------------------------------
    def __le__(self, other: object) -> bool:
        if other is self:
            return True
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) <= o

    def __lt__(self, other: object) -> bool:
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) < o

    def __ge__(self, other: object) -> bool:
        if other is self:
            return True
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) >= o

    def __gt__(self, other: object) -> bool:
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) > o

    def issubset(self, other: Iterable[Any]) -> bool:
        return frozenset(self).issubset(other)

    def issuperset(self, other: Iterable[Any]) -> bool:
        return frozenset(self).issuperset(other)

    def isdisjoint(self, other: Iterable[Any]) -> bool:
        if not self:
            return True
        return frozenset(self).isdisjoint(other)

    # -- set operators: frozenset results ----------------------------------------------------
    def __and__(self, other: Any) -> Any:
        if other is self:
            return frozenset(self)
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) & o

    def __rand__(self, other: Any) -> Any:
        o = _as_set(other)
        return NotImplemented if o is None else o & frozenset(self)

    def __or__(self, other: Any) -> Any:
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) | o

    def __ror__(self, other: Any) -> Any:
        o = _as_set(other)
        return NotImplemented if o is None else o | frozenset(self)

    def __sub__(self, other: Any) -> Any:
        if other is self:
            return frozenset()
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) - o

    def __rsub__(self, other: Any) -> Any:
        o = _as_set(other)
        return NotImplemented if o is None else o - frozenset(self)

    def __xor__(self, other: Any) -> Any:
        o = _as_set(other)
        return NotImplemented if o is None else frozenset(self) ^ o

    def __rxor__(self, other: Any) -> Any:
        o = _as_set(other)
        return NotImplemented if o is None else o ^ frozenset(self)

    def union(self, *others: Iterable[Any]) -> frozenset[Any]:
        return frozenset(self).union(*others)

    def intersection(self, *others: Iterable[Any]) -> frozenset[Any]:
        return frozenset(self).intersection(*others)

    def difference(self, *others: Iterable[Any]) -> frozenset[Any]:
        return frozenset(self).difference(*others)

    def __repr__(self) -> str:
        return f"PartitionSet({list(self)!r})"


EMPTY: frozenset[Any] = frozenset()
"""The empty set of partitions (`records.consumer.NO_PARTITIONS`): a frozenset, as empty
frozensets cost nothing more."""


def compact(partitions: Iterable[TopicIdPartition]) -> Any:
    """`partitions` in the form a member keeps for long: a `PartitionSet`, or the shared empty
    frozenset when there are none, or `partitions` itself if it already is one of those."""
    if isinstance(partitions, PartitionSet) or partitions is EMPTY:
        return partitions
    found = PartitionSet(partitions)
    return found if found else EMPTY
