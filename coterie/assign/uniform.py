"""Kafka's server-side `uniform` assignor (KIP-848), the default assignor of consumer groups.

The KIP-848 coordinator runs the assignor whenever the group epoch moves past the target
assignment epoch. Each member's `owned` is then its current *target* (the previous output of
this assignor), and the answer becomes the new target; the coordinator, not the assignor,
revokes partitions from members before others get them. So the assignor may move a partition
straight from one member to another, and it is judged on two things, in this order:
balance, then stickiness (move as little as possible of the previous target).

Theory of operation. Only topics that exist (are in `spec.topics`) count; a member's other
subscriptions contribute nothing. If every member subscribes to the same existing topics the
group is *homogeneous* and `uniform_homogeneous` computes exact shares (balance within one,
minimal movement); otherwise `uniform_heterogeneous` keeps what is still subscribed, hands
out the rest topic by topic to the least loaded subscribers and runs Kafka's bounded
balancing passes. Members are in member id order (Kafka takes its group spec's iteration
order; its own tests sort member ids). Racks are ignored: Kafka 4.2's uniform assignor never
reads partition racks either (a rack-aware variant is still a proposal there, KAFKA-19909).

Kafka identifies topics by id and breaks ties between topics by id; coterie's specs carry
names, so ties are broken by name. Member ids, subscriptions, topic names, partition counts,
owned partitions and (for partitions claimed twice) generations fully determine the result:
sets are only used for membership, never iterated into the answer.

Guarantees: every partition of a subscribed, existing topic is assigned exactly once, only to
a subscriber; homogeneous groups are balanced within one and move the fewest partitions
balance allows; a member whose target does not change gets its `owned` frozenset object back;
feeding the answer back as `owned` with nothing else changed gives the same answer (for
heterogeneous groups: when the balancing passes settled, see `uniform_heterogeneous`, which
also states what balance they reach).
"""

from __future__ import annotations

from coterie.assign.spec import (
    AssignmentSpec,
    GroupAssignment,
    MemberAssignment,
    TopicPartition,
)
from coterie.assign.uniform_heterogeneous import assign_heterogeneous
from coterie.assign.uniform_homogeneous import assign_homogeneous


class UniformAssignor:
    """Kafka's `uniform` server assignor (module docstring has the rules).

    `cooperative` is False: the assignor is sticky, but it does not promise KIP-429's rule
    that a partition still owned by one member is never given to another. In KIP-848 that
    rule is not the assignor's job: the coordinator computes a target and reconciles each
    member towards it, revoking before it assigns.
    """

    name = "uniform"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        members = spec.members
        if not members:
            return GroupAssignment({})
        member_ids = sorted(members)
        ordered = [members[mid] for mid in member_ids]
        owned = [m.owned for m in ordered]
        generations = [m.generation for m in ordered]
        effective: dict[frozenset[str], frozenset[str]] = {}
        subscriptions = []
        for m in ordered:
            subs = effective.get(m.subscribed_topics)
            if subs is None:
                subs = effective[m.subscribed_topics] = _existing(m.subscribed_topics, spec)
            subscriptions.append(subs)
        distinct = set(effective.values())
        targets: list[frozenset[TopicPartition]]
        if len(distinct) == 1:
            shape = tuple((t, spec.topics[t].partitions) for t in sorted(distinct.pop()))
            targets = assign_homogeneous(shape, owned, generations)
        else:
            counts = {t: spec.topics[t].partitions for subs in distinct for t in subs}
            targets = assign_heterogeneous(counts, subscriptions, owned, generations)
        return GroupAssignment({mid: MemberAssignment(t)
                                for mid, t in zip(member_ids, targets, strict=True)})


def _existing(topics: frozenset[str], spec: AssignmentSpec) -> frozenset[str]:
    """The topics of `topics` that exist and have partitions."""
    known = spec.topics
    if all(t in known and known[t].partitions > 0 for t in topics):
        return topics
    return frozenset(t for t in topics if t in known and known[t].partitions > 0)
