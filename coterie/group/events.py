"""Group events: what changed in a group, as plain dicts, derived from its state.

Operators and analytics jobs want a readable history of every group: who joined and left,
when a rebalance started and when the group was stable again, which partitions moved. The
cores already record every durable change in `__consumer_offsets`, but those records are a
recovery format (compacted, binary, and blind to live-only states such as a classic group's
PreparingRebalance). So events are derived here instead, by comparing a small *snapshot* of a
group taken after each operation with the snapshot taken after the previous one:
`EventDeriver.observe` returns the events between the two and remembers the new snapshot.

Pure: no clock (the caller passes `now_ms`), no I/O; the broker (coterie.broker.group_events)
encodes the dicts as JSON and appends them to `__group_events`.

Every event is a dict with the keys

    ts          the caller's clock, ms
    group       group id
    protocol    "classic" or "consumer" (KIP-848)
    type        one of EVENT_TYPES
    generation  classic generation / consumer group epoch after the change
    member      member id the event is about, or None
    details     a dict, depending on `type`

Ownership of partitions. A consumer group's snapshot says which partitions each member holds
(assigned plus pending revocation), so revocations and assignments are plain differences. A
classic group's coordinator only sees assignment bytes, cleared while a rebalance runs, so the
deriver keeps what each member was last given: with an eager assignor (any protocol whose name
does not contain "cooperative") members give everything back when a rebalance starts; with a
cooperative one they keep what the next assignment still gives them. Partitions are named
"topic-partition" (classic assignments are decoded only for protocol type "consumer").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.membership import ClassicState
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.timers import TimerKind
from coterie.wire.consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolError, decode_assignment

CLASSIC = "classic"
CONSUMER = "consumer"

EVENT_TYPES = (
    "member_joined", "member_left", "member_fenced", "rebalance_started",
    "generation_bumped", "epoch_bumped", "leader_elected", "protocol_selected",
    "assignment_computed", "partitions_revoked", "partitions_assigned",
    "member_epoch_changed", "state_changed", "group_deleted", "group_converted",
)

# Timer kinds that remove members, and the reason to give.
FENCE_REASONS: dict[TimerKind, str] = {
    TimerKind.SESSION: "session timeout",
    TimerKind.JOIN: "did not rejoin before the rebalance timeout",
    TimerKind.SYNC: "did not sync before the rebalance timeout",
    TimerKind.CONSUMER_SESSION: "session timeout",
    TimerKind.CONSUMER_REVOCATION: "did not revoke partitions before the rebalance timeout",
    TimerKind.CONSUMER_JOIN: "did not rejoin before the rebalance timeout",
    TimerKind.CONSUMER_SYNC: "did not sync before the rebalance timeout",
}

Event = dict[str, Any]
NameOf = Callable[[uuid.UUID], "str | None"]


def partition_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


# == snapshots ================================================================================
@dataclass(frozen=True, slots=True)
class ClassicMemberView:
    client_id: str
    instance_id: str | None
    assignment: bytes


@dataclass(frozen=True, slots=True)
class ClassicSnapshot:
    state: str
    generation: int
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: Mapping[str, ClassicMemberView]


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
    state: str
    group_epoch: int
    assignment_epoch: int
    members: Mapping[str, ConsumerMemberView]


Snapshot = ClassicSnapshot | ConsumerSnapshot


def classic_snapshot(group: ClassicGroup) -> ClassicSnapshot:
    return ClassicSnapshot(
        state=group.state.value, generation=group.generation,
        protocol_type=group.protocol_type, protocol=group.protocol, leader=group.leader,
        members={mid: ClassicMemberView(m.client_id, m.group_instance_id, m.assignment)
                 for mid, m in group.members.items()})


def consumer_snapshot(group: ConsumerGroup) -> ConsumerSnapshot:
    return ConsumerSnapshot(
        state=group.state().value, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        members={mid: ConsumerMemberView(
            m.client_id, m.instance_id, m.member_epoch, m.state.name.lower(),
            m.holds(), len(group.target_of(mid)))
            for mid, m in group.members.items()})


def is_eager(protocol: str | None) -> bool:
    """Eager assignors make every member give up everything when a rebalance starts."""
    return protocol is not None and "cooperative" not in protocol.lower()


def decode_partitions(protocol_type: str | None, assignment: bytes) -> frozenset[str]:
    """Partition names in a classic member's assignment ("consumer" protocol type only;
    other protocol types and undecodable bytes own nothing as far as events go)."""
    if protocol_type != PROTOCOL_TYPE or not assignment:
        return frozenset()
    try:
        return frozenset(partition_name(t, p) for t, p in decode_assignment(assignment).partitions)
    except ConsumerProtocolError:
        return frozenset()


def _sorted(partitions: Iterable[str]) -> list[str]:
    def key(name: str) -> tuple[str, int]:
        topic, _, index = name.rpartition("-")
        return (topic, int(index)) if index.isdigit() else (name, -1)

    return sorted(partitions, key=key)


# == the deriver ==============================================================================
class EventDeriver:
    """Remembers each group's last snapshot (and, for classic groups, what each member owns)
    and turns the next snapshot into events. What a classic member owns is kept as the
    assignment bytes it was given (the member's own object, so it costs nothing more), or
    empty bytes once it gave everything up, and decoded only when an event needs it: the
    decoded names cost about 1.3 KiB a member of ten partitions."""

    def __init__(self) -> None:
        self._last: dict[str, Snapshot] = {}
        self._owned: dict[str, dict[str, bytes]] = {}
        self._owned_type: dict[str, str | None] = {}  # the protocol type to decode them by

    def prime(self, group_id: str, snapshot: Snapshot | None) -> None:
        """Take `snapshot` as the group's current state without emitting anything (after a
        restart: the groups loaded from the log are not news)."""
        if snapshot is None:
            self._last.pop(group_id, None)
            self._owned.pop(group_id, None)
            self._owned_type.pop(group_id, None)
            return
        self._last[group_id] = snapshot
        if isinstance(snapshot, ClassicSnapshot):
            self._owned[group_id] = {mid: m.assignment for mid, m in snapshot.members.items()}
            self._owned_type[group_id] = snapshot.protocol_type

    def observe(self, group_id: str, snapshot: Snapshot | None, now_ms: int,
                cause: TimerKind | None = None, name_of: NameOf | None = None) -> list[Event]:
        """Events between the group's last snapshot and `snapshot` (None: no such group).
        `cause` is the kind of timer that fired, if one did (it names why members went);
        `name_of` names consumer groups' topic ids."""
        before = self._last.get(group_id)
        if snapshot == before:
            return []
        events: list[Event] = []
        if before is not None and snapshot is not None and type(before) is not type(snapshot):
            protocol = CLASSIC if isinstance(snapshot, ClassicSnapshot) else CONSUMER
            events.append(_event(now_ms, group_id, protocol, "group_converted",
                                 _generation(snapshot), None,
                                 {"from": _protocol(before), "to": protocol}))
            self.prime(group_id, snapshot)
            return events
        if isinstance(snapshot, ClassicSnapshot) or isinstance(before, ClassicSnapshot):
            events = self._classic(group_id, before, snapshot, now_ms, cause)  # type: ignore
        else:
            events = _consumer(group_id, before, snapshot, now_ms, cause,  # type: ignore
                               name_of or (lambda _: None))
        if snapshot is None:
            self._last.pop(group_id, None)
            self._owned.pop(group_id, None)
            self._owned_type.pop(group_id, None)
        else:
            self._last[group_id] = snapshot
        return events

    # -- classic ------------------------------------------------------------------------------
    def _classic(self, gid: str, before: ClassicSnapshot | None, after: ClassicSnapshot | None,
                 now: int, cause: TimerKind | None) -> list[Event]:
        empty = ClassicSnapshot(ClassicState.EMPTY.value, 0, None, None, None, {})
        b = before or empty
        a = after or ClassicSnapshot(ClassicState.DEAD.value, b.generation, b.protocol_type,
                                     None, None, {})
        gen = a.generation
        owned = self._owned.setdefault(gid, {})
        owned_type = self._owned_type.get(gid, a.protocol_type)
        out: list[Event] = []

        def held(member: str, forget: bool = False) -> frozenset[str]:
            given = owned.pop(member, b"") if forget else owned.get(member, b"")
            return decode_partitions(owned_type, given)

        def emit(kind: str, member: str | None = None, **details: Any) -> None:
            out.append(_event(now, gid, CLASSIC, kind, gen, member, details))

        def revoke(member: str, parts: frozenset[str], reason: str) -> None:
            if parts:
                emit("partitions_revoked", member, partitions=_sorted(parts),
                     count=len(parts), reason=reason)

        gone = [m for m in b.members if m not in a.members]
        for mid in gone:
            view = b.members[mid]
            if cause in FENCE_REASONS:
                emit("member_fenced", mid, reason=FENCE_REASONS[cause],
                     client_id=view.client_id, instance_id=view.instance_id)
            else:
                emit("member_left", mid, reason="left the group",
                     client_id=view.client_id, instance_id=view.instance_id)
            revoke(mid, held(mid, forget=True), "member left")
        for mid, view in a.members.items():
            if mid not in b.members:
                emit("member_joined", mid, client_id=view.client_id,
                     instance_id=view.instance_id)
        rebalancing = (ClassicState.PREPARING_REBALANCE.value,
                       ClassicState.COMPLETING_REBALANCE.value)
        prep = ClassicState.PREPARING_REBALANCE.value
        if (a.state == prep and b.state != prep) or (
                a.generation > b.generation and b.state != prep):
            emit("rebalance_started", previous_state=b.state, members=len(a.members))
            if a.state in rebalancing and is_eager(b.protocol or a.protocol):
                for mid in list(owned):
                    revoke(mid, held(mid, forget=True), "eager rebalance")
        if a.generation != b.generation:
            emit("generation_bumped", previous=b.generation, members=len(a.members))
        if a.protocol != b.protocol and a.protocol is not None:
            emit("protocol_selected", a.leader, protocol=a.protocol, previous=b.protocol)
        if a.leader != b.leader and a.leader is not None:
            emit("leader_elected", a.leader, previous=b.leader)
        changed = {mid: v.assignment for mid, v in a.members.items()
                   if v.assignment and (mid not in b.members
                                        or b.members[mid].assignment != v.assignment)}
        if changed:
            new = {mid: decode_partitions(a.protocol_type, v.assignment)
                   for mid, v in a.members.items()}
            emit("assignment_computed", a.leader,
                 partitions={mid: len(p) for mid, p in new.items()})
            had = {mid: held(mid) for mid in a.members}
            for mid in a.members:
                revoke(mid, had[mid] - new[mid], "reassigned")
            for mid in a.members:
                if new[mid] - had[mid]:
                    emit("partitions_assigned", mid, partitions=_sorted(new[mid] - had[mid]),
                         count=len(new[mid] - had[mid]))
                owned[mid] = a.members[mid].assignment
            self._owned_type[gid] = a.protocol_type
        if a.state != b.state:
            emit("state_changed", previous=b.state, state=a.state)
        if after is None:
            emit("group_deleted")
        return out


