"""Properties of the sticky and cooperative-sticky assignors, directed cases for claims,
generations, user data and racks, and a stickiness comparison with kafka-python's sticky."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.structs import TopicPartition as KafkaTP

from coterie.assign.cooperative_sticky import (
    CooperativeStickyAssignor,
    cooperative_claim,
    cooperative_subscription_user_data,
)
from coterie.assign.spec import (
    NO_GENERATION,
    AssignmentSpec,
    GroupAssignment,
    MemberSpec,
    TopicPartition,
    TopicSpec,
    subscribers,
)
from coterie.assign.sticky import StickyAssignor, subscription_user_data
from tests.unit.assign.checks import assert_valid, assert_within_one, loads, subscribed_partitions
from tests.unit.assign.strategies import (
    assignment_specs,
    member_ids,
    with_member,
    with_owned,
    without_member,
)

STICKY = StickyAssignor()
COOP = CooperativeStickyAssignor()
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parts(assignment: GroupAssignment) -> dict[str, frozenset[TopicPartition]]:
    return {m: a.partitions for m, a in assignment.members.items()}


def claimants(spec: AssignmentSpec) -> dict[TopicPartition, set[str]]:
    out: dict[TopicPartition, set[str]] = {}
    for m, member in spec.members.items():
        for tp in member.owned:
            out.setdefault(tp, set()).add(m)
    return out


def assert_locally_balanced(spec: AssignmentSpec, assignment: GroupAssignment) -> None:
    """Kafka's guarantee for any subscriptions: no holder has 2+ more partitions than another
    subscriber of the partition's topic."""
    load = loads(assignment)
    subs = subscribers(spec)
    for m, a in assignment.members.items():
        for topic, _ in a.partitions:
            for other in subs[topic]:
                assert load[m] <= load[other] + 1, (m, other, topic, load)


def homogeneous_total(spec: AssignmentSpec) -> int:
    return len(subscribed_partitions(spec))


# --- validity and balance -------------------------------------------------------------------


@PROPS
@given(spec=assignment_specs(owned="any"), racks=st.booleans(), data=st.data())
def test_sticky_valid_and_locally_balanced(spec: AssignmentSpec, racks: bool,
                                           data: st.DataObject) -> None:
    if racks:
        spec = data.draw(assignment_specs(owned="any", racks=True))
    result = STICKY.assign(spec)
    assert_valid(spec, result)
    assert_locally_balanced(spec, result)
    assert all(a.metadata == b"" for a in result.members.values())


@PROPS
@given(spec=assignment_specs(owned="any", homogeneous=True, max_members=8),
       racks=st.booleans(), data=st.data())
def test_identical_subscriptions_balance_within_one(spec: AssignmentSpec, racks: bool,
                                                    data: st.DataObject) -> None:
    if racks:
        spec = data.draw(assignment_specs(owned="any", homogeneous=True, racks=True))
    result = STICKY.assign(spec)
    assert_valid(spec, result)
    assert_within_one(loads(result))


def rightful_owner(spec: AssignmentSpec, tp: TopicPartition) -> str | None:
    """The claimant of `tp` whose claim counts (subscribed, partition exists) with a strictly
    higher generation than every other counting claim; None if there is none."""
    topic, partition = tp
    if topic not in spec.topics or not 0 <= partition < spec.topics[topic].partitions:
        return None
    valid = sorted(((m.generation, mid) for mid, m in spec.members.items()
                    if tp in m.owned and topic in m.subscribed_topics), reverse=True)
    if not valid or (len(valid) > 1 and valid[0][0] == valid[1][0]):
        return None
    return valid[0][1]


