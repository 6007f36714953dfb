"""A classic group's members, state and generation at one moment, and the legal moves.

Theory of operation (seed 1, with Apache Kafka 4.x's names for the states):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join, leave, member failure--> PreparingRebalance
    PreparingRebalance --everyone gone when the join phase ends--> Empty
    any --group deleted--> Dead

`PreparingRebalance` is the seed's "Joining": JoinGroup requests park until every known member
has rejoined. `CompletingRebalance` is "AwaitingSync": the generation is bumped, the leader
got everyone's metadata, and SyncGroup requests park until the leader's assignment arrives.

A group has two `Membership`s at most (`coterie.group.classic.group`): the durable one, built
only from the group's last record (`from_record`), and, during a join phase, the draft the
next generation is formed from (`draft`), which joins and leaves change and which becomes
durable when the phase ends and its record (`to_record`) is replayed. Every state change of
a draft goes through `transition`, checked against `TRANSITIONS`; a move that is not in the
table raises `IllegalTransition` naming the group, the states and why.

Members are immutable values: a change is a new `ClassicMember` in the dict, so a draft can
share the durable membership's member objects (`draft` copies the dicts, not the members).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from coterie.group.records.classic import GroupMetadataValue, MemberMetadata


class ClassicState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = ClassicState
TRANSITIONS: dict[ClassicState, frozenset[ClassicState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.PREPARING_REBALANCE: frozenset({S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.COMPLETING_REBALANCE: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.DEAD}),
    S.STABLE: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.DEAD: frozenset(),
}


class IllegalTransition(RuntimeError):
    def __init__(self, group_id: str, current: ClassicState, target: ClassicState,
                 why: str) -> None:
        super().__init__(f"group {group_id!r}: illegal transition {current.value} -> "
                         f"{target.value} ({why})")


def check_transition(group_id: str, current: ClassicState, target: ClassicState,
                     why: str) -> None:
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(group_id, current, target, why)


@dataclass(frozen=True, slots=True)
class ClassicMember:
    """One member as the group knows it: what its record holds, and every protocol it sent
    (the record holds the chosen one's metadata only)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def same_protocols(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class Membership:
    """Members, generation, protocol, leader and state of a classic group (module
    docstring): the durable one, or a join phase's draft."""

    state: ClassicState = ClassicState.EMPTY
    protocol_type: str | None = None
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    state_timestamp_ms: int = -1
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id

    # -- state -----------------------------------------------------------------------------
    def transition(self, group_id: str, target: ClassicState, now_ms: int, why: str) -> None:
        check_transition(group_id, self.state, target, why)
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_(self, *states: ClassicState) -> bool:
        return self.state in states

    def draft(self) -> Membership:
        """A copy for a join phase to change (the member values are shared: immutable)."""
        return Membership(self.state, self.protocol_type, self.generation, self.protocol,
                          self.leader, self.state_timestamp_ms, dict(self.members),
                          dict(self.static_members))

    # -- lookups ---------------------------------------------------------------------------
    def fenced(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """A request naming a member that is not (or no longer) this one: a static member
        replaced by a newer instance is FENCED_INSTANCE_ID, an unknown id UNKNOWN_MEMBER_ID."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def has_static(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- membership (drafts, and the builders of records) -----------------------------------
    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and (
            self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def update(self, member_id: str, **changes: object) -> ClassicMember:
        """Replace a member by a copy with `changes`; returns the new value."""
        member = self.members[member_id] = replace(self.members[member_id], **changes)
        return member

    def replace_static(self, old_id: str, new_id: str) -> ClassicMember:
        """Give a static member a new member id, keeping its place and assignment."""
        member = replace(self.members.pop(old_id), member_id=new_id)
        self.members[new_id] = member  # at the end, as a new member would be
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        return member

    # -- protocol selection ----------------------------------------------------------------
    def candidate_protocols(self, extra: tuple[tuple[str, bytes], ...] | None = None,
                            ignore: str | None = None) -> list[str]:
        """Protocols every member (plus an optional newcomer) supports, in the first
        member's order."""
        lists = [m.protocol_names() for mid, m in self.members.items() if mid != ignore]
        if extra is not None:
            lists.append([name for name, _ in extra])
        if not lists:
            return []
        common = set(lists[0]).intersection(*lists[1:])
        return [p for p in lists[0] if p in common]

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...],
                 member_id: str | None = None) -> bool:
        """Can a member with these protocols join (or rejoin as `member_id`)?"""
        if not protocol_type or not protocols:
            return False
        others = [m for mid, m in self.members.items() if mid != member_id]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols(protocols, ignore=member_id))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all support; most votes
        wins. Ties go to the candidate that comes first in the leader's preference order, so
        the choice is deterministic (the seed allows any choice when preferences disagree)."""
        candidates = self.candidate_protocols()
        votes = dict.fromkeys(candidates, 0)
        for m in self.members.values():
            for name in m.protocol_names():
                if name in votes:
                    votes[name] += 1
                    break
        leader = self.members.get(self.leader or "")
        order = [p for p in (leader.protocol_names() if leader else candidates) if p in votes]
        return max(order, key=lambda p: (votes[p], -order.index(p)))

    # -- records ---------------------------------------------------------------------------
    def to_record(self) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol,
            leader=self.leader if self.members else None,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(self.protocol), assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, value: GroupMetadataValue,
                    known: Mapping[str, ClassicMember] | None = None) -> Membership:
        """The membership a record describes: the only way a durable one is built, live and
        at start-up alike. A record with members but no assignments was written at the end
        of a join phase, before the leader's SyncGroup, so the group is CompletingRebalance
        and awaits the leader (seed 1, coordinator failover case 3); one with assignments
        is Stable. The record holds each member's metadata for the chosen protocol only: a
        member in `known` (the live group's, when a live result is replayed) whose protocols
        include that metadata keeps all the protocols it sent, as a Kafka member does until
        a failover."""
        known = known or {}
        membership = cls(protocol_type=value.protocol_type or None,
                         generation=value.generation, protocol=value.protocol,
                         state_timestamp_ms=value.current_state_timestamp_ms)
        for m in value.members:
            protocols: tuple[tuple[str, bytes], ...] = ((value.protocol or "", m.subscription),)
            before = known.get(m.member_id)
            if before is not None and before.metadata_for(value.protocol) == m.subscription \
                    and value.protocol in before.protocol_names():
                protocols = before.protocols
            membership.add(ClassicMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                session_timeout_ms=m.session_timeout_ms,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=protocols,
                assignment=m.assignment,
            ))
        membership.leader = value.leader if value.members else None
        if not value.members:
            membership.state = ClassicState.EMPTY
        elif any(m.assignment for m in value.members) or value.generation == 0:
            membership.state = ClassicState.STABLE
        else:
            membership.state = ClassicState.COMPLETING_REBALANCE
        return membership
