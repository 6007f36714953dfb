"""The `sticky` assignor (KIP-54, eager protocol), compatible with Java's StickyAssignor.

Guarantees (for every spec):
- every partition of a topic with at least one subscriber is assigned to exactly one member,
  and only to a member subscribed to its topic; partitions of topics nobody subscribes to,
  and topics missing from the spec, are assigned to no one;
- balance: with identical subscriptions every member gets floor(P/M) or ceil(P/M) partitions
  (within one of each other); with different subscriptions no partition's holder has two or
  more partitions more than another subscriber of its topic (Kafka's guarantee);
- stickiness, after balance (and, with identical subscriptions, after rack alignment): when
  nothing changed since its own last assignment nothing moves (with rack-aware assignment on
  and identical subscriptions a partition may still move, but only onto its rack); with
  identical subscriptions each member keeps as many of its claimed partitions as its quota
  allows and the members claiming the most keep the most, so from its own last assignment
  (without racks) one join moves only the partitions the new member receives, and one leave
  only the leaver's partitions;
- claims are per partition: the highest generation wins, and a partition claimed by two
  members of the same (highest) generation is reassigned from scratch;
- rack-aware (KIP-881) when members and replicas carry racks, without giving up balance;
- deterministic: the same spec gives the same assignment in every process.

Eager means members revoke everything before rejoining, so this assignor may hand a member a
partition another member claimed: nobody still holds it. Claims come from `MemberSpec.owned`
(KIP-848, or a classic subscription's owned partitions) when non-empty, else from the sticky
user data in `MemberSpec.metadata` (the classic eager protocol, see sticky_userdata). User data
that does not decode counts as no claim, as in Java, so one odd member cannot stop the group.
The assignment carries no user data: in the classic protocol the member itself reports what it
owns in its next subscription, built with `subscription_user_data`.

The algorithm is in sticky_core.
"""

from __future__ import annotations

from collections.abc import Iterable

from coterie.assign.spec import (
    NO_GENERATION,
    AssignmentSpec,
    AssignorError,
    GroupAssignment,
    MemberAssignment,
    MemberSpec,
    TopicPartition,
)
from coterie.assign.sticky_core import Claim, sticky_plan
from coterie.assign.sticky_userdata import decode_user_data, encode_sticky_user_data


def subscription_user_data(owned: Iterable[TopicPartition], generation: int) -> bytes:
    """The user data a `sticky` member puts in its subscription after it was assigned `owned`
    in `generation` (Java's StickyAssignorUserData version 1 layout). Before its first
    assignment a member sends none (empty bytes), as Java does."""
    return encode_sticky_user_data(owned, generation)


def eager_claim(member: MemberSpec) -> Claim:
    """What a sticky member claims: `owned` if given (with `generation`, or the user data's
    generation when the spec has none), else its sticky user data."""
    decoded = None
    if member.metadata:
        try:
            decoded = decode_user_data(member.metadata)
        except AssignorError:
            decoded = None
    if member.owned:
        generation = member.generation
        if generation == NO_GENERATION and decoded is not None:
            generation = decoded.generation
        return Claim(member.owned, generation)
    if decoded is None:
        return Claim(frozenset(), member.generation)
    generation = decoded.generation
    if generation == NO_GENERATION:
        generation = member.generation
    return Claim(decoded.owned, generation)


def to_group_assignment(spec: AssignmentSpec,
                        targets: dict[str, list[TopicPartition]]) -> GroupAssignment:
    """Wrap per-member partition lists in the spec's result type (no assignment metadata)."""
    return GroupAssignment({m: MemberAssignment(frozenset(targets.get(m, ())))
                            for m in spec.members})


class StickyAssignor:
    """Kafka's `sticky` assignor: balanced first, then as sticky as balance allows."""

    name = "sticky"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        claims = {m: eager_claim(member) for m, member in spec.members.items()}
        return to_group_assignment(spec, sticky_plan(spec, claims).targets)

    def subscription_user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes:
        """See the module-level `subscription_user_data`."""
        return subscription_user_data(owned, generation)
