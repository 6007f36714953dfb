"""One member's step towards its target assignment (Kafka's CurrentAssignmentBuilder).

Rules. The coordinator never hands a partition to a member while another member may still
be using it ("revoke before assign"). Per heartbeat, given the member, its target (epoch and
partitions), who holds which partition, and the partitions the member says it owns:

    keep     = assigned ∩ target
    revoke   = assigned - keep
    add      = target - keep, minus partitions another member still holds

- If something must be revoked and the member (as far as it said) still owns some of it:
  UNREVOKED_PARTITIONS, at its *current* epoch, assigned = keep, pending_revocation = revoke.
  The member keeps the epoch it is at, so its offset commits stay valid while it revokes.
- Otherwise it moves to the target epoch with assigned = keep + add and nothing pending:
  UNRELEASED_PARTITIONS if some target partitions were held back, else STABLE.

The target is first cut to the topics the member subscribes to (Kafka 4.2's
subscription-consistency rule): a target computed before the member changed its
subscription (a client-side assignor's round still running, a new regex not resolved yet)
may still hold topics it has dropped, and those are revoked, never (re)assigned.

Theory of operation, per current state:
- STABLE at the target epoch: nothing to do, unless the member changed its subscription in
  this heartbeat: then the partitions of topics it no longer subscribes to are taken away
  at once (`_drop_unsubscribed`). STABLE at an older epoch: step as above.
- UNREVOKED_PARTITIONS: wait while the member still reports any pending partition (or
  reports nothing, which means "unchanged"), taking away unsubscribed topics meanwhile if
  the subscription changed; once it reports none of them, step as above from its current
  epoch (the new target may have moved meanwhile).
- UNRELEASED_PARTITIONS: step again; held-back partitions come as soon as they are free.
- UNKNOWN: only a member reporting no partitions at all may continue (it starts over at the
  target epoch); anything else is fenced.

A partition counts as "held by another member" when the partition-epoch map has it and it
is not one this member is itself giving back (Kafka 4.x: a member whose target takes back a
partition it was revoking simply keeps it).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

from coterie.group.consumer.member import ConsumerMember, MemberState
from coterie.group.records.consumer import NO_PARTITIONS, Partitions, TopicIdPartition
from coterie.group.records.partition_set import compact


class FencedMember(Exception):
    """The member must drop every partition and rejoin (FENCED_MEMBER_EPOCH)."""


Subscribed = Callable[[uuid.UUID], bool]


def reconcile(member: ConsumerMember, target_epoch: int, target: Partitions,
              partition_epochs: Mapping[TopicIdPartition, int],
              owned: Partitions | None, subscribed: Subscribed | None = None,
              subscription_changed: bool = False) -> ConsumerMember:
    """The member's next state; `owned` None means the member did not report its partitions
    in this heartbeat (unchanged since the last one it sent). `subscribed` says whether the
    member subscribes to a topic id (by name or through a resolved regex; an unresolved
    regex matches nothing); None keeps every topic of the target.
    `subscription_changed`: the member changed its topic names or its regex in this
    heartbeat. Returns `member` itself when nothing changes."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            if subscription_changed and subscribed is not None:
                return _drop_unsubscribed(member, subscribed, owned)
            return member
        return _step(member, member.member_epoch, target_epoch, target, partition_epochs, owned,
                     subscribed)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(member.pending_revocation, owned):
            if subscription_changed and subscribed is not None:
                return _drop_unsubscribed(member, subscribed, owned)
            return member
        return _step(member, member.member_epoch, target_epoch, target, partition_epochs, owned,
                     subscribed)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _step(member, member.member_epoch, target_epoch, target, partition_epochs, owned,
                     subscribed)
    if owned is None or owned:
        raise FencedMember("The consumer group member is in a unknown state. "
                           "The member must abandon all its partitions and rejoin.")
    return _step(member, target_epoch, target_epoch, target, partition_epochs, owned, subscribed)


def _subscribed_only(partitions: Partitions, subscribed: Subscribed) -> Partitions:
    """`partitions` without the topics the member does not subscribe to (the same object
    when it has none of them, the usual case)."""
    if not partitions:
        return partitions
    gone = {topic for topic in {tp[0] for tp in partitions} if not subscribed(topic)}
    if not gone:
        return partitions
    return frozenset(tp for tp in partitions if tp[0] not in gone)


def _drop_unsubscribed(member: ConsumerMember, subscribed: Subscribed,
                       owned: Partitions | None) -> ConsumerMember:
    """Kafka's updateCurrentAssignment: the member stays at its epoch; partitions of topics
    it no longer subscribes to leave its assignment and, if it may still hold them, join
    those it must revoke (UNREVOKED_PARTITIONS). Cheaper than a full step, and it does not
    wait for the target to catch up with the new subscription."""
    assigned = member.assigned
    keep = _subscribed_only(assigned, subscribed)
    if keep is assigned:
        return member
    gone = assigned - keep
    pending = member.pending_revocation | gone
    if _still_owns(pending, owned):
        return _moved(member, member.member_epoch, MemberState.UNREVOKED_PARTITIONS, keep,
                      pending)
    # Already given up (the member no longer reports them): only the assignment shrinks.
    return _moved(member, member.member_epoch, member.state, keep, member.pending_revocation)


def _still_owns(pending: Partitions, owned: Partitions | None) -> bool:
    if owned is None:
        return True
    return not pending.isdisjoint(owned)


def _step(member: ConsumerMember, epoch: int, target_epoch: int, target: Partitions,
          partition_epochs: Mapping[TopicIdPartition, int],
          owned: Partitions | None, subscribed: Subscribed | None) -> ConsumerMember:
    if subscribed is not None:
        # Only here: a member settled at its target epoch never reads its target.
        target = _subscribed_only(target, subscribed)
    current = member.assigned
    keep = current & target
    revoke = current - keep
    add = target - keep
    held_back = False
    if add:
        own_pending = member.pending_revocation
        free = frozenset(tp for tp in add
                         if tp not in partition_epochs or tp in own_pending)
        held_back = len(free) != len(add)
        add = free
    if revoke and _still_owns(revoke, owned):
        return _moved(member, epoch, MemberState.UNREVOKED_PARTITIONS, keep, revoke)
    new_state = MemberState.UNRELEASED_PARTITIONS if held_back else MemberState.STABLE
    assigned = keep | add if add else keep
    if not held_back and len(assigned) == len(target):
        # All of the target, the usual end: share the target's set (one set per member,
        # not two).
        assigned = target
    return _moved(member, target_epoch, new_state, assigned, NO_PARTITIONS)


def _moved(member: ConsumerMember, epoch: int, state: MemberState, assigned: Partitions,
           pending: Partitions) -> ConsumerMember:
    # Kafka's updateMemberEpoch: the previous epoch becomes the one the member was at, even
    # when the epoch does not move. The sets are kept until the next change: compact ones
    # (`records/partition_set.py`; the target already is one).
    new = replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                  state=state, assigned=compact(assigned), pending_revocation=compact(pending))
    return member if new == member else new
