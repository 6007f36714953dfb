"""The consumer protocol's bytes, checked against kafka-python's independent codec.

kafka-python generates its ConsumerProtocolSubscription / ConsumerProtocolAssignment classes
from Kafka's JSON schemas too, but through its own code: agreeing with it in both directions,
at every version, is a real differential test of coterie's encoding.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from coterie.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)

topics = st.lists(st.text("abcdefgh-._", min_size=1, max_size=8), max_size=4, unique=True)
partitions = st.frozensets(st.tuples(st.sampled_from(["t0", "t1", "t-2"]),
                                     st.integers(0, 300)), max_size=20)
user_data = st.none() | st.binary(max_size=40)


@st.composite
def subscriptions(draw: st.DrawFn) -> Subscription:
    version = draw(st.integers(0, 3))
    return Subscription(
        topics=tuple(draw(topics)),
        user_data=draw(user_data),
        owned_partitions=draw(partitions) if version >= 1 else frozenset(),
        generation_id=draw(st.integers(-1, 2**31 - 1)) if version >= 2 else -1,
        rack_id=draw(st.none() | st.text("abc", max_size=5)) if version >= 3 else None,
        version=version)


def _kp_partitions(groups: list) -> frozenset[tuple[str, int]]:
    return frozenset((g.topic, p) for g in groups for p in g.partitions)


@given(subscriptions())
def test_subscription_agrees_with_kafka_python(sub: Subscription) -> None:
    data = encode_subscription(sub)
    theirs = KpSubscription.decode(data)
    assert theirs.version == sub.version
    assert list(theirs.topics) == list(sub.topics)
    assert theirs.user_data == sub.user_data
    if sub.version >= 1:
        assert _kp_partitions(theirs.owned_partitions) == sub.owned_partitions
    if sub.version >= 2:
        assert theirs.generation_id == sub.generation_id
    if sub.version >= 3:
        assert theirs.rack_id == sub.rack_id
    assert decode_subscription(data) == sub
    # and the other way: bytes kafka-python writes decode to the same subscription
    assert decode_subscription(theirs.encode(version=sub.version)) == sub


@given(partitions, user_data, st.integers(0, 3))
def test_assignment_agrees_with_kafka_python(parts: frozenset[tuple[str, int]],
                                             ud: bytes | None, version: int) -> None:
    ours = Assignment(parts, ud, version=version)
    data = encode_assignment(ours)
    theirs = KpAssignment.decode(data)
    assert _kp_partitions(theirs.assigned_partitions) == parts
    assert theirs.user_data == ud
    assert decode_assignment(data) == ours
    assert decode_assignment(theirs.encode(version=version)) == ours


def test_newer_version_with_extra_fields_is_read() -> None:
    """A v4 subscription (a future version that appends fields) is read as v3: Kafka's
    compatibility rule for these schemas."""
    v3 = encode_subscription(Subscription(("a",), None, frozenset({("a", 1)}), 7, "r"))
    future = b"\x00\x04" + v3[2:] + b"\x00\x00\x00\x09"
    got = decode_subscription(future)
    assert (got.topics, got.owned_partitions, got.generation_id, got.rack_id, got.version) == (
        ("a",), frozenset({("a", 1)}), 7, "r", 4)


@pytest.mark.parametrize("garbage", [b"\x00", b"\x00\x00\x00\x00\x00\x05ab", b"\xff\xff",
                                     b"\x00\x01\x7f\xff\xff\xff"])
def test_garbage_is_a_clear_error(garbage: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(garbage)
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(garbage)
    assert subscribed_topics(garbage) == set()


# A subscription (v1) declaring 2**31 - 1 topics, and an assignment (v0) whose one topic
# declares 2**31 - 1 partitions, each with bytes after the count.
HUGE_SUBSCRIPTION = b"\x00\x01" + b"\x7f\xff\xff\xff" + b"\x00" * 16
HUGE_ASSIGNMENT = (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x7f\xff\xff\xff"
                   + b"\x00" * 16)


def test_a_declared_count_near_2_to_the_31_is_a_clear_error() -> None:
    """These bytes come from clients (JoinGroup metadata, a leader's SyncGroup assignments).
    kio's native reader reserves an array's declared count before reading an element, so
    such a count aborted the whole broker; the bounds walk refuses it first."""
    with pytest.raises(ConsumerProtocolError, match="array of 2147483647 elements"):
        decode_subscription(HUGE_SUBSCRIPTION)
    with pytest.raises(ConsumerProtocolError, match="array of 2147483647 elements"):
        decode_assignment(HUGE_ASSIGNMENT)


def test_empty_assignment_bytes_are_an_empty_assignment() -> None:
    assert decode_assignment(b"").partitions == frozenset()


def test_bad_version_refused_on_encode() -> None:
    with pytest.raises(ConsumerProtocolError):
        encode_subscription(Subscription(("a",), version=4))
    with pytest.raises(ConsumerProtocolError):
        encode_assignment(Assignment(frozenset(), version=-1))
