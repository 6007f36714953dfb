"""Group events of share groups (`coterie.group.events` has the format and the deriver).

A share group's snapshot says which partitions each member holds; a share member holds its
target at once and may share partitions with others, so assignments and revocations are
plain differences per member (topic ids named through the shard's topic picture).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from coterie.group.events import (
    Event,
    NameOf,
    departure,
    event,
    partition_name,
    sorted_partitions,
)
from coterie.group.share.kinds import ShareTimer
from coterie.group.timers import TimerKind

SHARE = "share"

FENCE_REASONS: dict[TimerKind, str] = {ShareTimer.SHARE_SESSION: "session timeout"}


@dataclass(frozen=True, slots=True)
class ShareMemberView:
    client_id: str
    epoch: int
    held: frozenset[tuple[Any, int]]  # by topic id
    target: int  # partitions in the member's target assignment


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    protocol: ClassVar[str] = SHARE
    state: str
    group_epoch: int
    assignment_epoch: int
    members: Mapping[str, ShareMemberView]

    @property
    def generation(self) -> int:
        return self.group_epoch

    @classmethod
    def new_memo(cls, snapshot: ShareSnapshot | None) -> None:
        return None

    @classmethod
    def derive(cls, group_id: str, before: ShareSnapshot | None,
               after: ShareSnapshot | None, memo: None, now_ms: int,
               cause: TimerKind | None, name_of: NameOf) -> list[Event]:
        b = before or ShareSnapshot("Empty", 0, 0, {})
        a = after or ShareSnapshot("Dead", b.group_epoch, b.assignment_epoch, {})
        out: list[Event] = []

        def emit(kind: str, member: str | None = None, **details: Any) -> None:
            out.append(event(now_ms, group_id, SHARE, kind, a.group_epoch, member, details))

        def names(parts: Iterable[tuple[Any, int]]) -> list[str]:
            return sorted_partitions(partition_name(name_of(t) or str(t), p)
                                     for t, p in parts)

        for mid, view in b.members.items():
            if mid not in a.members:
                departure(emit, mid, view.client_id, None, cause, FENCE_REASONS)
        for mid, view in a.members.items():
            if mid not in b.members:
                emit("member_joined", mid, client_id=view.client_id)
        if a.group_epoch > b.group_epoch:
            emit("epoch_bumped", previous=b.group_epoch, members=len(a.members))
        if a.assignment_epoch != b.assignment_epoch:
            emit("assignment_computed", epoch=a.assignment_epoch,
                 partitions={mid: v.target for mid, v in a.members.items()})
        for mid, view in a.members.items():
            old = b.members.get(mid)
            had = old.held if old is not None else frozenset()
            if had - view.held:
                emit("partitions_revoked", mid, partitions=names(had - view.held),
                     count=len(had - view.held), reason="reassigned")
            if view.held - had:
                emit("partitions_assigned", mid, partitions=names(view.held - had),
                     count=len(view.held - had))
            if old is not None and old.epoch != view.epoch:
                emit("member_epoch_changed", mid, previous=old.epoch, epoch=view.epoch,
                     state="stable")
        if a.state != b.state:
            emit("state_changed", previous=b.state, state=a.state)
        if after is None:
            emit("group_deleted")
        return out
