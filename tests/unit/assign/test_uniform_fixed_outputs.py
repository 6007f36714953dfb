"""Fixed answers of the `uniform` assignor on larger generated groups, as digests.

The assignor is pure, so the same spec must always give the same assignment; these digests
were taken from the implementation before its hand-out step was optimised (subscriber order
kept per subscriber list instead of re-sorted per topic) and pin that optimisations change
nothing. The groups are bigger than the hypothesis examples: bucketed subscriptions as in
Kafka's JMH benchmark (full and one member joining), overlapping random subscriptions with
arbitrary owned partitions (invalid and doubly claimed ones included), and very unequal
previous loads, so that the hand-out's water-filling runs several rounds per topic, and
overlapping subscriber lists each shared by many topics.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace

import pytest

from coterie.assign.spec import AssignmentSpec, MemberSpec, TopicSpec
from coterie.assign.uniform import UniformAssignor

UNIFORM = UniformAssignor()


def digest(spec: AssignmentSpec) -> str:
    out = UNIFORM.assign(spec)
    lines = sorted(f"{m}:" + ",".join(f"{t}-{p}" for t, p in sorted(a.partitions))
                   for m, a in out.members.items())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def bucketed(members: int, topics: int, per_topic: int, joiner: bool) -> AssignmentSpec:
    """Kafka's heterogeneous benchmark shape: 5 buckets of members, each subscribed to its
    bucket of topics; with `joiner`, the others own their settled answer and one joins."""
    names = [f"topic-{t}" for t in range(topics)]
    count = members - 1 if joiner else members
    tper, mper = -(-topics // 5), -(-count // 5)
    spec_members = {f"member{i}": MemberSpec(f"member{i}",
                                             frozenset(names[(i // mper) * tper:
                                                             (i // mper + 1) * tper]))
                    for i in range(count)}
    spec = AssignmentSpec(spec_members, {t: TopicSpec(t, per_topic) for t in names})
    if not joiner:
        return spec
    settled = UNIFORM.assign(spec)
    owned = {m: replace(s, owned=settled.members[m].partitions, generation=1)
             for m, s in spec_members.items()}
    owned["newMember"] = MemberSpec("newMember", spec_members[f"member{count - 1}"]
                                    .subscribed_topics)
    return AssignmentSpec(owned, spec.topics)


def overlapping(seed: int, members: int, topics: int, owned_share: float) -> AssignmentSpec:
    """Random overlapping subscriptions (some to missing topics), random partition counts,
    and owned partitions drawn at random from all partitions (so some are unsubscribed,
    missing or claimed twice), with random generations."""
    rng = random.Random(seed)
    counts = {f"t{t:03d}": rng.randrange(1, 40) for t in range(topics)}
    names = sorted(counts)
    every = [(t, p) for t in names for p in range(counts[t])]
    spec_members = {}
    for i in range(members):
        subs = set(rng.sample(names, rng.randrange(0, min(8, topics) + 1)))
        if rng.random() < 0.1:
            subs.add("missing")
        owned = frozenset(rng.sample(every, int(rng.random() * owned_share * 12)))
        spec_members[f"m{i:04d}"] = MemberSpec(f"m{i:04d}", frozenset(subs), owned=owned,
                                               generation=rng.randrange(0, 4))
    return AssignmentSpec(spec_members, {t: TopicSpec(t, n) for t, n in counts.items()})


def unequal(seed: int, members: int) -> AssignmentSpec:
    """Two subscription classes sharing one topic; members own very different numbers of
    partitions of it (gaps between loads), and most partitions are unowned."""
    rng = random.Random(seed)
    counts = {"shared": 400, "left": 150, "right": 90}
    spec_members = {}
    for i in range(members):
        subs = frozenset({"shared", "left" if i % 3 else "right"})
        spec_members[f"m{i:03d}"] = MemberSpec(f"m{i:03d}", subs)
    owners = sorted(spec_members)
    claims: dict[str, set[tuple[str, int]]] = {m: set() for m in owners}
    for p in range(0, 400, 2):
        claims[owners[min(int(rng.expovariate(0.2)), members - 1)]].add(("shared", p))
    spec_members = {m: replace(s, owned=frozenset(claims[m]), generation=1)
                    for m, s in spec_members.items()}
    return AssignmentSpec(spec_members, {t: TopicSpec(t, n) for t, n in counts.items()})


def rings(members: int, topics: int, per_topic: int, owned_every: int) -> AssignmentSpec:
    """Three subscriptions over three topic families, each pair sharing one family: every
    family's subscriber list is shared by many topics and overlaps the other two lists.
    With `owned_every` > 0, each member owns every `owned_every`-th partition it would get."""
    names = [f"r{t:03d}" for t in range(topics)]
    third = topics // 3
    fams = [names[:third], names[third:2 * third], names[2 * third:]]
    subs = [frozenset(fams[0] + fams[1]), frozenset(fams[1] + fams[2]),
            frozenset(fams[2] + fams[0])]
    spec_members = {f"m{i:04d}": MemberSpec(f"m{i:04d}", subs[i % 3]) for i in range(members)}
    spec = AssignmentSpec(spec_members, {t: TopicSpec(t, per_topic) for t in names})
    if not owned_every:
        return spec
    first = UNIFORM.assign(spec)
    return AssignmentSpec({m: replace(s, owned=frozenset(sorted(first.members[m].partitions)
                                                         [::owned_every]), generation=1)
                           for m, s in spec_members.items()}, spec.topics)


CASES = {
    "bucketed-full": (lambda: bucketed(300, 60, 50, joiner=False), "c29433f07b22509f"),
    "bucketed-joiner": (lambda: bucketed(300, 60, 50, joiner=True), "e4bda940d2bbb4f5"),
    "bucketed-uneven": (lambda: bucketed(97, 23, 7, joiner=False), "52b9aacaf28d0b4d"),
    "overlapping-none-owned": (lambda: overlapping(1, 150, 30, 0.0), "5db7e596573f4eb6"),
    "overlapping-some-owned": (lambda: overlapping(2, 150, 30, 0.5), "461777f911382ca6"),
    "overlapping-much-owned": (lambda: overlapping(3, 60, 12, 3.0), "74b492143d5c158c"),
    "unequal-loads": (lambda: unequal(4, 40), "70687841fda66883"),
    "rings-full": (lambda: rings(120, 30, 17, 0), "e170de3c0c53a163"),
    "rings-partly-owned": (lambda: rings(120, 30, 17, 3), "e3a560e89cc945a0"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fixed_answer(case: str) -> None:
    make, expected = CASES[case]
    assert digest(make()) == expected
