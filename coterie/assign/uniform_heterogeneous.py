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
partitions one by one. It needs each topic's subscribers in (load, number) order; sorting
them per topic would cost O(S log S) per topic (about 40 us for 2,000 subscribers, most of
a first assignment with 1,000 topics), so a subscriber list shared by several topics keeps
that order in a `_Ladder` (members by load level) from one topic to the next: a topic with
P unowned partitions then costs O(P) plus the shifting of the levels it touches. A ladder
is rebuilt by sorting only when members of its list gained through another list (lists
that overlap); a list used by one topic is simply sorted. In step 3 the loads of a topic's
subscribers are checked with C-level max/min (remembered per subscriber list until
something moves), so balanced topics cost no sorting, and partition owners are indexed only
for the subscribers of topics that need balancing.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Sequence
from itertools import groupby, repeat

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
            members = classes.get(subs)
            if members is None:
                classes[subs] = [i]
            else:
                members.append(i)
        self.subscribers, self.topic_classes = _subscribers_by_topic(classes)
        # A version per class (distinct subscription, numbered in first-member order) that
        # moves whenever a member of the class gains in step 2 (see `_Ladder`).
        self.classes = classes
        self.class_versions = [0] * len(classes)
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
        removed = self.removed
        if not removed:
            return [(kept.union(gained) if kept else frozenset(gained)) if gained else kept
                    for kept, gained in zip(self.kept, self.gained, strict=True)]
        final = list(self.kept)
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
        versions = self.class_versions
        member_class: list[int] = []  # member -> class number, made when first needed
        ladders = self.ladders(by_topic)
        for topic in sorted(by_topic, key=self.topic_order):
            partitions = by_topic[topic]
            count = len(partitions)
            ladder = ladders.get(topic)
            if ladder is None:
                order = sorted(self.subscribers[topic], key=loads.__getitem__)
            else:
                if ladder.stamp != ladder.versions(versions):
                    ladder.rebuild(self.subscribers[topic], loads)
                order = ladder.prefix(count)
            tps = topic_partitions(topic, self.counts[topic])
            whole = isinstance(partitions, range)
            widest = 0
            rounds = _water_fill(order, loads, count)
            for members, at, level in rounds:
                width = len(members)
                widest = max(widest, width)
                chunk = (tps[at:at + width] if whole
                         else map(tps.__getitem__, partitions[at:at + width]))
                # Plain loops: CPython 3.11 runs these faster than map() over bound methods.
                for member, tp in zip(members, chunk, strict=True):
                    gained[member].append(tp)
                raised = level + 1
                for member in members:
                    loads[member] = raised
            touched = order[:widest]
            classes = self.topic_classes[topic]
            if len(classes) > 1:
                if not member_class:
                    member_class = self.member_classes()
                classes = tuple(set(map(member_class.__getitem__, touched)))
            for c in classes:
                versions[c] += 1
            if ladder is not None:
                ladder.advance(touched, loads, len(rounds) == 1)
                ladder.stamp = ladder.versions(versions)

    def member_classes(self) -> list[int]:
        """Member number -> class number."""
        out = [0] * len(self.kept)
        for c, members in enumerate(self.classes.values()):
            for i in members:
                out[i] = c
        return out

    def ladders(self, by_topic: dict[str, Sequence[int]]) -> dict[str, _Ladder]:
        """A ladder for each topic of `by_topic` whose subscriber list is shared with another
        topic of `by_topic` (one ladder per list); topics alone with their list sort it."""
        uses: dict[int, int] = {}
        for t in by_topic:
            key = id(self.subscribers[t])
            uses[key] = uses.get(key, 0) + 1
        made: dict[int, _Ladder] = {}
        out: dict[str, _Ladder] = {}
        for t in by_topic:
            key = id(self.subscribers[t])
            if uses[key] > 1:
                ladder = made.get(key)
                if ladder is None:
                    ladder = made[key] = _Ladder(self.topic_classes[t])
                out[t] = ladder
        return out

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