@PROPS
@given(spec=assignment_specs(owned="any"), racks=st.booleans(), data=st.data())
def test_cooperative_never_gives_a_partition_another_member_owns(
        spec: AssignmentSpec, racks: bool, data: st.DataObject) -> None:
    if racks:
        spec = data.draw(assignment_specs(owned="any", racks=True))
    result = parts(COOP.assign(spec))
    target = parts(STICKY.assign(spec))  # same claims: owned is set and metadata empty
    claimed = claimants(spec)
    given_out = Counter(tp for ps in result.values() for tp in ps)
    assert all(n == 1 for n in given_out.values())
    for m, ps in result.items():
        assert ps <= target[m]
        for tp in ps:
            others = claimed.get(tp, set()) - {m}
            assert not others or rightful_owner(spec, tp) == m, (m, tp, others)
        for tp in target[m] - ps:  # withheld: someone else claims it and m has no right
            assert claimed.get(tp, set()) - {m}, (m, tp)
            assert rightful_owner(spec, tp) != m


def test_cooperative_owner_keeps_a_partition_a_stale_member_still_claims() -> None:
    spec = group([MemberSpec("a", T, owned=frozenset({("t", 0)}), generation=2),
                  MemberSpec("b", T, owned=frozenset({("t", 0), ("t", 1)}), generation=1)], t=2)
    assert parts(COOP.assign(spec)) == {"a": {("t", 0)}, "b": {("t", 1)}}


def test_cooperative_withholds_what_the_rightful_owner_releases() -> None:
    # "a" owns both by right, but balance gives t-1 to "b", which also (stalely) claims it:
    # "b" must wait until "a" has revoked it.
    spec = group([MemberSpec("a", T, owned=frozenset({("t", 0), ("t", 1)}), generation=2),
                  MemberSpec("b", T, owned=frozenset({("t", 1)}), generation=1)], t=2)
    assert parts(STICKY.assign(spec)) == {"a": {("t", 0)}, "b": {("t", 1)}}
    assert parts(COOP.assign(spec)) == {"a": {("t", 0)}, "b": frozenset()}


# --- stickiness -----------------------------------------------------------------------------


@PROPS
@given(spec=assignment_specs(owned="any", max_members=8))
def test_no_movement_when_nothing_changed(spec: AssignmentSpec) -> None:
    for assignor in (STICKY, COOP):
        first = assignor.assign(replace_owned_none(spec))
        again = assignor.assign(with_owned(spec, first, generation=3))
        assert parts(again) == parts(first)
    # also from a messy start: once settled, a round without changes moves nothing
    settled = STICKY.assign(spec)
    assert parts(STICKY.assign(with_owned(spec, settled))) == parts(settled)


def aligned_count(spec: AssignmentSpec, assignment: GroupAssignment) -> int:
    n = 0
    for m, a in assignment.members.items():
        rack = spec.members[m].rack
        for topic, p in a.partitions:
            n += rack is not None and rack in spec.topics[topic].partition_racks.get(p, ())
    return n


@PROPS
@given(spec=assignment_specs(owned="any", racks=True, max_members=8))
def test_with_racks_an_unchanged_round_only_moves_to_align(spec: AssignmentSpec) -> None:
    """Rack alignment ranks above stickiness on the constrained path, so a round where nothing
    changed may move partitions, but only if that puts more partitions on their racks."""
    settled = STICKY.assign(spec)
    for generation in (3, 4):
        again = STICKY.assign(with_owned(spec, settled, generation=generation))
        if parts(again) != parts(settled):
            assert aligned_count(spec, again) > aligned_count(spec, settled)
        settled = again


def replace_owned_none(spec: AssignmentSpec) -> AssignmentSpec:
    return AssignmentSpec({m: replace(s, owned=frozenset(), generation=NO_GENERATION)
                           for m, s in spec.members.items()}, spec.topics)


@PROPS
@given(spec=assignment_specs(homogeneous=True, max_members=8, max_partitions=12),
       new_id=member_ids)
def test_one_join_moves_only_what_the_new_member_gets(spec: AssignmentSpec, new_id: str) -> None:
    if new_id in spec.members:
        return
    first = STICKY.assign(spec)
    topics = next(iter(spec.members.values())).subscribed_topics
    joined = with_member(with_owned(spec, first), MemberSpec(new_id, topics))
    second = parts(STICKY.assign(joined))
    before = parts(first)
    for m in spec.members:
        assert second[m] <= before[m]  # old members only give up partitions
    moved = sum(len(before[m] - second[m]) for m in spec.members)
    assert moved == len(second[new_id]) == homogeneous_total(spec) // (len(spec.members) + 1)


