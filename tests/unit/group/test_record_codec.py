"""The `__consumer_offsets` codec: byte-exact against Kafka's schemas, and lossless.

The expected byte strings below are written by hand from Kafka's message schemas
(group-coordinator/src/main/resources/common/message/{OffsetCommitKey,OffsetCommitValue,
GroupMetadataKey,GroupMetadataValue}.json), not produced by the code under test. Conventions:
non-flexible versions use int16-length strings (-1 = null), int32-length bytes and int32-count
arrays; flexible versions (v4) use unsigned-varint length+1 ("compact") strings, bytes and
arrays (0 = null) and end every struct with a tagged-field count.
"""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from coterie.group.records.classic_codec import (
    RecordCodecError,
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordType,
    decode,
    encode,
)
from coterie.group.records.offsets import OffsetCommitKey, OffsetCommitValue
from coterie.group.records.record import Record


def h(text: str) -> bytes:
    """Bytes from hex digits; spaces may group them for readability."""
    return bytes.fromhex(text)


def s16(text: str) -> bytes:
    """A non-flexible (int16-length) string."""
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def compact(text: str) -> bytes:
    """A flexible (uvarint length+1) string; only short strings here, so one length byte."""
    raw = text.encode()
    assert len(raw) + 1 < 0x80
    return bytes([len(raw) + 1]) + raw


# --------------------------------------------------------------------------------------------
# Fixed vectors: what we write.
# --------------------------------------------------------------------------------------------

OFFSET_KEY = OffsetCommitKey(group_id="grp", topic="tp", partition=5)
# OffsetCommitKey: record type (key version) 1, then group string, topic string, int32 partition.
OFFSET_KEY_BYTES = h("0001") + h("0003") + b"grp" + h("0002") + b"tp" + h("00000005")

GROUP_KEY = GroupMetadataKey(group_id="grp")
# GroupMetadataKey: record type 2, then group string.
GROUP_KEY_BYTES = h("0002") + h("0003") + b"grp"


def test_offset_commit_key_and_v3_value_bytes() -> None:
    record = Record(OFFSET_KEY, OffsetCommitValue(100, 7, "md", 1_234_567_890_123))
    # OffsetCommitValue v3: int64 offset, int32 leaderEpoch, string metadata,
    # int64 commitTimestamp. 1234567890123 = 0x0000011F71FB04CB.
    value = (
        h("0003")
        + h("0000000000000064")
        + h("00000007")
        + h("0002")
        + b"md"
        + h("0000011F71FB04CB")
    )
    assert encode(record) == (OFFSET_KEY_BYTES, value)
    assert decode(OFFSET_KEY_BYTES, value) == record


def test_offset_commit_value_with_expire_timestamp_is_v1() -> None:
    record = Record(OFFSET_KEY, OffsetCommitValue(100, -1, "", 1000, expire_timestamp_ms=2000))
    # OffsetCommitValue v1: int64 offset, string metadata, int64 commitTimestamp,
    # int64 expireTimestamp (no leader epoch in this version).
    value = h("0001") + h("0000000000000064") + h("0000") + h("00000000000003E8")
    value += h("00000000000007D0")
    assert encode(record) == (OFFSET_KEY_BYTES, value)
    assert decode(OFFSET_KEY_BYTES, value) == record


def test_v1_cannot_carry_the_leader_epoch() -> None:
    record = Record(OFFSET_KEY, OffsetCommitValue(1, 9, "", 10, expire_timestamp_ms=20))
    decoded = decode(*encode(record))
    assert decoded.value == OffsetCommitValue(1, -1, "", 10, expire_timestamp_ms=20)


MEMBER = MemberMetadata(
    member_id="m-1",
    group_instance_id=None,
    client_id="c",
    client_host="/1.2.3.4",
    rebalance_timeout_ms=60_000,
    session_timeout_ms=10_000,
    subscription=b"\x00\x01",
    assignment=b"",
)
GROUP_VALUE = GroupMetadataValue(
    protocol_type="consumer",
    generation=2,
    protocol="range",
    leader="m-1",
    current_state_timestamp_ms=1000,
    members=(MEMBER,),
)
# GroupMetadataValue v3: protocolType string, int32 generation, nullable protocol, nullable
# leader, int64 currentStateTimestamp, int32 member count, then per member: memberId,
# nullable groupInstanceId, clientId, clientHost, int32 rebalanceTimeout, int32 sessionTimeout,
# bytes subscription, bytes assignment.
GROUP_VALUE_V3_BYTES = (
    h("0003")
    + s16("consumer")
    + h("00000002")
    + s16("range")
    + s16("m-1")
    + h("00000000000003E8")
    + h("00000001")
    + s16("m-1")
    + h("FFFF")  # null groupInstanceId
    + s16("c")
    + s16("/1.2.3.4")
    + h("0000EA60")  # 60000
    + h("00002710")  # 10000
    + h("00000002")
    + h("0001")
    + h("00000000")
)


