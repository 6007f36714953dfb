"""Uniform, heterogeneous subscriptions: Kafka's UniformHeterogeneousAssignmentBuilderTest
cases (Kafka's test sorts member ids, and its topic ids sort like coterie's topic names, so
the expected answers are Kafka's own), and the properties: valid, deterministic, still when
nothing changed, and Kafka's balance guarantee per topic."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.assign.spec import AssignmentSpec, GroupAssignment
from coterie.assign.uniform import UniformAssignor
from coterie.assign.uniform_heterogeneous import assign_heterogeneous

from .checks import assert_valid, loads
from .strategies import assignment_specs, with_owned
from .test_uniform_homogeneous import answer, group, tps

UNIFORM = UniformAssignor()
PROPS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_members_without_subscriptions_get_nothing():
    assert answer(group({"topic1": 3}, {"A": ("", ""), "B": ("", "")})) == {
        "A": frozenset(), "B": frozenset()}


def test_subscriptions_to_missing_topics_contribute_nothing():
    assert answer(group({"topic1": 3}, {"A": ("topic3", ""), "B": ("topic2", "")})) == {
        "A": frozenset(), "B": frozenset()}


def test_first_assignment_two_members_two_topics():
    # topic1 goes first (3 per subscriber, as topic3, but fewer subscribers): all to A.
    # topic3 is water-filled: B alone until it reaches A's load of 3, then B, A, B.
    out = answer(group({"topic1": 3, "topic3": 6}, {"A": ("topic1,topic3", ""),
                                                    "B": ("topic3", "")}))
    assert out == {"A": tps("topic1-0, topic1-1, topic1-2, topic3-4"),
                   "B": tps("topic3-0, topic3-1, topic3-2, topic3-3, topic3-5")}


def test_more_members_than_partitions():
    out = answer(group({"topic3": 1, "topic1": 2}, {"A": ("topic3", ""), "B": ("topic3", ""),
                                                    "C": ("topic1", "")}))
    assert out == {"A": tps("topic3-0"), "B": frozenset(), "C": tps("topic1-0, topic1-1")}


def test_unbalanced_previous_assignment_three_topics():
    out = answer(group({"topic1": 6, "topic2": 4, "topic3": 4}, {
        "A": ("topic1", "topic1-0, topic1-1, topic1-2"),
        "B": ("topic1,topic2", "topic1-3, topic2-0"),
        "C": ("topic1,topic2,topic3", "topic1-4, topic1-5, topic2-1, topic2-2, topic2-3, "
                                      "topic3-0, topic3-1, topic3-2, topic3-3")}))
    assert out == {"A": tps("topic1-0, topic1-1, topic1-2, topic1-5"),
                   "B": tps("topic1-3, topic2-0, topic2-1, topic2-2, topic2-3"),
                   "C": tps("topic1-4, topic3-0, topic3-1, topic3-2, topic3-3")}


def test_partitions_added():
    out = answer(group({"topic1": 6, "topic2": 5, "topic3": 3, "topic4": 3}, {
        "A": ("topic1,topic3", "topic1-0, topic1-1, topic1-2, topic1-3, topic3-0, topic3-1"),
        "B": ("topic1,topic2,topic3,topic4", "topic2-0, topic2-1, topic2-2, "
                                             "topic4-0, topic4-1, topic4-2")}))
    assert out == {
        "A": tps("topic1-0, topic1-1, topic1-2, topic1-3, topic1-4, topic1-5, "
                 "topic3-0, topic3-1, topic3-2"),
        "B": tps("topic2-0, topic2-1, topic2-2, topic2-3, topic2-4, "
                 "topic4-0, topic4-1, topic4-2")}


def test_member_and_partitions_added():
    out = answer(group({"topic1": 6, "topic2": 7}, {
        "A": ("topic1", "topic1-0, topic1-2, topic2-0"),
        "B": ("topic1,topic2", "topic1-1, topic2-1, topic2-2"),
        "C": ("topic1,topic2", "")}))
    assert out == {"A": tps("topic1-0, topic1-2, topic1-3, topic1-4, topic1-5"),
                   "B": tps("topic1-1, topic2-1, topic2-2, topic2-6"),
                   "C": tps("topic2-0, topic2-3, topic2-4, topic2-5")}


def test_member_removed():
    out = answer(group({"topic1": 3, "topic2": 8, "topic3": 3}, {
        "A": ("topic1,topic3", "topic1-0, topic1-1, topic1-2, topic3-0, topic3-1"),
        "B": ("topic2", "topic2-3, topic2-4, topic2-5, topic2-6")}))
    assert out == {"A": tps("topic1-0, topic1-1, topic1-2, topic3-0, topic3-1, topic3-2"),
                   "B": tps(", ".join(f"topic2-{p}" for p in range(8)))}


def test_subscription_removed():
    out = answer(group({"topic1": 3, "topic2": 5}, {
        "A": ("topic1", "topic1-0, topic1-2, topic2-1, topic2-3"),
        "B": ("topic1,topic2", "topic1-1, topic2-0, topic2-2, topic2-4")}))
    assert out == {"A": tps("topic1-0, topic1-1, topic1-2"),
                   "B": tps("topic2-0, topic2-1, topic2-2, topic2-3, topic2-4")}


def test_balancing_skips_givers_without_partitions_of_the_topic():
    # Kafka's testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions forces the
    # heterogeneous builder on equal subscriptions (coterie's dispatch would pick the
    # homogeneous one), so call the builder directly.
    topics = {"topic1": 2, "topic2": 2, "topic3": 2}
    every = frozenset(topics)
    out = assign_heterogeneous(topics, [every, every],
                               [tps("topic1-0, topic1-1, topic2-0, topic2-1, topic3-0, topic3-1"),
                                frozenset()], [0, 0])
    assert out == [tps("topic2-0, topic3-0, topic3-1"), tps("topic1-0, topic1-1, topic2-1")]


def test_one_member_without_subscriptions():
    out = answer(group({"topic1": 3}, {"A": ("topic1", ""), "B": ("", "")}))
    assert out == {"A": tps("topic1-0, topic1-1, topic1-2"), "B": frozenset()}


def test_overlapping_subscriptions_may_stay_apart_overall():
    # Kafka's own example of what its passes accept: each topic is balanced among its
    # subscribers, the group is not within one.
    spec = group({"t1": 19, "t2": 11}, {
        "A": ("t1", ", ".join(f"t1-{p}" for p in range(9))),
        "B": ("t1,t2", ", ".join(f"t1-{p}" for p in range(9, 19))),
        "C": ("t2", ", ".join(f"t2-{p}" for p in range(11)))})
    out = UNIFORM.assign(spec)
    assert {m: a.partitions for m, a in out.members.items()} == {
        m: s.owned for m, s in spec.members.items()}
    assert sorted(loads(out).values()) == [9, 10, 11]


# ---------------------------------------------------------------- properties


def assert_kafka_balance(spec: AssignmentSpec, out: GroupAssignment) -> None:
    """Kafka's guarantee once its balancing passes settle: for every topic, a subscriber that
    holds a partition of it is at most one partition above the topic's least loaded
    subscriber."""
    load = loads(out)
    holders: dict[str, set[str]] = {}
    for m, a in out.members.items():
        for t, _ in a.partitions:
            holders.setdefault(t, set()).add(m)
    for t, held_by in holders.items():
        least = min(load[m] for m in spec.members if t in spec.members[m].subscribed_topics)
        assert max(load[m] for m in held_by) - least <= 1, (t, load)


@PROPS
@given(assignment_specs(owned="any", max_members=7, max_partitions=10))
def test_valid_and_balanced_per_topic(spec):
    out = UNIFORM.assign(spec)
    assert_valid(spec, out)
    assert_kafka_balance(spec, out)


@PROPS
@given(assignment_specs(owned="any"), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_member_order(spec, rnd):
    ids = list(spec.members)
    rnd.shuffle(ids)
    shuffled = AssignmentSpec({m: spec.members[m] for m in ids}, dict(spec.topics))
    assert UNIFORM.assign(shuffled) == UNIFORM.assign(spec)


@PROPS
@given(assignment_specs(owned="any", max_members=7, max_partitions=10))
def test_still_when_nothing_changed(spec):
    first = UNIFORM.assign(spec)
    assert UNIFORM.assign(with_owned(spec, first)) == first
