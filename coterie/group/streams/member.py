"""One streams group member, as its records build it.

A member is two records' worth of state: what it told the coordinator about itself
(`StreamsGroupMemberMetadataValue`: client, process, endpoint, topology epoch...) and where
its assignment stands (`StreamsGroupCurrentMemberAssignmentValue`, held here as the
`CurrentAssignment` that `reconciliation.reconcile` steps). `StreamsMember` is an immutable
value replaced on every change, so a group's snapshot and fingerprint can compare members by
identity first.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from coterie.group.records.streams import (
    Endpoint as RecordEndpoint,
)
from coterie.group.records.streams import (
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
)
from coterie.group.records.tasks import NO_TASKS, TaskSet
from coterie.group.streams.member_state import MemberState
from coterie.group.streams.messages import Endpoint
from coterie.group.streams.reconciliation import CurrentAssignment, TaskEpochs

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
JOIN_EPOCH = 0


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """The fields of a member metadata record (None where the member never said)."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, value: StreamsGroupMemberMetadataValue) -> MemberMetadata:
        ep = value.user_endpoint
        return cls(value.instance_id, value.rack_id, value.client_id, value.client_host,
                   value.rebalance_timeout_ms, value.topology_epoch, value.process_id,
                   None if ep is None else Endpoint(ep.host, ep.port),
                   tuple(value.client_tags))

    def value(self) -> StreamsGroupMemberMetadataValue:
        ep = self.user_endpoint
        return StreamsGroupMemberMetadataValue(
            instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id,
            client_host=self.client_host, rebalance_timeout_ms=self.rebalance_timeout_ms,
            topology_epoch=self.topology_epoch, process_id=self.process_id,
            user_endpoint=None if ep is None else RecordEndpoint(ep.host, ep.port),
            client_tags=tuple(sorted(self.client_tags)))


@dataclass(frozen=True, slots=True)
class StreamsMember:
    member_id: str
    metadata: MemberMetadata = field(default_factory=MemberMetadata)
    assignment: CurrentAssignment = field(default_factory=CurrentAssignment)

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def process_id(self) -> str:
        return self.metadata.process_id

    @property
    def assigned(self) -> TaskSet:
        return self.assignment.assigned

    def holds(self) -> TaskSet:
        return self.assignment.holds()

    def with_metadata(self, metadata: MemberMetadata) -> StreamsMember:
        return replace(self, metadata=metadata)

    def with_assignment(self, assignment: CurrentAssignment) -> StreamsMember:
        return replace(self, assignment=assignment)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.assignment.is_reconciled_to(epoch)


def assignment_of(value: StreamsGroupCurrentMemberAssignmentValue) -> CurrentAssignment:
    """The record as a `CurrentAssignment`. Active tasks a record gives no epoch for (written
    before Kafka kept them) take the member epoch, as Kafka does."""
    epochs: dict[str, dict[int, int]] = {}
    for tasks, stored in ((value.assigned_tasks.active, value.active_tasks_epochs),
                          (value.tasks_pending_revocation.active,
                           value.active_tasks_pending_revocation_epochs)):
        for s, ps in tasks.items():
            row = epochs.setdefault(s, {})
            known = stored.get(s, {})
            for p in ps:
                row[p] = known.get(p, value.member_epoch)
    return CurrentAssignment(
        member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
        state=MemberState.from_value(value.state), assigned=value.assigned_tasks,
        pending_revocation=value.tasks_pending_revocation, active_epochs=epochs)


def assignment_value(a: CurrentAssignment) -> StreamsGroupCurrentMemberAssignmentValue:
    return StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
        state=a.state.value, assigned_tasks=a.assigned,
        tasks_pending_revocation=a.pending_revocation,
        active_tasks_epochs=_epochs_of(a.assigned, a.active_epochs),
        active_tasks_pending_revocation_epochs=_epochs_of(a.pending_revocation,
                                                          a.active_epochs))


def _epochs_of(tasks: TaskSet, epochs: TaskEpochs) -> dict[str, dict[int, int]]:
    return {s: {p: epochs.get(s, {}).get(p, 0) for p in sorted(ps)}
            for s, ps in tasks.active.items()}


LEFT = CurrentAssignment(member_epoch=LEAVE_EPOCH, previous_member_epoch=LEAVE_EPOCH,
                         state=MemberState.STABLE, assigned=NO_TASKS,
                         pending_revocation=NO_TASKS)
"""A member whose current-assignment record was deleted (Kafka's replay of its tombstone)."""
