"""Sticky, balanced placement of items onto members: the engine under the co-partitioned and
replicated assignors.

An item (a partition, or a partition number of a group of topics) needs `copies` distinct
holders among its eligible members. Placement runs in three steps:

1. Keep. Each item keeps the members that held it before ("claims", best claim first) while
   they are still eligible, up to its number of copies.
2. Fill. Items short of copies take, one copy at a time, the least-loaded eligible member not
   holding them yet (ties go to the earlier member in member order).
3. Rebalance. While some member A holds at least two more items than some member B and holds
   an item that B is eligible for and does not hold, one such item moves from A to B, one
   item at a time, from the heaviest such A to the lightest such B (items A did not claim
   before move first). Every move lowers the sum of squared loads, so this ends.

Guarantees: every item gets exactly `copies` distinct eligible holders (the caller makes sure
enough members are eligible); when every item is eligible to every member, loads differ by at
most one (were A two above B, A would hold an item B lacks, and step 3 would move it); a
placement that came out of this function, fed back as the claims with nothing else changed,
comes out unchanged (keep retains it, nothing is short, and step 3 had already stopped);
the result depends only on the inputs.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

Item = TypeVar("Item", bound=Hashable)


def place(items: Sequence[Item], eligible: Mapping[Item, Sequence[str]],
          copies: Mapping[Item, int], claims: Mapping[Item, Sequence[str]],
          rank: Mapping[str, int]) -> dict[str, dict[Item, None]]:
    """Member -> items it holds (an ordered set, item order within keep/fill/moves).

    `rank` gives every member its position in member order; `eligible[item]` lists members in
    that order; `claims[item]` lists previous holders, best first (may name anyone).
    """
    held: dict[str, dict[Item, None]] = {mid: {} for mid in rank}
    holders: dict[Item, set[str]] = {}
    allowed = {item: frozenset(eligible[item]) for item in items}
    claimed: dict[str, set[Item]] = {mid: set() for mid in rank}

    for item in items:
        kept: set[str] = set()
        for mid in claims.get(item, ()):
            if len(kept) == copies[item]:
                break
            if mid in allowed[item] and mid not in kept:
                kept.add(mid)
                held[mid][item] = None
                claimed[mid].add(item)
        holders[item] = kept

    for item in items:
        need = copies[item] - len(holders[item])
        if need <= 0:
            continue
        free = [mid for mid in eligible[item] if mid not in holders[item]]
        free.sort(key=lambda mid: (len(held[mid]), rank[mid]))
        for mid in free[:need]:
            holders[item].add(mid)
            held[mid][item] = None

    _rebalance(held, holders, allowed, claimed, rank)
    return held


def _rebalance(held: dict[str, dict[Item, None]], holders: dict[Item, set[str]],
               allowed: Mapping[Item, frozenset[str]], claimed: Mapping[str, set[Item]],
               rank: Mapping[str, int]) -> None:
    # One move at a time, always from the heaviest member that can give to the lightest that
    # can take, so no member gives more than the balance needs and none gives then takes.
    while (move := _best_move(held, holders, allowed, claimed, rank)) is not None:
        a, b, item = move
        del held[a][item]
        holders[item].discard(a)
        held[b][item] = None
        holders[item].add(b)


def _best_move(held: dict[str, dict[Item, None]], holders: Mapping[Item, set[str]],
               allowed: Mapping[Item, frozenset[str]], claimed: Mapping[str, set[Item]],
               rank: Mapping[str, int]) -> tuple[str, str, Item] | None:
    heavy_first = sorted(rank, key=lambda mid: (-len(held[mid]), rank[mid]))
    light_first = sorted(rank, key=lambda mid: (len(held[mid]), rank[mid]))
    for a in heavy_first:
        for b in light_first:
            if len(held[a]) - len(held[b]) < 2:
                break
            item = _movable(held[a], b, holders, allowed, claimed[a])
            if item is not None:
                return a, b, item
    return None


def _movable(items: dict[Item, None], to: str, holders: Mapping[Item, set[str]],
             allowed: Mapping[Item, frozenset[str]], claimed: set[Item]) -> Item | None:
    """The first item `to` may take, preferring items the giver did not claim before."""
    fallback = None
    for item in items:
        if to in allowed[item] and to not in holders[item]:
            if item not in claimed:
                return item
            if fallback is None:
                fallback = item
    return fallback