def test_group_metadata_key_and_v3_value_bytes() -> None:
    record = Record(GROUP_KEY, GROUP_VALUE)
    assert encode(record) == (GROUP_KEY_BYTES, GROUP_VALUE_V3_BYTES)
    assert decode(GROUP_KEY_BYTES, GROUP_VALUE_V3_BYTES) == record


def test_empty_group_metadata_bytes() -> None:
    record = Record(GROUP_KEY, GroupMetadataValue("consumer", 3, None, None, 5, ()))
    # Null protocol and leader are int16 -1; no members is an int32 count of 0.
    value = h("0003") + s16("consumer") + h("00000003") + h("FFFF FFFF")
    value += h("0000000000000005") + h("00000000")
    assert encode(record) == (GROUP_KEY_BYTES, value)
    assert decode(GROUP_KEY_BYTES, value) == record


def test_a_member_count_near_2_to_the_31_is_a_decode_error() -> None:
    """A damaged GroupMetadataValue declaring 2**31 - 1 members: kio's native reader would
    reserve them all before reading one and abort the process; the bounds walk refuses it
    (classic_codec.read_entity)."""
    value = h("0003") + s16("consumer") + h("00000003") + h("FFFF FFFF")
    value += h("0000000000000005") + h("7FFFFFFF") + s16("m")
    with pytest.raises(RecordDecodeError, match="array of 2147483647 elements"):
        decode(GROUP_KEY_BYTES, value)


def test_static_member_bytes() -> None:
    member = MemberMetadata("m", "inst", "c", "h", 1, 2, b"", b"")
    record = Record(GROUP_KEY, GroupMetadataValue("", 0, None, None, -1, (member,)))
    value = h("0003") + s16("") + h("00000000") + h("FFFF FFFF") + h("FFFFFFFFFFFFFFFF")
    value += h("00000001") + s16("m") + s16("inst") + s16("c") + s16("h")
    value += h("00000001 00000002 00000000 00000000")
    assert encode(record) == (GROUP_KEY_BYTES, value)


@pytest.mark.parametrize(
    ("key", "key_bytes"), [(OFFSET_KEY, OFFSET_KEY_BYTES), (GROUP_KEY, GROUP_KEY_BYTES)]
)
def test_tombstones(key: OffsetCommitKey | GroupMetadataKey, key_bytes: bytes) -> None:
    assert encode(Record(key, None)) == (key_bytes, None)
    assert decode(key_bytes, None) == Record(key, None)


# --------------------------------------------------------------------------------------------
# Fixed vectors: older and newer versions Kafka wrote, which we only read.
# --------------------------------------------------------------------------------------------


def test_offset_commit_key_version_0() -> None:
    key = h("0000") + h("0003") + b"grp" + h("0002") + b"tp" + h("00000005")
    assert decode(key, None) == Record(OFFSET_KEY, None)


@pytest.mark.parametrize("version", [0, 2])
def test_offset_commit_value_v0_and_v2(version: int) -> None:
    # v0/v2: int64 offset, string metadata, int64 commitTimestamp.
    value = version.to_bytes(2, "big") + h("000000000000002A") + s16("x") + h("0000000000000010")
    assert decode(OFFSET_KEY_BYTES, value).value == OffsetCommitValue(42, -1, "x", 16)


def test_offset_commit_value_v4_flexible() -> None:
    # v4: as v3, but a compact metadata string and a trailing tagged-field count (0).
    value = h("0004 000000000000002A 00000003") + compact("x") + h("0000000000000010 00")
    assert decode(OFFSET_KEY_BYTES, value).value == OffsetCommitValue(42, 3, "x", 16)


def test_offset_commit_value_v4_with_topic_id_tag() -> None:
    # Kafka 4.1+ adds the topic id as tagged field 0 (uuid, 16 bytes); we ignore it.
    topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    value = h("0004 000000000000002A 00000003") + compact("x") + h("0000000000000010")
    value += h("01 00 10") + topic_id.bytes
    assert decode(OFFSET_KEY_BYTES, value).value == OffsetCommitValue(42, 3, "x", 16)


