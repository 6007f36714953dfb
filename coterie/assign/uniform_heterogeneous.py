"""The `uniform` assignor when members subscribe to different topics (Kafka 4.x's
`UniformHeterogeneousAssignmentBuilder` since KAFKA-17710, re-derived; see
`coterie.assign.uniform`).

Theory of operation. Members are numbered in member id order; a member's *load* is the
number of partitions in its target so far.
  1. Keep: every member keeps what it owns of the topics it still subscribes to
     (`uniform_partitions.claim`), however many that is.
  2. Hand out: topics with unowned partitions are taken in *topic order* (partitions per
     subscriber descending, then subscriber count ascending, then name); a topic's unowned
     partitions, in index order, go to its subscribers by water-filling: subscribers are
     sorted by (load, member number) and dealt one partition each, round after round, the
     round covering the subscribers whose load has been reached by the round's level.
  3. Balance: topics with two or more subscribers are visited in topic order, pass after
     pass, until a whole pass moves nothing (at most 16 passes). A topic whose subscribers'
     loads differ by at most one is left alone. Otherwise partitions of the topic move, one
     at a time, from its most loaded subscribers (highest member number first within a load;
     a member gives its highest-numbered partition of the topic; members holding none of the
     topic are skipped) to its least loaded ones (water-filling as in step 2), until the
     loads being taken from and given to differ by at most one.

Given the same member order and topic order the answer is exactly Kafka 4.2's
(`test_uniform_kafka` checks it against Kafka's jar).

What this guarantees (as Kafka's builder does): every partition of a subscribed topic is
assigned once, to a subscriber; a kept partition only moves in step 3, and only while its
holder is at least two partitions above the least loaded subscriber of its topic; when the
passes stop before the limit (a whole pass moved nothing), then for every topic, each
subscriber that holds a partition of it is at most one partition above the topic's least
loaded subscriber. When all subscribers of a topic subscribe to the same topics, that is
balance within one among them. With overlapping, unequal subscriptions the group as a whole
may stay further apart (Kafka's own example: loads 9, 10, 11 for A{t1}, B{t1, t2}, C{t2}).

Cost. Step 1 is C-level set operations over the owned partitions. Step 2 handles unowned
partitions one by one, and sorts the subscribers of each topic that has some: O(S log S)
per such topic, which dominates a first assignment with many topics (about 40 us per topic
of 2,000 subscribers). In step 3 the loads of a topic's subscribers are checked with C-level
max/min (remembered per subscriber list until something moves), so balanced topics cost no
sorting, and partition owners are indexed only for the subscribers of topics that need
balancing.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

from coterie.assign.spec import TopicPartition
from coterie.assign.uniform_partitions import TopicShape, claim, topic_partitions, universe

MAX_BALANCING_PASSES = 16
"""Kafka's MAX_ITERATION_COUNT: passes over the topics in the balancing step."""


def assign_heterogeneous(partition_counts: dict[str, int],
                         subscriptions: Sequence[frozenset[str]],
                         owned: Sequence[frozenset[TopicPartition]],
                         generations: Sequence[int]) -> list[frozenset[TopicPartition]]:
    """Targets for members 0..N-1 (in member order); `subscriptions[i]` holds only existing
    topics, `partition_counts` their partition counts."""
    return _Builder(partition_counts, subscriptions, owned, generations).build()


