"""The group's target assignment: run a server-side assignor, keep only what changed
(Kafka's TargetAssignmentBuilder).

Theory of operation. When the group epoch moves past the target epoch, the coordinator
builds an `AssignmentSpec` from the members as they will be after the current request:
each member's subscription (its topic names plus what its regex resolves to), its instance
id, and as `owned` its *current target* (so a sticky assignor moves as little of the target
as it can). Racks are left out: Kafka's server-side uniform and range assignors do not use
them. Topics come from the coordinator's topic image; a subscribed topic that does not exist
contributes nothing.

The assignor speaks topic names; the group stores partitions by topic id, so the answer is
mapped back through the image. One `ConsumerGroupTargetAssignmentMember` record is written for
every member whose target changed (or that had none), then one
`ConsumerGroupTargetAssignmentMetadata` record with the new epoch: after replay the target is
complete for that epoch, or (if the log stops in between) still at the old epoch, which the
next heartbeat recomputes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coterie.assign.spec import AssignmentSpec, Assignor, MemberSpec, TopicSpec
from coterie.group.consumer.member import ConsumerMember
from coterie.group.records.consumer import (
    NO_PARTITIONS,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    Partitions,
)
from coterie.group.records.partition_set import compact
from coterie.group.records.record import Record
from coterie.group.topic_image import TopicImage


@dataclass(frozen=True, slots=True)
class TargetAssignment:
    """A new target: every member's partitions, and the records that persist the change."""

    epoch: int
    targets: dict[str, Partitions]
    records: list[Record]


def build_spec(members: Mapping[str, ConsumerMember],
               subscriptions: Mapping[str, frozenset[str]],
               targets: Mapping[str, Partitions], image: TopicImage) -> AssignmentSpec:
    """The assignor's input (module docstring says what goes in)."""
    topics: dict[str, TopicSpec] = {}
    member_specs: dict[str, MemberSpec] = {}
    for member_id, member in members.items():
        subscribed = subscriptions[member_id]
        for name in subscribed:
            if name not in topics:
                info = image.by_name.get(name)
                if info is not None:
                    topics[name] = TopicSpec(name, info.partitions)
        member_specs[member_id] = MemberSpec(
            member_id=member_id,
            subscribed_topics=subscribed,
            instance_id=member.instance_id,
            owned=_names(targets.get(member_id, NO_PARTITIONS), image),
        )
    return AssignmentSpec(member_specs, topics)


def _names(partitions: Partitions, image: TopicImage) -> frozenset[tuple[str, int]]:
    """Partitions by name; partitions of topics that no longer exist, or beyond a topic's
    current count, are dropped."""
    out = []
    for topic_id, partition in partitions:
        name = image.by_id.get(topic_id)
        if name is not None and partition < image.by_name[name].partitions:
            out.append((name, partition))
    return frozenset(out)


def compute_target(group_id: str, epoch: int, members: Mapping[str, ConsumerMember],
                   subscriptions: Mapping[str, frozenset[str]],
                   old_targets: Mapping[str, Partitions], assignor: Assignor,
                   image: TopicImage) -> TargetAssignment:
    """Run `assignor` for `members` and return the new targets with the records that turn
    `old_targets` into them. Raises the assignor's `AssignorError`."""
    spec = build_spec(members, subscriptions, old_targets, image)
    answer = assignor.assign(spec)
    by_name = image.by_name
    targets: dict[str, Partitions] = {}
    records: list[Record] = []
    for member_id in members:
        assignment = answer.members.get(member_id)
        if assignment is None or not assignment.partitions:
            new: Partitions = NO_PARTITIONS
        elif (assignment.partitions is spec.members[member_id].owned
              and len(assignment.partitions) == len(old_targets[member_id])):
            # The assignor handed the previous target back untouched (and none of it was
            # dropped for being gone from the topic image).
            new = old_targets[member_id]
        else:
            # Kept for as long as the group is stable: the compact form (`PartitionSet`).
            new = compact(by_name[name].tp(p) for name, p in assignment.partitions)
        old = old_targets.get(member_id)
        if old is not None and old == new:
            # Unchanged: no record, and the member keeps the object it already shares with
            # its assigned partitions (an equal copy would be a second one to keep).
            new = old
        else:
            records.append(Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                                  ConsumerGroupTargetAssignmentMemberValue(new)))
        targets[member_id] = new
    records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group_id),
                          ConsumerGroupTargetAssignmentMetadataValue(epoch)))
    return TargetAssignment(epoch, targets, records)
