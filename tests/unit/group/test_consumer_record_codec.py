"""Consumer-group records in Kafka's `__consumer_offsets` byte format: round trips, exact bytes
for small cases worked out from Kafka's schemas, and refusal of malformed input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.group.records import consumer_codec as codec
from coterie.group.records.classic_codec import RecordDecodeError, UnknownRecordType
from coterie.group.records.consumer import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from coterie.group.records.offsets import OffsetCommitKey
from coterie.group.records.record import Record

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)

names = st.text(min_size=0, max_size=12)
opt = st.none() | names
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.frozensets(st.tuples(st.sampled_from([T1, T2, uuid.UUID(int=2**128 - 1)]),
                                     st.integers(0, 2**31 - 1)), max_size=12)
classic = st.none() | st.builds(
    ClassicMemberMetadata, int32,
    st.lists(st.tuples(names, st.binary(max_size=20)), max_size=3).map(tuple))

records = st.one_of(
    st.builds(Record, st.builds(ConsumerGroupMetadataKey, names),
              st.none() | st.builds(ConsumerGroupMetadataValue, int32, int64)),
    st.builds(Record, st.builds(ConsumerGroupMemberMetadataKey, names, names),
              st.none() | st.builds(
                  ConsumerGroupMemberMetadataValue, opt, opt, names, names,
                  st.lists(names, max_size=4).map(tuple), opt, int32, opt, classic)),
    st.builds(Record, st.builds(ConsumerGroupTargetAssignmentMetadataKey, names),
              st.none() | st.builds(ConsumerGroupTargetAssignmentMetadataValue, int32)),
    st.builds(Record, st.builds(ConsumerGroupTargetAssignmentMemberKey, names, names),
              st.none() | st.builds(ConsumerGroupTargetAssignmentMemberValue, partitions)),
    st.builds(Record, st.builds(ConsumerGroupCurrentMemberAssignmentKey, names, names),
              st.none() | st.builds(ConsumerGroupCurrentMemberAssignmentValue, int32, int32,
                                    st.sampled_from([0, 1, 2, 127]), partitions, partitions)),
    st.builds(Record, st.builds(ConsumerGroupRegularExpressionKey, names, names),
              st.none() | st.builds(ConsumerGroupRegularExpressionValue,
                                    st.lists(names, max_size=4).map(tuple), int64, int64)),
)


@given(records)
def test_round_trip(record):
    key, value = codec.encode(record)
    assert (value is None) == (record.value is None)
    assert codec.decode(key, value) == record


def test_key_bytes():
    key, value = codec.encode(Record(ConsumerGroupMetadataKey("g"), None))
    assert key == b"\x00\x03" + b"\x00\x01g" and value is None
    key, _ = codec.encode(Record(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), None))
    assert key == b"\x00\x08" + b"\x00\x01g" + b"\x00\x01m"
    key, _ = codec.encode(Record(ConsumerGroupRegularExpressionKey("g", "a.*"), None))
    assert key == b"\x00\x10" + b"\x00\x01g" + b"\x00\x03a.*"


def test_value_bytes():
    _, value = codec.encode(Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(5)))
    assert value == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"  # hash 0: tag left out
    _, value = codec.encode(Record(ConsumerGroupMetadataKey("g"),
                                   ConsumerGroupMetadataValue(5, 1)))
    assert value == b"\x00\x00\x00\x00\x00\x05" + b"\x01\x00\x08" + (1).to_bytes(8, "big")
    _, value = codec.encode(Record(
        ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        ConsumerGroupTargetAssignmentMemberValue(frozenset({(T2, 1), (T1, 3), (T1, 0)}))))
    assert value == (b"\x00\x00" + b"\x03"  # two topics, sorted by id
                     + T1.bytes + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x03" + b"\x00"
                     + T2.bytes + b"\x02" + b"\x00\x00\x00\x01" + b"\x00"
                     + b"\x00")


def test_member_metadata_writes_the_classic_tag_like_kafka():
    value = ConsumerGroupMemberMetadataValue(None, "r1", "c", "h", ("b", "a"), "", 1000, None)
    _, raw = codec.encode(Record(ConsumerGroupMemberMetadataKey("g", "m"), value))
    body = (b"\x00" + b"\x03r1" + b"\x02c" + b"\x02h" + b"\x03\x02b\x02a" + b"\x01"
            + b"\x00\x00\x03\xe8" + b"\x00")
    # Kafka writes tag 0 even when the classic metadata is null: one byte, 0.
    assert raw == b"\x00\x00" + body + b"\x01" + b"\x00\x01\x00"
    classic = ClassicMemberMetadata(45000, (("range", b"\x01"),))
    _, raw = codec.encode(Record(ConsumerGroupMemberMetadataKey("g", "m"),
                                 ConsumerGroupMemberMetadataValue(
                                     None, "r1", "c", "h", ("b", "a"), "", 1000, None, classic)))
    struct = (b"\x00\x00\xaf\xc8" + b"\x02" + b"\x06range" + b"\x02\x01" + b"\x00" + b"\x00")
    assert raw == b"\x00\x00" + body + b"\x01\x00" + bytes([len(struct) + 1]) + b"\x01" + struct
    assert codec.decode(*codec.encode(Record(ConsumerGroupMemberMetadataKey("g", "m"),
                                             value))).value == value


def test_unknown_types_and_malformed_values():
    with pytest.raises(UnknownRecordType):
        codec.decode(b"\x00\x04\x00\x01g", None)  # partition metadata: not read
    with pytest.raises(UnknownRecordType):
        codec.decode(b"\x00\x02\x00\x01g", b"")
    good_key, good_value = codec.encode(Record(ConsumerGroupMetadataKey("g"),
                                               ConsumerGroupMetadataValue(1)))
    with pytest.raises(RecordDecodeError):
        codec.decode(good_key, good_value + b"\x00")
    with pytest.raises(RecordDecodeError):
        codec.decode(good_key, b"\x00\x01" + good_value[2:])  # unknown value version
    with pytest.raises(RecordDecodeError):
        codec.decode(good_key, good_value[:4])
    mkey, mvalue = codec.encode(Record(
        ConsumerGroupMemberMetadataKey("g", "m"),
        ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None, 1, None)))
    with pytest.raises(RecordDecodeError):
        codec.decode(mkey, mvalue[:-1])
    with pytest.raises(RecordDecodeError):
        codec.decode(mkey, mvalue + b"\x00")
    with pytest.raises(RecordDecodeError):
        codec.decode(b"\x00", None)


def test_refuses_foreign_records():
    with pytest.raises(codec.RecordEncodeError):
        codec.encode(Record(OffsetCommitKey("g", "t", 0), None))
    with pytest.raises(codec.RecordEncodeError):
        codec.encode(Record(ConsumerGroupMetadataKey("g"),
                            ConsumerGroupTargetAssignmentMetadataValue(1)))
