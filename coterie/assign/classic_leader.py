"""A classic-protocol leader's step: members' subscription bytes in, assignment bytes out.

In the classic protocol the coordinator hands the JoinGroup leader every member's metadata
for the chosen protocol (seed 1); the leader decodes the consumer subscriptions, runs the
assignor and returns one assignment per member in its SyncGroup. This module is that step,
pure, so the member library's consumer and any test can run it without a broker, and so the
same `Assignor` objects serve the leader here and the KIP-848 coordinator later.

Owned partitions come from the subscription (KIP-429, v1+) with its generation (v2+). Older
sticky members carry them in their user data instead; the subscription's user data is passed
to the assignor as `MemberSpec.metadata`, and the sticky assignors decode it when `owned` is
empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from coterie.assign.spec import AssignmentSpec, Assignor, MemberSpec, TopicSpec
from coterie.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
)


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One entry of a JoinGroup leader's member list."""

    member_id: str
    instance_id: str | None
    metadata: bytes


def build_spec(members: Sequence[JoinedMember], partition_counts: Mapping[str, int],
               partition_racks: Mapping[str, Mapping[int, frozenset[str]]] | None = None,
               ) -> tuple[AssignmentSpec, dict[str, int]]:
    """The assignor's spec for these members, and each member's subscription version.

    Raises ConsumerProtocolError naming the member whose metadata does not decode: a leader
    cannot assign for a group it cannot read, and the error must reach the user.
    """
    racks = partition_racks or {}
    specs: dict[str, MemberSpec] = {}
    versions: dict[str, int] = {}
    for m in members:
        try:
            sub = decode_subscription(m.metadata)
        except ConsumerProtocolError as exc:
            raise ConsumerProtocolError(f"member {m.member_id}: {exc}") from exc
        specs[m.member_id] = MemberSpec(
            member_id=m.member_id, subscribed_topics=frozenset(sub.topics),
            instance_id=m.instance_id, rack=sub.rack_id, owned=sub.owned_partitions,
            generation=sub.generation_id, metadata=sub.user_data or b"")
        versions[m.member_id] = sub.version
    topics = {name: TopicSpec(name, count, racks.get(name, {}))
              for name, count in partition_counts.items()}
    return AssignmentSpec(members=specs, topics=topics), versions


def subscribed_union(members: Sequence[JoinedMember]) -> set[str]:
    """Every topic some member subscribes to: what the leader must fetch metadata for.
    Members whose metadata does not decode contribute nothing (build_spec reports them)."""
    topics: set[str] = set()
    for m in members:
        try:
            topics.update(decode_subscription(m.metadata).topics)
        except ConsumerProtocolError:
            continue
    return topics


def lead(assignor: Assignor, members: Sequence[JoinedMember],
         partition_counts: Mapping[str, int],
         partition_racks: Mapping[str, Mapping[int, frozenset[str]]] | None = None,
         ) -> dict[str, bytes]:
    """Run `assignor` for the group and encode each member's assignment.

    Each member gets its assignment in the version of the subscription it sent (capped at
    what we write), so an old client reads a layout it knows. Every member of the group gets
    an entry, empty if the assignor gave it nothing.
    """
    spec, versions = build_spec(members, partition_counts, partition_racks)
    result = assignor.assign(spec)
    out: dict[str, bytes] = {}
    for m in members:
        given = result.members.get(m.member_id)
        partitions = given.partitions if given is not None else frozenset()
        user_data = given.metadata or None if given is not None else None
        out[m.member_id] = encode_assignment(
            Assignment(partitions, user_data, version=min(versions[m.member_id], 3)))
    return out
