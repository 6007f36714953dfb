"""Range: Kafka's answers on Kafka's own examples, kafka-python's answers on generated groups,
and the guarantees the module states."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from kafka.coordinator.assignors.range import RangePartitionAssignor

from coterie.assign.range import RangeAssignor
from coterie.assign.spec import AssignmentSpec, MemberSpec, TopicSpec

from .checks import assert_valid
from .kafka_python import kafka_python_assign
from .strategies import assignment_specs

RANGE = RangeAssignor()


def parse(text: str) -> frozenset[tuple[str, int]]:
    """'t1-0, t2-3' -> {('t1', 0), ('t2', 3)} (Kafka's test notation)."""
    return frozenset((s.rsplit("-", 1)[0], int(s.rsplit("-", 1)[1]))
                     for s in text.split(", ") if s)


def kafka_rack_case(topics: dict[str, int], replication: int, broker_racks: list[str | None],
                    consumer_racks: list[str | None],
                    consumer_topics: list[list[str]]) -> AssignmentSpec:
    """The cluster Kafka's AbstractPartitionAssignorTest builds: partition i of the topic that
    starts at running offset o has its replicas on brokers (i + j + o) % brokers, j <
    replication, broker b on rack broker_racks[b]; consumers are consumer0, consumer1, ..."""
    specs, offset = {}, 0
    for name, n in topics.items():
        racks = {p: frozenset(r for j in range(replication)
                              if (r := broker_racks[(p + j + offset) % len(broker_racks)]))
                 for p in range(n)}
        specs[name] = TopicSpec(name, n, racks)
        offset += n
    members = {f"consumer{i}": MemberSpec(f"consumer{i}", frozenset(ts), rack=rack)
               for i, (ts, rack) in enumerate(zip(consumer_topics, consumer_racks, strict=True))}
    return AssignmentSpec(members, specs)


ABC = ["a", "b", "c"]
NO_RACKS: list[str | None] = [None, None, None]
ALL3 = ["t1", "t2", "t3"]


def _non_rack_aware(topics, consumer_topics, expected):
    """Kafka's verifyNonRackAwareAssignment: rack configurations that must not change range."""
    configs = [(3, NO_RACKS, ABC), (3, ABC, NO_RACKS), (3, ABC, ABC),
               (4, ["a", "b", "c", "d"], ABC), (3, ABC, ["d", "e", "f"]),
               (3, ABC, [None, "e", "f"])]
    return [(topics, rf, brokers, consumers, consumer_topics, expected)
            for rf, brokers, consumers in configs]


T672 = {"t1": 6, "t2": 7, "t3": 2}
T555 = {"t1": 5, "t2": 5, "t3": 5}
T6622 = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
UNEQUAL = [ALL3, ALL3, ["t1", "t3"]]
KAFKA_CASES = [
    # testRackAwareAssignmentWithUniformSubscription
    *_non_rack_aware(T672, [ALL3] * 3, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
                                         "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"]),
    (T672, 1, ABC, ABC, [ALL3] * 3, ["t1-0, t1-3, t2-0, t2-3, t2-6",
                                     "t1-1, t1-4, t2-1, t2-4, t3-0",
                                     "t1-2, t1-5, t2-2, t2-5, t3-1"]),
    (T672, 2, ABC, ABC, [ALL3] * 3, ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1",
                                     "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"]),
    (T672, 3, ["a", "b"], ABC, [ALL3] * 3, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
                                            "t1-2, t1-3, t2-3, t2-4, t3-1",
                                            "t1-4, t1-5, t2-5, t2-6"]),
    # testRackAwareAssignmentWithNonEqualSubscription
    *_non_rack_aware(T672, UNEQUAL, ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
                                     "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"]),
    (T672, 1, ABC, ABC, UNEQUAL, ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6",
                                  "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"]),
    (T672, 2, ABC, ABC, UNEQUAL, ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1",
                                  "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"]),
    (T672, 3, ["a", "b"], ABC, UNEQUAL, ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
                                         "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"]),
    # testRackAwareAssignmentWithUniformPartitions: co-partitioning beats rack alignment
    *[(T555, rf, brokers, ABC, [ALL3] * 3, ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1",
                                            "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
                                            "t1-4, t2-4, t3-4"])
      for rf, brokers in [(1, ABC), (2, ABC), (3, ["a", "b"])]],
    # testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription
    (T555, 1, ABC, ABC, UNEQUAL, ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1",
                                  "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"]),
    (T555, 2, ABC, ABC, UNEQUAL, ["t1-2, t2-0, t2-1, t2-3, t3-2",
                                  "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"]),
    (T555, 3, ["a", "b"], ABC, UNEQUAL, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1",
                                         "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"]),
    # testRackAwareAssignmentWithCoPartitioning
    *[(T6622, rf, ["a", "b"], ["a", "b", "b", "a"], [["t1", "t2"]] * 2 + [["t3", "t4"]] * 2,
       expected) for rf, expected in [
        (3, ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
             "t3-0, t4-0", "t3-1, t4-1"]),
        (2, ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
             "t3-0, t4-0", "t3-1, t4-1"]),
        (1, ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5",
             "t3-1, t4-1", "t3-0, t4-0"])]],
    *[(T6622, rf, brokers, ["a", "b", "b", "a"], [["t1", "t2", "t3", "t4"]] * 4, expected)
      for rf, brokers, expected in [
        (2, ["a", "b"], ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
                         "t1-4, t2-4", "t1-5, t2-5"]),
        (1, ["a", "b"], ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1",
                         "t1-5, t2-5", "t1-4, t2-4"]),
        (1, ABC, ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1",
                  "t1-2, t2-2", "t1-5, t2-5"])]],
    # testCoPartitionedAssignmentWithSameSubscription (t7..t9 do not exist)
    *[({"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}, rf, brokers, ABC,
       [[f"t{i}" for i in range(1, 10)]] * 3, expected) for rf, brokers, expected in [
        (3, NO_RACKS, ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
                       "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
                       "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3"]),
        (2, ABC, ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
                  "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
                  "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3"])]],
]


