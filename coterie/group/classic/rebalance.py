"""The join phase of a classic group: how it starts, when it ends, and the record it ends with.

A join phase (PreparingRebalance) starts when a member joins, rejoins with new metadata or
goes, or the leader rejoins: the group's durable membership is copied into a draft
(`coterie.group.classic.live.JoinPhase`), which the phase's joins and leaves change. It ends
when every member has rejoined (`maybe_complete_join`), or at the rebalance timeout, or, out
of Empty, when the initial rebalance delay runs out (the JOIN timer, `timers.py`). Its end
(`complete_join`) drops the members that did not rejoin, bumps the generation, chooses the
protocol and the leader, and writes the group's record, which is then replayed: the new
generation is durable, CompletingRebalance (or Empty, if nobody is left), and the parked
JoinGroups are answered from it.

Shared by the other phases: the session timer, a parked join, a member updated from its
JoinGroup, and the answer a member gets for the current generation.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.live import JoinPhase
from coterie.group.classic.membership import ClassicMember, ClassicState, Membership
from coterie.group.classic.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    JoinMember,
    SyncGroupResponse,
)
from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey

S = ClassicState


# == shared ===================================================================================
def session_timer(group_id: str, member: ClassicMember, now_ms: int) -> TimerOp:
    return TimerOp(TimerKey(ClassicTimer.SESSION, group_id, member.member_id),
                   now_ms + member.session_timeout_ms)


def no_session_timer(group_id: str, member_id: str) -> TimerOp:
    return TimerOp(TimerKey(ClassicTimer.SESSION, group_id, member_id), None)


def write(group: ClassicGroup, value: GroupMetadataValue, result: Result,
          known: dict[str, ClassicMember] | None = None) -> None:
    """The group's record goes into `result` and is replayed (`ClassicGroup.apply`)."""
    result.records.append(Record(GroupMetadataKey(group.group_id), value))
    group.apply(value, known)


def update_member(membership: Membership, member_id: str, req: JoinGroupRequest) -> None:
    """The member as its JoinGroup describes it now."""
    member = membership.members[member_id]
    membership.update(member_id, protocols=req.protocols,
                      session_timeout_ms=req.session_timeout_ms,
                      rebalance_timeout_ms=req.rebalance_timeout_ms,
                      client_id=req.client_id or member.client_id,
                      client_host=req.client_host or member.client_host)


def park_join(group: ClassicGroup, member_id: str, req: JoinGroupRequest,
              result: Result) -> None:
    joins = group.live.joins
    old = joins.get(member_id)
    if old is not None and old != req.token:
        # The client gave up on its earlier JoinGroup and sent another: the old one is
        # answered so the connection is not left hanging.
        result.completed.append((old, JoinGroupResponse(ErrorCode.rebalance_in_progress,
                                                        member_id=member_id)))
    joins[member_id] = req.token
    # A member with a parked request is alive: its session timer stops until it is
    # answered (and is re-armed with the answer).
    result.timers.append(no_session_timer(group.group_id, member_id))


def join_response(group: ClassicGroup, member_id: str) -> JoinGroupResponse:
    """The answer for the current generation: the leader also gets every member's
    metadata for the chosen protocol."""
    view = group.view
    members: tuple[JoinMember, ...] = ()
    if member_id == view.leader:
        members = tuple(JoinMember(m.member_id, m.group_instance_id,
                                   m.metadata_for(view.protocol))
                        for m in view.members.values())
    return JoinGroupResponse(
        ErrorCode.none, generation_id=view.generation, protocol_type=view.protocol_type,
        protocol_name=view.protocol, leader=view.leader or "", member_id=member_id,
        members=members,
    )


# == the start ================================================================================
def start_join_phase(group: ClassicGroup, now_ms: int, why: str) -> Result:
    """Leave Empty, Stable or CompletingRebalance for a join phase: a draft of the durable
    membership, PreparingRebalance. A CompletingRebalance's generation is void: whoever
    waits for it is told to rejoin. The caller changes the draft (adds, removes, updates
    the member the phase is for), then `arm_join_phase`."""
    result = Result()
    live = group.live
    was = group.state
    if was is S.COMPLETING_REBALANCE:
        result.completed += [(token, SyncGroupResponse(ErrorCode.rebalance_in_progress))
                             for token in live.syncs.values()]
        live.syncs.clear()
        live.pending_sync.clear()
        result.timers.append(TimerOp(TimerKey(ClassicTimer.SYNC, group.group_id), None))
    draft = group.durable.draft()
    draft.state = was  # (Stable even when the record alone would say CompletingRebalance)
    draft.transition(group.group_id, S.PREPARING_REBALANCE, now_ms, why)
    live.join_phase = JoinPhase(draft, from_empty=was is S.EMPTY)
    live.assigned = False
    return result