@PROPS
@given(spec=assignment_specs(homogeneous=True, min_members=2, max_members=8,
                             max_partitions=12), data=st.data())
def test_one_leave_moves_only_the_leavers_partitions(spec: AssignmentSpec,
                                                     data: st.DataObject) -> None:
    leaver = data.draw(st.sampled_from(sorted(spec.members)))
    first = parts(STICKY.assign(spec))
    left = without_member(with_owned(spec, STICKY.assign(spec)), leaver)
    second = parts(STICKY.assign(left))
    for m in left.members:
        assert first[m] <= second[m]  # nobody loses anything
    gained = set().union(*(second[m] - first[m] for m in left.members))
    assert gained == set(first[leaver])


@PROPS
@given(spec=assignment_specs(owned="any", homogeneous=True, max_members=8))
def test_cooperative_follow_up_round_completes(spec: AssignmentSpec) -> None:
    """Identical subscriptions, no racks: after one round members revoke what they were not
    given; the next round completes the assignment without revoking anything else."""
    first = COOP.assign(spec)
    follow = with_owned(spec, first, generation=9)
    second = COOP.assign(follow)
    assert_valid(follow, second)
    assert_within_one(loads(second))
    for m, ps in parts(first).items():
        assert ps <= second.members[m].partitions


@PROPS
@given(spec=assignment_specs(owned="any"), racks=st.booleans(), data=st.data())
def test_cooperative_rounds_converge(spec: AssignmentSpec, racks: bool,
                                     data: st.DataObject) -> None:
    if racks:
        spec = data.draw(assignment_specs(owned="any", racks=True))
    for generation in range(1, 6):
        result = COOP.assign(spec)
        spec = with_owned(spec, result, generation=generation)
        given_out = Counter(tp for a in result.members.values() for tp in a.partitions)
        if set(given_out) == subscribed_partitions(spec):
            assert_valid(spec, result)
            assert_locally_balanced(spec, result)
            return
    raise AssertionError("cooperative-sticky did not complete within five rounds")


# --- claims, generations, user data ---------------------------------------------------------


def group(members: list[MemberSpec], **partitions: int) -> AssignmentSpec:
    return AssignmentSpec({m.member_id: m for m in members},
                          {t: TopicSpec(t, n) for t, n in partitions.items()})


T = frozenset({"t"})


def test_higher_generation_wins_a_disputed_partition() -> None:
    for newer, older in (("a", "b"), ("b", "a")):
        spec = group([MemberSpec(newer, T, owned=frozenset({("t", 0)}), generation=5),
                      MemberSpec(older, T, owned=frozenset({("t", 0), ("t", 1)}),
                                 generation=4)], t=2)
        result = parts(STICKY.assign(spec))
        assert result == {newer: {("t", 0)}, older: {("t", 1)}}


def test_same_generation_dispute_is_reassigned_and_withheld_cooperatively() -> None:
    spec = group([MemberSpec("a", T, owned=frozenset({("t", 0)}), generation=3),
                  MemberSpec("b", T, owned=frozenset({("t", 0), ("t", 1)}), generation=3),
                  MemberSpec("c", T, generation=3)], t=3)
    assert_valid(spec, STICKY.assign(spec))
    coop = parts(COOP.assign(spec))
    assert all(("t", 0) not in ps for ps in coop.values())  # both claimants must revoke first
    assert coop["b"] == {("t", 1)}