def test_group_metadata_value_v0() -> None:
    # v0 members: memberId, clientId, clientHost, int32 sessionTimeout, subscription,
    # assignment. No rebalance timeout (Kafka reads it as the session timeout) and no
    # currentStateTimestamp (-1).
    value = h("0000") + s16("consumer") + h("00000001") + s16("range") + s16("m")
    value += h("00000001") + s16("m") + s16("c") + s16("h") + h("00002710")
    value += h("00000001 AB 00000001 CD")
    assert decode(GROUP_KEY_BYTES, value).value == GroupMetadataValue(
        "consumer",
        1,
        "range",
        "m",
        -1,
        (MemberMetadata("m", None, "c", "h", 10_000, 10_000, b"\xab", b"\xcd"),),
    )


def test_group_metadata_value_v1() -> None:
    # v1 members gain int32 rebalanceTimeout between clientHost and sessionTimeout.
    value = h("0001") + s16("consumer") + h("00000001") + h("FFFF FFFF") + h("00000001")
    value += s16("m") + s16("c") + s16("h") + h("0000EA60 00002710 00000000 00000000")
    assert decode(GROUP_KEY_BYTES, value).value == GroupMetadataValue(
        "consumer",
        1,
        None,
        None,
        -1,
        (MemberMetadata("m", None, "c", "h", 60_000, 10_000, b"", b""),),
    )


def test_group_metadata_value_v2() -> None:
    # v2 adds int64 currentStateTimestamp before the members.
    value = h("0002") + s16("") + h("00000000") + h("FFFF FFFF") + h("0000000000000063")
    value += h("00000000")
    assert decode(GROUP_KEY_BYTES, value).value == GroupMetadataValue("", 0, None, None, 99, ())


def test_group_metadata_value_v4_flexible() -> None:
    # v4: compact strings/bytes/arrays (length+1), null = 0, and a tagged-field count after
    # each member and after the whole value.
    value = h("0004") + compact("consumer") + h("00000002") + compact("range") + compact("m-1")
    value += h("00000000000003E8") + h("02")  # one member
    value += compact("m-1") + h("00") + compact("c") + compact("/1.2.3.4")
    value += h("0000EA60 00002710") + h("03 0001") + h("01") + h("00")  # member tags
    value += h("00")  # value tags
    assert decode(GROUP_KEY_BYTES, value) == Record(GROUP_KEY, GROUP_VALUE)


# --------------------------------------------------------------------------------------------
# Unknown and malformed input.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 8, 16, 100, -1])
def test_unknown_key_versions(version: int) -> None:
    # Record types 3+ (consumer/share/streams group records, written by Kafka's new
    # coordinator or future coterie code) are for the loader to skip, value or not.
    key = version.to_bytes(2, "big", signed=True) + s16("grp")
    with pytest.raises(UnknownRecordType) as info:
        decode(key, b"\x00\x00whatever")
    assert info.value.version == version
    with pytest.raises(UnknownRecordType):
        decode(key, None)
    assert not isinstance(info.value, RecordDecodeError)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"", None),
        (b"\x00", None),
        (h("0001") + s16("grp"), None),  # truncated offset key
        (OFFSET_KEY_BYTES + b"\x00", None),  # trailing garbage
        (GROUP_KEY_BYTES[:-1], None),
        (OFFSET_KEY_BYTES, b""),
        (OFFSET_KEY_BYTES, b"\x00"),
        (OFFSET_KEY_BYTES, h("0005") + bytes(30)),  # unknown value version
        (OFFSET_KEY_BYTES, h("FFFF") + bytes(30)),
        (OFFSET_KEY_BYTES, h("0003") + bytes(10)),  # truncated
        (GROUP_KEY_BYTES, GROUP_VALUE_V3_BYTES[:-1]),
        (GROUP_KEY_BYTES, GROUP_VALUE_V3_BYTES + b"\x00"),
        (GROUP_KEY_BYTES, h("0005") + GROUP_VALUE_V3_BYTES[2:]),
        (GROUP_KEY_BYTES, h("0003") + s16("x")[:1] + b"\xff\xfe"),
        (h("0002") + h("0002") + b"\xff\xfe", None),  # invalid UTF-8
        (h("0002") + h("FFFF"), None),  # null where Kafka's schema forbids it
        # Negative and null (-1) member counts; members is not nullable in Kafka's schema.
        (GROUP_KEY_BYTES, h("0003") + s16("c") + h("00000001 FFFFFFFF") + bytes(8) + h("FFFFFFFE")),
        (GROUP_KEY_BYTES, h("0003") + s16("c") + h("00000001 FFFFFFFF") + bytes(8) + h("FFFFFFFF")),
        (GROUP_KEY_BYTES, h("0004") + compact("c") + h("00000001 00 00") + bytes(8) + h("00 00")),
    ],
)
def test_malformed_input(key: bytes, value: bytes | None) -> None:
    with pytest.raises(RecordDecodeError):
        decode(key, value)