def arm_join_phase(group: ClassicGroup, config: ClassicConfig, now_ms: int) -> Result:
    """The timer that ends the phase, once its draft holds the members it starts with."""
    phase = group.live.join_phase
    assert phase is not None
    draft = phase.draft
    if phase.from_empty:
        # The first rebalance out of Empty always ends on the join timer, never inside
        # the JoinGroup that starts it, even with a 0 ms delay (Kafka schedules it too):
        # the timer fires on a later turn of the broker's loop, so JoinGroups already
        # read by then join this generation instead of forcing a second one.
        delay = min(config.initial_rebalance_delay_ms, draft.max_rebalance_timeout_ms())
        phase.initial_deadline = now_ms + draft.max_rebalance_timeout_ms()
        return Result(timers=[TimerOp(TimerKey(ClassicTimer.JOIN, group.group_id),
                                      now_ms + delay)])
    result = Result(timers=[TimerOp(TimerKey(ClassicTimer.JOIN, group.group_id),
                                    now_ms + draft.max_rebalance_timeout_ms())])
    result.merge(maybe_complete_join(group, now_ms))
    return result


def join_into_phase(group: ClassicGroup, config: ClassicConfig, req: JoinGroupRequest,
                    member_id: str, change: Callable[[Membership], object], now_ms: int,
                    why: str, result: Result) -> Result:
    """A JoinGroup that takes part in the group's join phase, starting one (for `why`) if
    none runs: `change` makes the draft hold the member as its request describes it, the
    request parks, and the phase is armed, or, already running, may now complete."""
    starting = group.live.join_phase is None
    if starting:
        result.merge(start_join_phase(group, now_ms, why))
    change(group.view)
    park_join(group, member_id, req, result)
    result.merge(arm_join_phase(group, config, now_ms) if starting
                 else maybe_complete_join(group, now_ms))
    return result


def prepare_rebalance(group: ClassicGroup, config: ClassicConfig, now_ms: int,
                      why: str) -> Result:
    """A join phase that starts with the members the group has."""
    result = start_join_phase(group, now_ms, why)
    result.merge(arm_join_phase(group, config, now_ms))
    return result


# == the end ==================================================================================
def all_joined(group: ClassicGroup) -> bool:
    live = group.live
    return not live.pending_members and all(mid in live.joins for mid in group.members)


def maybe_complete_join(group: ClassicGroup, now_ms: int) -> Result:
    phase = group.live.join_phase
    if phase is None or not all_joined(group):
        return Result()
    if phase.initial_deadline is not None:
        return Result()  # the initial delay decides when this join phase ends
    return complete_join(group, now_ms)


def complete_join(group: ClassicGroup, now_ms: int) -> Result:
    """End the join phase (module docstring): its record is written and replayed."""
    live = group.live
    phase = live.join_phase
    assert phase is not None
    draft = phase.draft
    gid = group.group_id
    result = Result(timers=[TimerOp(TimerKey(ClassicTimer.JOIN, gid), None)])
    for member_id in [mid for mid in draft.members if mid not in live.joins]:
        draft.remove(member_id)
        result.timers.append(no_session_timer(gid, member_id))
    # Ids handed out by MEMBER_ID_REQUIRED stay pending (until their own timer) across the
    # end of the phase, as in Kafka: a client whose JoinGroup with its new id comes just
    # after a 0 ms initial delay ended joins the next generation, instead of being told
    # UNKNOWN_MEMBER_ID and starting over.
    if not draft.members:
        draft.protocol, draft.leader = None, None
        draft.transition(gid, S.EMPTY, now_ms, "no members left after the join phase")
    else:
        draft.protocol = draft.select_protocol()
        if draft.leader not in draft.members or draft.leader not in live.joins:
            draft.leader = next(iter(draft.members))
        draft.transition(gid, S.COMPLETING_REBALANCE, now_ms, "join phase complete")
        for mid in draft.members:
            draft.update(mid, assignment=b"")
    draft.generation += 1
    write(group, draft.to_record(), result)
    live.join_phase = None
    live.assigned = False
    if not group.members:
        return result
    live.pending_sync = set(group.members)
    for mid, m in group.members.items():
        result.completed.append((live.joins.pop(mid), join_response(group, mid)))
        result.timers.append(session_timer(gid, m, now_ms))
    result.timers.append(TimerOp(TimerKey(ClassicTimer.SYNC, gid),
                                 now_ms + group.durable.max_rebalance_timeout_ms()))
    return result