def test_eager_reads_claims_from_any_clients_user_data() -> None:
    java = subscription_user_data([("t", 0), ("t", 1)], 7)
    kafka_python = StickyAssignorUserData(previous_assignment=[("t", [2, 3])],
                                          generation=7).encode()
    spec = group([MemberSpec("a", T, metadata=java), MemberSpec("b", T, metadata=kafka_python),
                  MemberSpec("c", T, metadata=b"\x05garbage")], t=6)
    result = parts(STICKY.assign(spec))
    assert result["a"] == {("t", 0), ("t", 1)}
    assert result["b"] == {("t", 2), ("t", 3)}
    assert result["c"] == {("t", 4), ("t", 5)}


def test_user_data_generations_settle_disputes() -> None:
    spec = group([MemberSpec("a", T, metadata=subscription_user_data([("t", 0)], 2)),
                  MemberSpec("b", T, metadata=subscription_user_data([("t", 0)], 1))], t=1)
    assert parts(STICKY.assign(spec))["a"] == {("t", 0)}


def test_cooperative_takes_owned_at_its_word_and_generation_from_user_data() -> None:
    stale = MemberSpec("a", T, metadata=subscription_user_data([("t", 0)], 8))
    assert cooperative_claim(stale).owned == frozenset()
    assert cooperative_claim(stale).generation == 8
    old = MemberSpec("b", T, owned=frozenset({("t", 0)}),
                     metadata=cooperative_subscription_user_data(4))
    assert cooperative_claim(old).generation == 4
    spec = group([stale, old], t=2)
    assert parts(COOP.assign(spec))["b"] == {("t", 0)}


def test_unsubscribed_and_vanished_claims_are_ignored() -> None:
    spec = group([MemberSpec("a", frozenset({"u"}), owned=frozenset({("t", 0), ("u", 9)}),
                             generation=2),
                  MemberSpec("b", frozenset({"t", "u"}), generation=1)], t=1, u=2)
    result = STICKY.assign(spec)
    assert_valid(spec, result)
    assert parts(result)["b"] >= {("t", 0)}


def test_empty_group_and_no_topics() -> None:
    assert STICKY.assign(AssignmentSpec({}, {})).members == {}
    spec = group([MemberSpec("a", frozenset({"ghost"}))], t=3)
    assert parts(STICKY.assign(spec)) == {"a": frozenset()}
    assert parts(COOP.assign(spec)) == {"a": frozenset()}


# --- racks ----------------------------------------------------------------------------------


def rack_topic(n: int, racks: dict[int, frozenset[str]]) -> TopicSpec:
    return TopicSpec("t", n, racks)


def test_same_rack_partitions_go_to_same_rack_members() -> None:
    racks = {0: frozenset("a"), 1: frozenset("a"), 2: frozenset("b"), 3: frozenset("b")}
    spec = AssignmentSpec({"x": MemberSpec("x", T, rack="b"), "y": MemberSpec("y", T, rack="a")},
                          {"t": rack_topic(4, racks)})
    assert parts(STICKY.assign(spec)) == {"x": {("t", 2), ("t", 3)}, "y": {("t", 0), ("t", 1)}}


def test_rack_alignment_never_costs_balance() -> None:
    racks = {0: frozenset("a"), 1: frozenset("a"), 2: frozenset("a")}  # partition 3: no racks
    spec = AssignmentSpec({"x": MemberSpec("x", T, rack="a"), "y": MemberSpec("y", T, rack="b")},
                          {"t": rack_topic(4, racks)})
    result = parts(STICKY.assign(spec))
    assert_within_one({m: len(p) for m, p in result.items()})
    assert len(result["x"]) == 2 and result["x"] <= {("t", 0), ("t", 1), ("t", 2)}


def test_rack_aware_unequal_subscriptions_prefer_rack_among_equally_loaded() -> None:
    racks = {p: frozenset("b") for p in range(4)}
    spec = AssignmentSpec(
        {"x": MemberSpec("x", frozenset({"t", "u"}), rack="a"),
         "y": MemberSpec("y", T, rack="b")},
        {"t": rack_topic(4, racks), "u": TopicSpec("u", 1)})
    result = parts(STICKY.assign(spec))
    assert_locally_balanced(spec, STICKY.assign(spec))
    assert len(result["y"] & {("t", p) for p in range(4)}) >= 2