@pytest.mark.parametrize(("topics", "rf", "brokers", "racks", "consumer_topics", "expected"),
                         KAFKA_CASES)
def test_kafka_rack_aware_examples(topics, rf, brokers, racks, consumer_topics, expected):
    spec = kafka_rack_case(topics, rf, brokers, racks, consumer_topics)
    got = RANGE.assign(spec)
    assert {mid: a.partitions for mid, a in got.members.items()} == {
        f"consumer{i}": parse(text) for i, text in enumerate(expected)}


def test_static_members_keep_ranges_when_member_ids_change():
    # Kafka's testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges: replicas
    # of partition p on racks {abc[p % 3], abc[(p + 1) % 3]} for both topics.
    racks = {p: frozenset({ABC[p % 3], ABC[(p + 1) % 3]}) for p in range(5)}
    topics = {t: TopicSpec(t, 5, racks) for t in ("topic1", "topic2")}
    both = frozenset(topics)

    def by_instance(ids: list[str]) -> dict[str, frozenset]:
        members = {mid: MemberSpec(mid, both, instance_id=f"instance{i + 1}", rack=ABC[i])
                   for i, mid in enumerate(ids)}
        got = RANGE.assign(AssignmentSpec(members, topics))
        return {members[mid].instance_id: a.partitions for mid, a in got.members.items()}

    expected = {"instance1": parse("topic1-0, topic1-2, topic2-0, topic2-2"),
                "instance2": parse("topic1-1, topic1-3, topic2-1, topic2-3"),
                "instance3": parse("topic1-4, topic2-4")}
    assert by_instance(["consumer1", "consumer2", "consumer3"]) == expected
    assert by_instance(["consumer1", "consumer5", "consumer4"]) == expected


def _six_partitions(members: list[MemberSpec]) -> dict[str, frozenset]:
    topics = {t: TopicSpec(t, 3) for t in ("topic1", "topic2")}
    got = RANGE.assign(AssignmentSpec({m.member_id: m for m in members}, topics))
    return {mid: a.partitions for mid, a in got.members.items()}


