"""The classic group protocol of seed 1, driven by requests and timers, free of I/O.

Every handler takes a request and `now_ms` and returns a `Result`: the answer (or None when
the request parks), the records to persist before answering, the timers to arm or cancel, and
the parked requests it completes. Timers that fire come back through `on_timer`.

Timers (`TimerKey`s, by kind; `coterie.group.timers`):
- SESSION (group, member): a member that neither heartbeats nor has a request parked is
  removed when its session timeout passes, which rebalances the group.
- JOIN (group): the join phase ends at the rebalance timeout even if members are missing
  (they are removed); for a group that was Empty it is first the initial rebalance delay,
  and only this timer ends that phase, even when the delay is 0 ms.
- SYNC (group): members that have not sent SyncGroup within the rebalance timeout after
  the join phase are removed, which rebalances the group (this covers a leader that never
  sends its assignment and a follower that never collects its own).
- PENDING (group, member): a member id handed out with MEMBER_ID_REQUIRED is forgotten
  if the client does not come back with it within its session timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coterie.group.classic.group import ClassicGroup, ClassicMember, ClassicState
from coterie.group.classic.messages import (
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coterie.group.limits import MAX_STRING_BYTES, first_too_long, too_long
from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey, TimerKind

S = ClassicState


@dataclass(frozen=True, slots=True)
class ClassicConfig:
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    max_metadata_bytes: int = 1024 * 1024  # coterie: group.classic.max.member.metadata.bytes


class ClassicCoordinator:
    """All classic groups of one coordinator."""

    def __init__(self, config: ClassicConfig, new_member_id: Callable[[str], str]) -> None:
        self.config = config
        self._new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}
        # Groups whose join phase is in its initial delay, with the latest it may end.
        self._initial_deadline: dict[str, int] = {}

    # == replay ==============================================================================
    def replay(self, record: Record) -> None:
        """Apply a persisted group record: the same path at start-up and in tests."""
        key = record.key
        if not isinstance(key, GroupMetadataKey):
            return
        if not isinstance(record.value, GroupMetadataValue):  # a tombstone
            self.groups.pop(key.group_id, None)
            return
        self.groups[key.group_id] = ClassicGroup.from_record(key.group_id, record.value)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Deadlines to arm once loading finishes: members must show up again in time."""
        ops = []
        for group in self.groups.values():
            for m in group.members.values():
                ops.append(TimerOp(TimerKey(TimerKind.SESSION, group.group_id, m.member_id),
                                   now_ms + m.session_timeout_ms))
            if group.is_(S.COMPLETING_REBALANCE):
                ops.append(TimerOp(TimerKey(TimerKind.SYNC, group.group_id),
                                   now_ms + group.max_rebalance_timeout_ms()))
        return ops

    # == JoinGroup ===========================================================================
    def join_group(self, req: JoinGroupRequest, now_ms: int) -> Result:
        refusal = self._validate_join(req)
        if refusal is not None:
            return Result(refusal)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                return Result(JoinGroupResponse(ErrorCode.unknown_member_id,
                                                member_id=req.member_id))
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
            self.groups[req.group_id] = group
        if group.is_(S.DEAD):
            return Result(JoinGroupResponse(ErrorCode.coordinator_not_available,
                                            member_id=req.member_id))
        member_id = req.member_id or None
        if not group.supports(req.protocol_type, req.protocols, member_id):
            return Result(JoinGroupResponse(ErrorCode.inconsistent_group_protocol,
                                            member_id=req.member_id))
        if req.member_id == UNKNOWN_MEMBER_ID:
            return self._join_unknown(group, req, now_ms)
        return self._join_known(group, req, now_ms)

    def validate_join(self, req: JoinGroupRequest) -> JoinGroupResponse | None:
        """The answer a JoinGroup gets before any group is looked at (invalid group id,
        session timeout out of bounds, metadata too large, a string too long to be stored),
        or None. Mixed groups: a JoinGroup for a consumer group is checked the same way
        first."""
        return self._validate_join(req)

    def _validate_join(self, req: JoinGroupRequest) -> JoinGroupResponse | None:
        cfg = self.config

        def refuse(code: ErrorCode, reason: str) -> JoinGroupResponse:
            return JoinGroupResponse(code, member_id=req.member_id, reason=reason)

        if not req.group_id:
            return refuse(ErrorCode.invalid_group_id, "The group id is empty.")
        if too_long(req.group_id):
            return refuse(ErrorCode.invalid_group_id,
                          f"The group id is longer than {MAX_STRING_BYTES} bytes.")
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= (
                cfg.max_session_timeout_ms):
            return refuse(ErrorCode.invalid_session_timeout,
                          f"Session timeout {req.session_timeout_ms} ms is outside "
                          f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}].")
        metadata_bytes = sum(len(m) for _, m in req.protocols)
        if metadata_bytes > cfg.max_metadata_bytes:
            return refuse(ErrorCode.invalid_request,
                          f"Protocol metadata of {metadata_bytes} bytes is more than "
                          f"{cfg.max_metadata_bytes}.")
        reason = first_too_long([
            ("The member id", req.member_id), ("The group instance id", req.group_instance_id),
            ("The protocol type", req.protocol_type),
            *(("A protocol name", name) for name, _ in req.protocols)])
        if reason is not None:
            return refuse(ErrorCode.invalid_request, reason)
        return None

    def _full(self, group: ClassicGroup) -> bool:
        return len(group.members) + len(group.pending_members) >= self.config.max_size

    def _join_unknown(self, group: ClassicGroup, req: JoinGroupRequest, now_ms: int) -> Result:
        instance = req.group_instance_id
        if group.has_static(instance):
            return self._rejoin_static(group, req, now_ms)
        if self._full(group):
            return Result(JoinGroupResponse(ErrorCode.group_max_size_reached))
        new_id = self._new_member_id(req.client_id)
        if instance is None and req.require_known_member_id:
            # KIP-394: hand out an id and make the client come back with it, so a client that
            # retries a timed-out join does not leave a trail of half-joined members.
            group.pending_members.add(new_id)
            return Result(JoinGroupResponse(ErrorCode.member_id_required, member_id=new_id),
                          timers=[TimerOp(TimerKey(TimerKind.PENDING, group.group_id, new_id),
                                          now_ms + req.session_timeout_ms)])
        return self._add_member_and_rebalance(group, req, new_id, now_ms)

    def _join_known(self, group: ClassicGroup, req: JoinGroupRequest, now_ms: int) -> Result:
        member_id = req.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            result = self._add_member_and_rebalance(group, req, member_id, now_ms)
            result.timers.append(
                TimerOp(TimerKey(TimerKind.PENDING, group.group_id, member_id), None))
            return result
        fenced = group.fenced(member_id, req.group_instance_id)
        if fenced is not None:
            return Result(JoinGroupResponse(fenced, member_id=member_id))
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            result = Result()
            self._park_join(group, member, req, result)
            self._update_member(member, req)
            result.merge(self._maybe_complete_join(group, now_ms))
            return result
        if group.is_(S.COMPLETING_REBALANCE):
            if member.same_protocols(req.protocols):
                # A retry whose earlier answer was lost: answer again, as it was.
                return Result(self._join_response(group, member_id),
                              timers=[self._session_timer(group, member, now_ms)])
            return self._update_and_rebalance(group, member, req, now_ms, "metadata changed")
        if group.is_(S.STABLE):
            if member_id == group.leader or not member.same_protocols(req.protocols):
                # The leader rejoins to make the group reassign (e.g. topic metadata changed),
                # and anyone with a new subscription forces a new generation.
                return self._update_and_rebalance(group, member, req, now_ms,
                                                  "leader or metadata changed")
            return Result(self._join_response(group, member_id),
                          timers=[self._session_timer(group, member, now_ms)])
        return Result(JoinGroupResponse(ErrorCode.unknown_member_id, member_id=member_id))

    def _rejoin_static(self, group: ClassicGroup, req: JoinGroupRequest, now_ms: int) -> Result:
        """A known group.instance.id with no member id: the restarted instance takes over its
        old member (KIP-345), keeping its assignment. A stable group does not rebalance."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        new_id = self._new_member_id(req.client_id)
        old = group.members[old_id]
        result = Result()
        # Whatever the old incarnation had parked is answered: it has been replaced.
        if old.awaiting_join:
            result.completed.append((old.join_token, JoinGroupResponse(
                ErrorCode.fenced_instance_id, member_id=old_id)))
            old.awaiting_join, old.join_token = False, None
        if old.awaiting_sync:
            result.completed.append((old.sync_token, SyncGroupResponse(
                ErrorCode.fenced_instance_id)))
            old.awaiting_sync, old.sync_token = False, None
        result.timers.append(TimerOp(TimerKey(TimerKind.SESSION, group.group_id, old_id), None))
        protocols_changed = not old.same_protocols(req.protocols)
        member = group.replace_static(old_id, new_id)
        self._update_member(member, req)
        result.timers.append(self._session_timer(group, member, now_ms))
        if group.is_(S.STABLE) and not protocols_changed:
            result.records.append(self._group_record(group))
            # KIP-814: a returning leader that can skip the assignment step still learns that
            # it leads, with every member's metadata, so it goes on watching topic metadata
            # (and rebalances when it changes) without forcing a rebalance now. Older
            # clients get the plain answer, as from Kafka.
            skip = new_id == group.leader and req.supports_skip_assignment
            members = self._join_response(group, new_id).members if skip else ()
            result.response = JoinGroupResponse(
                ErrorCode.none, generation_id=group.generation,
                protocol_type=group.protocol_type, protocol_name=group.protocol,
                leader=group.leader or "", member_id=new_id, members=members,
                skip_assignment=skip,
            )
            return result
        if group.is_(S.PREPARING_REBALANCE):
            self._park_join(group, member, req, result)
            result.merge(self._maybe_complete_join(group, now_ms))
            return result
        self._park_join(group, member, req, result)
        result.merge(self._prepare_rebalance(group, now_ms, "static member rejoined"))
        return result

    def _add_member_and_rebalance(self, group: ClassicGroup, req: JoinGroupRequest,
                                  member_id: str, now_ms: int) -> Result:
        member = ClassicMember(
            member_id=member_id, group_instance_id=req.group_instance_id,
            client_id=req.client_id, client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type, protocols=req.protocols,
        )
        if group.is_(S.PREPARING_REBALANCE) and group.group_id in self._initial_deadline:
            # Only a member that arrives while a join phase that started from Empty (a new
            # group's, or one whose members had all gone) is in its initial delay extends
            # that delay; the member whose join starts the phase does not, or a lone first
            # member would always wait two delays (Kafka's rule: PreparingRebalance entered
            # from Empty).
            group.new_member_added = True
        group.add(member)
        result = Result()
        self._park_join(group, member, req, result)
        if group.is_(S.PREPARING_REBALANCE):
            result.merge(self._maybe_complete_join(group, now_ms))
        else:
            result.merge(self._prepare_rebalance(group, now_ms, f"{member_id} joined"))
        return result

    def _update_member(self, member: ClassicMember, req: JoinGroupRequest) -> None:
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host

    def _update_and_rebalance(self, group: ClassicGroup, member: ClassicMember,
                              req: JoinGroupRequest, now_ms: int, why: str) -> Result:
        self._update_member(member, req)
        result = Result()
        self._park_join(group, member, req, result)
        result.merge(self._prepare_rebalance(group, now_ms, why))
        return result

    def _park_join(self, group: ClassicGroup, member: ClassicMember, req: JoinGroupRequest,
                   result: Result) -> None:
        if member.awaiting_join and member.join_token != req.token:
            # The client gave up on its earlier JoinGroup and sent another: the old one is
            # answered so the connection is not left hanging.
            result.completed.append((member.join_token, JoinGroupResponse(
                ErrorCode.rebalance_in_progress, member_id=member.member_id)))
        member.awaiting_join = True
        member.join_token = req.token
        # A member with a parked request is alive: its session timer stops until it is
        # answered (and is re-armed with the answer).
        result.timers.append(
            TimerOp(TimerKey(TimerKind.SESSION, group.group_id, member.member_id), None))

    # == rebalance phases ====================================================================
    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, why: str) -> Result:
        result = Result()
        if group.is_(S.COMPLETING_REBALANCE):
            # The generation being synced is void: tell whoever waits for it to rejoin.
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    result.completed.append((m.sync_token, SyncGroupResponse(
                        ErrorCode.rebalance_in_progress)))
                    m.awaiting_sync, m.sync_token = False, None
            group.pending_sync.clear()
            result.timers.append(TimerOp(TimerKey(TimerKind.SYNC, group.group_id), None))
        was_empty = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, now_ms, why)
        if was_empty:
            # The first rebalance out of Empty always ends on the join timer, never inside
            # the JoinGroup that starts it, even with a 0 ms delay (Kafka schedules it too):
            # the timer fires on a later turn of the broker's loop, so JoinGroups already
            # read by then join this generation instead of forcing a second one.
            delay = min(self.config.initial_rebalance_delay_ms,
                        group.max_rebalance_timeout_ms())
            self._initial_deadline[group.group_id] = now_ms + group.max_rebalance_timeout_ms()
            result.timers.append(TimerOp(TimerKey(TimerKind.JOIN, group.group_id), now_ms + delay))
        else:
            result.timers.append(TimerOp(TimerKey(TimerKind.JOIN, group.group_id),
                                         now_ms + group.max_rebalance_timeout_ms()))
            result.merge(self._maybe_complete_join(group, now_ms))
        return result

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> Result:
        if not group.is_(S.PREPARING_REBALANCE) or not group.all_joined():
            return Result()
        if group.group_id in self._initial_deadline:
            return Result()  # the initial delay decides when this join phase ends
        return self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> Result:
        result = Result(timers=[TimerOp(TimerKey(TimerKind.JOIN, group.group_id), None)])
        self._initial_deadline.pop(group.group_id, None)
        for member_id in [mid for mid, m in group.members.items() if not m.awaiting_join]:
            group.remove(member_id)
            result.timers.append(
                TimerOp(TimerKey(TimerKind.SESSION, group.group_id, member_id), None))
        # Ids handed out by MEMBER_ID_REQUIRED stay pending (until their own timer) across
        # the end of the phase, as in Kafka: a client whose JoinGroup with its new id comes
        # just after a 0 ms initial delay ended joins the next generation, instead of being
        # told UNKNOWN_MEMBER_ID and starting over.
        group.generation += 1
        group.new_member_added = False
        if not group.members:
            group.protocol = None
            group.leader = None
            group.transition(S.EMPTY, now_ms, "no members left after the join phase")
            result.records.append(self._group_record(group))
            return result
        group.protocol = group.select_protocol()
        if group.leader not in group.members or not group.members[group.leader].awaiting_join:
            group.leader = next(iter(group.members))
        group.transition(S.COMPLETING_REBALANCE, now_ms, "join phase complete")
        for m in group.members.values():
            m.assignment = b""
        group.pending_sync = set(group.members)
        result.records.append(self._group_record(group))
        for m in group.members.values():
            result.completed.append((m.join_token, self._join_response(group, m.member_id)))
            m.awaiting_join, m.join_token = False, None
            result.timers.append(self._session_timer(group, m, now_ms))
        result.timers.append(TimerOp(TimerKey(TimerKind.SYNC, group.group_id),
                                     now_ms + group.max_rebalance_timeout_ms()))
        return result

    def _join_response(self, group: ClassicGroup, member_id: str) -> JoinGroupResponse:
        members: tuple[JoinMember, ...] = ()
        if member_id == group.leader:
            members = tuple(JoinMember(m.member_id, m.group_instance_id,
                                       m.metadata_for(group.protocol))
                            for m in group.members.values())
        return JoinGroupResponse(
            ErrorCode.none, generation_id=group.generation, protocol_type=group.protocol_type,
            protocol_name=group.protocol, leader=group.leader or "", member_id=member_id,
            members=members,
        )

    # == SyncGroup ===========================================================================
    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> Result:
        group = self.groups.get(req.group_id)
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
        if group.is_(S.STABLE):
            group.pending_sync.discard(member.member_id)
            timers = [self._session_timer(group, member, now_ms)]
            if not group.pending_sync:
                timers.append(TimerOp(TimerKey(TimerKind.SYNC, group.group_id), None))
            return Result(self._sync_response(group, member), timers=timers)
        # CompletingRebalance: park until the leader's assignment is in.
        result = Result()
        group.pending_sync.discard(member.member_id)
        if member.awaiting_sync and member.sync_token != req.token:
            result.completed.append((member.sync_token, SyncGroupResponse(
                ErrorCode.rebalance_in_progress)))
        member.awaiting_sync, member.sync_token = True, req.token
        result.timers.append(
            TimerOp(TimerKey(TimerKind.SESSION, group.group_id, member.member_id), None))
        if member.member_id != group.leader:
            return result
        if req.error != ErrorCode.none:
            return self._fail_sync(group, req.error, now_ms, result)
        assignments = dict(req.assignments)
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        group.transition(S.STABLE, now_ms, "leader sent the assignment")
        result.records.append(self._group_record(group))
        if not group.pending_sync:
            result.timers.append(TimerOp(TimerKey(TimerKind.SYNC, group.group_id), None))
        for m in group.members.values():
            if m.awaiting_sync:
                result.completed.append((m.sync_token, self._sync_response(group, m)))
                m.awaiting_sync, m.sync_token = False, None
                result.timers.append(self._session_timer(group, m, now_ms))
        return result

    def _fail_sync(self, group: ClassicGroup, error: ErrorCode, now_ms: int,
                   result: Result) -> Result:
        """The leader could not produce an assignment: every waiting member gets its error,
        and the generation is void (everyone rejoins)."""
        for m in group.members.values():
            if m.awaiting_sync:
                result.completed.append((m.sync_token, SyncGroupResponse(error)))
                m.awaiting_sync, m.sync_token = False, None
                result.timers.append(self._session_timer(group, m, now_ms))
        result.merge(self._prepare_rebalance(group, now_ms, f"leader reported {error.name}"))
        return result

    def persist_failed(self, group_id: str, generation: int, now_ms: int) -> Result:
        """The broker could not persist a record of this generation (the leader's assignment,
        say). It answers that result's requests with the storage error itself; here the
        generation is voided so that every member rejoins instead of trusting state that was
        never made durable."""
        group = self.groups.get(group_id)
        if group is None or group.generation != generation or not group.is_(
                S.STABLE, S.COMPLETING_REBALANCE):
            return Result()
        for m in group.members.values():
            m.assignment = b""
        return self._prepare_rebalance(group, now_ms, "a record could not be persisted")

    def _sync_response(self, group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
        return SyncGroupResponse(ErrorCode.none, assignment=member.assignment,
                                 protocol_type=group.protocol_type,
                                 protocol_name=group.protocol)

    # == Heartbeat ===========================================================================
    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Result:
        group = self.groups.get(req.group_id)
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
        timers = [] if member.awaiting_join or member.awaiting_sync else [
            self._session_timer(group, member, now_ms)]
        if group.is_(S.PREPARING_REBALANCE):
            return Result(ErrorCode.rebalance_in_progress, timers=timers)
        return Result(ErrorCode.none, timers=timers)

    # == LeaveGroup ==========================================================================
    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> Result:
        group = self.groups.get(req.group_id)
        if group is None or group.is_(S.DEAD):
            return Result(LeaveGroupResponse(ErrorCode.unknown_member_id, tuple(
                (m, ErrorCode.unknown_member_id) for m in req.members)))
        outcome = []
        result = Result()
        leaving = []
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
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                result.timers.append(
                    TimerOp(TimerKey(TimerKind.PENDING, group.group_id, member_id), None))
                outcome.append((lm, ErrorCode.none))
                continue
            if member_id not in group.members:
                outcome.append((lm, ErrorCode.unknown_member_id))
                continue
            outcome.append((lm, ErrorCode.none))
            leaving.append(member_id)
        if leaving or result.timers:
            result.merge(self._remove_members(group, leaving, now_ms, "members left"))
        result.response = LeaveGroupResponse(ErrorCode.none, tuple(outcome))
        return result

    def _remove_members(self, group: ClassicGroup, member_ids: Iterable[str], now_ms: int,
                        why: str) -> Result:
        result = Result()
        removed = False
        for member_id in member_ids:
            member = group.remove(member_id)
            if member is None:
                continue
            removed = True
            result.timers.append(
                TimerOp(TimerKey(TimerKind.SESSION, group.group_id, member_id), None))
            if member.awaiting_join:
                result.completed.append((member.join_token, JoinGroupResponse(
                    ErrorCode.unknown_member_id, member_id=member_id)))
            if member.awaiting_sync:
                result.completed.append((member.sync_token, SyncGroupResponse(
                    ErrorCode.unknown_member_id)))
        if not removed:
            result.merge(self._maybe_complete_join(group, now_ms))
            return result
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            result.merge(self._prepare_rebalance(group, now_ms, why))
        elif group.is_(S.PREPARING_REBALANCE):
            if not group.members and not group.pending_members:
                result.merge(self._complete_join(group, now_ms))
            else:
                result.merge(self._maybe_complete_join(group, now_ms))
        return result

    # == timers ==============================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        kind, group_id, member_id = key.kind, key.group_id, key.member_id
        group = self.groups.get(group_id)
        if group is None:
            return Result()
        if kind is TimerKind.SESSION:
            member = group.members.get(member_id)
            if member is None or member.awaiting_join or member.awaiting_sync:
                return Result()
            return self._remove_members(group, [member_id], now_ms,
                                        f"session of {member_id} expired")
        if kind is TimerKind.PENDING:
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                return self._maybe_complete_join(group, now_ms)
            return Result()
        if kind is TimerKind.JOIN:
            if not group.is_(S.PREPARING_REBALANCE):
                return Result()
            final = self._initial_deadline.get(group_id)
            if final is not None and group.new_member_added and now_ms < final:
                # End of an initial delay while members kept arriving: wait one more delay
                # (never past the rebalance timeout) so a starting fleet lands in one
                # generation instead of one rebalance per member. With a 0 ms delay the
                # timer is re-armed for the same instant (the broker's next loop turn): it
                # cannot spin, as each extension needs a member that joined since the last
                # firing, and the rebalance timeout still ends the chain (Kafka's 0 ms chain
                # has no end while members keep coming: its remaining time never shrinks).
                group.new_member_added = False
                nxt = min(now_ms + self.config.initial_rebalance_delay_ms, final)
                return Result(timers=[TimerOp(TimerKey(TimerKind.JOIN, group_id), nxt)])
            return self._complete_join(group, now_ms)
        if kind is TimerKind.SYNC:
            # Members of this generation that never sent SyncGroup, whether the leader's
            # assignment arrived (Stable) or not (CompletingRebalance), are gone.
            if not group.is_(S.COMPLETING_REBALANCE, S.STABLE):
                return Result()
            missing = [mid for mid in group.pending_sync if mid in group.members]
            return self._remove_members(group, missing, now_ms, "sync timeout")
        return Result()

    def _session_timer(self, group: ClassicGroup, member: ClassicMember, now_ms: int) -> TimerOp:
        return TimerOp(TimerKey(TimerKind.SESSION, group.group_id, member.member_id),
                       now_ms + member.session_timeout_ms)

    # == admin ===============================================================================
    def describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(ErrorCode.none, group_id, "Dead", "", "")
        stable = group.is_(S.STABLE)
        members = tuple(
            DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.metadata_for(group.protocol) if stable else b"",
                            m.assignment if stable else b"")
            for m in group.members.values()
        )
        return DescribedGroup(ErrorCode.none, group_id, group.state.value,
                              group.protocol_type or "",
                              (group.protocol or "") if stable else "", members)

    def list_groups(self) -> list[ListedGroup]:
        return [ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values() if not g.is_(S.DEAD)]

    def delete_group(self, group_id: str, now_ms: int) -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups for one group: only an Empty group may go (NON_EMPTY_GROUP otherwise)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, []
        if not group.is_(S.EMPTY):
            return ErrorCode.non_empty_group, []
        group.transition(S.DEAD, now_ms, "deleted")
        del self.groups[group_id]
        return ErrorCode.none, [Record(GroupMetadataKey(group_id), None)]

    def _group_record(self, group: ClassicGroup) -> Record:
        return Record(GroupMetadataKey(group.group_id), group.to_record())

    # == conversions (mixed groups) ===========================================================
    def hand_over(self, group: ClassicGroup) -> Result:
        """`group` has just become a consumer group (its tombstone is replayed): whoever it
        parked is told REBALANCE_IN_PROGRESS (they rejoin, now into the consumer group), and
        its timers and live state go."""
        gid = group.group_id
        result = Result(timers=[TimerOp(TimerKey(TimerKind.JOIN, gid), None),
                                TimerOp(TimerKey(TimerKind.SYNC, gid), None)])
        for m in group.members.values():
            result.timers.append(TimerOp(TimerKey(TimerKind.SESSION, gid, m.member_id), None))
            if m.awaiting_join:
                result.completed.append((m.join_token, JoinGroupResponse(
                    ErrorCode.rebalance_in_progress, member_id=m.member_id)))
                m.awaiting_join, m.join_token = False, None
            if m.awaiting_sync:
                result.completed.append((m.sync_token, SyncGroupResponse(
                    ErrorCode.rebalance_in_progress)))
                m.awaiting_sync, m.sync_token = False, None
        for member_id in group.pending_members:
            result.timers.append(TimerOp(TimerKey(TimerKind.PENDING, gid, member_id), None))
        self._initial_deadline.pop(gid, None)
        return result

    def adopt(self, group_id: str, now_ms: int, rebalance: bool, why: str) -> Result:
        """A group that has just become classic (its record is replayed, e.g. a consumer
        group downgraded): arm its members' session timers and, if asked, start a
        rebalance so that they agree on a classic generation."""
        group = self.groups.get(group_id)
        if group is None:
            return Result()
        result = Result(timers=[self._session_timer(group, m, now_ms)
                                for m in group.members.values()])
        if rebalance and group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            result.merge(self._prepare_rebalance(group, now_ms, why))
        return result
