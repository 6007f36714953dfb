"""Partition universes and owned-partition claims shared by the two halves of the `uniform`
assignor (`uniform_homogeneous`, `uniform_heterogeneous`).

Why this module exists: the KIP-848 coordinator calls the assignor with every member's
current target as `owned`, and in the common round almost all of it stays put. Checking that
the owned partitions still exist, are still subscribed and are not claimed twice is then the
largest cost if it is done partition by partition in Python. Done as one C-level set
difference between the set of every partition of the members' topics (their *universe*) and
all owned sets (see `_unowned_if_clean`), it costs a hash lookup per partition and no Python
bytecode, yields the unowned partitions as a by-product, and lets every member keep its very
frozenset object, uncopied. Only when that check fails are claims examined one by one.

Universes are memoised per topic shape (names and partition counts) in a small bounded
cache: topic metadata changes rarely, so consecutive rounds of a group find their universe
ready. The cache only remembers values that are a pure function of its key, so results never
depend on it; it is bounded by the number of partitions it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coterie.assign.spec import TopicPartition

TopicShape = tuple[tuple[str, int], ...]
"""(topic name, partition count) pairs, topic names sorted: the key of a universe."""

CACHE_PARTITIONS = 1_000_000
"""The most partitions the universe cache holds (of all universes together)."""


@dataclass(frozen=True, slots=True)
class Universe:
    """Every partition of some topics, in (topic name, index) order and as a set."""

    ordered: tuple[TopicPartition, ...]
    members: frozenset[TopicPartition]


_universes: dict[TopicShape, Universe] = {}
_topic_partitions: dict[tuple[str, int], tuple[TopicPartition, ...]] = {}
_cached_partitions = 0


def universe(shape: TopicShape) -> Universe:
    """The universe of `shape` (memoised; see the module docstring)."""
    global _cached_partitions
    found = _universes.get(shape)
    if found is not None:
        return found
    ordered: list[TopicPartition] = []
    for name, count in shape:
        ordered.extend(topic_partitions(name, count))
    made = Universe(tuple(ordered), frozenset(ordered))
    size = len(ordered)
    if size <= CACHE_PARTITIONS:
        while _universes and _cached_partitions + size > CACHE_PARTITIONS:
            oldest = next(iter(_universes))
            _cached_partitions -= len(_universes.pop(oldest).ordered)
        _universes[shape] = made
        _cached_partitions += size
    return made


def topic_partitions(name: str, count: int) -> tuple[TopicPartition, ...]:
    """One topic's partitions; tuples are shared between the universes that contain it."""
    key = (name, count)
    found = _topic_partitions.get(key)
    if found is None:
        found = tuple((name, p) for p in range(count))
        if len(_topic_partitions) >= 65_536:
            _topic_partitions.clear()
        _topic_partitions[key] = found
    return found


@dataclass(slots=True)
class Claims:
    """What members may keep of what they own: `kept[i]` for the i-th member (a subset of its
    owned partitions, the very same object when nothing had to go) and `unowned`, the
    partitions of the universe nobody kept."""

    kept: list[frozenset[TopicPartition]]
    unowned: frozenset[TopicPartition]


Classes = Sequence[tuple[frozenset[TopicPartition], Sequence[int]]]
"""(allowed universe, member numbers) per distinct subscription: the members of a class may
keep only partitions of its universe."""


def claim(owned: Sequence[frozenset[TopicPartition]], everything: frozenset[TopicPartition],
          generations: Sequence[int], classes: Classes | None = None) -> Claims:
    """Keep each member's owned partitions that lie in its allowed universe (`everything`
    when `classes` is None, else its class's); a partition that several members still claim
    goes to the claimant with the highest generation, ties to the earliest member (a KIP-848
    target never has such claims; a spec may).

    `classes`, when given, must cover every member once and their universes must add up to
    `everything`.
    """
    if not any(owned):
        return Claims(list(owned), everything)
    unowned = _unowned_if_clean(owned, everything, classes)
    if unowned is not None:
        return Claims(list(owned), unowned)
    allowed: list[frozenset[TopicPartition]] = [everything] * len(owned)
    for universe_, members in classes or ():
        for i in members:
            allowed[i] = universe_
    kept = [o if not o or o <= a else o & a for o, a in zip(owned, allowed, strict=True)]
    nonempty = [k for k in kept if k]
    unowned = everything.difference(*nonempty)
    if sum(map(len, nonempty)) != len(everything) - len(unowned):
        _drop_double_claims(kept, generations)
    return Claims(kept, unowned)


def _unowned_if_clean(owned: Sequence[frozenset[TopicPartition]],
                      everything: frozenset[TopicPartition],
                      classes: Classes | None) -> frozenset[TopicPartition] | None:
    """The unowned partitions when every claim is allowed and no two members claim one
    partition (the common case), else None.

    For members sharing an allowed set U with owned sets o_1..o_k: |U - (o_1 | ... | o_k)|
    equals |U| - sum(|o_i|) exactly when every o_i lies in U and they are disjoint; when the
    classes' universes do not overlap, that check per class is enough for the group.
    """
    if classes is None:
        rest = everything.difference(*owned)
        return rest if len(everything) - len(rest) == sum(map(len, owned)) else None
    if sum(len(u) for u, _ in classes) != len(everything):
        return None  # overlapping subscriptions: claims may collide across them
    rests = []
    for universe_, members in classes:
        mine = [owned[i] for i in members]
        rest = universe_.difference(*mine)
        if len(universe_) - len(rest) != sum(map(len, mine)):
            return None
        rests.append(rest)
    return rests[0] if len(rests) == 1 else frozenset().union(*rests)


def _drop_double_claims(kept: list[frozenset[TopicPartition]],
                        generations: Sequence[int]) -> None:
    taken: set[TopicPartition] = set()
    for i in sorted(range(len(kept)), key=lambda i: (-generations[i], i)):
        mine = kept[i]
        if not taken.isdisjoint(mine):
            mine = kept[i] = mine - taken
        taken.update(mine)
