"""Kafka's round-robin assignor, answer for answer the same as the Java client's and
kafka-python's `roundrobin`.

Theory of operation. Members are laid out in member order (`coterie.assign.order`: static
members by instance id, then dynamic members by member id) and treated as a ring. Every
partition of every subscribed, existing topic is laid out sorted by topic name, then index.
Each partition goes to the next member of the ring that subscribes to its topic; members that
do not are skipped, and the ring position moves past the member that took the partition.

Guarantees: every partition of a topic with at least one subscriber is assigned exactly once,
only to a subscriber; the result depends only on the spec. When every member subscribes to
the same topics the members' partition counts differ by at most one; with different
subscriptions there is no balance promise (members are skipped, not compensated). Eager, and
owned partitions are ignored, as in Kafka.
"""

from __future__ import annotations

from coterie.assign.order import ordered_members
from coterie.assign.spec import AssignmentSpec, GroupAssignment, MemberAssignment, TopicPartition


class RoundRobinAssignor:
    """Kafka's `roundrobin` strategy (module docstring has the rules)."""

    name = "roundrobin"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        ring = ordered_members(spec)
        subscribed = [spec.members[mid].subscribed_topics for mid in ring]
        out: dict[str, set[TopicPartition]] = {mid: set() for mid in spec.members}
        topics = sorted({t for topics in subscribed for t in topics if t in spec.topics})
        pos = 0
        for topic in topics:
            for p in range(spec.topics[topic].partitions):
                # A subscriber exists (the topic came from someone's subscription), so the
                # scan ends within one turn of the ring.
                while topic not in subscribed[pos]:
                    pos = (pos + 1) % len(ring)
                out[ring[pos]].add((topic, p))
                pos = (pos + 1) % len(ring)
        return GroupAssignment({mid: MemberAssignment(frozenset(tps))
                                for mid, tps in out.items()})
