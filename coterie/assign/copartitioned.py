"""Co-partitioned assignment: partition k of every joined topic goes to one member (seed 1's
co-partitioning, for joins: records with the same key land in the same partition number of
each topic, so the member that owns number k sees both sides of the join).

Theory of operation. Topics are grouped by their exact set of subscribers; topics in one group
are co-partitioned with each other. Within a group, partition number k is one unit: the k-th
partition of every topic of the group that has one. Units are the items that
`coterie.assign.placement` places with one copy each: a member keeps the units it owned
(a member owning any partition of a unit claims it; best claim first: highest generation,
then member order), new units go to the least-loaded subscriber, and units move from members
two or more above others until no such move is possible. Load is counted in units, i.e.
partition numbers.

Topics with unequal partition counts are not an error: a group with counts 4 and 6 has six
units, the last two holding one partition each. Members subscribing to different topic sets
just make more groups; a topic is co-partitioned only with the topics that have exactly its
subscribers.

Guarantees:
  - every partition of a subscribed topic is assigned exactly once, to a subscriber;
  - within a group, partition k of every topic goes to the same member;
  - when all members subscribe to the same topics, members' unit counts differ by at most one;
  - sticky: an assignment given back as owned partitions, nothing else changed, comes out
    unchanged; with identical subscriptions, after one member leaves the others keep all
    their units, and after one joins the others only give units to the newcomer;
  - the result depends only on the spec.
Eager, not cooperative.
"""

from __future__ import annotations

from coterie.assign.order import ordered_members
from coterie.assign.placement import place
from coterie.assign.spec import (
    AssignmentSpec,
    GroupAssignment,
    MemberAssignment,
    TopicPartition,
    subscribers,
)

Unit = tuple[int, int]
"""(group index, partition number)."""


class CopartitionedAssignor:
    """Same partition numbers of topics with the same subscribers to one member."""

    name = "copartitioned"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        order = ordered_members(spec)
        rank = {mid: i for i, mid in enumerate(order)}
        by_subscribers: dict[frozenset[str], list[str]] = {}
        for topic, mids in subscribers(spec).items():
            if spec.topics[topic].partitions > 0:
                by_subscribers.setdefault(frozenset(mids), []).append(topic)
        groups = sorted((sorted(topics), sorted(mids, key=rank.__getitem__))
                        for mids, topics in by_subscribers.items())

        units: list[Unit] = []
        eligible: dict[Unit, list[str]] = {}
        members_of: dict[Unit, list[TopicPartition]] = {}
        unit_of: dict[TopicPartition, Unit] = {}
        for g, (topics, mids) in enumerate(groups):
            width = max(spec.topics[t].partitions for t in topics)
            for k in range(width):
                unit = (g, k)
                units.append(unit)
                eligible[unit] = mids
                members_of[unit] = [(t, k) for t in topics if k < spec.topics[t].partitions]
                unit_of.update((tp, unit) for tp in members_of[unit])

        claims: dict[Unit, list[str]] = {}
        for mid in sorted(order, key=lambda m: (-spec.members[m].generation, rank[m])):
            for unit in {unit_of[tp] for tp in spec.members[mid].owned if tp in unit_of}:
                claims.setdefault(unit, []).append(mid)
        held = place(units, eligible, dict.fromkeys(units, 1), claims, rank)
        return GroupAssignment({
            mid: MemberAssignment(frozenset(tp for unit in held[mid] for tp in members_of[unit]))
            for mid in spec.members})