def _consumer(gid: str, before: ConsumerSnapshot | None, after: ConsumerSnapshot | None,
              now: int, cause: TimerKind | None, name_of: NameOf) -> list[Event]:
    b = before or ConsumerSnapshot("Empty", 0, 0, {})
    a = after or ConsumerSnapshot("Dead", b.group_epoch, b.assignment_epoch, {})
    gen = a.group_epoch
    out: list[Event] = []

    def emit(kind: str, member: str | None = None, **details: Any) -> None:
        out.append(_event(now, gid, CONSUMER, kind, gen, member, details))

    def names(parts: Iterable[tuple[Any, int]]) -> list[str]:
        return _sorted(partition_name(name_of(t) or str(t), p) for t, p in parts)

    for mid, view in b.members.items():
        if mid in a.members:
            continue
        if cause in FENCE_REASONS:
            emit("member_fenced", mid, reason=FENCE_REASONS[cause], client_id=view.client_id,
                 instance_id=view.instance_id)
        else:
            emit("member_left", mid, reason="left the group", client_id=view.client_id,
                 instance_id=view.instance_id)
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


def _event(ts: int, group: str, protocol: str, kind: str, generation: int,
           member: str | None, details: dict[str, Any]) -> Event:
    return {"ts": ts, "group": group, "protocol": protocol, "type": kind,
            "generation": generation, "member": member, "details": details}


def _protocol(snapshot: Snapshot) -> str:
    return CLASSIC if isinstance(snapshot, ClassicSnapshot) else CONSUMER


def _generation(snapshot: Snapshot) -> int:
    return snapshot.generation if isinstance(snapshot, ClassicSnapshot) else snapshot.group_epoch