class _Builder:
    """One assignment's working state: loads, subscribers per topic, what moved."""

    def __init__(self, partition_counts: dict[str, int], subscriptions: Sequence[frozenset[str]],
                 owned: Sequence[frozenset[TopicPartition]], generations: Sequence[int]) -> None:
        self.counts = partition_counts
        classes: dict[frozenset[str], list[int]] = {}
        for i, subs in enumerate(subscriptions):
            classes.setdefault(subs, []).append(i)
        self.subscribers = _subscribers_by_topic(classes)
        self.everything = universe(self._shape(self.subscribers))
        claims = claim(owned, self.everything.members, generations,
                       [(universe(self._shape(subs)).members, members)
                        for subs, members in classes.items()])
        self.kept = claims.kept
        self.unowned = claims.unowned
        self.loads = list(map(len, self.kept))
        n = len(self.kept)
        # Partitions a member gained in steps 2 and 3, and kept ones it gave up in step 3.
        self.gained: list[list[TopicPartition]] = [[] for _ in range(n)]
        self.removed: dict[int, set[TopicPartition]] = {}
        # Partition -> member, filled in for a topic's subscribers when it needs balancing.
        self.owner: dict[TopicPartition, int] = {}
        self.indexed = [False] * n
        self.moves = 0
        self.spread: dict[int, tuple[int, int]] = {}

    def _shape(self, topics: frozenset[str] | dict[str, list[int]]) -> TopicShape:
        return tuple((t, self.counts[t]) for t in sorted(topics))

    def topic_order(self, topic: str) -> tuple[float, int, str]:
        subs = len(self.subscribers[topic])
        return (-(self.counts[topic] / subs), subs, topic)

    def build(self) -> list[frozenset[TopicPartition]]:
        self.hand_out()
        self.balance()
        final = list(self.kept)
        removed = self.removed
        for i, gained in enumerate(self.gained):
            if gained:
                kept = final[i] if i not in removed else final[i] - removed[i]
                final[i] = kept.union(gained) if kept else frozenset(gained)
            elif i in removed:
                final[i] = final[i] - removed[i]
        return final

    # -- step 2 --------------------------------------------------------------------------

    def hand_out(self) -> None:
        if not self.unowned:
            return
        by_topic: dict[str, Sequence[int]] = {}
        if len(self.unowned) == len(self.everything.ordered):
            by_topic = {t: range(self.counts[t]) for t in self.subscribers}
        else:
            lists: dict[str, list[int]] = {}
            ordered = (sorted(self.unowned) if len(self.unowned) * 16 < len(self.everything.ordered)
                       else [tp for tp in self.everything.ordered if tp in self.unowned])
            for t, p in ordered:
                lists.setdefault(t, []).append(p)
            by_topic = lists
        loads, gained = self.loads, self.gained
        for topic in sorted(by_topic, key=self.topic_order):
            order = sorted(self.subscribers[topic], key=loads.__getitem__)
            partitions = by_topic[topic]
            tps = topic_partitions(topic, self.counts[topic])
            for members, at in _water_fill(order, loads, len(partitions)):
                for member, p in zip(members, partitions[at:at + len(members)], strict=True):
                    gained[member].append(tps[p])
                    loads[member] += 1

    # -- step 3 --------------------------------------------------------------------------

    def balance(self) -> None:
        topics = sorted((t for t, subs in self.subscribers.items() if len(subs) >= 2),
                        key=self.topic_order)
        last = -1
        for _ in range(MAX_BALANCING_PASSES):
            for index, topic in enumerate(topics):
                if index == last:
                    return
                if self.balance_topic(topic) > 0 or last == -1:
                    last = index

    def imbalance(self, subs: list[int]) -> int:
        """max - min load over `subs`, remembered per list object until something moves."""
        seen = self.spread.get(id(subs))
        if seen is not None and seen[0] == self.moves:
            return seen[1]
        loads = self.loads
        spread = max(map(loads.__getitem__, subs)) - min(map(loads.__getitem__, subs))
        self.spread[id(subs)] = (self.moves, spread)
        return spread

    def balance_topic(self, topic: str) -> int:
        subs = self.subscribers[topic]
        if self.imbalance(subs) <= 1:
            return 0
        owner = self.index_owners(subs)
        loads = self.loads
        # The topic's partitions grouped by owner, index order within an owner; a member
        # gives from the end of its group.
        grouped = sorted((owner[(topic, p)], p) for p in range(self.counts[topic]))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for at, (member, _) in enumerate(grouped):
            start.setdefault(member, at)
            end[member] = at + 1
        bal = _Balancer(sorted(subs, key=loads.__getitem__), loads)
        moved = 0
        while not bal.balanced():
            giver = bal.next_most_loaded()
            while giver != -1 and end.get(giver, 0) - start.get(giver, 0) <= 0:
                bal.exclude_most_loaded()
                giver = bal.next_most_loaded()
            if giver == -1:
                break
            end[giver] -= 1
            p = grouped[end[giver]][1]
            taker = bal.next_least_loaded()
            if bal.balanced():
                break
            self._move((topic, p), giver, taker)
            moved += 1
        return moved

    def index_owners(self, subs: list[int]) -> dict[TopicPartition, int]:
        """The owner map, complete for every partition the members of `subs` hold."""
        owner, indexed = self.owner, self.indexed
        for i in subs:
            if not indexed[i]:
                indexed[i] = True
                owner.update(zip(self.kept[i], repeat(i)))
                owner.update(zip(self.gained[i], repeat(i)))
        # Moves only happen between subscribers of a topic being balanced, all of them
        # indexed first, so a member indexed late has given nothing away yet.
        return owner

    def _move(self, tp: TopicPartition, giver: int, taker: int) -> None:
        gained = self.gained[giver]
        if tp in self.kept[giver]:
            self.removed.setdefault(giver, set()).add(tp)
        else:
            gained.remove(tp)
        lost = self.removed.get(taker)
        if lost is not None and tp in lost:
            lost.discard(tp)
        else:
            self.gained[taker].append(tp)
        self.loads[giver] -= 1
        self.loads[taker] += 1
        self.owner[tp] = taker
        self.moves += 1


