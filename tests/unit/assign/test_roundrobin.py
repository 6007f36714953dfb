"""Round-robin: Kafka's answers on Kafka's own examples, kafka-python's answers on generated
groups, and the guarantees the module states."""

from __future__ import annotations

from hypothesis import given, settings
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from coterie.assign.roundrobin import RoundRobinAssignor
from coterie.assign.spec import AssignmentSpec, MemberSpec, TopicSpec

from .checks import assert_valid, assert_within_one, loads
from .kafka_python import kafka_python_assign
from .strategies import assignment_specs
from .test_range import parse

RR = RoundRobinAssignor()


def run(members: list[MemberSpec], **partitions: int) -> dict[str, frozenset]:
    topics = {t: TopicSpec(t, n) for t, n in partitions.items()}
    got = RR.assign(AssignmentSpec({m.member_id: m for m in members}, topics))
    return {mid: a.partitions for mid, a in got.members.items()}


def test_javadoc_examples():
    both = frozenset({"t0", "t1"})
    assert run([MemberSpec("C0", both), MemberSpec("C1", both)], t0=3, t1=3) == {
        "C0": parse("t0-0, t0-2, t1-1"), "C1": parse("t0-1, t1-0, t1-2")}
    # Different subscriptions: members are skipped, not compensated.
    assert run([MemberSpec("C0", frozenset({"t0"})), MemberSpec("C1", frozenset({"t0", "t1"})),
                MemberSpec("C2", frozenset({"t0", "t1", "t2"}))], t0=1, t1=2, t2=3) == {
        "C0": parse("t0-0"), "C1": parse("t1-0"), "C2": parse("t1-1, t2-0, t2-1, t2-2")}
    # Kafka's testMultipleConsumersMixedTopics.
    one, two = frozenset({"topic1"}), frozenset({"topic1", "topic2"})
    assert run([MemberSpec("consumer1", one), MemberSpec("consumer2", two),
                MemberSpec("consumer3", one)], topic1=3, topic2=2) == {
        "consumer1": parse("topic1-0"), "consumer2": parse("topic1-1, topic2-0, topic2-1"),
        "consumer3": parse("topic1-2")}


def test_static_members_order_by_instance_id():
    both = frozenset({"topic1", "topic2"})
    expected = {"consumer-b": parse("topic1-0, topic1-2, topic2-1"),
                "consumer-a": parse("topic1-1, topic2-0, topic2-2")}
    assert run([MemberSpec("consumer-b", both, instance_id="instance1"),
                MemberSpec("consumer-a", both, instance_id="instance2")],
               topic1=3, topic2=3) == expected
    assert run([MemberSpec("consumer-b", both, instance_id="instance1"),
                MemberSpec("consumer-a", both)], topic1=3, topic2=3) == expected


def test_static_members_persist_when_a_dynamic_member_is_replaced():
    # Kafka's testStaticMemberRoundRobinAssignmentPersistent.
    both = frozenset({"topic1", "topic2"})
    static = [MemberSpec(f"consumer{i}", both, instance_id=f"instance{i}") for i in (1, 2, 3)]
    expected = {"consumer1": parse("topic1-0, topic2-1"), "consumer2": parse("topic1-1, topic2-2"),
                "consumer3": parse("topic1-2")}
    assert run([*static, MemberSpec("consumer4", both)], topic1=3, topic2=3) == {
        **expected, "consumer4": parse("topic2-0")}
    assert run([*static, MemberSpec("consumer5", both)], topic1=3, topic2=3) == {
        **expected, "consumer5": parse("topic2-0")}


@settings(max_examples=400, deadline=None)
@given(assignment_specs(max_members=7, max_partitions=12, homogeneous=True))
def test_same_answer_as_kafka_python(spec):
    # Identical subscriptions only: kafka-python 3.0.12's round-robin raises KeyError as soon as
    # it has to skip a member (it rebinds the member id to the (instance id, member id) pair),
    # so differing subscriptions are pinned by the Javadoc example above instead.
    got = RR.assign(spec)
    assert {mid: a.partitions for mid, a in got.members.items()} == kafka_python_assign(
        RoundRobinPartitionAssignor, spec)


@settings(max_examples=300, deadline=None)
@given(assignment_specs())
def test_guarantees(spec):
    got = RR.assign(spec)
    assert_valid(spec, got)
    assert RR.assign(AssignmentSpec(dict(reversed(spec.members.items())), spec.topics)) == got


@settings(max_examples=200, deadline=None)
@given(assignment_specs(homogeneous=True))
def test_identical_subscriptions_balance_within_one(spec):
    got = RR.assign(spec)
    assert_valid(spec, got)
    assert_within_one(loads(got))
