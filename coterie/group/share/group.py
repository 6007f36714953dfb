"""A KIP-932 share group's state, built only by applying records.

Like a consumer or streams group, every durable change goes through one `apply_*` per
record kind (tombstones included), the same path a coordinator takes when it loads
`__consumer_offsets`; handlers write records and replay them, so live and replayed state
cannot drift apart.

What a group holds (all durable; a share group has no volatile table):
- the group epoch and the metadata hash of the topics its members subscribe to
  (`ShareGroupMetadataValue`);
- members (`member.py`), the target assignment (member -> partitions) and its epoch;
- which partitions' share-partition state was set up (`ShareGroupStatePartitionMetadata`,
  record type 15: `state_partitions`). coterie has no share coordinator yet, so it records
  the partitions it assigns as initialized at once (docs/share-groups.md).

The state, as Kafka 4.2's ShareGroup derives it: Empty without members, else Stable (a share
member never waits for another to give a partition back).

Offsets: a share group keeps no committed offsets of the consumer kind. Kafka 4.2 refuses
OffsetCommit (and TxnOffsetCommit) and OffsetDelete for its id with GROUP_ID_NOT_FOUND "Group
<id> is not a consumer group.", and so does coterie (`commit_refusal`,
`offset_delete_refusal`); an OffsetFetch is answered without error and with no offsets.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.group import ListedGroup, Refusal
from coterie.group.records.record import Record
from coterie.group.records.share import (
    NO_PARTITIONS,
    InitTopic,
    Partitions,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from coterie.group.share.events import ShareMemberView, ShareSnapshot
from coterie.group.share.member import ShareMember

EMPTY = "Empty"
STABLE = "Stable"
PROTOCOL_TYPE = "share"


class ShareReplayError(RuntimeError):
    """Records that contradict the state they are applied to (a corrupt or misordered log):
    Kafka refuses to load such a partition, and so does coterie."""


class ShareGroup:
    """One share group (module docstring)."""

    group_type = "share"
    changes_without_records = False

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.targets: dict[str, Partitions] = {}
        self.initialized: dict[uuid.UUID, InitTopic] = {}
        self.initializing: dict[uuid.UUID, InitTopic] = {}
        self.deleting: dict[uuid.UUID, str] = {}
        self.has_state_record = False

    # == the Group protocol ====================================================================
    def has_members(self) -> bool:
        return bool(self.members)

    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def listing(self) -> ListedGroup | None:
        return ListedGroup(self.group_id, PROTOCOL_TYPE, self.state(), "share")

    def commit_refusal(self, member_id: str, epoch: int, instance_id: str | None,
                       version: int, transactional: bool = False) -> Refusal | None:
        return self._not_consumer()

    def fetch_refusal(self, member_id: str | None, epoch: int) -> Refusal | None:
        """Kafka 4.2.1 answers an OffsetFetch of a share group id without error (and with
        no offsets, as it has none), whoever asks: checked against a 4.2.1 broker."""
        return None

    def offset_delete_refusal(self) -> Refusal | None:
        return self._not_consumer()

    def _not_consumer(self) -> Refusal:
        return Refusal(ErrorCode.group_id_not_found,
                       f"Group {self.group_id} is not a consumer group.")

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def offsets_expire_from(self) -> int | None:
        return None if self.members else -1

    def deletion(self) -> tuple[ErrorCode, list[Record]]:
        """Only an empty group goes (NON_EMPTY_GROUP), with Kafka 4.2's tombstones: targets
        left over, the target epoch, the state-partition record, then the group."""
        if self.members:
            return ErrorCode.non_empty_group, []
        gid = self.group_id
        records = [Record(ShareGroupTargetAssignmentMemberKey(gid, mid), None)
                   for mid in sorted(self.targets)]
        records.append(Record(ShareGroupTargetAssignmentMetadataKey(gid), None))
        records.append(Record(ShareGroupStatePartitionMetadataKey(gid), None))
        records.append(Record(ShareGroupMetadataKey(gid), None))
        return ErrorCode.none, records

    def dropped(self, error: ErrorCode) -> list[tuple[Hashable, Any]]:
        """A share group parks no request."""
        return []

    def event_snapshot(self) -> ShareSnapshot:
        return ShareSnapshot(
            state=self.state(), group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            members={mid: ShareMemberView(m.client_id, m.member_epoch, frozenset(m.assigned),
                                          len(self.targets.get(mid, NO_PARTITIONS)))
                     for mid, m in self.members.items()})

    def event_fingerprint(self) -> Hashable:
        return (self.group_epoch, self.assignment_epoch, tuple(self.members.values()))

    # == views =================================================================================
    def target_of(self, member_id: str) -> Partitions:
        return self.targets.get(member_id, NO_PARTITIONS)

    def state_value(self) -> ShareGroupStatePartitionMetadataValue:
        return ShareGroupStatePartitionMetadataValue(
            initializing_topics=dict(self.initializing),
            initialized_topics=dict(self.initialized), deleting_topics=dict(self.deleting))

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a record can change, for comparing two groups (live and replayed)."""
        return (self.group_id, self.group_epoch, self.metadata_hash, self.assignment_epoch,
                dict(self.members), {m: frozenset(p) for m, p in self.targets.items()},
                dict(self.initialized), dict(self.initializing), dict(self.deleting),
                self.has_state_record)

    # == applying records ======================================================================
    def apply_metadata(self, value: ShareGroupMetadataValue) -> None:
        self.group_epoch = value.epoch
        self.metadata_hash = value.metadata_hash

    def apply_member_metadata(self, member_id: str,
                              value: ShareGroupMemberMetadataValue | None) -> None:
        if value is None:
            if member_id in self.targets:
                raise ShareReplayError(f"member {member_id} of {self.group_id} deleted "
                                       "before its target assignment was")
            self.members.pop(member_id, None)
            return
        old = self.members.get(member_id) or ShareMember(member_id)
        self.members[member_id] = old.with_metadata(value)

    def apply_current_assignment(self, member_id: str,
                                 value: ShareGroupCurrentMemberAssignmentValue | None,
                                 ) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self.members[member_id] = ShareMember(
                    member_id, old.rack_id, old.client_id, old.client_host, old.subscribed,
                    member_epoch=-1, previous_member_epoch=-1)
            return
        self.members[member_id] = (old or ShareMember(member_id)).with_assignment(value)

    def apply_target_epoch(self, value: ShareGroupTargetAssignmentMetadataValue | None,
                           ) -> None:
        if value is None:
            if self.targets:
                raise ShareReplayError(f"target assignment of {self.group_id} deleted while "
                                       f"it still has {len(self.targets)} members")
            self.assignment_epoch = -1
        else:
            self.assignment_epoch = value.assignment_epoch

    def apply_target_member(self, member_id: str,
                            value: ShareGroupTargetAssignmentMemberValue | None) -> None:
        if value is None:
            self.targets.pop(member_id, None)
        else:
            self.targets[member_id] = value.partitions

    def apply_state_partitions(self, value: ShareGroupStatePartitionMetadataValue | None,
                               ) -> None:
        if value is None:
            self.initialized, self.initializing, self.deleting = {}, {}, {}
            self.has_state_record = False
            return
        self.initialized = dict(value.initialized_topics)
        self.initializing = dict(value.initializing_topics)
        self.deleting = dict(value.deleting_topics)
        self.has_state_record = True
