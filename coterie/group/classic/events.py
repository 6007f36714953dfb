"""Group events of classic groups (`coterie.group.events` has the format and the deriver).

Ownership of partitions. A classic group's coordinator only sees assignment bytes, cleared
while a rebalance runs, so the rules keep what each member was last given (the memo): with
an eager assignor (any protocol whose name does not contain "cooperative") members give
everything back when a rebalance starts; with a cooperative one they keep what the next
assignment still gives them. What a member owns is kept as the assignment bytes it was given
(the member's own object, so it costs nothing more), or empty bytes once it gave everything
up, and decoded only when an event needs it ("topic-partition" names; assignments are
decoded only for protocol type "consumer"): the decoded names cost about 1.3 KiB a member of
ten partitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicState
from coterie.group.events import (
    Event,
    NameOf,
    departure,
    event,
    partition_name,
    sorted_partitions,
)
from coterie.group.timers import TimerKind
from coterie.wire.consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolError, decode_assignment

CLASSIC = "classic"

# Timer kinds that remove members, and the reason to give.
FENCE_REASONS: dict[TimerKind, str] = {
    ClassicTimer.SESSION: "session timeout",
    ClassicTimer.JOIN: "did not rejoin before the rebalance timeout",
    ClassicTimer.SYNC: "did not sync before the rebalance timeout",
}


@dataclass(frozen=True, slots=True)
class ClassicMemberView:
    client_id: str
    instance_id: str | None
    assignment: bytes


@dataclass(slots=True)
class ClassicMemo:
    """What each member was last given (assignment bytes), and the protocol type to decode
    them by (`known`: whether one was seen)."""

    owned: dict[str, bytes] = field(default_factory=dict)
    owned_type: str | None = None
    known: bool = False


@dataclass(frozen=True, slots=True)
class ClassicSnapshot:
    protocol: ClassVar[str] = CLASSIC
    state: str
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: Mapping[str, ClassicMemberView]

    @classmethod
    def new_memo(cls, snapshot: ClassicSnapshot | None) -> ClassicMemo:
        if snapshot is None:
            return ClassicMemo()
        return ClassicMemo({mid: m.assignment for mid, m in snapshot.members.items()},
                           snapshot.protocol_type, True)

    @classmethod
    def derive(cls, group_id: str, before: ClassicSnapshot | None,
               after: ClassicSnapshot | None, memo: ClassicMemo, now_ms: int,
               cause: TimerKind | None, name_of: NameOf) -> list[Event]:
        return _derive(group_id, before, after, memo, now_ms, cause)


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


def _derive(gid: str, before: ClassicSnapshot | None, after: ClassicSnapshot | None,
            memo: ClassicMemo, now: int, cause: TimerKind | None) -> list[Event]:
    empty = ClassicSnapshot(ClassicState.EMPTY.value, 0, None, None, None, {})
    b = before or empty
    a = after or ClassicSnapshot(ClassicState.DEAD.value, b.generation, b.protocol_type,
                                 None, None, {})
    gen = a.generation
    owned = memo.owned
    owned_type = memo.owned_type if memo.known else a.protocol_type
    out: list[Event] = []

    def held(member: str, forget: bool = False) -> frozenset[str]:
        given = owned.pop(member, b"") if forget else owned.get(member, b"")
        return decode_partitions(owned_type, given)

    def emit(kind: str, member: str | None = None, **details: Any) -> None:
        out.append(event(now, gid, CLASSIC, kind, gen, member, details))

    def revoke(member: str, parts: frozenset[str], reason: str) -> None:
        if parts:
            emit("partitions_revoked", member, partitions=sorted_partitions(parts),
                 count=len(parts), reason=reason)

    gone = [m for m in b.members if m not in a.members]
    for mid in gone:
        view = b.members[mid]
        departure(emit, mid, view.client_id, view.instance_id, cause, FENCE_REASONS)
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
        if a.state in rebalancing and is_eager(b.protocol_name or a.protocol_name):
            for mid in list(owned):
                revoke(mid, held(mid, forget=True), "eager rebalance")
    if a.generation != b.generation:
        emit("generation_bumped", previous=b.generation, members=len(a.members))
    if a.protocol_name != b.protocol_name and a.protocol_name is not None:
        emit("protocol_selected", a.leader, protocol=a.protocol_name, previous=b.protocol_name)
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
                emit("partitions_assigned", mid,
                     partitions=sorted_partitions(new[mid] - had[mid]),
                     count=len(new[mid] - had[mid]))
            owned[mid] = a.members[mid].assignment
        memo.owned_type, memo.known = a.protocol_type, True
    if a.state != b.state:
        emit("state_changed", previous=b.state, state=a.state)
    if after is None:
        emit("group_deleted")
    return out
