"""Converting a group between the classic and the consumer protocol, as records (mixed groups).

Why. An online upgrade (seed 3) starts when the first consumer-protocol member joins a
classic group of the consumer embedded protocol: the group becomes a consumer group in which
the classic members live on. The downgrade is the way back, when the last consumer-protocol
member leaves and only classic members remain. Both are a change of group type, so both are
written as records that delete one group and create the other, in an order that replay
accepts; the coordinator applies them through the same replay path as every other record.

Upgrade (`upgrade_records`), Apache Kafka 4.x's `ConsumerGroup.fromClassicGroup`:
- the group epoch and the target epoch are the classic generation;
- every classic member becomes a member STABLE at that epoch, keeping its member id,
  instance id, client id and host, rebalance timeout, and as classic metadata its session
  timeout and protocols (the group's chosen protocol first: it is the one the member was
  told); its subscribed topics and rack come from its subscription;
- its partitions and target are its last assignment. coterie adds, where no other member's
  assignment claims them, the partitions its subscription says it owns: a cooperative
  (KIP-429) member keeps using those through a rebalance, and a group converted in the middle
  of one (assignments cleared, the leader's SyncGroup not in yet) must not hand them to
  someone else while the member still uses them;
- records: the classic group's tombstone, then each member's metadata (type 5), the group
  epoch (3), each member's target (7), the target epoch (6), each member's assignment (8).
Refused (GROUP_ID_NOT_FOUND, the group stays classic) when a subscription or an assignment
does not decode, when an assignment carries user data (a custom assignor's, which the
consumer protocol would lose; Kafka 4.2 refuses too), or when two assignments name the same
partition.

Downgrade (`downgrade_records`), Kafka's `ClassicGroup.fromConsumerGroup`:
- the consumer group's tombstones: every member's assignment (8), every target (7), every
  regex resolution (16), the target epoch (6), every member's metadata (5), the group (3);
- one classic group record: generation = the group epoch, protocol type "consumer", the
  protocol the members' supported protocols elect (the classic rule), leader = first member,
  each member's assignment = the partitions it may still be using (its assignment and what
  it has yet to revoke) encoded in the version of its subscription. Kafka writes the target
  there; the two agree when the group is STABLE, and coterie's choice keeps ownership intact
  if the group is upgraded again before the members have rejoined.
The coordinator then starts a rebalance so that the members agree on a classic generation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.membership import ClassicMember, Membership
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.member import ConsumerMember, MemberState, shared_names
from coterie.group.records.classic import GroupMetadataKey
from coterie.group.records.consumer import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    Partitions,
    TopicIdPartition,
)
from coterie.group.records.partition_set import compact
from coterie.group.records.record import Record
from coterie.group.topic_image import TopicImage
from coterie.wire.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)


class ConversionRefused(Exception):
    """The group cannot be converted; the message says why (Kafka's words where it has
    them)."""


# == classic -> consumer =========================================================================

def upgrade_records(group: ClassicGroup, image: TopicImage) -> list[Record]:
    """The records that turn classic `group` (with members) into a consumer group."""
    gid, generation = group.group_id, group.generation
    members: list[ConsumerMember] = []
    owners: dict[TopicIdPartition, str] = {}
    claimed: dict[str, set[TopicIdPartition]] = {}
    owned: dict[str, Partitions] = {}
    for m in group.members.values():
        protocol = group.protocol if group.protocol is not None else m.protocol_names()[0]
        try:
            sub = decode_subscription(m.metadata_for(protocol))
            assignment = decode_assignment(m.assignment)
        except ConsumerProtocolError:
            raise ConversionRefused(
                f"Cannot upgrade classic group {gid} to consumer group because the embedded "
                "consumer protocol is malformed.") from None
        if assignment.user_data:
            raise ConversionRefused(
                f"Cannot upgrade classic group {gid} to consumer group because an unsupported "
                "custom assignor is in use. Please refer to the documentation or switch to a "
                "default assignor before re-attempting the upgrade.")
        mine = claimed[m.member_id] = set()
        for tp in by_id(assignment.partitions, image):
            if owners.setdefault(tp, m.member_id) != m.member_id:
                raise ConversionRefused(
                    f"Cannot upgrade classic group {gid} to consumer group because partition "
                    f"{tp[1]} of topic id {tp[0]} is assigned to two members.")
            mine.add(tp)
        owned[m.member_id] = by_id(sub.owned_partitions, image)
        protocols = sorted(m.protocols, key=lambda p: p[0] != protocol)
        members.append(ConsumerMember(
            member_id=m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=shared_names(sub.topics),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(protocols)),
            member_epoch=generation, previous_member_epoch=generation,
            state=MemberState.STABLE,
        ))
    for member_id, partitions in owned.items():
        for tp in sorted(partitions):
            if owners.setdefault(tp, member_id) == member_id:
                claimed[member_id].add(tp)
    members = [_with_assigned(m, compact(claimed[m.member_id])) for m in members]

    topics: set[str] = set()
    for m in members:
        topics |= m.subscribed_topic_names
    records = [Record(GroupMetadataKey(gid), None)]
    records += [Record(ConsumerGroupMemberMetadataKey(gid, m.member_id), m.metadata_value())
                for m in members]
    records.append(Record(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(
        generation, image.metadata_hash(topics))))
    records += [Record(ConsumerGroupTargetAssignmentMemberKey(gid, m.member_id),
                       ConsumerGroupTargetAssignmentMemberValue(m.assigned)) for m in members]
    records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(gid),
                          ConsumerGroupTargetAssignmentMetadataValue(generation)))
    records += [Record(ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id),
                       m.assignment_value()) for m in members]
    return records


def _with_assigned(member: ConsumerMember, assigned: Partitions) -> ConsumerMember:
    return replace(member, assigned=assigned)


# == consumer -> classic =========================================================================

def downgrade_records(group: ConsumerGroup, image: TopicImage, now_ms: int) -> list[Record]:
    """The records that turn consumer `group`, whose members all speak the classic protocol,
    into a classic group (Stable at generation = group epoch; the caller rebalances it).
    Raises ConversionRefused if the members share no protocol."""
    gid = group.group_id
    classic = Membership(protocol_type=PROTOCOL_TYPE, generation=group.group_epoch,
                         state_timestamp_ms=now_ms)
    for m in group.members.values():
        assert m.classic is not None, "only classic members can be downgraded"
        classic.add(ClassicMember(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, session_timeout_ms=m.classic.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms, protocol_type=PROTOCOL_TYPE,
            protocols=m.classic.supported_protocols,
        ))
    if not classic.candidate_protocols():
        raise ConversionRefused(f"Cannot downgrade consumer group {gid}: its members share "
                                "no protocol.")
    classic.protocol = classic.select_protocol()
    for cm in list(classic.members.values()):
        try:
            version = min(decode_subscription(cm.metadata_for(classic.protocol)).version, 3)
        except ConsumerProtocolError:
            version = 0
        # What the member may still be using, not its target (Kafka writes the target):
        # the same once the group is STABLE, and if the group is upgraded again before the
        # rebalance ends, nobody is given a partition this member has not let go of.
        classic.update(cm.member_id, assignment=encode_assignment(Assignment(
            by_name(group.members[cm.member_id].holds(), image), version=version)))
    records = _tombstones(group)
    records.append(Record(GroupMetadataKey(gid), classic.to_record()))
    return records


def _tombstones(group: ConsumerGroup) -> list[Record]:
    """Every record of the consumer group, deleted, in the order replay accepts."""
    gid = group.group_id
    members = list(group.members)
    records = [Record(ConsumerGroupCurrentMemberAssignmentKey(gid, m), None) for m in members]
    records += [Record(ConsumerGroupTargetAssignmentMemberKey(gid, m), None)
                for m in group.targets]
    records += [Record(ConsumerGroupRegularExpressionKey(gid, r), None)
                for r in sorted(group.resolved_regexes)]
    records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(gid), None))
    records += [Record(ConsumerGroupMemberMetadataKey(gid, m), None) for m in members]
    records.append(Record(ConsumerGroupMetadataKey(gid), None))
    return records


# == helpers ======================================================================================

def by_id(partitions: Iterable[tuple[str, int]], image: TopicImage) -> Partitions:
    """By topic id; partitions of topics that do not exist (or beyond their count) are left
    out, as Kafka leaves out topics it does not know."""
    out = []
    for name, p in partitions:
        info = image.by_name.get(name)
        if info is not None and 0 <= p < info.partitions:
            out.append((info.topic_id, p))
    return frozenset(out)


def by_name(partitions: Partitions, image: TopicImage) -> frozenset[tuple[str, int]]:
    """By topic name; partitions of topics no longer known are left out."""
    out = []
    for topic_id, p in partitions:
        name = image.name_of(topic_id)
        if name is not None:
            out.append((name, p))
    return frozenset(out)
