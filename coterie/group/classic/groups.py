"""The classic groups of one shard: the entry point of the classic protocol (seed 1).

Every handler takes a request and `now_ms` and returns a `Result`: the answer (or None when
the request parks), the records to persist before answering, the timers to arm or cancel, and
the parked requests it completes. The rules live in one module per phase: `join.py`
(JoinGroup), `static.py` (static members), `rebalance.py` (the join phase and its end),
`sync.py` (SyncGroup, Heartbeat), `leave.py` (LeaveGroup, removals), `timers.py`.

State. A group's durable state changes only by replaying its record (`replay` here at
start-up, `ClassicGroup.apply` when a live result carries one: the same code); what no
record holds is the group's volatile table (`live.py`), which a rebuilt group starts without
and re-derives (`after_load`, `after_rebuild`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.classic import join, leave, sync, timers
from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicState
from coterie.group.classic.messages import (
    DescribedGroup,
    DescribedMember,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coterie.group.classic.rebalance import prepare_rebalance, session_timer
from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey
from coterie.group.typed_groups import GroupsOf

S = ClassicState


class ClassicGroups:
    """All classic groups of one shard (module docstring)."""

    def __init__(self, config: ClassicConfig, new_member_id: Callable[[str], str],
                 registry: dict[str, Any] | None = None) -> None:
        """`registry` is the shard's one dict of groups of every type (this class sees its
        classic groups); a private one by default, for tests that drive classic groups
        alone."""
        self.config = config
        self._new_member_id = new_member_id
        self.groups: GroupsOf[ClassicGroup] = GroupsOf(
            {} if registry is None else registry, ClassicGroup)

    # == replay ==============================================================================
    def replay(self, record: Record) -> None:
        """Apply a persisted group record: the same path at start-up and in tests."""
        key = record.key
        if not isinstance(key, GroupMetadataKey):
            return
        if not isinstance(record.value, GroupMetadataValue):  # a tombstone
            self.groups.pop(key.group_id, None)
            return
        group = self.groups.get(key.group_id)
        if group is None:
            group = self.groups[key.group_id] = ClassicGroup(key.group_id)
        group.apply(record.value)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Deadlines to arm once loading finishes: members must show up again in time."""
        ops: list[TimerOp] = []
        for group in self.groups.values():
            ops += timers.after_load(group, now_ms)
        return ops

    def after_rebuild(self, group_id: str, failed: list[Record], now_ms: int) -> Result:
        """`group_id` was rebuilt from its records after the append of `failed` failed: its
        volatile table is re-derived as after a load. A group whose own record was among
        them, and that has members, then rebalances, as Kafka's does when the write of an
        assignment fails: the generation being formed or synced is gone. A group put back
        by a failed conversion or deletion is as its records say, nothing more."""
        group = self.groups.get(group_id)
        if group is None:
            return Result()
        result = Result(timers=timers.after_load(group, now_ms))
        own = any(isinstance(r.key, GroupMetadataKey) and r.value is not None
                  for r in failed)
        if own and group.members and group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            result.merge(prepare_rebalance(group, self.config, now_ms,
                                           "a record could not be persisted"))
        return result

    # == the protocol ========================================================================
    def validate_join(self, req: JoinGroupRequest) -> JoinGroupResponse | None:
        """The answer a JoinGroup gets before any group is looked at, or None
        (`join.validate_join`)."""
        return join.validate_join(self.config, req)

    def join_group(self, req: JoinGroupRequest, now_ms: int) -> Result:
        return join.join_group(self.groups, self.config, self._new_member_id, req, now_ms)

    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> Result:
        return sync.sync_group(self.groups, self.config, req, now_ms)

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> Result:
        return sync.heartbeat(self.groups, req, now_ms)

    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> Result:
        return leave.leave_group(self.groups, self.config, req, now_ms)

    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        return timers.on_timer(self.groups, self.config, key, now_ms)

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

    # == conversions (mixed groups) ===========================================================
    def hand_over(self, group: ClassicGroup) -> Result:
        """`group` has just become a consumer group (its tombstone is replayed): whoever it
        parked is told REBALANCE_IN_PROGRESS (they rejoin, now into the consumer group), and
        its timers and volatile table go."""
        gid = group.group_id
        result = Result(timers=[TimerOp(TimerKey(ClassicTimer.JOIN, gid), None),
                                TimerOp(TimerKey(ClassicTimer.SYNC, gid), None)])
        for member_id in group.members:
            result.timers.append(TimerOp(TimerKey(ClassicTimer.SESSION, gid, member_id), None))
        result.completed += group.parked_answers(
            lambda mid: JoinGroupResponse(ErrorCode.rebalance_in_progress, member_id=mid),
            lambda mid: SyncGroupResponse(ErrorCode.rebalance_in_progress))
        for member_id in group.live.pending_members:
            result.timers.append(TimerOp(TimerKey(ClassicTimer.PENDING, gid, member_id), None))
        return result

    def adopt(self, group_id: str, now_ms: int, rebalance: bool, why: str) -> Result:
        """A group that has just become classic (its record is replayed, e.g. a consumer
        group downgraded): arm its members' session timers and, if asked, start a
        rebalance so that they agree on a classic generation."""
        group = self.groups.get(group_id)
        if group is None:
            return Result()
        result = Result(timers=[session_timer(group_id, m, now_ms)
                                for m in group.members.values()])
        if rebalance and group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            result.merge(prepare_rebalance(group, self.config, now_ms, why))
        return result
