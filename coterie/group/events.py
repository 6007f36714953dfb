"""Group events: what changed in a group, as plain dicts, derived from its state.

Operators and analytics jobs want a readable history of every group: who joined and left,
when a rebalance started and when the group was stable again, which partitions moved. The
cores already record every durable change in `__consumer_offsets`, but those records are a
recovery format (compacted, binary, and blind to live-only states such as a classic group's
PreparingRebalance). So events are derived here instead, by comparing a small *snapshot* of a
group taken after each operation (`Group.event_snapshot()`) with the snapshot taken after
the previous one: `EventDeriver.observe` returns the events between the two and remembers the
new snapshot. Each group type has its snapshot and the rules that turn two of them into
events (`classic/events.py`, `consumer/events.py`); a snapshot of another type than the
last one is a conversion (`group_converted`).

Pure: no clock (the caller passes `now_ms`), no I/O; the broker (coterie.broker.group_events)
encodes the dicts as JSON and appends them to `__group_events`.

Every event is a dict with the keys

    ts          the caller's clock, ms
    group       group id
    protocol    the group type ("classic", "consumer" (KIP-848), ...)
    type        one of EVENT_TYPES
    generation  classic generation / consumer group epoch after the change
    member      member id the event is about, or None
    details     a dict, depending on `type`

Partitions are named "topic-partition".
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from coterie.group.timers import TimerKind

EVENT_TYPES = (
    "member_joined", "member_left", "member_fenced", "rebalance_started",
    "generation_bumped", "epoch_bumped", "leader_elected", "protocol_selected",
    "assignment_computed", "partitions_revoked", "partitions_assigned",
    "member_epoch_changed", "state_changed", "group_deleted", "group_converted",
)

Event = dict[str, Any]
NameOf = Callable[[uuid.UUID], "str | None"]


class Snapshot(Protocol):
    """A group as events compare it. Its type names the group type (`protocol`) and holds
    the rules (`derive`); `memo` is what those rules remember of a group between two
    snapshots besides the snapshot itself: `new_memo(snapshot)` when a group is primed with
    it, `new_memo(None)` when its first snapshot is news (None: the rules need none)."""

    protocol: str

    @property
    def generation(self) -> int: ...

    @classmethod
    def new_memo(cls, snapshot: Any) -> Any: ...

    @classmethod
    def derive(cls, group_id: str, before: Any, after: Any, memo: Any, now_ms: int,
               cause: TimerKind | None, name_of: NameOf) -> list[Event]: ...


def partition_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def sorted_partitions(partitions: Iterable[str]) -> list[str]:
    """Partition names in (topic, partition number) order."""
    def key(name: str) -> tuple[str, int]:
        topic, _, index = name.rpartition("-")
        return (topic, int(index)) if index.isdigit() else (name, -1)

    return sorted(partitions, key=key)


def event(ts: int, group: str, protocol: str, kind: str, generation: int,
          member: str | None, details: dict[str, Any]) -> Event:
    return {"ts": ts, "group": group, "protocol": protocol, "type": kind,
            "generation": generation, "member": member, "details": details}


def departure(emit: Callable[..., None], member_id: str, client_id: str,
              instance_id: str | None, cause: TimerKind | None,
              reasons: Mapping[TimerKind, str]) -> None:
    """A member that went: fenced, with the reason its type gives the timer that removed
    it (`reasons`), or, with no such timer firing, left."""
    reason = None if cause is None else reasons.get(cause)
    if reason is not None:
        emit("member_fenced", member_id, reason=reason, client_id=client_id,
             instance_id=instance_id)
    else:
        emit("member_left", member_id, reason="left the group", client_id=client_id,
             instance_id=instance_id)


class EventDeriver:
    """Remembers each group's last snapshot (and its type's memo) and turns the next
    snapshot into events."""

    def __init__(self) -> None:
        self._last: dict[str, Any] = {}
        self._memo: dict[str, Any] = {}

    def prime(self, group_id: str, snapshot: Any | None) -> None:
        """Take `snapshot` as the group's current state without emitting anything (after a
        restart: the groups loaded from the log are not news)."""
        if snapshot is None:
            self._last.pop(group_id, None)
            self._memo.pop(group_id, None)
            return
        self._last[group_id] = snapshot
        memo = type(snapshot).new_memo(snapshot)
        if memo is None:
            self._memo.pop(group_id, None)
        else:
            self._memo[group_id] = memo

    def observe(self, group_id: str, snapshot: Any | None, now_ms: int,
                cause: TimerKind | None = None, name_of: NameOf | None = None) -> list[Event]:
        """Events between the group's last snapshot and `snapshot` (None: no such group).
        `cause` is the kind of timer that fired, if one did (it names why members went);
        `name_of` names consumer groups' topic ids."""
        before = self._last.get(group_id)
        if snapshot == before:
            return []
        if before is not None and snapshot is not None and type(before) is not type(snapshot):
            converted = [event(now_ms, group_id, snapshot.protocol, "group_converted",
                               snapshot.generation, None,
                               {"from": before.protocol, "to": snapshot.protocol})]
            self.prime(group_id, snapshot)
            return converted
        rules = type(snapshot if snapshot is not None else before)
        memo = self._memo.get(group_id)
        if memo is None:
            memo = rules.new_memo(None)
            if memo is not None:
                self._memo[group_id] = memo
        events = rules.derive(group_id, before, snapshot, memo, now_ms, cause,
                              name_of or (lambda _: None))
        if snapshot is None:
            self._last.pop(group_id, None)
            self._memo.pop(group_id, None)
        else:
            self._last[group_id] = snapshot
        return events