def test_offset_value_v4_with_unknown_tag_is_refused() -> None:
    # kio cannot skip tags it has no field for; refusing beats silently misreading.
    value = h("0004 000000000000002A 00000003") + compact("x") + h("0000000000000010")
    value += h("01 07 01 AA")
    with pytest.raises(RecordDecodeError):
        decode(OFFSET_KEY_BYTES, value)


@pytest.mark.parametrize(
    "record",
    [
        Record(OffsetCommitKey("g", "t", 2**31), None),
        Record(OffsetCommitKey("g" * 40_000, "t", 0), None),
        Record(OffsetCommitKey("\ud800", "t", 0), None),
        Record(OFFSET_KEY, OffsetCommitValue(2**63, -1, "", 0)),
        Record(OFFSET_KEY, GroupMetadataValue("", 0, None, None, -1, ())),
        Record(GROUP_KEY, OffsetCommitValue(0, -1, "", 0)),
        Record(GROUP_KEY, GroupMetadataValue("", 2**31, None, None, -1, ())),
    ],
)
def test_unencodable_records(record: Record) -> None:
    with pytest.raises(RecordEncodeError):
        encode(record)


# --------------------------------------------------------------------------------------------
# Properties.
# --------------------------------------------------------------------------------------------

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=40)
blob = st.binary(max_size=64)

offset_keys = st.builds(OffsetCommitKey, text, text, int32)
offset_values = st.builds(
    OffsetCommitValue,
    offset=int64,
    leader_epoch=int32,
    metadata=text,
    commit_timestamp_ms=int64,
    expire_timestamp_ms=st.one_of(st.just(-1), int64),
)
members = st.builds(
    MemberMetadata,
    member_id=text,
    group_instance_id=st.none() | text,
    client_id=text,
    client_host=text,
    rebalance_timeout_ms=int32,
    session_timeout_ms=int32,
    subscription=blob,
    assignment=blob,
)
group_values = st.builds(
    GroupMetadataValue,
    protocol_type=text,
    generation=int32,
    protocol=st.none() | text,
    leader=st.none() | text,
    current_state_timestamp_ms=int64,
    members=st.lists(members, max_size=4).map(tuple),
)
records = st.one_of(
    st.builds(Record, offset_keys, st.none() | offset_values),
    st.builds(Record, st.builds(GroupMetadataKey, text), st.none() | group_values),
)


def expected_after_round_trip(record: Record) -> Record:
    """The one lossy case: v1 (explicit expiry) has no leader epoch."""
    value = record.value
    if isinstance(value, OffsetCommitValue) and value.expire_timestamp_ms != -1:
        return Record(
            record.key,
            OffsetCommitValue(
                value.offset,
                -1,
                value.metadata,
                value.commit_timestamp_ms,
                value.expire_timestamp_ms,
            ),
        )
    return record


@settings(max_examples=300)
@given(records)
def test_round_trip(record: Record) -> None:
    key, value = encode(record)
    assert (value is None) == (record.value is None)
    assert decode(key, value) == expected_after_round_trip(record)


@settings(max_examples=300)
@given(records, st.data())
def test_truncation_is_detected(record: Record, data: st.DataObject) -> None:
    key, value = encode(record)
    cut = data.draw(st.integers(0, len(key) - 1))
    with pytest.raises(RecordDecodeError):
        decode(key[:cut], value)
    if value is not None:
        cut = data.draw(st.integers(0, len(value) - 1))
        with pytest.raises(RecordDecodeError):
            decode(key, value[:cut])


@settings(max_examples=500)
@given(st.binary(max_size=40), st.none() | st.binary(max_size=80))
def test_arbitrary_bytes_never_crash(key: bytes, value: bytes | None) -> None:
    # Whatever is in the log, decode answers with a record or one of our errors.
    try:
        record = decode(key, value)
    except RecordCodecError:
        return
    assert isinstance(record, Record)
