"""One member of a KIP-848 consumer group: what it asked for and where its assignment stands.

A member is an immutable value; every change makes a new one (`dataclasses.replace`), so a
handler can compute the member it *would* have, compare it with the old one, and only then
decide which records to write. Its fields fall in two halves that map onto two records:

- what the member asked for (`ConsumerGroupMemberMetadataValue`, record type 5): instance
  id, rack, client id and host, subscribed topic names and regex, rebalance timeout, server
  assignor, and, for a classic-protocol member of a mixed group, its session timeout and
  JoinGroup protocols;
- where its assignment stands (`ConsumerGroupCurrentMemberAssignmentValue`, type 8): its
  epoch, the epoch before that (to accept a heartbeat whose answer was lost), its state, the
  partitions it may use and the partitions it must give back.

Member states (Kafka's `MemberState`, with Kafka's byte values in the record):
- STABLE: at its epoch, owns everything its target gives it at that epoch;
- UNREVOKED_PARTITIONS: must give back `pending_revocation` before moving on; it stays at its
  epoch meanwhile, and a revocation timer (its rebalance timeout) fences it if it never does;
- UNRELEASED_PARTITIONS: at the target epoch, but some target partitions are still held by
  other members and will be handed over once they let go;
- UNKNOWN: a state value written by a newer coordinator; the member is made to start over.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace

from coterie.common.shared_table import SharedTable, shared_opt, shared_str
from coterie.group.records.consumer import (
    NO_PARTITIONS,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    Partitions,
)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.Enum):
    """Where a member's reconciliation stands; values are the bytes Kafka persists."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


# One frozenset per distinct subscription, shared by every member subscribed to the same
# topics (most members of a group are): a set of names costs 216 bytes or more per member
# otherwise. Bounded, so that members with ever new subscriptions cannot grow it forever.
_SHARED_NAMES_MAX = 4096
_SHARED_NAMES: SharedTable[frozenset[str]] = SharedTable(_SHARED_NAMES_MAX)


def shared_names(names: Iterable[str]) -> frozenset[str]:
    """`frozenset(names)`, as the same object as every equal subscription's."""
    return _SHARED_NAMES.share(frozenset(names))


# The record's sorted tuple of a subscription, likewise one per distinct subscription.
_SORTED_NAMES: dict[frozenset[str], tuple[str, ...]] = {}


def sorted_names(names: frozenset[str]) -> tuple[str, ...]:
    """`tuple(sorted(names))`, as the same object for every equal subscription."""
    found = _SORTED_NAMES.get(names)
    if found is not None:
        return found
    found = tuple(sorted(names))
    if len(_SORTED_NAMES) < _SHARED_NAMES_MAX:
        _SORTED_NAMES[names] = found
    return found


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """One member, immutable so a handler can compare before and after (module docstring)."""

    member_id: str
    # -- what the member asked for (record type 5) --
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # Mixed groups: set when the member speaks the classic protocol.
    classic: ClassicMemberMetadata | None = None
    # -- where its assignment stands (record type 8) --
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = NO_PARTITIONS
    pending_revocation: Partitions = NO_PARTITIONS

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def holds(self) -> Partitions:
        """Every partition this member may still be using: the ones it was given and the
        ones it has been asked to give back but has not yet."""
        if not self.pending_revocation:
            return self.assigned
        return self.assigned | self.pending_revocation

    # -- the two record halves ---------------------------------------------------------------
    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=sorted_names(self.subscribed_topic_names),
            # Kafka writes an empty string, not null, for "no regex".
            subscribed_topic_regex=self.subscribed_topic_regex or "",
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=self.state.value,
            assigned=self.assigned,
            pending_revocation=self.pending_revocation,
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerMember:
        return replace(
            self,
            instance_id=value.instance_id,
            rack_id=shared_opt(value.rack_id),
            client_id=shared_str(value.client_id),
            client_host=shared_str(value.client_host),
            subscribed_topic_names=shared_names(value.subscribed_topic_names),
            # Kafka's clients clear a regex subscription with an empty string.
            subscribed_topic_regex=shared_opt(value.subscribed_topic_regex or None),
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=shared_opt(value.server_assignor),
            classic=value.classic_member_metadata,
        )

    def with_assignment(self, value: ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerMember:
        return replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_value(value.state),
            assigned=value.assigned,
            pending_revocation=value.pending_revocation,
        )

    def same_metadata(self, other: ConsumerMember) -> bool:
        """Whether the record-type-5 half is equal (what a heartbeat usually leaves alone)."""
        return (self.instance_id == other.instance_id
                and self.rack_id == other.rack_id
                and self.client_id == other.client_id
                and self.client_host == other.client_host
                and self.same_subscription(other)
                and self.rebalance_timeout_ms == other.rebalance_timeout_ms
                and self.server_assignor == other.server_assignor
                and self.classic == other.classic)

    def same_subscription(self, other: ConsumerMember) -> bool:
        """Whether both subscribe to the same topic names and the same regex."""
        return (self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex)

    def same_assignment(self, other: ConsumerMember) -> bool:
        return (self.member_epoch == other.member_epoch
                and self.previous_member_epoch == other.previous_member_epoch
                and self.state is other.state
                and self.assigned == other.assigned
                and self.pending_revocation == other.pending_revocation)
