"""Replicated assignment: every partition to R distinct members (seed 1's "redundant
partitioning", for search indexers that keep several copies of each partition's index).

Theory of operation. Each partition of each subscribed, existing topic is an item that needs
R holders among its topic's subscribers; `coterie.assign.placement` keeps the copies members
already own (best claim first: highest generation, then member order), fills missing copies
onto the least-loaded subscribers, and moves copies from members two or more above others
until no such move is possible.

Guarantees:
  - every partition of a subscribed topic goes to exactly R distinct members, all subscribed
    to its topic;
  - when all members subscribe to the same topics, members' copy counts differ by at most one;
  - sticky: with owned partitions in the spec (the KIP-848 coordinator always passes them;
    classic members pass their owned partitions), an assignment given back unchanged comes
    out unchanged; with identical subscriptions, after one member joins the others only give
    copies to the newcomer, and after one leaves the others lose at most as many copies as
    the leaver held (none when R is 1);
  - the result depends only on the spec (members without owned partitions: member order).
A topic with fewer than R subscribers is an AssignorError by default: silently running with
fewer copies than configured would hide lost redundancy. With `allow_fewer=True` such a topic
is instead given to all its subscribers (every partition at most once per member).
The assignor is eager: it may hand a member a copy another member is asked to give up.
"""

from __future__ import annotations

from coterie.assign.order import ordered_members
from coterie.assign.placement import place
from coterie.assign.spec import (
    AssignmentSpec,
    AssignorError,
    GroupAssignment,
    MemberAssignment,
    TopicPartition,
    subscribers,
)


class ReplicatedAssignor:
    """Each partition to `replicas` distinct subscribers (module docstring has the rules)."""

    name = "replicated"
    cooperative = False

    def __init__(self, replicas: int = 2, *, allow_fewer: bool = False) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {replicas}")
        self.replicas = replicas
        self.allow_fewer = allow_fewer

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        order = ordered_members(spec)
        rank = {mid: i for i, mid in enumerate(order)}
        subs = {topic: sorted(mids, key=rank.__getitem__)
                for topic, mids in subscribers(spec).items()}
        items: list[TopicPartition] = []
        eligible: dict[TopicPartition, list[str]] = {}
        copies: dict[TopicPartition, int] = {}
        for topic in sorted(subs):
            if spec.topics[topic].partitions == 0:
                continue
            if len(subs[topic]) < self.replicas and not self.allow_fewer:
                raise AssignorError(
                    f"topic {topic!r} has {len(subs[topic])} subscriber(s), "
                    f"fewer than the {self.replicas} replicas asked for")
            n = min(self.replicas, len(subs[topic]))
            for p in range(spec.topics[topic].partitions):
                items.append((topic, p))
                eligible[(topic, p)] = subs[topic]
                copies[(topic, p)] = n
        claims: dict[TopicPartition, list[str]] = {}
        best_first = sorted(order, key=lambda mid: (-spec.members[mid].generation, rank[mid]))
        for mid in best_first:
            for tp in spec.members[mid].owned:
                if tp in copies:
                    claims.setdefault(tp, []).append(mid)
        held = place(items, eligible, copies, claims, rank)
        return GroupAssignment({mid: MemberAssignment(frozenset(held[mid]))
                                for mid in spec.members})
