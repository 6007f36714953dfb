"""Share-group records in Kafka 4.2's `__consumer_offsets` byte format: round trips, exact
bytes worked out by hand from Kafka's `ShareGroup*` schemas, and refusal of malformed input
with the codec's own errors.

Byte conventions: keys are non-flexible (int16-length strings); values are flexible (compact
strings and arrays, an unsigned varint of length + 1, 0 for null; a uuid is its 16 bytes;
every struct ends with its tagged fields, none here, so a single 0)."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.group.records import classic_codec, consumer_codec, streams_codec
from coterie.group.records import share_codec as codec
from coterie.group.records.classic_codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordType,
)
from coterie.group.records.consumer import ConsumerGroupMetadataKey, ConsumerGroupMetadataValue
from coterie.group.records.record import Record
from coterie.group.records.share import (
    SHARE_RECORD_KEY_TYPES,
    InitTopic,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from tests.unit.group.records.byte_builders import NO_TAGS, V0, arr, cs, i16, i32, i64, s16

T1 = uuid.UUID(int=0x1234)
T2 = uuid.UUID("6d3c0b8e-4f3a-4d7e-9a51-3c2f1e0d9b8a")
MEMBER_KEY_TYPES = (10, 13, 14)

# --------------------------------------------------------------------------------------------
# Strategies.
# --------------------------------------------------------------------------------------------

names = st.text(max_size=8)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
topic_ids = st.uuids()
partition_sets = st.frozensets(st.tuples(st.sampled_from([T1, T2]) | topic_ids, int32),
                               max_size=6)
partition_numbers = st.frozensets(int32, max_size=4)
init_topics = st.dictionaries(topic_ids, st.builds(InitTopic, names, partition_numbers),
                              max_size=3)

records = st.one_of(
    st.builds(Record, st.builds(ShareGroupMemberMetadataKey, names, names),
              st.none() | st.builds(ShareGroupMemberMetadataValue, st.none() | names, names,
                                    names, st.lists(names, max_size=3).map(tuple))),
    st.builds(Record, st.builds(ShareGroupMetadataKey, names),
              st.none() | st.builds(ShareGroupMetadataValue, int32, int64)),
    st.builds(Record, st.builds(ShareGroupTargetAssignmentMetadataKey, names),
              st.none() | st.builds(ShareGroupTargetAssignmentMetadataValue, int32)),
    st.builds(Record, st.builds(ShareGroupTargetAssignmentMemberKey, names, names),
              st.none() | st.builds(ShareGroupTargetAssignmentMemberValue, partition_sets)),
    st.builds(Record, st.builds(ShareGroupCurrentMemberAssignmentKey, names, names),
              st.none() | st.builds(ShareGroupCurrentMemberAssignmentValue, int32, int32,
                                    st.integers(-128, 127), partition_sets)),
    st.builds(Record, st.builds(ShareGroupStatePartitionMetadataKey, names),
              st.none() | st.builds(ShareGroupStatePartitionMetadataValue, init_topics,
                                    init_topics,
                                    st.dictionaries(topic_ids, names, max_size=3))),
)


# --------------------------------------------------------------------------------------------
# Round trips.
# --------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(records)
def test_round_trip(record):
    key, value = codec.encode(record)
    assert (value is None) == (record.value is None)
    assert codec.decode(key, value) == record
    # Equal values give equal bytes: what is read is written back the same.
    assert codec.encode(codec.decode(key, value)) == (key, value)
    # And through the family, the way the codec door will call it.
    assert codec.FAMILY.decode(*codec.FAMILY.encode(record)) == record


def test_tombstones_have_no_value():
    for key in (ShareGroupMemberMetadataKey("g", "m"), ShareGroupMetadataKey("g"),
                ShareGroupTargetAssignmentMetadataKey("g"),
                ShareGroupTargetAssignmentMemberKey("g", "m"),
                ShareGroupCurrentMemberAssignmentKey("g", "m"),
                ShareGroupStatePartitionMetadataKey("g")):
        raw_key, raw_value = codec.encode(Record(key, None))
        assert raw_value is None
        assert codec.decode(raw_key, None) == Record(key, None)


# --------------------------------------------------------------------------------------------
# Exact bytes, from the schemas.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "raw"), [
    (ShareGroupMemberMetadataKey("g", "m"), i16(10) + s16("g") + s16("m")),
    (ShareGroupMetadataKey("grp"), i16(11) + s16("grp")),
    (ShareGroupTargetAssignmentMetadataKey("g"), i16(12) + s16("g")),
    (ShareGroupTargetAssignmentMemberKey("g", "m-1"), i16(13) + s16("g") + s16("m-1")),
    (ShareGroupCurrentMemberAssignmentKey("g", "m"), i16(14) + s16("g") + s16("m")),
    (ShareGroupStatePartitionMetadataKey("app"), i16(15) + s16("app")),
])
def test_key_bytes(key, raw):
    assert codec.encode(Record(key, None)) == (raw, None)
    assert codec.decode(raw, None).key == key


def _value_bytes(key, value):
    raw_key, raw_value = codec.encode(Record(key, value))
    assert codec.decode(raw_key, raw_value).value == value
    return raw_value


def test_member_metadata_value_bytes():
    key = ShareGroupMemberMetadataKey("g", "m")
    # RackId (nullable), ClientId, ClientHost, SubscribedTopicNames: compact strings.
    assert _value_bytes(key, ShareGroupMemberMetadataValue("r", "c", "/h", ("b", "a"))) == (
        V0 + cs("r") + cs("c") + cs("/h") + arr(cs("b"), cs("a")) + NO_TAGS)
    assert _value_bytes(key, ShareGroupMemberMetadataValue(None, "c", "h")) == (
        V0 + b"\x00" + cs("c") + cs("h") + arr() + NO_TAGS)


def test_metadata_value_bytes():
    assert _value_bytes(ShareGroupMetadataKey("g"), ShareGroupMetadataValue(5, -2)) == (
        V0 + i32(5) + i64(-2) + NO_TAGS)


def test_target_assignment_metadata_value_bytes():
    value = ShareGroupTargetAssignmentMetadataValue(7)
    assert _value_bytes(ShareGroupTargetAssignmentMetadataKey("g"), value) == (
        V0 + i32(7) + NO_TAGS)


def test_target_assignment_member_value_bytes():
    value = ShareGroupTargetAssignmentMemberValue(frozenset({(T2, 3), (T1, 5), (T1, 0)}))
    # TopicPartitions: (TopicId uuid, Partitions []int32), sorted by topic id, then partition.
    assert _value_bytes(ShareGroupTargetAssignmentMemberKey("g", "m"), value) == (
        V0
        + arr(T1.bytes + arr(i32(0), i32(5)) + NO_TAGS, T2.bytes + arr(i32(3)) + NO_TAGS)
        + NO_TAGS)


def test_current_member_assignment_value_bytes():
    value = ShareGroupCurrentMemberAssignmentValue(4, 3, 0, frozenset({(T1, 2)}))
    assert _value_bytes(ShareGroupCurrentMemberAssignmentKey("g", "m"), value) == (
        V0 + i32(4) + i32(3) + b"\x00"  # MemberEpoch, PreviousMemberEpoch, State int8
        + arr(T1.bytes + arr(i32(2)) + NO_TAGS)  # AssignedPartitions
        + NO_TAGS)
    empty = ShareGroupCurrentMemberAssignmentValue(1, 0, 0)
    assert _value_bytes(ShareGroupCurrentMemberAssignmentKey("g", "m"), empty) == (
        V0 + i32(1) + i32(0) + b"\x00" + arr() + NO_TAGS)


def test_state_partition_metadata_value_bytes():
    value = ShareGroupStatePartitionMetadataValue(
        initializing_topics={T2: InitTopic("b", frozenset({1, 0}))},
        initialized_topics={T2: InitTopic("b", frozenset({2})),
                            T1: InitTopic("a", frozenset({0}))},
        deleting_topics={T1: "old"})
    # TopicPartitionsInfo: TopicId, TopicName, Partitions; TopicInfo: TopicId, TopicName.
    assert _value_bytes(ShareGroupStatePartitionMetadataKey("g"), value) == (
        V0
        + arr(T2.bytes + cs("b") + arr(i32(0), i32(1)) + NO_TAGS)  # InitializingTopics
        + arr(T1.bytes + cs("a") + arr(i32(0)) + NO_TAGS,  # InitializedTopics, by topic id
              T2.bytes + cs("b") + arr(i32(2)) + NO_TAGS)
        + arr(T1.bytes + cs("old") + NO_TAGS)  # DeletingTopics
        + NO_TAGS)
    assert _value_bytes(ShareGroupStatePartitionMetadataKey("g"),
                        ShareGroupStatePartitionMetadataValue()) == (
        V0 + arr() + arr() + arr() + NO_TAGS)


# --------------------------------------------------------------------------------------------
# Malformed input: the codec's errors, never another exception.
# --------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(records.filter(lambda r: r.value is not None))
def test_unknown_value_version(record):
    key, value = codec.encode(record)
    with pytest.raises(RecordDecodeError, match="version 1"):
        codec.decode(key, i16(1) + value[2:])


@settings(deadline=None)
@given(records)
def test_truncated_bytes(record):
    key, value = codec.encode(record)
    for cut in range(len(key)):
        with pytest.raises(RecordDecodeError):
            codec.decode(key[:cut], value)
    if value is not None:
        for cut in range(len(value)):
            with pytest.raises(RecordDecodeError):
                codec.decode(key, value[:cut])
        with pytest.raises(RecordDecodeError, match="trailing"):
            codec.decode(key, value + b"\x00")
    with pytest.raises(RecordDecodeError, match="trailing"):
        codec.decode(key + b"\x00", value)


@settings(deadline=None)
@given(st.sampled_from(sorted(codec.SHARE_RECORD_TYPES)), st.binary(max_size=60))
def test_garbage_gives_a_record_or_a_decode_error(record_type, garbage):
    key = i16(record_type) + s16("g") + (s16("m") if record_type in MEMBER_KEY_TYPES else b"")
    for raw_key, raw_value in ((key, V0 + garbage), (i16(record_type) + garbage, None)):
        with contextlib.suppress(RecordDecodeError):
            assert isinstance(codec.decode(raw_key, raw_value), Record)


# A compact array or string length near 2**32 (uvarint 0xfffffffe + 1).
HUGE_COUNT = b"\xff\xff\xff\xff\x0f"


@pytest.mark.parametrize("record_type", sorted(codec.SHARE_RECORD_TYPES))
@pytest.mark.parametrize("skip", range(0, 24, 3))
def test_a_declared_count_near_2_to_the_32_is_a_decode_error(record_type, skip):
    """A damaged count must never reach kio's native reader (which reserves it first and
    would abort the process): a decode error, wherever it sits."""
    key = i16(record_type) + s16("g") + (s16("m") if record_type in MEMBER_KEY_TYPES else b"")
    for version in (0, 1):
        with contextlib.suppress(RecordDecodeError):
            codec.decode(key, i16(version) + b"\x01" * skip + HUGE_COUNT + b"\x00" * 8)
    with pytest.raises(RecordDecodeError):
        codec.decode(i16(record_type) + HUGE_COUNT, None)


def test_nulls_where_the_schema_allows_none():
    key = codec.encode(Record(ShareGroupTargetAssignmentMemberKey("g", "m"), None))[0]
    with pytest.raises(RecordDecodeError):
        codec.decode(key, V0 + b"\x00" + NO_TAGS)  # TopicPartitions null
    with pytest.raises(RecordDecodeError):
        codec.decode(key, V0 + arr(T1.bytes + b"\x00" + NO_TAGS) + NO_TAGS)  # Partitions null
    key = codec.encode(Record(ShareGroupMemberMetadataKey("g", "m"), None))[0]
    with pytest.raises(RecordDecodeError):  # ClientId null
        codec.decode(key, V0 + b"\x00" + b"\x00" + cs("h") + arr() + NO_TAGS)
    with pytest.raises(RecordDecodeError):  # SubscribedTopicNames null
        codec.decode(key, V0 + b"\x00" + cs("c") + cs("h") + b"\x00" + NO_TAGS)
    key = codec.encode(Record(ShareGroupStatePartitionMetadataKey("g"), None))[0]
    with pytest.raises(RecordDecodeError):  # DeletingTopics null
        codec.decode(key, V0 + arr() + arr() + b"\x00" + NO_TAGS)
    with pytest.raises(RecordDecodeError):  # a TopicName null
        codec.decode(key, V0 + arr() + arr() + arr(T1.bytes + b"\x00" + NO_TAGS) + NO_TAGS)


def test_unknown_tagged_fields_are_refused():
    key = codec.encode(Record(ShareGroupMetadataKey("g"), None))[0]
    with pytest.raises(RecordDecodeError):
        codec.decode(key, V0 + i32(1) + i64(0) + b"\x01" + b"\x05\x01\x00")


def test_a_topic_listed_twice_is_refused():
    key = codec.encode(Record(ShareGroupStatePartitionMetadataKey("g"), None))[0]
    twice = arr(T1.bytes + cs("a") + arr(i32(0)) + NO_TAGS, T1.bytes + cs("a") + arr(i32(1))
                + NO_TAGS)
    with pytest.raises(RecordDecodeError, match="listed twice"):
        codec.decode(key, V0 + arr() + twice + arr() + NO_TAGS)
    with pytest.raises(RecordDecodeError, match="listed twice"):
        codec.decode(key, V0 + arr() + arr() + arr(T1.bytes + cs("a") + NO_TAGS,
                                                   T1.bytes + cs("b") + NO_TAGS) + NO_TAGS)


def test_assignments_spread_over_entries_of_one_topic_are_one_set():
    """Kafka writes each topic once; should a record list one twice, the member still has
    every partition named (nothing to choose between, unlike the state record's names)."""
    key = codec.encode(Record(ShareGroupTargetAssignmentMemberKey("g", "m"), None))[0]
    raw = V0 + arr(T1.bytes + arr(i32(1)) + NO_TAGS, T1.bytes + arr(i32(0)) + NO_TAGS) + NO_TAGS
    assert codec.decode(key, raw).value == ShareGroupTargetAssignmentMemberValue(
        frozenset({(T1, 0), (T1, 1)}))


def test_other_record_types_are_unknown_here():
    consumer_key, consumer_value = consumer_codec.encode(
        Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(1)))
    for raw_key in (consumer_key, i16(9) + s16("g"), i16(16) + s16("g"), i16(17) + s16("g")):
        with pytest.raises(UnknownRecordType):
            codec.decode(raw_key, consumer_value)
    with pytest.raises(RecordDecodeError):
        codec.decode(b"\x00", None)


