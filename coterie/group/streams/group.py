"""A KIP-1071 streams group's state, built only by applying records.

Like a consumer group (`consumer/group.py`), every durable change goes through one `apply_*`
per record kind (tombstones included), the same path a coordinator takes when it loads
`__consumer_offsets`; handlers write records and apply them, so live and replayed state
cannot drift apart.

What a group holds (durable):
- the group epoch, the metadata hash of the topics its topology names, the topology epoch
  last found ready (`validated_topology_epoch`, -1: none) and the assignment configs the
  last target used;
- the topology its first member declared (Kafka 4.2 never changes it afterwards);
- members (`member.py`), the target assignment (member -> tasks) and its epoch;
- which member, on which process, holds which task (`TaskOwners`), derived from the
  members' current assignments.

The volatile table (what no record holds; lost on a restart or a rebuild, re-derived):
- `configured`: the topology configured against the topic picture (`configure_topology`),
  cached with the (topology, picture version) it was computed for;
- `endpoint_epoch`: the version of the endpoint -> partitions map members use for
  Interactive Queries (Kafka keeps it in memory too): bumped when a member with an endpoint
  gets other tasks, changes its endpoint or goes;
- `shutdown_requester`: the member that asked the application to shut down (Kafka keeps it
  until the group is empty);
- `delay_armed`: the initial rebalance delay timer runs (the first assignment waits).

The state (ListGroups, describe), as Kafka 4.2's StreamsGroup derives it: Empty without
members; NotReady while there is no topology or its epoch is not the validated one (topics
missing, internal topics still to create...); Assigning while the group epoch is ahead of
the target's; Reconciling while a member is not stable at the target epoch; else Stable.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.group import ListedGroup, Refusal
from coterie.group.records.record import Record
from coterie.group.records.streams import (
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
)
from coterie.group.records.tasks import NO_TASKS, TaskSet
from coterie.group.streams.configured_topology import ConfiguredTopology
from coterie.group.streams.events import StreamsMemberView, StreamsSnapshot
from coterie.group.streams.member import (
    LEAVE_EPOCH,
    LEFT,
    MemberMetadata,
    StreamsMember,
    assignment_of,
)
from coterie.group.streams.task_owners import TaskOwners
from coterie.group.streams.topology import Topology
from coterie.group.streams.topology_record import topology_of

EMPTY = "Empty"
NOT_READY = "NotReady"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"


class StreamsReplayError(RuntimeError):
    """Records that contradict the state they are applied to (a corrupt or misordered log):
    Kafka refuses to load such a partition, and so does coterie."""


class StreamsGroup:
    """One streams group (module docstring)."""

    group_type = "streams"
    changes_without_records = False

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.last_assignment_configs: tuple[tuple[str, str], ...] = ()
        self.topology: Topology | None = None
        self.members: dict[str, StreamsMember] = {}
        self.targets: dict[str, TaskSet] = {}
        self.assignment_epoch = 0
        self.owners = TaskOwners()
        # The volatile table (module docstring).
        self.configured: ConfiguredTopology | None = None
        self.configured_for: tuple[Topology, int] | None = None
        self.configured_hash = 0  # the metadata hash `configured` was computed with
        self.endpoint_epoch = 0
        self.shutdown_requester: str | None = None
        self.delay_armed = False

    # == the Group protocol ====================================================================
    def has_members(self) -> bool:
        return bool(self.members)

    def listing(self) -> ListedGroup | None:
        return ListedGroup(self.group_id, "streams", self.state(), "streams")

    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        epoch = self.assignment_epoch
        if all(m.is_reconciled_to(epoch) for m in self.members.values()):
            return STABLE
        return RECONCILING

    def commit_refusal(self, member_id: str, epoch: int, instance_id: str | None,
                       version: int, transactional: bool = False) -> Refusal | None:
        """Kafka 4.2's StreamsGroup.validateOffsetCommit: a negative epoch into an empty
        group (an admin tool), and a transactional commit with epoch -1 and neither member
        nor instance id (a producer outside the group), go ahead; otherwise the member must
        exist, use OffsetCommit v9+, and name its epoch. An older epoch is accepted by Kafka
        per task, when the member got the task at that epoch or before; here the request's
        partitions are not known, so an older epoch is accepted when the member got every
        active task it holds at that epoch or before (coterie's whole-request rule)."""
        if epoch < 0 and not self.members:
            return None
        if transactional and epoch == -1 and member_id == "" and instance_id is None:
            return None
        member = self.members.get(member_id)
        if member is None:
            return Refusal(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not a member of group {self.group_id}.")
        if not transactional and version < 9:
            return Refusal(ErrorCode.unsupported_version,
                           "OffsetCommit version 9 or above must be used by members using "
                           "the streams group protocol")
        current = member.member_epoch
        if epoch == current:
            return None
        if epoch > current:
            return Refusal(ErrorCode.stale_member_epoch,
                           f"Received member epoch {epoch} is newer than current member "
                           f"epoch {current}.")
        for s, by_partition in sorted(member.assignment.active_epochs.items()):
            for p, assigned_at in sorted(by_partition.items()):
                if epoch < assigned_at:
                    return Refusal(ErrorCode.stale_member_epoch,
                                   f"Received member epoch {epoch} is older than assignment "
                                   f"epoch {assigned_at} for task {s}-{p}.")
        return None

    def fetch_refusal(self, member_id: str | None, epoch: int) -> Refusal | None:
        """Kafka 4.2's StreamsGroup.validateOffsetFetch."""
        if member_id is None and epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return Refusal(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not a member of group {self.group_id}.")
        if epoch != member.member_epoch:
            return Refusal(ErrorCode.stale_member_epoch,
                           f"The received member epoch {epoch} does not match the expected "
                           f"member epoch {member.member_epoch}.")
        return None

    def offset_delete_refusal(self) -> Refusal | None:
        """A streams group's offsets may be deleted (partition by partition)."""
        return None

    def subscribed_topics(self) -> set[str]:
        """The topology's source and repartition source topics while the group has members
        (Kafka's isSubscribedToTopic): OffsetDelete may not delete their offsets."""
        if not self.members or self.topology is None:
            return set()
        return {t for s in self.topology.subtopologies
                for t in (*s.source_topics, *s.repartition_source_names())}

    def offsets_expire_from(self) -> int | None:
        return None if self.members else -1

    def deletion(self) -> tuple[ErrorCode, list[Record]]:
        """Only an empty group goes (NON_EMPTY_GROUP): leftover targets, the target epoch,
        the topology, then the group (the order replay checks)."""
        if self.members:
            return ErrorCode.non_empty_group, []
        gid = self.group_id
        records = [Record(StreamsGroupTargetAssignmentMemberKey(gid, mid), None)
                   for mid in sorted(self.targets)]
        records.append(Record(StreamsGroupTargetAssignmentMetadataKey(gid), None))
        records.append(Record(StreamsGroupTopologyKey(gid), None))
        records.append(Record(StreamsGroupMetadataKey(gid), None))
        return ErrorCode.none, records

    def dropped(self, error: ErrorCode) -> list[tuple[Hashable, Any]]:
        """A streams group parks no request."""
        return []

    def event_snapshot(self) -> StreamsSnapshot:
        return StreamsSnapshot(
            state=self.state(), group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            members={mid: StreamsMemberView(
                m.metadata.client_id, m.metadata.process_id, m.member_epoch,
                m.assignment.state.name.lower(), _task_names(m.holds()),
                _count(self.targets.get(mid, NO_TASKS)))
                for mid, m in self.members.items()})

    def event_fingerprint(self) -> Hashable:
        return (self.group_epoch, self.assignment_epoch, self.validated_topology_epoch,
                tuple(self.members.values()))

    # == views =================================================================================
    def target_of(self, member_id: str) -> TaskSet:
        return self.targets.get(member_id, NO_TASKS)

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a record can change, for comparing two groups (live and replayed)."""
        return (self.group_id, self.group_epoch, self.metadata_hash,
                self.validated_topology_epoch, self.last_assignment_configs, self.topology,
                dict(self.members), dict(self.targets), self.assignment_epoch,
                self.owners.snapshot())

    # == applying records ======================================================================
    def apply_metadata(self, value: StreamsGroupMetadataValue) -> None:
        self.group_epoch = value.epoch
        self.metadata_hash = value.metadata_hash
        self.validated_topology_epoch = value.validated_topology_epoch
        self.last_assignment_configs = tuple(value.last_assignment_configs)

    def apply_topology(self, value: StreamsGroupTopologyValue | None) -> None:
        self.topology = None if value is None else topology_of(value)

    def apply_target_epoch(self, value: StreamsGroupTargetAssignmentMetadataValue | None,
                           ) -> None:
        if value is None:
            if self.targets:
                raise StreamsReplayError(f"target assignment of {self.group_id} deleted "
                                         f"while it still has {len(self.targets)} members")
            self.assignment_epoch = -1
        else:
            self.assignment_epoch = value.assignment_epoch

    def apply_target_member(self, member_id: str,
                            value: StreamsGroupTargetAssignmentMemberValue | None) -> None:
        if value is None:
            self.targets.pop(member_id, None)
        else:
            self.targets[member_id] = value.tasks

    def apply_member_metadata(self, member_id: str,
                              value: StreamsGroupMemberMetadataValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is None:
                return
            if old.member_epoch != LEAVE_EPOCH:
                raise StreamsReplayError(f"member {member_id} of {self.group_id} deleted "
                                         "before its current assignment was")
            if member_id in self.targets:
                raise StreamsReplayError(f"member {member_id} of {self.group_id} deleted "
                                         "before its target assignment was")
            self.owners.remove(member_id)
            del self.members[member_id]
            return
        new = (old or StreamsMember(member_id)).with_metadata(MemberMetadata.of(value))
        self.members[member_id] = new
        if old is not None and old.process_id != new.process_id:
            self.owners.update(member_id, new.process_id, new.holds())

    def apply_current_assignment(self, member_id: str,
                                 value: StreamsGroupCurrentMemberAssignmentValue | None,
                                 ) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is None:
                return
            new = old.with_assignment(LEFT)
        else:
            new = (old or StreamsMember(member_id)).with_assignment(assignment_of(value))
        self.members[member_id] = new
        self.owners.update(member_id, new.process_id, new.holds())


def _task_names(tasks: TaskSet) -> frozenset[str]:
    """Tasks as "active:0_1", "standby:1_0": subtopology_partition by role, as Kafka
    Streams names tasks."""
    out: set[str] = set()
    for role, t in (("active", tasks.active), ("standby", tasks.standby),
                    ("warmup", tasks.warmup)):
        out.update(f"{role}:{s}_{p}" for s, ps in t.items() for p in ps)
    return frozenset(out)


def _count(tasks: TaskSet) -> int:
    return sum(len(p) for t in (tasks.active, tasks.standby, tasks.warmup) for p in t.values())
