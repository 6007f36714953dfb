"""Sticky user data bytes: against hand-built Java layouts, and differentially against the
encoders and decoders of kafka-python 3.0.12 and aiokafka (both installed in .venv)."""

from __future__ import annotations

import struct

import pytest
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.structs import TopicPartition as KafkaTP

from coterie.assign.spec import NO_GENERATION, AssignorError
from coterie.assign.sticky_userdata import (
    DecodedUserData,
    decode_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

int32s = st.integers(-(2**31), 2**31 - 1)
topic_names = st.text(min_size=0, max_size=12)
owned_sets = st.frozensets(st.tuples(topic_names, st.integers(0, 2**31 - 1)), max_size=20)


def grouped(owned: frozenset[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """Owned partitions in the order coterie writes them: topics sorted, partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for t, p in owned:
        by_topic.setdefault(t, []).append(p)
    return [(t, sorted(by_topic[t])) for t in sorted(by_topic)]


def java_bytes(assignment: list[tuple[str, list[int]]], generation: int | None) -> bytes:
    """Java's StickyAssignorUserData built by hand: v1 with a generation, v0 without."""
    out = struct.pack(">i", len(assignment))
    for topic, partitions in assignment:
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    if generation is not None:
        out += struct.pack(">i", generation)
    return out


def test_known_vector() -> None:
    data = encode_sticky_user_data({("t", 1), ("t", 0), ("a", 5)}, 7)
    assert data.hex() == (
        "00000002"                      # two topics
        "0001" "61" "00000001" "00000005"   # "a": [5]
        "0001" "74" "00000002" "00000000" "00000001"  # "t": [0, 1]
        "00000007"                      # generation
    )
    assert decode_user_data(data) == DecodedUserData(
        frozenset({("t", 0), ("t", 1), ("a", 5)}), 7)


@settings(max_examples=200)
@given(owned=owned_sets, generation=int32s)
def test_encode_is_java_layout_and_matches_both_python_clients(
        owned: frozenset[tuple[str, int]], generation: int) -> None:
    ours = encode_sticky_user_data(owned, generation)
    assignment = grouped(owned)
    assert ours == java_bytes(assignment, generation)
    assert ours == StickyAssignorUserDataV1(assignment, generation).encode()
    assert ours == StickyAssignorUserData(previous_assignment=assignment, generation=generation,
                                          version=1).encode(header=False)


@settings(max_examples=200)
@given(owned=owned_sets, generation=int32s)
def test_python_clients_decode_ours(owned: frozenset[tuple[str, int]], generation: int) -> None:
    ours = encode_sticky_user_data(owned, generation)
    kp = StickyAssignorUserData.decode(ours, version=1, header=False)
    assert frozenset((e.topic, p) for e in kp.previous_assignment for p in e.partitions) == owned
    assert kp.generation == generation
    aio = StickyAssignorUserDataV1.decode(ours)
    assert frozenset((t, p) for t, ps in aio.previous_assignment for p in ps) == owned
    assert aio.generation == generation


@settings(max_examples=200)
@given(owned=owned_sets, generation=int32s)
def test_decode_every_client_layout(owned: frozenset[tuple[str, int]], generation: int) -> None:
    assignment = grouped(owned)
    want = DecodedUserData(owned, generation)
    # Java / librdkafka / aiokafka: version 1 without a prefix.
    assert decode_user_data(java_bytes(assignment, generation)) == want
    # Java before 2.3: version 0, no generation. With no topics it is four zero bytes, which
    # is also cooperative-sticky's "generation 0": it owns nothing either way.
    v0 = decode_user_data(java_bytes(assignment, None))
    assert v0.owned == owned
    assert v0.generation == (0 if not owned else NO_GENERATION)
    # kafka-python 3.x: its generic encoder puts an int16 version first.
    kp = StickyAssignorUserData(previous_assignment=assignment, generation=generation).encode()
    assert kp[:2] == b"\x00\x01"
    assert decode_user_data(kp) == want
    kp0 = StickyAssignorUserData(previous_assignment=assignment, version=0).encode()
    assert decode_user_data(kp0) == DecodedUserData(owned, NO_GENERATION)


def test_decode_a_real_kafka_python_subscription() -> None:
    """The user data exactly as a kafka-python sticky member puts it on the wire."""
    meta = StickyPartitionAssignor._metadata(["t", "u"], [KafkaTP("t", 0), KafkaTP("u", 3)], 9)
    wire = ConsumerProtocolSubscription.decode(meta.encode())
    assert decode_user_data(wire.user_data) == DecodedUserData(
        frozenset({("t", 0), ("u", 3)}), 9)


@given(generation=int32s)
def test_cooperative_generation(generation: int) -> None:
    data = encode_cooperative_user_data(generation)
    assert data == struct.pack(">i", generation)
    assert decode_user_data(data) == DecodedUserData(frozenset(), generation)


def test_empty_means_no_previous_assignment() -> None:
    assert decode_user_data(b"") == DecodedUserData(frozenset(), NO_GENERATION)


@pytest.mark.parametrize("data", [
    b"\x00",                                   # too short for anything
    b"\x00\x00\x00",
    b"\x00\x00\x00\x01\x00",                   # one topic, then nothing
    b"\xff\xff\xff\xff\x00\x00\x00\x00\x00",   # negative topic count
    b"\x7f\xff\xff\xff" + b"\x00" * 8,         # topic count far beyond the bytes
    java_bytes([("t", [0])], 1) + b"\x00",     # trailing byte
    java_bytes([("t", [0])], 1)[:-1],          # truncated generation
    b"\x00\x00\x00\x01\xff\xff" + b"\x00" * 8,  # negative name length
    b"\x00\x00\x00\x01\x00\x02\xff\xfe\x00\x00\x00\x00\x00\x00\x00\x00",  # invalid UTF-8
    b"\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff\x00\x00\x00\x00",  # negative partition count
    b"\x00\x02" + java_bytes([("t", [0])], 1),  # unknown version prefix
])
def test_garbage_raises_assignor_error(data: bytes) -> None:
    with pytest.raises(AssignorError):
        decode_user_data(data)


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_assignor_error(data: bytes) -> None:
    try:
        decoded = decode_user_data(data)
    except AssignorError:
        return
    assert isinstance(decoded.owned, frozenset)
    assert isinstance(decoded.generation, int)


def test_encode_rejects_values_outside_int32() -> None:
    with pytest.raises(AssignorError):
        encode_sticky_user_data({("t", 2**31)}, 1)
    with pytest.raises(AssignorError):
        encode_cooperative_user_data(2**31)