def test_encode_refuses_what_kafka_could_not_read():
    bad = [
        Record(ConsumerGroupMetadataKey("g"), None),  # another family's key
        Record(ShareGroupMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(1)),
        Record(ShareGroupTargetAssignmentMetadataKey("g"),
               ShareGroupTargetAssignmentMetadataValue(2**31)),
        Record(ShareGroupMetadataKey("g"), ShareGroupMetadataValue(1, 2**63)),
        Record(ShareGroupCurrentMemberAssignmentKey("g", "m"),
               ShareGroupCurrentMemberAssignmentValue(1, 0, 128)),
        Record(ShareGroupTargetAssignmentMemberKey("g", "m"),
               ShareGroupTargetAssignmentMemberValue(frozenset({(T1, "x")}))),
        Record(ShareGroupTargetAssignmentMemberKey("g", "m"),
               ShareGroupTargetAssignmentMemberValue(frozenset({("not-a-uuid", 0)}))),
        # Kafka reads no string longer than 32,767 bytes, compact or not.
        Record(ShareGroupMemberMetadataKey("g", "m"),
               ShareGroupMemberMetadataValue(None, "c", "h", ("t" * 32_768,))),
        Record(ShareGroupStatePartitionMetadataKey("g"),
               ShareGroupStatePartitionMetadataValue(deleting_topics={T1: "t" * 32_768})),
        Record(ShareGroupMetadataKey("g" * 32_768), None),
    ]
    for record in bad:
        with pytest.raises(RecordEncodeError):
            codec.encode(record)


# --------------------------------------------------------------------------------------------
# The family beside the others.
# --------------------------------------------------------------------------------------------


def test_family_collides_with_no_other():
    families = (classic_codec.FAMILY, consumer_codec.FAMILY, streams_codec.FAMILY,
                codec.FAMILY)
    types = [t for f in families for t in f.record_types]
    assert len(types) == len(set(types))
    keys = [k for f in families for k in f.key_types]
    assert len(keys) == len(set(keys))
    assert codec.FAMILY.record_types == codec.SHARE_RECORD_TYPES == {10, 11, 12, 13, 14, 15}
    assert codec.FAMILY.key_types == SHARE_RECORD_KEY_TYPES


def test_family_is_registered():
    """The share group kind registers the family: the codec door reads share records back
    (a loader replays them)."""
    from coterie.group import codec as door
    from coterie.group.registry import FAMILIES

    assert codec.FAMILY in FAMILIES
    record = Record(ShareGroupMetadataKey("g"), ShareGroupMetadataValue(1))
    assert door.decode(*door.encode(record)) == record
