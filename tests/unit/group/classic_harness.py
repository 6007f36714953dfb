"""Drives a ClassicGroups with virtual time, as the broker would, minus the sockets.

Records are "persisted" into a list, timers live in a dict and fire in deadline order when
time advances, and every answer (immediate or completed later) is stored by request token.
"""

from __future__ import annotations

import itertools
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.groups import ClassicGroups
from coterie.group.classic.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from coterie.group.records.record import Record

from .virtual_time import VirtualTime


class Harness(VirtualTime):
    def __init__(self, config: ClassicConfig | None = None,
                 records: list[Record] | None = None, now_ms: int = 0) -> None:
        self.config = config or ClassicConfig(initial_rebalance_delay_ms=0)
        counter = itertools.count(1)
        self.coordinator = ClassicGroups(
            self.config, lambda client_id: f"{client_id or 'member'}-{next(counter)}")
        super().__init__(now_ms)
        self._tokens = itertools.count(1)
        if records:
            self.load(records)

    def group(self, group_id: str = "g") -> ClassicGroup:
        return self.coordinator.groups[group_id]

    # -- requests -------------------------------------------------------------------------
    def join(self, member_id: str = "", protocols: tuple = (("range", b"m"),),
             group_id: str = "g", session_ms: int = 10_000, rebalance_ms: int = 30_000,
             instance_id: str | None = None, protocol_type: str = "consumer",
             require_known: bool = True, client_id: str = "c",
             skip_assignment: bool = False) -> Any:
        """Send a JoinGroup; returns its token (answer, if any, in self.answers[token])."""
        token = next(self._tokens)
        resp = self.apply(self.coordinator.join_group(JoinGroupRequest(
            group_id=group_id, member_id=member_id, protocol_type=protocol_type,
            protocols=tuple(protocols), session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, group_instance_id=instance_id,
            require_known_member_id=require_known, client_id=client_id, token=token,
            supports_skip_assignment=skip_assignment,
        ), self.now))
        if resp is not None:
            self.answers[token] = resp
        return token

    def join_new(self, **kw: Any) -> tuple[str, Any]:
        """The v4+ dance: MEMBER_ID_REQUIRED, then join again with the given id."""
        token = self.join(**kw)
        first = self.answers.get(token)
        if first is not None and first.error == ErrorCode.member_id_required:
            kw["member_id"] = first.member_id
            return first.member_id, self.join(**kw)
        if first is not None:
            return first.member_id, token
        # Parked at once (static members skip MEMBER_ID_REQUIRED): find its id in the group.
        group = self.coordinator.groups[kw.get("group_id", "g")]
        return group.static_members[kw["instance_id"]], token

    def sync(self, member_id: str, generation: int, assignments: dict | None = None,
             group_id: str = "g", error: ErrorCode = ErrorCode.none,
             instance_id: str | None = None) -> Any:
        token = next(self._tokens)
        resp = self.apply(self.coordinator.sync_group(SyncGroupRequest(
            group_id=group_id, generation_id=generation, member_id=member_id,
            assignments=tuple((assignments or {}).items()), error=error,
            group_instance_id=instance_id, token=token,
        ), self.now))
        if resp is not None:
            self.answers[token] = resp
        return token

    def heartbeat(self, member_id: str, generation: int, group_id: str = "g",
                  instance_id: str | None = None) -> ErrorCode:
        return self.apply(self.coordinator.heartbeat(HeartbeatRequest(
            group_id, generation, member_id, instance_id), self.now))

    def leave(self, *members: LeavingMember, group_id: str = "g") -> Any:
        return self.apply(self.coordinator.leave_group(LeaveGroupRequest(
            group_id, tuple(members)), self.now))

    def delete_group(self, group_id: str = "g") -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups of a classic group as the shard does it (`Group.deletion`, then the
        tombstone replayed), without applying the records to the harness."""
        group = self.coordinator.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, []
        code, records = group.deletion()
        for record in records:
            self.coordinator.replay(record)
        return code, records

    def answer(self, token: Any) -> Any:
        return self.answers.get(token)

    def replayed(self) -> ClassicGroups:
        fresh = ClassicGroups(self.config, lambda c: "unused")
        for record in self.records:
            fresh.replay(record)
        return fresh
