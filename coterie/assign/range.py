"""Kafka's range assignor, rack-aware as in KIP-881, so a coterie leader agrees with Java,
librdkafka and kafka-python leaders on the same group.

Theory of operation. Each topic is assigned on its own. Its subscribers are laid out in
member order (`coterie.assign.order`: static members by instance id, then dynamic members by
member id) and its partitions in index order; with P partitions and C subscribers the first
P % C subscribers take P // C + 1 consecutive partitions and the rest take P // C.

Rack awareness (KIP-881) applies when some subscriber of some topic has a rack, those racks
meet the partitions' replica racks, and the partitions do not all sit on the same racks (else
the answer would not change). Then, before the plain ranges:
  - topics with the same subscribers (and racks) and the same partition count are
    co-partitioned: partition k of all of them goes to the first subscriber (in member order)
    whose rack holds partition k of every one of them and who is still under its quota;
  - any other topic that needs it gives each subscriber, in member order, up to its quota of
    the partitions on its rack, lowest index first;
  - the plain pass then gives each subscriber, in order, up to its quota of what is left.
A member without a rack matches every partition. Quotas are the plain range quotas (P // C,
plus one for as many members as P % C allows), so rack awareness never costs balance.
Without rack information the result is exactly plain range.

Guarantees: every partition of a topic with at least one subscriber is assigned exactly once,
only to a subscriber; per topic the subscribers' counts differ by at most one (the group as a
whole can be unbalanced: the first members get the extra partition of every topic); topics
with equal partition counts and the same subscribers are co-partitioned when no rack
information applies; the result depends only on the spec. Range is eager (not cooperative)
and ignores owned partitions, as Kafka's does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from coterie.assign.order import ordered_members
from coterie.assign.spec import (
    AssignmentSpec,
    GroupAssignment,
    MemberAssignment,
    TopicPartition,
    TopicSpec,
)


class RangeAssignor:
    """Kafka's `range` strategy (module docstring has the rules)."""

    name = "range"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        per_topic = _subscribers_in_order(spec)
        out: dict[str, set[TopicPartition]] = {mid: set() for mid in spec.members}
        racks = {mid: m.rack for mid, m in spec.members.items() if m.rack}
        states = ([_TopicState(spec.topics[t], subs, racks) for t, subs in per_topic.items()]
                  if racks else [])
        if any(s.needs_rack for s in states):
            _assign_rack_aware(states, out)
        else:
            for topic, subs in per_topic.items():
                _plain_ranges(topic, spec.topics[topic].partitions, subs, out)
        return GroupAssignment({mid: MemberAssignment(frozenset(tps))
                                for mid, tps in out.items()})


def _subscribers_in_order(spec: AssignmentSpec) -> dict[str, list[str]]:
    """Topic -> its subscribers in member order, for existing topics with partitions."""
    per_topic: dict[str, list[str]] = {}
    topics = spec.topics
    order = ordered_members(spec)
    distinct = {spec.members[mid].subscribed_topics for mid in order}
    if len(distinct) == 1:
        # Everyone subscribes to the same topics (the common case): one shared list.
        return {t: order for t in distinct.pop() if t in topics and topics[t].partitions > 0}
    for mid in order:
        for topic in spec.members[mid].subscribed_topics:
            t = topics.get(topic)
            if t is not None and t.partitions > 0:
                per_topic.setdefault(topic, []).append(mid)
    return per_topic


def _plain_ranges(topic: str, partitions: int, subs: list[str],
                  out: dict[str, set[TopicPartition]]) -> None:
    quota, extra = divmod(partitions, len(subs))
    start = 0
    for i, mid in enumerate(subs):
        length = quota + (1 if i < extra else 0)
        if length == 0:
            break
        out[mid].update((topic, p) for p in range(start, start + length))
        start += length


class _TopicState:
    """One topic's progress through the rack-aware passes: what is left and who may still
    take how many (the plain range quotas)."""

    def __init__(self, topic: TopicSpec, subs: list[str], racks: dict[str, str | None]) -> None:
        self.topic = topic.name
        self.subs = subs
        self.rack_of = {mid: racks.get(mid) for mid in subs}
        consumer_racks = {r for r in self.rack_of.values() if r}
        # Partition racks only matter when some subscriber has a rack (Kafka keeps none
        # otherwise, which also puts such topics in their own co-partitioning bucket).
        self.partition_racks: list[frozenset[str]] = (
            [topic.partition_racks.get(p, frozenset()) for p in range(topic.partitions)]
            if consumer_racks else [])
        all_racks = frozenset().union(*self.partition_racks)
        self.needs_rack = (bool(consumer_racks) and not consumer_racks.isdisjoint(all_racks)
                           and any(r != all_racks for r in self.partition_racks))
        self.bucket = (tuple(self.rack_of.items()), len(self.partition_racks))
        self.unassigned: dict[int, None] = dict.fromkeys(range(topic.partitions))
        self.count = dict.fromkeys(subs, 0)
        self.quota, self.extra = divmod(topic.partitions, len(subs))

    def racks_match(self, mid: str, p: int) -> bool:
        rack = self.rack_of[mid]
        return rack is None or rack in self.partition_racks[p]

    def max_assignable(self, mid: str) -> int:
        return max(0, self.quota + (1 if self.extra > 0 else 0) - self.count[mid])

    def give(self, mid: str, ps: list[int], out: dict[str, set[TopicPartition]]) -> None:
        out[mid].update((self.topic, p) for p in ps)
        self.count[mid] += len(ps)
        if self.count[mid] > self.quota:
            self.extra -= 1
        for p in ps:
            del self.unassigned[p]


def _assign_rack_aware(states: list[_TopicState], out: dict[str, set[TopicPartition]]) -> None:
    buckets: dict[tuple[object, ...], list[_TopicState]] = {}
    for s in states:
        buckets.setdefault(s.bucket, []).append(s)
    for (_, partitions), bucket in buckets.items():
        if len(bucket) > 1:
            _copartitioned_rack_match(bucket, partitions, out)
        elif bucket[0].needs_rack:
            _ranges(bucket[0], bucket[0].racks_match, out)
    for s in states:
        _ranges(s, None, out)


def _ranges(s: _TopicState, may: Callable[[str, int], bool] | None,
            out: dict[str, set[TopicPartition]]) -> None:
    """Each subscriber in order takes up to its quota of the remaining partitions it `may`."""
    for mid in s.subs:
        if not s.unassigned:
            return
        limit = s.max_assignable(mid)
        if limit == 0:
            continue
        candidates: Iterable[int] = s.unassigned
        if may is not None:
            candidates = (p for p in s.unassigned if may(mid, p))
        take = []
        for p in candidates:
            take.append(p)
            if len(take) == limit:
                break
        if take:
            s.give(mid, take, out)


def _copartitioned_rack_match(bucket: list[_TopicState], partitions: int,
                              out: dict[str, set[TopicPartition]]) -> None:
    """Partition k of every topic in the bucket to the first open subscriber whose rack holds
    all of them."""
    remaining = list(bucket[0].subs)
    for p in range(partitions):
        chosen = next((mid for mid in remaining
                       if all(s.racks_match(mid, p) and s.max_assignable(mid) > 0
                              for s in bucket)), None)
        if chosen is None:
            continue
        for s in bucket:
            s.give(chosen, [p], out)
        if all(s.max_assignable(chosen) == 0 for s in bucket):
            remaining.remove(chosen)
            if not remaining:
                return
