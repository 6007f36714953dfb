"""Group events of streams groups (`coterie.group.events` has the format and the deriver).

A minimal snapshot: the state, the two epochs and, per member, its client, process, epoch,
reconciliation state and the tasks it holds (named "active:0_1", role and Kafka Streams'
task id), so that joins, departures, rebalances and task moves read as they do for consumer
groups (the task events reuse the partition event types, with `tasks` in their details).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from coterie.group.events import Event, NameOf, departure, event
from coterie.group.streams.kinds import StreamsTimer
from coterie.group.timers import TimerKind

STREAMS = "streams"

FENCE_REASONS: dict[TimerKind, str] = {
    StreamsTimer.STREAMS_SESSION: "session timeout",
    StreamsTimer.STREAMS_REVOCATION: "did not revoke tasks before the rebalance timeout",
}


@dataclass(frozen=True, slots=True)
class StreamsMemberView:
    client_id: str
    process_id: str
    epoch: int
    state: str
    tasks: frozenset[str]  # held (assigned + pending revocation), "role:subtopology_partition"
    target: int  # tasks in the member's target assignment


@dataclass(frozen=True, slots=True)
class StreamsSnapshot:
    protocol: ClassVar[str] = STREAMS
    state: str
    group_epoch: int
    assignment_epoch: int
    members: Mapping[str, StreamsMemberView]

    @property
    def generation(self) -> int:
        return self.group_epoch

    @classmethod
    def new_memo(cls, snapshot: StreamsSnapshot | None) -> None:
        return None

    @classmethod
    def derive(cls, group_id: str, before: StreamsSnapshot | None,
               after: StreamsSnapshot | None, memo: None, now_ms: int,
               cause: TimerKind | None, name_of: NameOf) -> list[Event]:
        b = before or StreamsSnapshot("Empty", 0, 0, {})
        a = after or StreamsSnapshot("Dead", b.group_epoch, b.assignment_epoch, {})
        out: list[Event] = []

        def emit(kind: str, member: str | None = None, **details: Any) -> None:
            out.append(event(now_ms, group_id, STREAMS, kind, a.group_epoch, member, details))

        for mid, view in b.members.items():
            if mid not in a.members:
                departure(emit, mid, view.client_id, None, cause, FENCE_REASONS)
        for mid, view in a.members.items():
            if mid not in b.members:
                emit("member_joined", mid, client_id=view.client_id,
                     process_id=view.process_id)
        if a.group_epoch > b.group_epoch:
            emit("epoch_bumped", previous=b.group_epoch, members=len(a.members))
        if a.assignment_epoch != b.assignment_epoch:
            emit("assignment_computed", epoch=a.assignment_epoch,
                 tasks={mid: v.target for mid, v in a.members.items()})
        for mid, view in a.members.items():
            old = b.members.get(mid)
            had = old.tasks if old is not None else frozenset()
            if had - view.tasks:
                emit("partitions_revoked", mid, tasks=sorted(had - view.tasks))
            if view.tasks - had:
                emit("partitions_assigned", mid, tasks=sorted(view.tasks - had))
            if old is not None and old.epoch != view.epoch:
                emit("member_epoch_changed", mid, previous=old.epoch, epoch=view.epoch,
                     state=view.state)
        if a.state != b.state:
            emit("state_changed", previous=b.state, state=a.state)
        if after is None:
            emit("group_deleted")
        return out