def test_javadoc_example_and_instance_id_order():
    both = frozenset({"topic1", "topic2"})
    first, second = parse("topic1-0, topic1-1, topic2-0, topic2-1"), parse("topic1-2, topic2-2")
    assert _six_partitions([MemberSpec("C0", both), MemberSpec("C1", both)]) == {
        "C0": first, "C1": second}
    # Static members sort by instance id, whatever their member ids.
    assert _six_partitions([MemberSpec("consumer-b", both, instance_id="instance1"),
                            MemberSpec("consumer-a", both, instance_id="instance2")]) == {
        "consumer-b": first, "consumer-a": second}
    # A static member sorts before every dynamic member.
    assert _six_partitions([MemberSpec("consumer-b", both, instance_id="instance1"),
                            MemberSpec("consumer-a", both)]) == {
        "consumer-b": first, "consumer-a": second}


def test_mixed_subscriptions_example():
    # Kafka's testMultipleConsumersMixedTopics.
    topics = {"topic1": TopicSpec("topic1", 3), "topic2": TopicSpec("topic2", 2)}
    members = {"consumer1": MemberSpec("consumer1", frozenset({"topic1"})),
               "consumer2": MemberSpec("consumer2", frozenset({"topic1", "topic2"})),
               "consumer3": MemberSpec("consumer3", frozenset({"topic1"}))}
    got = RANGE.assign(AssignmentSpec(members, topics))
    assert {m: a.partitions for m, a in got.members.items()} == {
        "consumer1": parse("topic1-0"), "consumer2": parse("topic1-1, topic2-0, topic2-1"),
        "consumer3": parse("topic1-2")}


@settings(max_examples=400, deadline=None)
@given(assignment_specs(max_members=7, max_partitions=12))
def test_same_answer_as_kafka_python(spec):
    got = RANGE.assign(spec)
    assert {mid: a.partitions for mid, a in got.members.items()} == kafka_python_assign(
        RangePartitionAssignor, spec)


def _per_topic_counts(spec, assignment) -> dict[str, Counter]:
    counts: dict[str, Counter] = {}
    for mid, a in assignment.members.items():
        for topic, _ in a.partitions:
            counts.setdefault(topic, Counter())[mid] += 1
    return counts


@settings(max_examples=300, deadline=None)
@given(assignment_specs(racks=True))
def test_guarantees(spec):
    got = RANGE.assign(spec)
    assert_valid(spec, got)
    # Per topic, the counts are exactly plain range's: P // C each, plus one for P % C of them.
    plain = RANGE.assign(AssignmentSpec(
        {mid: replace(m, rack=None) for mid, m in spec.members.items()}, spec.topics))
    for topic, counts in _per_topic_counts(spec, got).items():
        subs = [m for m in spec.members.values() if topic in m.subscribed_topics]
        full = [counts.get(m.member_id, 0) for m in subs]
        assert max(full) - min(full) <= 1
        assert sorted(full) == sorted(_per_topic_counts(spec, plain)[topic].get(m.member_id, 0)
                                      for m in subs)
    # Deterministic: member insertion order does not matter.
    reordered = AssignmentSpec(dict(reversed(spec.members.items())), spec.topics)
    assert RANGE.assign(reordered) == got


@settings(max_examples=200, deadline=None)
@given(assignment_specs(homogeneous=True, ghosts=False))
def test_equal_counts_are_co_partitioned_without_racks(spec):
    got = RANGE.assign(spec)
    by_count: dict[int, list[str]] = {}
    for name, t in spec.topics.items():
        if name in next(iter(spec.members.values())).subscribed_topics:
            by_count.setdefault(t.partitions, []).append(name)
    for a in got.members.values():
        for names in by_count.values():
            numbers = {frozenset(p for t, p in a.partitions if t == name) for name in names}
            assert len(numbers) == 1


@settings(max_examples=200, deadline=None)
@given(assignment_specs(racks=True, static=False))
def test_static_members_assignment_follows_instance_ids(spec):
    # Make everyone static and give them new member ids: same partitions per instance id.
    members = {mid: replace(m, instance_id=f"inst-{mid}") for mid, m in spec.members.items()}
    renamed = {f"new-{len(mid)}-{mid[::-1]}": replace(m, member_id=f"new-{len(mid)}-{mid[::-1]}")
               for mid, m in members.items()}
    before = RANGE.assign(AssignmentSpec(members, spec.topics))
    after = RANGE.assign(AssignmentSpec(renamed, spec.topics))
    assert ({members[mid].instance_id: a.partitions for mid, a in before.members.items()}
            == {renamed[mid].instance_id: a.partitions for mid, a in after.members.items()})