def _subscribers_by_topic(classes: dict[frozenset[str], list[int]]) -> dict[str, list[int]]:
    """Topic -> its subscribers' numbers, ascending, given the members of each distinct
    subscription. Topics with exactly the same subscribers share one list object (which
    `_Builder.imbalance` relies on to remember spreads)."""
    topic_classes: dict[str, list[frozenset[str]]] = {}
    for subs in classes:
        for topic in subs:
            topic_classes.setdefault(topic, []).append(subs)
    merged: dict[tuple[frozenset[str], ...], list[int]] = {}
    out: dict[str, list[int]] = {}
    for topic, cls in topic_classes.items():
        if len(cls) == 1:
            out[topic] = classes[cls[0]]
            continue
        key = tuple(cls)
        members = merged.get(key)
        if members is None:
            members = merged[key] = sorted(i for c in cls for i in classes[c])
        out[topic] = members
    return out


def _water_fill(order: list[int], loads: list[int], count: int) -> list[tuple[list[int], int]]:
    """Rounds (members, first item) dealing `count` items, one per member of a round, to
    the members of `order` (sorted by load, then number) as Kafka's least loaded walk does:
    a round covers the members whose initial load the round's level has reached. Only
    members inside the rounds gain, so the loads read past them are the initial ones."""
    rounds: list[tuple[list[int], int]] = []
    n = len(order)
    level = loads[order[0]] - 1
    reach = 0
    at = 0
    while at < count:
        level += 1
        # A round never needs more members than items are left: the walk stops growing
        # the range there (the round is the last one anyway).
        left = count - at
        while reach < n and reach < left and loads[order[reach]] == level:
            reach += 1
        take = min(reach, left)
        rounds.append((order[:take], at))
        at += take
    return rounds


class _Balancer:
    """Kafka's least/most loaded walk over one topic's subscribers, sorted by (load, number).

    The least loaded range [0, least_end) grows rightwards as its level rises; the most
    loaded range [most_start, most_end) grows leftwards as its level falls; members with
    nothing of the topic to give are swapped out of the most loaded range's end. Loads are
    read live: moves update them as they happen."""

    __slots__ = ("least_end", "least_level", "loads", "most_end", "most_level", "most_start",
                 "next_least", "next_most", "order")

    def __init__(self, order: list[int], loads: list[int]) -> None:
        n = len(order)
        self.order = order
        self.loads = loads
        self.least_end = 0
        self.least_level = loads[order[0]] - 1
        self.next_least = 0
        self.most_start = n
        self.most_end = n
        self.most_level = loads[order[-1]] + 1
        self.next_most = n - 1

    def balanced(self) -> bool:
        return self.most_level - self.least_level <= 1

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_level += 1
            order, loads, n = self.order, self.loads, len(self.order)
            while self.least_end < n and loads[order[self.least_end]] == self.least_level:
                self.least_end += 1
            self.next_least = 0
        member = self.order[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        order, loads = self.order, self.loads
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Emptied by exclusions: restart the level from the next member down so
                # that the range does grow.
                self.most_level = loads[order[self.most_start - 1]]
            else:
                self.most_level -= 1
            while self.most_start > 0 and loads[order[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = order[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member `next_most_loaded` just returned from the most loaded range."""
        order = self.order
        at = self.next_most + 1
        order[at], order[self.most_end - 1] = order[self.most_end - 1], order[at]
        self.most_end -= 1
