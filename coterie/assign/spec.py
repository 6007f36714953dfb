"""The assignor interface: an assignment spec in, a group assignment out.

This is seed 4's `PartitionAssignor` shape, written for Python and shared by every user of an
assignor: a classic-protocol leader (the member library, `coterie.client`) builds a spec from
the members' subscriptions, and the KIP-848 coordinator builds one from its member records.
Assignors are pure: no I/O, no clock, no randomness, so the same spec always gives the same
assignment, which is what lets a leader, a coordinator and a replaying coordinator agree.

Partitions are named by (topic name, partition index). Server-side KIP-848 state keys topics by
id; the coordinator maps ids to names before it calls an assignor, so one assignor serves both
protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

TopicPartition = tuple[str, int]
"""(topic name, partition index)."""

NO_GENERATION = -1
"""The generation of a member that has never been assigned anything (Kafka's DEFAULT_GENERATION)."""


class AssignorError(Exception):
    """The assignor cannot produce an assignment for this spec (seed 4's
    PartitionAssignorException): e.g. replicated assignment asked for more copies than there
    are eligible members, or member metadata the assignor cannot decode."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as an assignor sees it.

    `owned` is what the member holds now: in the classic protocol the owned partitions it sent
    in its subscription (KIP-429) or decoded from sticky user data; in KIP-848 its current
    assignment. `generation` is the generation those partitions come from (sticky assignors
    prefer the owner of the highest generation when two members claim one partition).
    `metadata` is opaque to everyone but the assignor (classic user data, seed 4's
    AssignorMetadata bytes).
    """

    member_id: str
    subscribed_topics: frozenset[str]
    instance_id: str | None = None
    rack: str | None = None
    owned: frozenset[TopicPartition] = frozenset()
    generation: int = NO_GENERATION
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic's shape: its partition count and, for rack-aware assignment, the racks that
    hold a replica of each partition (absent partitions have no rack information)."""

    name: str
    partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """Everything an assignor may look at: members keyed by member id, topics keyed by name.

    Topics a member subscribes to but that are missing from `topics` do not exist (yet): they
    contribute no partitions.
    """

    members: Mapping[str, MemberSpec]
    topics: Mapping[str, TopicSpec]


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """What one member gets: its target partitions and optional assignor metadata (classic
    assignment user data; seed 4's per-member metadata)."""

    partitions: frozenset[TopicPartition]
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupAssignment:
    """The assignor's answer: one entry for every member of the spec (possibly empty)."""

    members: Mapping[str, MemberAssignment]

    def owner_of(self) -> dict[TopicPartition, list[str]]:
        """Partition -> members it was given to (a convenience for checks and tests)."""
        owners: dict[TopicPartition, list[str]] = {}
        for member_id, assignment in self.members.items():
            for tp in assignment.partitions:
                owners.setdefault(tp, []).append(member_id)
        return owners


@runtime_checkable
class Assignor(Protocol):
    """A named, pure assignment strategy.

    `name` is the protocol name members advertise (classic JoinGroup protocol name, KIP-848
    server assignor name). `cooperative` says whether the assignor supports KIP-429's
    incremental protocol: it never gives a member a partition that another member still owns
    in the spec, so members can keep what they own across a rebalance.
    """

    name: str
    cooperative: bool

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        """Compute the group's assignment; raise AssignorError if it cannot."""
        ...


def subscribers(spec: AssignmentSpec) -> dict[str, list[str]]:
    """Topic -> member ids subscribed to it, member ids sorted (existing topics only)."""
    out: dict[str, list[str]] = {}
    for member_id in sorted(spec.members):
        for topic in spec.members[member_id].subscribed_topics:
            if topic in spec.topics:
                out.setdefault(topic, []).append(member_id)
    return out


def all_partitions(spec: AssignmentSpec, topic: str) -> list[TopicPartition]:
    """Every partition of `topic` in index order (empty if the topic does not exist)."""
    t = spec.topics.get(topic)
    return [] if t is None else [(topic, p) for p in range(t.partitions)]
