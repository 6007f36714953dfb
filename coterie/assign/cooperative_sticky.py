"""The `cooperative-sticky` assignor (KIP-429), compatible with Java's CooperativeStickyAssignor
and librdkafka's `cooperative-sticky`.

Guarantees: every guarantee of `sticky` (see coterie.assign.sticky) for the *target*
assignment, plus the incremental protocol's rule:
- a member is never given a partition that a different member claims to own, unless the
  member itself owns it by right: it claims it too, from a strictly higher generation than
  every other claimant (a stale claim from an older generation does not make the current
  owner let go; this is Java's rule too). A partition claimed by two members of the same
  highest generation is withheld from everyone. A withheld partition is left out of this
  round: its claimants are not given it, so they revoke it and rejoin, and the follow-up
  rebalance (where nobody owns it) hands it to its target. With identical subscriptions and
  no racks the follow-up round revokes nothing else, so two rounds complete any change;
- a member keeps every partition it owns by right that is still in its target, so members
  only pause the partitions that actually move.

Claims are what the member says it owns *now*: `MemberSpec.owned` (the subscription's
owned-partitions field of KIP-429, or a KIP-848 member's current assignment). Unlike `sticky`,
an empty `owned` is taken at its word and the user data is not read for partitions, because a
cooperative member that lost its partitions sends an empty list while librdkafka's user data
still lists its previous assignment (Java's CooperativeStickyAssignor does the same). The
generation is `MemberSpec.generation` (subscription v2+), else the one in the user data:
Java's int32 or the sticky layout librdkafka sends.
"""

from __future__ import annotations

from collections.abc import Iterable

from coterie.assign.spec import (
    NO_GENERATION,
    AssignmentSpec,
    AssignorError,
    GroupAssignment,
    MemberSpec,
    TopicPartition,
)
from coterie.assign.sticky import to_group_assignment
from coterie.assign.sticky_core import Claim, sticky_plan
from coterie.assign.sticky_userdata import decode_user_data, encode_cooperative_user_data

_SHARED = object()
"""Marker for a partition that two or more members claim."""


def cooperative_subscription_user_data(generation: int) -> bytes:
    """The user data a `cooperative-sticky` member sends: its generation as one int32, as the
    Java client does (owned partitions travel in the subscription itself)."""
    return encode_cooperative_user_data(generation)


def cooperative_claim(member: MemberSpec) -> Claim:
    """What a cooperative member claims: its `owned`, with `generation` or the user data's."""
    generation = member.generation
    if generation == NO_GENERATION and member.metadata:
        try:
            generation = decode_user_data(member.metadata).generation
        except AssignorError:
            generation = NO_GENERATION
    return Claim(member.owned, generation)


class CooperativeStickyAssignor:
    """Sticky placement, minus partitions another member has yet to revoke."""

    name = "cooperative-sticky"
    cooperative = True

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        claims = {m: cooperative_claim(member) for m, member in spec.members.items()}
        plan = sticky_plan(spec, claims)
        targets, winners = plan.targets, plan.winners
        holder: dict[TopicPartition, object] = {}
        for m, claim in claims.items():
            for tp in claim.owned:
                holder[tp] = m if holder.get(tp, m) == m else _SHARED
        if holder:
            for m, partitions in targets.items():
                targets[m] = [tp for tp in partitions
                              if holder.get(tp, m) == m or winners.get(tp) == m]
        return to_group_assignment(spec, targets)

    def subscription_user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes:
        """See `cooperative_subscription_user_data` (`owned` is not part of it)."""
        return cooperative_subscription_user_data(generation)
