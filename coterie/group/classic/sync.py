"""SyncGroup and Heartbeat for classic groups (seed 1): the sync phase and staying alive.

SyncGroup in CompletingRebalance parks until the leader's assignment arrives. The leader's
SyncGroup writes the group's record with every member's assignment; once it is replayed the
group is Stable and every parked SyncGroup is answered from it. A leader that reports that
it could not assign (the `error` of the request) voids the generation: every waiting member
gets that error and a new join phase starts. In Stable, a SyncGroup is answered at once (a
member that had not collected its assignment yet, or asks again). Members of the
generation that never send SyncGroup are removed by the SYNC timer (`timers.py`).

Heartbeat keeps a member's session: it answers ILLEGAL_GENERATION for another generation,
REBALANCE_IN_PROGRESS during a join phase (the member must rejoin), and re-arms the session
timer unless the member has a request parked (it is alive while parked).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import replace

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicMember, ClassicState, check_transition
from coterie.group.classic.messages import HeartbeatRequest, SyncGroupRequest, SyncGroupResponse
from coterie.group.classic.rebalance import (
    no_session_timer,
    prepare_rebalance,
    session_timer,
    write,
)
from coterie.group.records.classic import GroupMetadataValue, MemberMetadata
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey

S = ClassicState


def sync_response(group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
    return SyncGroupResponse(ErrorCode.none, assignment=member.assignment,
                             protocol_type=group.protocol_type, protocol_name=group.protocol)


def sync_group(groups: MutableMapping[str, ClassicGroup], config: ClassicConfig,
               req: SyncGroupRequest, now_ms: int) -> Result:
    group = groups.get(req.group_id)
    if group is None or group.is_(S.DEAD):
        return Result(SyncGroupResponse(ErrorCode.unknown_member_id))
    fenced = group.fenced(req.member_id, req.group_instance_id)
    if fenced is not None:
        return Result(SyncGroupResponse(fenced))
    if req.generation_id != group.generation:
        return Result(SyncGroupResponse(ErrorCode.illegal_generation))
    if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol):
        return Result(SyncGroupResponse(ErrorCode.inconsistent_group_protocol))
    member = group.members[req.member_id]
    if group.is_(S.PREPARING_REBALANCE):
        return Result(SyncGroupResponse(ErrorCode.rebalance_in_progress))
    if group.is_(S.EMPTY):
        return Result(SyncGroupResponse(ErrorCode.unknown_member_id))
    gid, mid = group.group_id, member.member_id
    live = group.live
    if group.is_(S.STABLE):
        live.pending_sync.discard(mid)
        timers = [session_timer(gid, member, now_ms)]
        if not live.pending_sync:
            timers.append(TimerOp(TimerKey(ClassicTimer.SYNC, gid), None))
        return Result(sync_response(group, member), timers=timers)
    # CompletingRebalance: park until the leader's assignment is in.
    result = Result()
    live.pending_sync.discard(mid)
    old = live.syncs.get(mid)
    if old is not None and old != req.token:
        result.completed.append((old, SyncGroupResponse(ErrorCode.rebalance_in_progress)))
    live.syncs[mid] = req.token
    result.timers.append(no_session_timer(gid, mid))
    if mid != group.leader:
        return result
    if req.error != ErrorCode.none:
        return fail_sync(group, config, req.error, now_ms, result)
    assignments = dict(req.assignments)
    check_transition(gid, group.state, S.STABLE, "leader sent the assignment")
    before = group.durable.to_record()
    write(group, GroupMetadataValue(
        protocol_type=before.protocol_type, generation=before.generation,
        protocol=before.protocol, leader=before.leader, current_state_timestamp_ms=now_ms,
        members=tuple(_assigned(m, assignments.get(m.member_id, b""))
                      for m in before.members)), result)
    live.assigned = True
    if not live.pending_sync:
        result.timers.append(TimerOp(TimerKey(ClassicTimer.SYNC, gid), None))
    for member_id, token in live.syncs.items():
        m = group.members[member_id]
        result.completed.append((token, sync_response(group, m)))
        result.timers.append(session_timer(gid, m, now_ms))
    live.syncs.clear()
    return result


def _assigned(member: MemberMetadata, assignment: bytes) -> MemberMetadata:
    return replace(member, assignment=assignment)


def fail_sync(group: ClassicGroup, config: ClassicConfig, error: ErrorCode, now_ms: int,
              result: Result) -> Result:
    """The leader could not produce an assignment: every waiting member gets its error,
    and the generation is void (everyone rejoins)."""
    gid = group.group_id
    for member_id, token in group.live.syncs.items():
        result.completed.append((token, SyncGroupResponse(error)))
        result.timers.append(session_timer(gid, group.members[member_id], now_ms))
    group.live.syncs.clear()
    result.merge(prepare_rebalance(group, config, now_ms, f"leader reported {error.name}"))
    return result


def heartbeat(groups: MutableMapping[str, ClassicGroup], req: HeartbeatRequest,
              now_ms: int) -> Result:
    group = groups.get(req.group_id)
    if group is None or group.is_(S.DEAD):
        return Result(ErrorCode.unknown_member_id)
    fenced = group.fenced(req.member_id, req.group_instance_id)
    if fenced is not None:
        return Result(fenced)
    if group.is_(S.EMPTY):
        return Result(ErrorCode.unknown_member_id)
    if req.generation_id != group.generation:
        return Result(ErrorCode.illegal_generation)
    member = group.members[req.member_id]
    timers = [] if group.awaiting(req.member_id) else [
        session_timer(group.group_id, member, now_ms)]
    if group.is_(S.PREPARING_REBALANCE):
        return Result(ErrorCode.rebalance_in_progress, timers=timers)
    return Result(ErrorCode.none, timers=timers)
