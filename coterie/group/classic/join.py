"""JoinGroup for classic groups (seed 1): checks, new members, known members rejoining.

A JoinGroup is checked on its face first (`validate_join`: group id, session timeout bounds,
metadata size, strings too long to be stored), then against the group: its protocol type and
protocols must fit the other members'. A new dynamic member of JoinGroup v4+ gets an id with
MEMBER_ID_REQUIRED and comes back with it (KIP-394); a new static member takes over its old
incarnation (`static.py`). A member joining or rejoining with new metadata starts a join
phase, or joins the one in progress (`rebalance.py`), and its request parks until the phase
ends. A known member sending the same metadata to a Stable or CompletingRebalance group (a
retry whose answer was lost) is answered at once with the current generation; the leader
rejoining a Stable group starts a rebalance (it wants the group to reassign).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicMember, ClassicState
from coterie.group.classic.messages import UNKNOWN_MEMBER_ID, JoinGroupRequest, JoinGroupResponse
from coterie.group.classic.rebalance import (
    join_into_phase,
    join_response,
    session_timer,
    update_member,
)
from coterie.group.classic.static import rejoin_static
from coterie.group.limits import MAX_STRING_BYTES, first_too_long, too_long
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey

S = ClassicState


def validate_join(config: ClassicConfig, req: JoinGroupRequest) -> JoinGroupResponse | None:
    """The answer a JoinGroup gets before any group is looked at (invalid group id, session
    timeout out of bounds, metadata too large, a string too long to be stored), or None.
    Mixed groups: a JoinGroup for a consumer group is checked the same way first."""

    def refuse(code: ErrorCode, reason: str) -> JoinGroupResponse:
        return JoinGroupResponse(code, member_id=req.member_id, reason=reason)

    if not req.group_id:
        return refuse(ErrorCode.invalid_group_id, "The group id is empty.")
    if too_long(req.group_id):
        return refuse(ErrorCode.invalid_group_id,
                      f"The group id is longer than {MAX_STRING_BYTES} bytes.")
    if not config.min_session_timeout_ms <= req.session_timeout_ms <= (
            config.max_session_timeout_ms):
        return refuse(ErrorCode.invalid_session_timeout,
                      f"Session timeout {req.session_timeout_ms} ms is outside "
                      f"[{config.min_session_timeout_ms}, {config.max_session_timeout_ms}].")
    metadata_bytes = sum(len(m) for _, m in req.protocols)
    if metadata_bytes > config.max_metadata_bytes:
        return refuse(ErrorCode.invalid_request,
                      f"Protocol metadata of {metadata_bytes} bytes is more than "
                      f"{config.max_metadata_bytes}.")
    reason = first_too_long([
        ("The member id", req.member_id), ("The group instance id", req.group_instance_id),
        ("The protocol type", req.protocol_type),
        *(("A protocol name", name) for name, _ in req.protocols)])
    if reason is not None:
        return refuse(ErrorCode.invalid_request, reason)
    return None


def join_group(groups: MutableMapping[str, ClassicGroup], config: ClassicConfig,
               new_member_id: Callable[[str], str], req: JoinGroupRequest,
               now_ms: int) -> Result:
    refusal = validate_join(config, req)
    if refusal is not None:
        return Result(refusal)
    group = groups.get(req.group_id)
    if group is None:
        if req.member_id != UNKNOWN_MEMBER_ID:
            return Result(JoinGroupResponse(ErrorCode.unknown_member_id,
                                            member_id=req.member_id))
        group = groups[req.group_id] = ClassicGroup(req.group_id)
        group.durable.state_timestamp_ms = now_ms  # a new group, in no record yet
    if group.is_(S.DEAD):
        return Result(JoinGroupResponse(ErrorCode.coordinator_not_available,
                                        member_id=req.member_id))
    if not group.view.supports(req.protocol_type, req.protocols, req.member_id or None):
        return Result(JoinGroupResponse(ErrorCode.inconsistent_group_protocol,
                                        member_id=req.member_id))
    if req.member_id == UNKNOWN_MEMBER_ID:
        return _join_unknown(group, config, new_member_id, req, now_ms)
    return _join_known(group, config, req, now_ms)


def _full(group: ClassicGroup, config: ClassicConfig) -> bool:
    return len(group.members) + len(group.live.pending_members) >= config.max_size


def _join_unknown(group: ClassicGroup, config: ClassicConfig,
                  new_member_id: Callable[[str], str], req: JoinGroupRequest,
                  now_ms: int) -> Result:
    instance = req.group_instance_id
    if group.view.has_static(instance):
        return rejoin_static(group, config, new_member_id(req.client_id), req, now_ms)
    if _full(group, config):
        return Result(JoinGroupResponse(ErrorCode.group_max_size_reached))
    new_id = new_member_id(req.client_id)
    if instance is None and req.require_known_member_id:
        # KIP-394: hand out an id and make the client come back with it, so a client that
        # retries a timed-out join does not leave a trail of half-joined members.
        group.live.pending_members.add(new_id)
        return Result(JoinGroupResponse(ErrorCode.member_id_required, member_id=new_id),
                      timers=[TimerOp(TimerKey(ClassicTimer.PENDING, group.group_id, new_id),
                                      now_ms + req.session_timeout_ms)])
    return _add_member(group, config, req, new_id, now_ms)


def _join_known(group: ClassicGroup, config: ClassicConfig, req: JoinGroupRequest,
                now_ms: int) -> Result:
    member_id = req.member_id
    live = group.live
    if member_id in live.pending_members:
        live.pending_members.discard(member_id)
        result = _add_member(group, config, req, member_id, now_ms)
        result.timers.append(
            TimerOp(TimerKey(ClassicTimer.PENDING, group.group_id, member_id), None))
        return result
    fenced = group.fenced(member_id, req.group_instance_id)
    if fenced is not None:
        return Result(JoinGroupResponse(fenced, member_id=member_id))
    member = group.members[member_id]
    if group.is_(S.PREPARING_REBALANCE):
        return _rejoin(group, config, req, now_ms, "rejoined")
    if group.is_(S.COMPLETING_REBALANCE):
        if member.same_protocols(req.protocols):
            # A retry whose earlier answer was lost: answer again, as it was.
            return Result(join_response(group, member_id),
                          timers=[session_timer(group.group_id, member, now_ms)])
        return _rejoin(group, config, req, now_ms, "metadata changed")
    if group.is_(S.STABLE):
        if member_id == group.leader or not member.same_protocols(req.protocols):
            # The leader rejoins to make the group reassign (e.g. topic metadata changed),
            # and anyone with a new subscription forces a new generation.
            return _rejoin(group, config, req, now_ms, "leader or metadata changed")
        return Result(join_response(group, member_id),
                      timers=[session_timer(group.group_id, member, now_ms)])
    return Result(JoinGroupResponse(ErrorCode.unknown_member_id, member_id=member_id))


def _rejoin(group: ClassicGroup, config: ClassicConfig, req: JoinGroupRequest, now_ms: int,
            why: str) -> Result:
    """A known member rejoins: into the join phase that runs, or one it starts."""
    return join_into_phase(group, config, req, req.member_id,
                           lambda draft: update_member(draft, req.member_id, req), now_ms,
                           why, Result())


def _add_member(group: ClassicGroup, config: ClassicConfig, req: JoinGroupRequest,
                member_id: str, now_ms: int) -> Result:
    member = ClassicMember(
        member_id=member_id, group_instance_id=req.group_instance_id,
        client_id=req.client_id, client_host=req.client_host,
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        protocol_type=req.protocol_type, protocols=req.protocols,
    )
    phase = group.live.join_phase
    if phase is not None and phase.initial_deadline is not None:
        # Only a member that arrives while a join phase that started from Empty (a new
        # group's, or one whose members had all gone) is in its initial delay extends
        # that delay; the member whose join starts the phase does not, or a lone first
        # member would always wait two delays (Kafka's rule: PreparingRebalance entered
        # from Empty).
        phase.new_member_added = True
    return join_into_phase(group, config, req, member_id, lambda draft: draft.add(member),
                           now_ms, f"{member_id} joined", Result())
