"""Hypothesis strategies for assignment specs, and spec edits for movement properties.

Shared by every assignor's tests (range, round-robin, co-partitioned, replicated, sticky).
Member ids come from a tiny alphabet so that ordering ties and near-ties are common; topics
are named t0..t5 and a member may subscribe to a topic that does not exist (ghost topics
must contribute nothing).
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from coterie.assign.spec import (
    AssignmentSpec,
    GroupAssignment,
    MemberSpec,
    TopicPartition,
    TopicSpec,
)

RACKS = ("a", "b", "c")
TOPIC_NAMES = tuple(f"t{i}" for i in range(6))
GHOST_TOPIC = "ghost"

member_ids = st.text(alphabet="abAB-_01", min_size=1, max_size=5)


@st.composite
def topic_specs(draw: st.DrawFn, *, max_topics: int = 4, max_partitions: int = 8,
                racks: bool = False, min_partitions: int = 1) -> dict[str, TopicSpec]:
    """name -> TopicSpec for 1..max_topics of t0..t5; with `racks`, each partition's replica
    racks are a random subset of a, b, c (possibly empty or absent)."""
    names = draw(st.lists(st.sampled_from(TOPIC_NAMES), min_size=1, max_size=max_topics,
                          unique=True))
    topics = {}
    for name in names:
        n = draw(st.integers(min_partitions, max_partitions))
        partition_racks: dict[int, frozenset[str]] = {}
        if racks:
            for p in range(n):
                chosen = draw(st.none() | st.frozensets(st.sampled_from(RACKS)))
                if chosen is not None:
                    partition_racks[p] = chosen
        topics[name] = TopicSpec(name, n, partition_racks)
    return topics


@st.composite
def assignment_specs(draw: st.DrawFn, *, min_members: int = 1, max_members: int = 6,
                     max_topics: int = 4, max_partitions: int = 8,
                     homogeneous: bool = False, racks: bool = False, static: bool = True,
                     owned: str = "none", ghosts: bool = True) -> AssignmentSpec:
    """A group and its topics.

    `homogeneous`: every member subscribes to the same topics. `racks`: members and partitions
    may have racks (members also the rack "z", which holds nothing). `static`: some members
    have (unique) instance ids. `owned`: "none", or "any" (each member owns a random subset
    of existing and vanished partitions, claims may overlap, random generations).
    """
    topics = draw(topic_specs(max_topics=max_topics, max_partitions=max_partitions,
                              racks=racks))
    names = sorted(topics)
    pool = [*names, GHOST_TOPIC] if ghosts else names
    ids = draw(st.lists(member_ids, min_size=min_members, max_size=max_members, unique=True))
    shared = frozenset(draw(st.lists(st.sampled_from(pool), min_size=1, unique=True)))
    instance_ids = iter(draw(st.permutations([f"i{k}" for k in range(len(ids))])))
    members = {}
    for mid in ids:
        subscribed = shared if homogeneous else frozenset(
            draw(st.lists(st.sampled_from(pool), min_size=1, unique=True)))
        instance = next(instance_ids)
        if not static or draw(st.booleans()):
            instance = None
        rack = draw(st.none() | st.sampled_from((*RACKS, "z"))) if racks else None
        owned_tps: frozenset[TopicPartition] = frozenset()
        generation = -1
        if owned == "any":
            universe = [(t, p) for t in [*names, GHOST_TOPIC] for p in range(max_partitions)]
            owned_tps = frozenset(draw(st.lists(st.sampled_from(universe), max_size=12)))
            generation = draw(st.integers(-1, 3))
        members[mid] = MemberSpec(mid, subscribed, instance_id=instance, rack=rack,
                                  owned=owned_tps, generation=generation)
    return AssignmentSpec(members, topics)


def with_owned(spec: AssignmentSpec, assignment: GroupAssignment,
               generation: int = 1) -> AssignmentSpec:
    """The next round of the same group: every member owns what `assignment` gave it."""
    members = {mid: replace(m, owned=assignment.members[mid].partitions, generation=generation)
               for mid, m in spec.members.items()}
    return AssignmentSpec(members, spec.topics)


def without_member(spec: AssignmentSpec, member_id: str) -> AssignmentSpec:
    return AssignmentSpec({mid: m for mid, m in spec.members.items() if mid != member_id},
                          spec.topics)


def with_member(spec: AssignmentSpec, member: MemberSpec) -> AssignmentSpec:
    return AssignmentSpec({**spec.members, member.member_id: member}, spec.topics)

