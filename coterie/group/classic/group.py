"""One classic group: its durable membership, built only by its records, and its live table.

What is durable is what the group's last record (`GroupMetadataValue`) says: `durable`, a
`Membership` that only `apply` (the replay of a record, live and at start-up alike) replaces.
What no record holds is in `live` (`coterie.group.classic.live`): the join phase's draft
membership while the group is PreparingRebalance, the parked requests, pending member ids,
the sync phase's bookkeeping. The group's state and members as every rule sees them
(`view`, `state`) combine the two: the draft while a join phase runs, the durable
membership otherwise.

The `Group` protocol (`coterie.group.group`) is implemented here: the rules the shard
applies to a group of any type (offset commit fencing, listing, expiry, events).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.classic.events import ClassicMemberView, ClassicSnapshot
from coterie.group.classic.live import ClassicLive
from coterie.group.classic.membership import ClassicMember, ClassicState, Membership
from coterie.group.classic.messages import JoinGroupResponse, SyncGroupResponse
from coterie.group.group import ListedGroup, Refusal
from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue
from coterie.group.records.record import Record
from coterie.wire.consumer_protocol import PROTOCOL_TYPE, subscribed_topics

S = ClassicState


class ClassicGroup:
    """One classic group (module docstring)."""

    __slots__ = ("durable", "group_id", "live")
    group_type = "classic"
    # A join phase changes the group without a record: observers look after every call.
    changes_without_records = True

    def __init__(self, group_id: str, durable: Membership | None = None) -> None:
        self.group_id = group_id
        self.durable = durable if durable is not None else Membership()
        self.live = ClassicLive()

    # -- replay ----------------------------------------------------------------------------
    def apply(self, value: GroupMetadataValue,
              known: Mapping[str, ClassicMember] | None = None) -> None:
        """Replay one record of this group: the durable membership becomes what it says
        (`Membership.from_record`; members the live group knows, or `known`, keep the
        protocols the record cannot hold). The only way durable state changes."""
        self.durable = Membership.from_record(value, self.view.members if known is None
                                              else known)

    # -- the group as the rules see it -----------------------------------------------------
    @property
    def view(self) -> Membership:
        """The join phase's draft while one runs, else the durable membership."""
        phase = self.live.join_phase
        return self.durable if phase is None else phase.draft

    @property
    def state(self) -> ClassicState:
        if self.live.join_phase is not None:
            return S.PREPARING_REBALANCE
        state = self.durable.state
        if state is S.COMPLETING_REBALANCE and self.live.assigned:
            return S.STABLE  # assigned, though every assignment is empty
        return state

    def is_(self, *states: ClassicState) -> bool:
        return self.state in states

    @property
    def members(self) -> dict[str, ClassicMember]:
        return self.view.members

    @property
    def static_members(self) -> dict[str, str]:
        return self.view.static_members

    @property
    def generation(self) -> int:
        return self.durable.generation

    @property
    def protocol(self) -> str | None:
        return self.durable.protocol

    @property
    def protocol_type(self) -> str | None:
        return self.view.protocol_type

    @property
    def leader(self) -> str | None:
        return self.view.leader

    @property
    def state_timestamp_ms(self) -> int:
        return self.view.state_timestamp_ms

    @property
    def pending_members(self) -> set[str]:
        return self.live.pending_members

    def to_record(self) -> GroupMetadataValue:
        return self.view.to_record()

    def fenced(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        return self.view.fenced(member_id, instance_id)

    def awaiting(self, member_id: str) -> bool:
        """Whether the member has a JoinGroup or SyncGroup parked (it is alive: its session
        timer waits)."""
        return member_id in self.live.joins or member_id in self.live.syncs

    def parked_answers(self, join: Any, sync: Any) -> list[tuple[Any, Any]]:
        """(token, answer) for every parked request, the answers built by `join(member_id)`
        and `sync(member_id)`; the table forgets them."""
        live = self.live
        out = [(token, join(mid)) for mid, token in live.joins.items()]
        out += [(token, sync(mid)) for mid, token in live.syncs.items()]
        live.joins.clear()
        live.syncs.clear()
        return out

    # -- the Group protocol (coterie.group.group) ------------------------------------------
    def has_members(self) -> bool:
        return bool(self.members)

    def listing(self) -> ListedGroup | None:
        if self.is_(S.DEAD):
            return None
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, "classic")

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
        if self.is_(S.DEAD):
            return ErrorCode.coordinator_not_available
        if generation < 0 and self.is_(S.EMPTY):
            return None
        if generation < 0 and not member_id and instance_id is None:
            return None if transactional else ErrorCode.unknown_member_id
        fenced = self.fenced(member_id, instance_id)
        if fenced is not None:
            return fenced
        if generation != self.generation:
            return ErrorCode.illegal_generation
        if not transactional and self.is_(S.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return None

    def fetch_refusal(self, member_id: str | None, epoch: int) -> Refusal | None:
        """Kafka does not fence a classic group's OffsetFetch."""
        return None

    def offset_delete_refusal(self) -> Refusal | None:
        """A classic group's offsets may be deleted (partition by partition)."""
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
        return self.state_timestamp_ms if self.is_(S.EMPTY) else None

    def deletion(self) -> tuple[ErrorCode, list[Record]]:
        """Only an Empty group may be deleted: its tombstone."""
        if not self.is_(S.EMPTY):
            return ErrorCode.non_empty_group, []
        return ErrorCode.none, [Record(GroupMetadataKey(self.group_id), None)]

    def dropped(self, error: ErrorCode) -> list[tuple[Hashable, Any]]:
        """The parked JoinGroups and SyncGroups, answered with `error`."""
        return self.parked_answers(lambda mid: JoinGroupResponse(error, member_id=mid),
                                   lambda mid: SyncGroupResponse(error))

    def event_snapshot(self) -> ClassicSnapshot:
        return ClassicSnapshot(
            state=self.state.value, generation=self.generation,
            protocol_type=self.protocol_type, protocol_name=self.protocol, leader=self.leader,
            members={mid: ClassicMemberView(m.client_id, m.group_instance_id, m.assignment)
                     for mid, m in self.members.items()})

    def event_fingerprint(self) -> Hashable:
        """A classic group's assignments only change with its state or generation; tuples
        compare their items by identity first, so this is cheap."""
        members = self.members
        return (self.state, self.generation, self.leader, self.protocol, tuple(members),
                tuple(m.assignment for m in members.values()))
