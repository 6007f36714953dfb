"""A streams group's next target assignment: the sticky task assignor
(`coterie.assign.streams_tasks`) run over the group's members and its configured topology,
written as records (Kafka 4.2's TargetAssignmentBuilder).

Each member is given to the assignor with its process, rack and client tags and the tasks of
its current target (what stickiness keeps). Subtopologies come from the configured topology
with their task counts; one with state (changelog topics) is stateful and gets standby
replicas. A topology that is not ready assigns nothing: every member's target is empty, the
target epoch still moves to the group epoch (the group then reads NotReady, not Assigning).

Records: one target-member record for each member whose target changed (a member with no
target yet has an empty one), then the target epoch record.
"""

from __future__ import annotations

from collections.abc import Mapping

from coterie.assign.streams_tasks import (
    SubtopologySpec,
    TaskAssignmentSpec,
    TaskMemberSpec,
    assign_tasks,
)
from coterie.group.records.record import Record
from coterie.group.records.streams import (
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
)
from coterie.group.records.tasks import NO_TASKS, TaskSet
from coterie.group.streams.configured_topology import ConfiguredTopology
from coterie.group.streams.member import StreamsMember


def target_records(group_id: str, epoch: int, members: Mapping[str, StreamsMember],
                   old_targets: Mapping[str, TaskSet], configured: ConfiguredTopology | None,
                   num_standby_replicas: int) -> tuple[dict[str, TaskSet], list[Record]]:
    """The new targets of `members` (after the change being decided) and their records."""
    subtopologies: dict[str, SubtopologySpec] = {}
    if configured is not None and configured.is_ready() and configured.subtopologies:
        subtopologies = {sid: SubtopologySpec(sid, s.number_of_tasks,
                                              bool(s.state_changelog_topics))
                         for sid, s in configured.subtopologies.items()}
    targets: dict[str, TaskSet] = {}
    if subtopologies and members:
        spec = TaskAssignmentSpec(
            members={mid: _member_spec(m, old_targets.get(mid, NO_TASKS))
                     for mid, m in members.items()},
            subtopologies=subtopologies, num_standby_replicas=num_standby_replicas)
        assigned = assign_tasks(spec)
        for mid, a in assigned.members.items():
            targets[mid] = TaskSet.of(a.active, a.standby, a.warmup)
    else:
        targets = dict.fromkeys(members, NO_TASKS)
    records: list[Record] = []
    for mid in sorted(targets):
        new = targets[mid]
        if new != old_targets.get(mid, NO_TASKS):
            records.append(Record(StreamsGroupTargetAssignmentMemberKey(group_id, mid),
                                  StreamsGroupTargetAssignmentMemberValue(new)))
    records.append(Record(StreamsGroupTargetAssignmentMetadataKey(group_id),
                          StreamsGroupTargetAssignmentMetadataValue(epoch)))
    return targets, records


def _member_spec(member: StreamsMember, target: TaskSet) -> TaskMemberSpec:
    meta = member.metadata
    return TaskMemberSpec(member.member_id, meta.process_id, meta.rack_id,
                          dict(meta.client_tags), target.active, target.standby,
                          target.warmup)
