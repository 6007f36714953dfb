"""Group events of consumer groups (`coterie.group.events` has the format and the deriver).

A consumer group's snapshot says which partitions each member holds (assigned plus pending
revocation), so revocations and assignments are plain differences; topic ids are named
through the shard's topic picture (`name_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.events import (
    Event,
    NameOf,
    departure,
    event,
    partition_name,
    sorted_partitions,
)
from coterie.group.timers import TimerKind

CONSUMER = "consumer"

# Timer kinds that remove members, and the reason to give.
FENCE_REASONS: dict[TimerKind, str] = {
    ConsumerTimer.CONSUMER_SESSION: "session timeout",
    ConsumerTimer.CONSUMER_REVOCATION: "did not revoke partitions before the rebalance timeout",
    ConsumerTimer.CONSUMER_JOIN: "did not rejoin before the rebalance timeout",
    ConsumerTimer.CONSUMER_SYNC: "did not sync before the rebalance timeout",
}


@dataclass(frozen=True, slots=True)
class ConsumerMemberView:
    client_id: str
    instance_id: str | None
    epoch: int
    state: str
    owned: frozenset[tuple[Any, int]]  # assigned + pending revocation, by topic id
    target: int  # partitions in the member's target assignment


@dataclass(frozen=True, slots=True)
class ConsumerSnapshot:
    protocol: ClassVar[str] = CONSUMER
    state: str
    group_epoch: int
    assignment_epoch: int
    members: Mapping[str, ConsumerMemberView]

    @property
    def generation(self) -> int:
        return self.group_epoch

    @classmethod
    def new_memo(cls, snapshot: ConsumerSnapshot | None) -> None:
        return None

    @classmethod
    def derive(cls, group_id: str, before: ConsumerSnapshot | None,
               after: ConsumerSnapshot | None, memo: None, now_ms: int,
               cause: TimerKind | None, name_of: NameOf) -> list[Event]:
        return _derive(group_id, before, after, now_ms, cause, name_of)


def _derive(gid: str, before: ConsumerSnapshot | None, after: ConsumerSnapshot | None,
            now: int, cause: TimerKind | None, name_of: NameOf) -> list[Event]:
    b = before or ConsumerSnapshot("Empty", 0, 0, {})
    a = after or ConsumerSnapshot("Dead", b.group_epoch, b.assignment_epoch, {})
    gen = a.group_epoch
    out: list[Event] = []

    def emit(kind: str, member: str | None = None, **details: Any) -> None:
        out.append(event(now, gid, CONSUMER, kind, gen, member, details))

    def names(parts: Iterable[tuple[Any, int]]) -> list[str]:
        return sorted_partitions(partition_name(name_of(t) or str(t), p) for t, p in parts)

    for mid, view in b.members.items():
        if mid in a.members:
            continue
        departure(emit, mid, view.client_id, view.instance_id, cause, FENCE_REASONS)
        if view.owned:
            emit("partitions_revoked", mid, partitions=names(view.owned),
                 count=len(view.owned), reason="member left")
    for mid, view in a.members.items():
        if mid not in b.members:
            emit("member_joined", mid, client_id=view.client_id, instance_id=view.instance_id)
    if a.group_epoch > b.group_epoch:
        emit("rebalance_started", previous_state=b.state, members=len(a.members))
        emit("epoch_bumped", previous=b.group_epoch, members=len(a.members))
    if a.assignment_epoch != b.assignment_epoch:
        emit("assignment_computed", epoch=a.assignment_epoch,
             partitions={mid: v.target for mid, v in a.members.items()})
    for mid, view in a.members.items():
        old = b.members.get(mid)
        had = old.owned if old is not None else frozenset()
        if had - view.owned:
            emit("partitions_revoked", mid, partitions=names(had - view.owned),
                 count=len(had - view.owned), reason="reassigned")
    for mid, view in a.members.items():
        old = b.members.get(mid)
        had = old.owned if old is not None else frozenset()
        if view.owned - had:
            emit("partitions_assigned", mid, partitions=names(view.owned - had),
                 count=len(view.owned - had))
        if old is not None and old.epoch != view.epoch:
            emit("member_epoch_changed", mid, previous=old.epoch, epoch=view.epoch,
                 state=view.state)
    if a.state != b.state:
        emit("state_changed", previous=b.state, state=a.state)
    if after is None:
        emit("group_deleted")
    return out
