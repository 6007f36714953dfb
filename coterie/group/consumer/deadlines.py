"""A consumer group member's deadlines: its session, and the revocation timeout that runs
while it holds partitions the target gives to others (KIP-848: the member must revoke them
within its rebalance timeout, or be fenced).

Timers are not persisted: after a restart (`timers_after_load`) every member gets a full
session again, and a member still asked to revoke a full rebalance timeout.

Classic-protocol members of a mixed group (`mixed/classic_members.py`) use the session key
with their own JoinGroup session timeout, have no revocation timer (they revoke by
rejoining), and have CONSUMER_JOIN and CONSUMER_SYNC (group, member) timers instead;
`cancel_timers` cancels those too when such a member is removed."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.member import ConsumerMember, MemberState
from coterie.group.result import TimerOp
from coterie.group.timers import TimerKey


def session_timer(group_id: str, member_id: str, now_ms: int, default_timeout_ms: int,
                  member: ConsumerMember | None = None) -> TimerOp:
    """The session deadline: group.consumer.session.timeout.ms, or for a classic member the
    session timeout of its last JoinGroup."""
    timeout = default_timeout_ms
    if member is not None and member.classic is not None:
        timeout = member.classic.session_timeout_ms
    return TimerOp(TimerKey(ConsumerTimer.CONSUMER_SESSION, group_id, member_id), now_ms + timeout)


def cancel_timers(group_id: str, member: ConsumerMember) -> list[TimerOp]:
    """Every deadline the member may have armed, cancelled (it left or was fenced)."""
    mid = member.member_id
    ops = [TimerOp(TimerKey(ConsumerTimer.CONSUMER_SESSION, group_id, mid), None)]
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        ops.append(TimerOp(revocation_key(group_id, member), None))
    if member.uses_classic_protocol:
        ops += [TimerOp(TimerKey(ConsumerTimer.CONSUMER_JOIN, group_id, mid), None),
                TimerOp(TimerKey(ConsumerTimer.CONSUMER_SYNC, group_id, mid), None)]
    return ops


def revocation_key(group_id: str, member: ConsumerMember) -> TimerKey:
    return TimerKey(ConsumerTimer.CONSUMER_REVOCATION, group_id, member.member_id,
                    member.member_epoch)


def revocation_timers(group_id: str, before: ConsumerMember, after: ConsumerMember,
                       now_ms: int) -> list[TimerOp]:
    """Arm the revocation timer whenever the member (still or newly) has partitions to give
    back, cancel it once it has none."""
    ops = []
    unrevoked = MemberState.UNREVOKED_PARTITIONS
    if before.state is unrevoked and (after.state is not unrevoked
                                      or after.member_epoch != before.member_epoch):
        ops.append(TimerOp(revocation_key(group_id, before), None))
    if after.state is unrevoked:
        ops.append(TimerOp(revocation_key(group_id, after),
                           now_ms + max(after.rebalance_timeout_ms, 0)))
    return ops


def timers_after_load(groups: Iterable[ConsumerGroup], session_timeout_ms: Callable[[str], int],
                      now_ms: int) -> list[TimerOp]:
    """Deadlines to arm once loading finishes: every member must heartbeat again within
    its session (`session_timeout_ms(group_id)`: the group's own setting or the broker's),
    and members asked to revoke must still do so in time."""
    ops = []
    for group in groups:
        timeout = session_timeout_ms(group.group_id)
        for m in group.members.values():
            ops.append(session_timer(group.group_id, m.member_id, now_ms, timeout, m))
            if m.state is MemberState.UNREVOKED_PARTITIONS and not m.uses_classic_protocol:
                ops.append(TimerOp(revocation_key(group.group_id, m),
                                   now_ms + max(m.rebalance_timeout_ms, 0)))
    return ops
