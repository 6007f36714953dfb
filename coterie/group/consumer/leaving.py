"""Members going: a leave (member epoch -1), a static member's temporary leave (-2), and
fencing (no heartbeat within the session, partitions not revoked in time, a classic member's
LeaveGroup or expired join).

Leaving or fenced, a member is removed (`removal`): tombstones for its assignment, target and
metadata, its timers cancelled, the regexes only it subscribed with dropped, and one group
epoch bump for the lot, so the next heartbeat computes a target without it. Its partitions
are free at once (the records release them): a member that left, or that the coordinator
stopped hearing from, is not using them any more.

Epoch -2 (static members only, `static_leave`) keeps the member and its partitions at epoch
-2, which nobody else gets, until it rejoins under the same instance id
(`membership.static_member`) or its session expires (then it is fenced like any other).

Each function decides only: it returns a `Result` whose records the coordinator applies.
"""

from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from coterie.group.consumer.changes import (
    assignment_record,
    epoch_record,
    member_tombstones,
    regex_tombstone,
)
from coterie.group.consumer.deadlines import cancel_timers, revocation_key
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.member import STATIC_LEAVE_EPOCH, ConsumerMember, MemberState
from coterie.group.consumer.messages import ConsumerHeartbeatResponse
from coterie.group.records.consumer import NO_PARTITIONS
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.topic_image import TopicImage


def static_leave(group: ConsumerGroup, member: ConsumerMember) -> Result:
    """The member will be back (a restart): it keeps its partitions, which nobody else
    gets, until it rejoins with its instance id or its session runs out. What it was
    revoking is free at once: it is not using anything while away."""
    away = replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation=NO_PARTITIONS)
    records = [assignment_record(group.group_id, away)]
    timers = []
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        timers.append(TimerOp(revocation_key(group.group_id, member), None))
    return Result(ConsumerHeartbeatResponse(
        ErrorCode.none, member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH),
        records=records, timers=timers)


def removal(group: ConsumerGroup, members: list[ConsumerMember], image: TopicImage) -> Result:
    """Remove members (tombstones for each, their timers cancelled, the regexes nobody else
    uses dropped) and bump the group epoch once, with the hash of the topics the rest
    subscribe to."""
    gid = group.group_id
    records: list[Record] = []
    timers: list[TimerOp] = []
    for member in members:
        records += member_tombstones(gid, member.member_id)
        timers += cancel_timers(gid, member)
    regexes = dict(group.resolved_regexes)
    for regex in sorted({m.subscribed_topic_regex for m in members} - {None}):
        assert regex is not None
        if regex in regexes and group.regex_users_after(regex, members) <= 0:
            del regexes[regex]
            records.append(regex_tombstone(gid, regex))
    topics = group.subscribed_topics_after(members, (), regexes)
    records.append(epoch_record(gid, group.group_epoch + 1, image.metadata_hash(topics)))
    return Result(records=records, timers=timers)
