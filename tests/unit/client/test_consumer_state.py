"""The consumer's pure pieces: subscriptions (names, whole-name RE2 patterns), the
assignment diff of KIP-429, the per-partition positions and buffers (stale fetches
refused, revoking partitions never delivered, partitions served in turn), and the leader's
KIP-429 check."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.assign.classic_leader import JoinedMember
from coterie.client.consumer_rebalance import check_cooperative
from coterie.client.partition_state import Assignment
from coterie.client.records import ConsumerRecord, Decoded
from coterie.client.subscription import AssignmentChange, TopicPartition, TopicSubscription
from coterie.wire.consumer_protocol import (
    Assignment as WireAssignment,
)
from coterie.wire.consumer_protocol import (
    Subscription,
    encode_assignment,
    encode_subscription,
)

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def records(tp: TopicPartition, offsets: range) -> Decoded:
    return Decoded([ConsumerRecord(tp.topic, tp.partition, o, 0, 0, None, b"%d" % o)
                    for o in offsets], offsets.stop)


def test_pattern_matches_whole_names_and_skips_internal_topics() -> None:
    sub = TopicSubscription(pattern="orders-.*")
    names = ["orders-eu", "orders-", "old-orders-eu", "orders", "__orders-x", "orders-us"]
    assert [n for n in names if sub.matches(n)] == ["orders-eu", "orders-", "orders-us"]
    assert sub.resolve(names) is True
    assert sub.topics == {"orders-eu", "orders-", "orders-us"}
    assert sub.resolve(reversed(names)) is False
    assert TopicSubscription(pattern="__consumer_offsets").resolve(["__consumer_offsets"]) \
        is False
    by_name = TopicSubscription(topics=["a", "b"])
    assert by_name.matches("a") and not by_name.matches("c")
    assert by_name.resolve(["c"]) is False and by_name.topics == {"a", "b"}


def test_bad_subscriptions_are_refused() -> None:
    with pytest.raises(ValueError, match="either"):
        TopicSubscription()
    with pytest.raises(ValueError, match="either"):
        TopicSubscription(topics=["a"], pattern="a")
    with pytest.raises(ValueError, match="RE2"):
        TopicSubscription(pattern="(unclosed")
    with pytest.raises(ValueError, match="names"):
        TopicSubscription(topics="orders")


@given(st.sets(st.integers(0, 9)), st.sets(st.integers(0, 9)))
def test_assignment_change_splits_owned_and_assigned(owned: set[int],
                                                     assigned: set[int]) -> None:
    change = AssignmentChange.between([("t", p) for p in owned], [("t", p) for p in assigned])
    assert change.revoked | change.kept == {TopicPartition("t", p) for p in owned}
    assert change.added | change.kept == {TopicPartition("t", p) for p in assigned}
    assert not change.revoked & change.added


def test_a_fetch_is_kept_only_for_the_same_live_partition_at_the_same_offset() -> None:
    a = Assignment()
    (ps,) = a.add([T0])
    ps.seek(5)
    assert a.deliver(ps, 4, records(T0, range(4, 8))) is False  # fetched before a seek
    assert a.deliver(ps, 5, records(T0, range(5, 8))) is True
    assert a.deliver(ps, 5, records(T0, range(5, 9))) is False  # already buffered
    a.remove([T0])
    (again,) = a.add([T0])
    again.seek(5)
    assert a.deliver(ps, 5, records(T0, range(5, 8))) is False  # the old state object
    got, drained = a.take(10)
    assert (got, drained) == ([], False)
    assert a.deliver(again, 5, Decoded([], 9)) is True  # control batches only: skip ahead
    assert again.position == 9 and again.buffer is None


def test_revoking_drops_buffers_and_stops_delivery_at_once() -> None:
    a = Assignment()
    p0, p1 = a.add([T0, T1])
    p0.seek(0)
    p1.seek(0)
    a.deliver(p0, 0, records(T0, range(0, 5)))
    a.deliver(p1, 0, records(T1, range(0, 5)))
    a.start_revoking([T0])
    assert a.owned() == {T1}
    assert not p0.fetchable(0.0) and not p0.needs_position
    got, _ = a.take(100)
    assert {(r.topic, r.partition) for r in got} == {T1}
    assert a.positions() == {T0: 0, T1: 5}  # what a commit before revocation stores
    a.remove([T0])
    assert set(a.parts) == {T1}


def test_take_serves_partitions_in_turn_and_moves_positions() -> None:
    a = Assignment()
    states = a.add([T0, T1, T2])
    for ps in states:
        ps.seek(10)
        a.deliver(ps, 10, records(ps.tp, range(10, 14)))
    first, _ = a.take(3)
    second, _ = a.take(3)
    assert {r.partition for r in first} != {r.partition for r in second}
    rest, drained = a.take(100)
    assert drained and len(first) + len(second) + len(rest) == 12
    assert a.positions() == {T0: 14, T1: 14, T2: 14}
    assert all(ps.fetchable(0.0) for ps in states)
    paused = states[0]
    paused.paused = True
    a.deliver(paused, 14, records(T0, range(14, 16)))
    assert a.take(100) == ([], False) and paused.position == 14


def _member(member_id: str, owned: set[TopicPartition]) -> JoinedMember:
    return JoinedMember(member_id, None, encode_subscription(Subscription(
        ("t",), owned_partitions=frozenset(owned), generation_id=3)))


def _assign(parts: set[TopicPartition]) -> bytes:
    return encode_assignment(WireAssignment(frozenset(parts)))


def test_the_leader_refuses_a_cooperative_plan_that_moves_an_owned_partition() -> None:
    members = [_member("a", {T0, T1}), _member("b", {T2})]
    check_cooperative(members, {"a": _assign({T0}), "b": _assign({T2})})  # T1 revoked only
    check_cooperative(members, {"a": _assign({T0, T1}), "b": _assign({T2})})
    with pytest.raises(ValueError, match=r"\('t', 1\)"):
        check_cooperative(members, {"a": _assign({T0}), "b": _assign({T1, T2})})
