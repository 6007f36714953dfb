"""One classic group: its members, its state, and the only legal moves between states.

Theory of operation (seed 1, with Apache Kafka 4.x's names for the states):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join, leave, member failure--> PreparingRebalance
    PreparingRebalance --everyone gone when the join phase ends--> Empty
    any --group deleted--> Dead

`PreparingRebalance` is the seed's "Joining": JoinGroup requests park until every known member
has rejoined. `CompletingRebalance` is "AwaitingSync": the generation is bumped, the leader
got everyone's metadata, and SyncGroup requests park until the leader's assignment arrives.

Every state change goes through `transition`, which checks it against `TRANSITIONS`; a move
that is not in the table raises `IllegalTransition` naming the group, the states and why. Two
kinds of fields live here: persisted ones (generation, protocol, leader, members' metadata and
assignments), which `to_record` / `apply_record` map to and from the group's record, and
live-only ones (parked requests, pending member ids), which a restart forgets on purpose:
clients simply resend.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from coterie.group.group import ListedGroup, Refusal
from coterie.group.records.classic import GroupMetadataValue, MemberMetadata
from coterie.wire.consumer_protocol import PROTOCOL_TYPE, subscribed_topics


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


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    # Live only: the parked JoinGroup / SyncGroup of this member, by the broker's token.
    join_token: Hashable | None = None
    awaiting_join: bool = False
    sync_token: Hashable | None = None
    awaiting_sync: bool = False

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
class ClassicGroup:
    group_id: str
    state: ClassicState = ClassicState.EMPTY
    protocol_type: str | None = None
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    state_timestamp_ms: int = -1
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # ids handed out by MEMBER_ID_REQUIRED
    # Members of the current generation that have not yet sent their SyncGroup.
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False

    # -- state -----------------------------------------------------------------------------
    def transition(self, target: ClassicState, now_ms: int, why: str) -> None:
        if target not in TRANSITIONS[self.state]:
            raise IllegalTransition(self.group_id, self.state, target, why)
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_(self, *states: ClassicState) -> bool:
        return self.state in states

    # -- the Group protocol (coterie.group.group): rules the shard applies to any group ------
    group_type = "classic"

    def has_members(self) -> bool:
        return bool(self.members)

    def listing(self) -> ListedGroup | None:
        if self.is_(ClassicState.DEAD):
            return None
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, "classic")

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

    def commit_refusal(self, member_id: str, epoch: int, instance_id: str | None,
                       version: int, transactional: bool = False) -> Refusal | None:
        """OffsetCommit fencing by generation and member id (Kafka 4.2).

        A negative generation is a commit from outside group management (an admin tool, or
        a consumer that only uses assign()): Kafka accepts it into an empty group whatever
        member id it carries, since librdkafka sends its own member id with generation -1 in
        that case. Into a group with members it is UNKNOWN_MEMBER_ID.

        TxnOffsetCommit differs twice: one without member id and generation is accepted
        whatever the group's state (older versions of it carry neither), and one during a
        rebalance's sync phase is not REBALANCE_IN_PROGRESS (the transaction does not wait
        for the group)."""
        code = self._commit_code(member_id, epoch, instance_id, transactional)
        return None if code is None else Refusal(code, code.name)

    def _commit_code(self, member_id: str, generation: int, instance_id: str | None,
                     transactional: bool) -> ErrorCode | None:
        if self.is_(ClassicState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation < 0 and self.is_(ClassicState.EMPTY):
            return None
        if generation < 0 and not member_id and instance_id is None:
            return None if transactional else ErrorCode.unknown_member_id
        fenced = self.fenced(member_id, instance_id)
        if fenced is not None:
            return fenced
        if generation != self.generation:
            return ErrorCode.illegal_generation
        if not transactional and self.is_(ClassicState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return None

    def fetch_refusal(self, member_id: str | None, epoch: int) -> Refusal | None:
        """Kafka does not fence a classic group's OffsetFetch."""
        return None

    def subscribed_topics(self) -> set[str]:
        """The topics in the members' embedded consumer-protocol subscriptions; none for a
        group of another protocol type (Connect's, say) or without members."""
        if not self.members or self.protocol_type != PROTOCOL_TYPE:
            return set()
        topics: set[str] = set()
        for m in self.members.values():
            topics |= subscribed_topics(m.metadata_for(self.protocol))
        return topics

    def offsets_expire_from(self) -> int | None:
        """Retention runs from the moment the group became empty (Kafka's rule)."""
        return self.state_timestamp_ms if self.is_(ClassicState.EMPTY) else None

    # -- membership --------------------------------------------------------------------------
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
        self.pending_sync.discard(member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def replace_static(self, old_id: str, new_id: str) -> ClassicMember:
        """Give a static member a new member id, keeping its place and assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def has_static(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def all_joined(self) -> bool:
        return not self.pending_members and all(
            m.awaiting_join for m in self.members.values()
        )

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

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

    # -- persistence -----------------------------------------------------------------------
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
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """The group as it was persisted. A group whose last record carries members but no
        assignments was persisted mid-rebalance (after the join phase, before the leader's
        SyncGroup), so it resumes in CompletingRebalance and awaits the leader (seed 1,
        coordinator failover case 3)."""
        group = cls(group_id=group_id, protocol_type=value.protocol_type or None,
                    generation=value.generation, protocol=value.protocol,
                    state_timestamp_ms=value.current_state_timestamp_ms)
        for m in value.members:
            group.add(ClassicMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                session_timeout_ms=m.session_timeout_ms,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=((value.protocol or "", m.subscription),),
                assignment=m.assignment,
            ))
        group.leader = value.leader if value.members else None
        if not value.members:
            group.state = ClassicState.EMPTY
        elif any(m.assignment for m in value.members) or value.generation == 0:
            group.state = ClassicState.STABLE
        else:
            group.state = ClassicState.COMPLETING_REBALANCE
            group.pending_sync = set(group.members)
        return group