# --- determinism across processes -----------------------------------------------------------


_PROGRAM = """
import json
from coterie.assign.spec import AssignmentSpec, MemberSpec, TopicSpec
from coterie.assign.sticky import StickyAssignor
from coterie.assign.cooperative_sticky import CooperativeStickyAssignor
topics = {"t": TopicSpec("t", 13, {p: frozenset("ab"[p % 2]) for p in range(0, 13, 3)}),
          "u": TopicSpec("u", 7)}
members = {}
for i in range(5):
    owned = frozenset(("t", p) for p in range(i, 13, 4)) | frozenset(("u", p) for p in range(i))
    subs = frozenset({"t", "u"}) if i % 2 else frozenset({"t"})
    members[f"m{i}"] = MemberSpec(f"m{i}", subs, rack="ab"[i % 2], owned=owned, generation=i % 3)
spec = AssignmentSpec(members, topics)
out = {}
for a in (StickyAssignor(), CooperativeStickyAssignor()):
    result = a.assign(spec)
    out[a.name] = {m: sorted(x.partitions) for m, x in sorted(result.members.items())}
print(json.dumps(out))
"""


def test_same_assignment_under_any_hash_seed() -> None:
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", _PROGRAM], env=env, capture_output=True,
                             text=True, check=True, timeout=60)
        outputs.add(run.stdout)
    assert len(outputs) == 1
    assert json.loads(outputs.pop())["sticky"]


# --- against kafka-python's sticky ----------------------------------------------------------


def kafka_python_sticky(spec: AssignmentSpec,
                        previous: dict[str, frozenset[TopicPartition]]
                        ) -> dict[str, frozenset[TopicPartition]]:
    """kafka-python 3.0.12's StickyPartitionAssignor on the same group, each member's previous
    assignment sent as kafka-python's own sticky user data (generation 1)."""
    def partitions_for_topic(topic: str) -> set[int] | None:
        t = spec.topics.get(topic)
        return None if t is None else set(range(t.partitions))

    cluster = SimpleNamespace(topics=lambda: set(spec.topics),
                              partitions_for_topic=partitions_for_topic)
    members = []
    for m, member in sorted(spec.members.items()):
        prev = [KafkaTP(*tp) for tp in sorted(previous[m])]
        sub = StickyPartitionAssignor._metadata(sorted(member.subscribed_topics), prev, 1)
        members.append(SimpleNamespace(
            member_id=m, group_instance_id=None,
            metadata=ConsumerProtocolSubscription.decode(sub.encode())))
    result = StickyPartitionAssignor().assign(cluster, members)
    return {m: frozenset((t, p) for t, ps in a.assigned_partitions for p in ps)
            for m, a in result.items()}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=assignment_specs(homogeneous=True, max_members=6, max_partitions=10, ghosts=False),
       data=st.data())
def test_never_moves_more_than_kafka_python_sticky(spec: AssignmentSpec,
                                                   data: st.DataObject) -> None:
    """Identical subscriptions, each partition previously owned by at most one member (any
    imbalance): both are balanced, and coterie keeps at least as many partitions in place."""
    ids = sorted(spec.members)
    previous: dict[str, set[TopicPartition]] = {m: set() for m in ids}
    for tp in sorted(subscribed_partitions(spec)):
        owner = data.draw(st.sampled_from([None, *ids]))
        if owner is not None:
            previous[owner].add(tp)
    prev = {m: frozenset(ps) for m, ps in previous.items()}
    spec = AssignmentSpec({m: replace(s, owned=prev[m], generation=1)
                           for m, s in spec.members.items()}, spec.topics)
    ours = parts(STICKY.assign(spec))
    theirs = kafka_python_sticky(spec, prev)
    assert_within_one({m: len(p) for m, p in ours.items()})
    kept_ours = sum(len(ours[m] & prev[m]) for m in ids)
    kept_theirs = sum(len(theirs[m] & prev[m]) for m in ids)
    assert kept_ours >= kept_theirs
