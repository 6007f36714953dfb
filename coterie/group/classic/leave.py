"""LeaveGroup, and members removed for any reason (left, session expired, never synced).

LeaveGroup v3+ names several members, each by member id or by instance id (a static member
leaving for good); a dynamic member id still pending (MEMBER_ID_REQUIRED) is just forgotten.
Removing members from a Stable or CompletingRebalance group starts a join phase without them;
removing them during a join phase may complete it (everyone left has rejoined), or, when
nobody is left, ends it at once with an Empty generation. Their parked requests are answered
UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicState
from coterie.group.classic.messages import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from coterie.group.classic.rebalance import (
    arm_join_phase,
    complete_join,
    maybe_complete_join,
    no_session_timer,
    start_join_phase,
)
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey

S = ClassicState


def leave_group(groups: MutableMapping[str, ClassicGroup], config: ClassicConfig,
                req: LeaveGroupRequest, now_ms: int) -> Result:
    group = groups.get(req.group_id)
    if group is None or group.is_(S.DEAD):
        return Result(LeaveGroupResponse(ErrorCode.unknown_member_id, tuple(
            (m, ErrorCode.unknown_member_id) for m in req.members)))
    outcome = []
    result = Result()
    leaving = []
    live = group.live
    for lm in req.members:
        member_id = lm.member_id
        if lm.group_instance_id is not None:
            known = group.static_members.get(lm.group_instance_id)
            if known is None:
                outcome.append((lm, ErrorCode.unknown_member_id))
                continue
            if member_id not in (UNKNOWN_MEMBER_ID, known):
                outcome.append((lm, ErrorCode.fenced_instance_id))
                continue
            member_id = known
        elif member_id in live.pending_members:
            live.pending_members.discard(member_id)
            result.timers.append(
                TimerOp(TimerKey(ClassicTimer.PENDING, group.group_id, member_id), None))
            outcome.append((lm, ErrorCode.none))
            continue
        if member_id not in group.members:
            outcome.append((lm, ErrorCode.unknown_member_id))
            continue
        outcome.append((lm, ErrorCode.none))
        leaving.append(member_id)
    if leaving or result.timers:
        result.merge(remove_members(group, config, leaving, now_ms, "members left"))
    result.response = LeaveGroupResponse(ErrorCode.none, tuple(outcome))
    return result


def remove_members(group: ClassicGroup, config: ClassicConfig, member_ids: Iterable[str],
                   now_ms: int, why: str) -> Result:
    """Take members out of the group (module docstring)."""
    result = Result()
    gid = group.group_id
    live = group.live
    gone = [mid for mid in dict.fromkeys(member_ids) if mid in group.members]
    for member_id in gone:
        result.timers.append(no_session_timer(gid, member_id))
        token = live.joins.pop(member_id, None)
        if token is not None:
            result.completed.append((token, JoinGroupResponse(
                ErrorCode.unknown_member_id, member_id=member_id)))
        token = live.syncs.pop(member_id, None)
        if token is not None:
            result.completed.append((token, SyncGroupResponse(ErrorCode.unknown_member_id)))
        live.pending_sync.discard(member_id)
    if not gone:
        result.merge(maybe_complete_join(group, now_ms))
        return result
    if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
        result.merge(start_join_phase(group, now_ms, why))
        for member_id in gone:
            group.view.remove(member_id)
        result.merge(arm_join_phase(group, config, now_ms))
    elif group.is_(S.PREPARING_REBALANCE):
        for member_id in gone:
            group.view.remove(member_id)
        if not group.members and not live.pending_members:
            result.merge(complete_join(group, now_ms))
        else:
            result.merge(maybe_complete_join(group, now_ms))
    return result
