"""One share group member, as its records build it.

A member is two records' worth of state: what it told the coordinator about itself (rack,
client, subscribed topic names: `ShareGroupMemberMetadataValue`) and its current assignment
(`ShareGroupCurrentMemberAssignmentValue`: member epoch, previous epoch, partitions). A
share member has no static identity, no rebalance timeout and nothing pending revocation:
it holds its target as soon as it hears of it. `ShareMember` is an immutable value replaced
on every change, so snapshots and fingerprints compare members cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from coterie.group.records.share import (
    NO_PARTITIONS,
    Partitions,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STABLE = 0  # Kafka's MemberState.STABLE, the only state a share member is ever in


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: Partitions = NO_PARTITIONS

    def metadata_value(self) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(
            rack_id=self.rack_id, client_id=self.client_id, client_host=self.client_host,
            subscribed_topic_names=tuple(sorted(self.subscribed)))

    def assignment_value(self) -> ShareGroupCurrentMemberAssignmentValue:
        return ShareGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch,
            state=self.state, assigned=self.assigned)

    def with_metadata(self, value: ShareGroupMemberMetadataValue) -> ShareMember:
        return replace(self, rack_id=value.rack_id, client_id=value.client_id,
                       client_host=value.client_host,
                       subscribed=frozenset(value.subscribed_topic_names))

    def with_assignment(self, value: ShareGroupCurrentMemberAssignmentValue) -> ShareMember:
        return replace(self, member_epoch=value.member_epoch,
                       previous_member_epoch=value.previous_member_epoch, state=value.state,
                       assigned=value.assigned)

    def same_metadata(self, other: ShareMember) -> bool:
        """Whether the two would write the same member metadata record."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed) == (
            other.rack_id, other.client_id, other.client_host, other.subscribed)