def _subscribers_by_topic(classes: dict[frozenset[str], list[int]]
                          ) -> tuple[dict[str, list[int]], dict[str, tuple[int, ...]]]:
    """Topic -> its subscribers' numbers, ascending, given the members of each distinct
    subscription; and topic -> the numbers of the subscriptions (classes, numbered in
    `classes` order) those subscribers come from. Topics with exactly the same subscribers
    share one list object (which `_Builder.imbalance` and `_Builder.ladders` rely on)."""
    number = {subs: c for c, subs in enumerate(classes)}
    topic_classes: dict[str, list[frozenset[str]]] = {}
    for subs in classes:
        for topic in subs:
            topic_classes.setdefault(topic, []).append(subs)
    merged: dict[tuple[frozenset[str], ...], list[int]] = {}
    out: dict[str, list[int]] = {}
    class_numbers: dict[str, tuple[int, ...]] = {}
    for topic, cls in topic_classes.items():
        class_numbers[topic] = tuple(number[c] for c in cls)
        if len(cls) == 1:
            out[topic] = classes[cls[0]]
            continue
        key = tuple(cls)
        members = merged.get(key)
        if members is None:
            members = merged[key] = sorted(i for c in cls for i in classes[c])
        out[topic] = members
    return out, class_numbers


class _Ladder:
    """The members of one subscriber list in (load, member number) order, kept level by
    level (load -> members ascending) across the topics that share the list.

    Why: step 2 deals each topic's partitions to its subscribers in that order. Sorting a
    list of S subscribers per topic costs O(S log S) even when the topic has far fewer
    partitions than S; a ladder yields the first `count` members in O(count) and, after the
    hand-out, moves only the members that gained. It is valid while no member of the list
    gained in another list's hand-out: `stamp` holds the versions of the list's classes when
    it was last brought up to date, and a stale ladder is rebuilt by sorting."""

    __slots__ = ("classes", "keys", "levels", "stamp")

    def __init__(self, classes: tuple[int, ...]) -> None:
        self.classes = classes
        self.levels: dict[int, list[int]] = {}
        self.keys: list[int] = []  # the loads present in `levels`, ascending
        self.stamp: tuple[int, ...] | None = None

    def versions(self, class_versions: list[int]) -> tuple[int, ...]:
        return tuple(map(class_versions.__getitem__, self.classes))

    def rebuild(self, subs: list[int], loads: list[int]) -> None:
        by_load = loads.__getitem__
        self.levels = {load: list(group)
                       for load, group in groupby(sorted(subs, key=by_load), key=by_load)}
        self.keys = list(self.levels)

    def prefix(self, count: int) -> list[int]:
        """The first `count` members in (load, number) order (all of them if fewer)."""
        out: list[int] = []
        levels = self.levels
        for load in self.keys:
            level = levels[load]
            if len(out) + len(level) >= count:
                out += level[:count - len(out)]
                break
            out += level
        return out

    def advance(self, touched: list[int], loads: list[int], one_level: bool) -> None:
        """`touched`, the first members in ladder order, now have the loads in `loads`;
        `one_level`: they all came from the lowest level and went one up (so they are
        still in number order and share one load)."""
        if not touched:
            return
        keys, levels = self.keys, self.levels
        left = len(touched)
        emptied = 0
        for load in keys:
            level = levels[load]
            if len(level) > left:
                del level[:left]
                break
            del levels[load]
            emptied += 1
            left -= len(level)
            if left == 0:
                break
        del keys[:emptied]
        by_load = loads.__getitem__
        groups = ([(by_load(touched[0]), touched)] if one_level else
                  [(load, sorted(group))
                   for load, group in groupby(sorted(touched, key=by_load), key=by_load)])
        for load, group in groups:
            level = levels.get(load)
            if level is None:
                levels[load] = list(group)
                insort(keys, load)
            else:
                # Often every newcomer has a higher number than the level's members (the
                # level fills in number order): then appending keeps the order.
                fits = level[-1] < group[0]
                level += group
                if not fits:
                    level.sort()


def _water_fill(order: list[int], loads: list[int],
                count: int) -> list[tuple[list[int], int, int]]:
    """Rounds (members, first item, level) dealing `count` items, one per member of a round,
    to the members of `order` (sorted by load, then number) as Kafka's least loaded walk
    does: a round covers the members whose initial load the round's level has reached, and
    each of them is at that level when the round starts (one item takes it a level up).
    Only members inside the rounds gain, so the loads read past them are the initial ones."""
    rounds: list[tuple[list[int], int, int]] = []
    n = len(order)
    by_load = loads.__getitem__
    level = by_load(order[0]) - 1
    reach = 0
    at = 0
    while at < count:
        level += 1
        # A round never needs more members than items are left: the walk stops growing
        # the range there (the round is the last one anyway). Past `reach` every load is
        # at least `level`, so the members at `level` are those up to the first above it.
        left = count - at
        reach = bisect_right(order, level, reach, max(reach, min(n, left)), key=by_load)
        take = min(reach, left)
        rounds.append((order[:take], at, level))
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
