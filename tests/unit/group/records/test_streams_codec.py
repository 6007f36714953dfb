"""Streams-group records in Kafka 4.2's `__consumer_offsets` byte format: round trips, exact
bytes worked out by hand from Kafka's `StreamsGroup*` schemas, and refusal of malformed input
with the codec's own errors.

Byte conventions: keys are non-flexible (int16-length strings); values are flexible (compact
strings and arrays, an unsigned varint of length + 1, 0 for null; every struct ends with its
tagged fields: a count, then tag, size and body for each)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.group.records import classic_codec, consumer_codec
from coterie.group.records import streams_codec as codec
from coterie.group.records.classic_codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordType,
)
from coterie.group.records.consumer import ConsumerGroupMetadataKey, ConsumerGroupMetadataValue
from coterie.group.records.record import Record
from coterie.group.records.streams import (
    STREAMS_RECORD_KEY_TYPES,
    CopartitionGroup,
    Endpoint,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    Subtopology,
    TopicInfo,
)
from coterie.group.records.tasks import TaskSet
from tests.unit.group.records.byte_builders import NO_TAGS, V0, arr, cs, i16, i32, i64, s16

# --------------------------------------------------------------------------------------------
# Strategies.
# --------------------------------------------------------------------------------------------

names = st.text(max_size=8)
opt = st.none() | names
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
pairs = st.lists(st.tuples(names, names), max_size=3).map(tuple)
task_map = st.dictionaries(st.text(max_size=3), st.frozensets(int32, min_size=1, max_size=4),
                           max_size=3)
task_sets = st.builds(TaskSet.of, task_map, task_map, task_map)


@st.composite
def epochs_for(draw, active):
    """Assignment epochs for some of the subtopologies of `active`, each for all its
    partitions (the rule the codec keeps)."""
    chosen = draw(st.sets(st.sampled_from(sorted(active)))) if active else set()
    return {s: {p: draw(int32) for p in active[s]} for s in chosen}


@st.composite
def current_assignments(draw):
    assigned, pending = draw(task_sets), draw(task_sets)
    return StreamsGroupCurrentMemberAssignmentValue(
        draw(int32), draw(int32), draw(st.sampled_from([1, 2, 3, 127])), assigned, pending,
        draw(epochs_for(assigned.active)), draw(epochs_for(pending.active)))


topic_infos = st.lists(st.builds(TopicInfo, names, int32, int16, pairs), max_size=2).map(tuple)
int16s = st.lists(int16, max_size=3).map(tuple)
name_tuples = st.lists(names, max_size=3).map(tuple)
subtopologies = st.builds(
    Subtopology, names, name_tuples, name_tuples, topic_infos, name_tuples, topic_infos,
    st.lists(st.builds(CopartitionGroup, int16s, int16s, int16s), max_size=2).map(tuple))

records = st.one_of(
    st.builds(Record, st.builds(StreamsGroupMetadataKey, names),
              st.none() | st.builds(StreamsGroupMetadataValue, int32, int64, int32, pairs)),
    st.builds(Record, st.builds(StreamsGroupMemberMetadataKey, names, names),
              st.none() | st.builds(
                  StreamsGroupMemberMetadataValue, opt, opt, names, names, int32, int32, names,
                  st.none() | st.builds(Endpoint, names, st.integers(0, 2**16 - 1)), pairs)),
    st.builds(Record, st.builds(StreamsGroupTargetAssignmentMetadataKey, names),
              st.none() | st.builds(StreamsGroupTargetAssignmentMetadataValue, int32)),
    st.builds(Record, st.builds(StreamsGroupTargetAssignmentMemberKey, names, names),
              st.none() | st.builds(StreamsGroupTargetAssignmentMemberValue, task_sets)),
    st.builds(Record, st.builds(StreamsGroupCurrentMemberAssignmentKey, names, names),
              st.none() | current_assignments()),
    st.builds(Record, st.builds(StreamsGroupTopologyKey, names),
              st.none() | st.builds(StreamsGroupTopologyValue, int32,
                                    st.lists(subtopologies, max_size=2).map(tuple))),
)


# --------------------------------------------------------------------------------------------
# Round trips.
# --------------------------------------------------------------------------------------------


@given(records)
def test_round_trip(record):
    key, value = codec.encode(record)
    assert (value is None) == (record.value is None)
    assert codec.decode(key, value) == record
    # And through the family, the way the codec door will call it.
    assert codec.FAMILY.decode(*codec.FAMILY.encode(record)) == record


def test_tombstones_have_no_value():
    for key in (StreamsGroupMetadataKey("g"), StreamsGroupMemberMetadataKey("g", "m"),
                StreamsGroupTargetAssignmentMetadataKey("g"),
                StreamsGroupTargetAssignmentMemberKey("g", "m"),
                StreamsGroupCurrentMemberAssignmentKey("g", "m"), StreamsGroupTopologyKey("g")):
        raw_key, raw_value = codec.encode(Record(key, None))
        assert raw_value is None
        assert codec.decode(raw_key, None) == Record(key, None)


# --------------------------------------------------------------------------------------------
# Exact bytes, from the schemas.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "raw"), [
    (StreamsGroupMetadataKey("g"), i16(17) + s16("g")),
    (StreamsGroupMemberMetadataKey("g", "m"), i16(19) + s16("g") + s16("m")),
    (StreamsGroupTargetAssignmentMetadataKey("grp"), i16(20) + s16("grp")),
    (StreamsGroupTargetAssignmentMemberKey("g", "m-1"), i16(21) + s16("g") + s16("m-1")),
    (StreamsGroupCurrentMemberAssignmentKey("g", "m"), i16(22) + s16("g") + s16("m")),
    (StreamsGroupTopologyKey("app"), i16(23) + s16("app")),
])
def test_key_bytes(key, raw):
    assert codec.encode(Record(key, None)) == (raw, None)
    assert codec.decode(raw, None).key == key


def _value_bytes(key, value):
    raw_key, raw_value = codec.encode(Record(key, value))
    assert codec.decode(raw_key, raw_value).value == value
    return raw_value


def test_metadata_value_bytes():
    key = StreamsGroupMetadataKey("g")
    # Epoch int32, MetadataHash int64; tag 0 (ValidatedTopologyEpoch) at its default -1 and
    # tag 1 (LastAssignmentConfigs) empty are left out.
    assert _value_bytes(key, StreamsGroupMetadataValue(5, -2)) == (
        V0 + i32(5) + i64(-2) + NO_TAGS)
    configs = arr(cs("num.standby.replicas") + cs("1") + NO_TAGS)
    assert _value_bytes(key, StreamsGroupMetadataValue(
        5, 7, 3, (("num.standby.replicas", "1"),))) == (
        V0 + i32(5) + i64(7)
        + b"\x02"  # two tagged fields, by tag
        + b"\x00\x04" + i32(3)
        + b"\x01" + bytes([len(configs)]) + configs)


def test_member_metadata_value_bytes():
    key = StreamsGroupMemberMetadataKey("g", "m")
    value = StreamsGroupMemberMetadataValue(
        instance_id=None, rack_id="r", client_id="c", client_host="/h", rebalance_timeout_ms=1000,
        topology_epoch=2, process_id="p", user_endpoint=Endpoint("h", 8080),
        client_tags=(("az", "1"),))
    assert _value_bytes(key, value) == (
        V0
        + b"\x00"  # InstanceId: null
        + cs("r") + cs("c") + cs("/h")
        + i32(1000)  # RebalanceTimeoutMs
        + i32(2)  # TopologyEpoch
        + cs("p")  # ProcessId
        + b"\x01" + cs("h") + (8080).to_bytes(2, "big") + NO_TAGS  # UserEndpoint: uint16 port
        + arr(cs("az") + cs("1") + NO_TAGS)  # ClientTags
        + NO_TAGS)
    no_endpoint = StreamsGroupMemberMetadataValue("i", None, "c", "h", 1, 0, "p", None, ())
    assert _value_bytes(key, no_endpoint) == (
        V0 + cs("i") + b"\x00" + cs("c") + cs("h") + i32(1) + i32(0) + cs("p")
        + b"\xff"  # a null struct: int8 -1
        + arr() + NO_TAGS)


def test_target_assignment_metadata_value_bytes():
    value = StreamsGroupTargetAssignmentMetadataValue(7)
    assert _value_bytes(StreamsGroupTargetAssignmentMetadataKey("g"), value) == (
        V0 + i32(7) + NO_TAGS)


def test_target_assignment_member_value_bytes():
    value = StreamsGroupTargetAssignmentMemberValue(
        TaskSet.of(active={"1": [2, 0], "0": [1]}, standby={"0": [3]}))
    # ActiveTasks, StandbyTasks, WarmupTasks: TaskIds sorted by subtopology, then partition.
    assert _value_bytes(StreamsGroupTargetAssignmentMemberKey("g", "m"), value) == (
        V0
        + arr(cs("0") + arr(i32(1)) + NO_TAGS, cs("1") + arr(i32(0), i32(2)) + NO_TAGS)
        + arr(cs("0") + arr(i32(3)) + NO_TAGS)
        + arr()
        + NO_TAGS)


def test_current_member_assignment_value_bytes():
    value = StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=4, previous_member_epoch=3, state=1,
        assigned_tasks=TaskSet.of(active={"0": [1, 0]}, standby={"1": [0]}),
        tasks_pending_revocation=TaskSet.of(active={"2": [7]}),
        active_tasks_epochs={"0": {0: 4, 1: 3}})
    epochs = arr(i32(4), i32(3))
    assert _value_bytes(StreamsGroupCurrentMemberAssignmentKey("g", "m"), value) == (
        V0 + i32(4) + i32(3) + b"\x01"  # MemberEpoch, PreviousMemberEpoch, State int8
        # ActiveTasks, with tag 0 (AssignmentEpochs) in partition order.
        + arr(cs("0") + arr(i32(0), i32(1)) + b"\x01\x00" + bytes([len(epochs)]) + epochs)
        + arr(cs("1") + arr(i32(0)) + NO_TAGS)  # StandbyTasks
        + arr()  # WarmupTasks
        + arr(cs("2") + arr(i32(7)) + NO_TAGS)  # ActiveTasksPendingRevocation, no epochs
        + arr()  # StandbyTasksPendingRevocation
        + arr()  # WarmupTasksPendingRevocation
        + NO_TAGS)


def test_topology_value_bytes():
    value = StreamsGroupTopologyValue(epoch=2, subtopologies=(Subtopology(
        subtopology_id="0",
        source_topics=("in",),
        state_changelog_topics=(TopicInfo("cl", 0, 3, (("cleanup.policy", "compact"),)),),
        repartition_sink_topics=("rp",),
        repartition_source_topics=(TopicInfo("rs", 4, 2),),
        copartition_groups=(CopartitionGroup(source_topics=(0,),
                                             repartition_source_topics=(0, 1)),),
    ),))
    subtopology = (
        cs("0")  # SubtopologyId
        + arr(cs("in"))  # SourceTopics
        + arr()  # SourceTopicRegex
        # StateChangelogTopics: TopicInfo is Name, Partitions int32, ReplicationFactor int16,
        # TopicConfigs.
        + arr(cs("cl") + i32(0) + i16(3) + arr(cs("cleanup.policy") + cs("compact") + NO_TAGS)
              + NO_TAGS)
        + arr(cs("rp"))  # RepartitionSinkTopics
        + arr(cs("rs") + i32(4) + i16(2) + arr() + NO_TAGS)  # RepartitionSourceTopics
        # CopartitionGroups: three int16 index arrays.
        + arr(arr(i16(0)) + arr() + arr(i16(0), i16(1)) + NO_TAGS)
        + NO_TAGS)
    assert _value_bytes(StreamsGroupTopologyKey("g"), value) == (
        V0 + i32(2) + arr(subtopology) + NO_TAGS)


# --------------------------------------------------------------------------------------------
# Tagged arrays: null, and the AssignmentEpochs rules.
# --------------------------------------------------------------------------------------------


def test_null_tagged_arrays_read_as_none_recorded():
    key = codec.encode(Record(StreamsGroupMetadataKey("g"), None))[0]
    null_configs = V0 + i32(1) + i64(0) + b"\x01" + b"\x01\x01\x00"
    assert codec.decode(key, null_configs).value == StreamsGroupMetadataValue(1, 0)
    key = codec.encode(Record(StreamsGroupCurrentMemberAssignmentKey("g", "m"), None))[0]
    null_epochs = (V0 + i32(1) + i32(0) + b"\x01"
                   + arr(cs("0") + arr(i32(5)) + b"\x01\x00\x01\x00") + arr() * 5 + NO_TAGS)
    assert codec.decode(key, null_epochs).value == StreamsGroupCurrentMemberAssignmentValue(
        1, 0, 1, TaskSet.of(active={"0": [5]}))


def test_epochs_on_standby_tasks_are_ignored_as_kafka_does():
    key = codec.encode(Record(StreamsGroupCurrentMemberAssignmentKey("g", "m"), None))[0]
    epochs = arr(i32(9))
    raw = (V0 + i32(1) + i32(0) + b"\x01" + arr()
           + arr(cs("0") + arr(i32(5)) + b"\x01\x00" + bytes([len(epochs)]) + epochs)
           + arr() * 4 + NO_TAGS)
    assert codec.decode(key, raw).value == StreamsGroupCurrentMemberAssignmentValue(
        1, 0, 1, TaskSet.of(standby={"0": [5]}))


def test_epochs_must_cover_their_partitions():
    key = StreamsGroupCurrentMemberAssignmentKey("g", "m")
    assigned = TaskSet.of(active={"0": [0, 1]})
    for epochs in ({"0": {0: 1}}, {"0": {0: 1, 1: 1, 2: 1}}, {"9": {0: 1}}):
        with pytest.raises(RecordEncodeError):
            codec.encode(Record(key, StreamsGroupCurrentMemberAssignmentValue(
                1, 0, 1, assigned, active_tasks_epochs=epochs)))
    raw_key = codec.encode(Record(key, None))[0]
    one_epoch = arr(i32(1))
    two_partitions_one_epoch = (
        V0 + i32(1) + i32(0) + b"\x01"
        + arr(cs("0") + arr(i32(0), i32(1)) + b"\x01\x00" + bytes([len(one_epoch)]) + one_epoch)
        + arr() * 5 + NO_TAGS)
    with pytest.raises(RecordDecodeError, match="assignment epochs"):
        codec.decode(raw_key, two_partitions_one_epoch)


# --------------------------------------------------------------------------------------------
# Malformed input: the codec's errors, never another exception.
# --------------------------------------------------------------------------------------------


@given(records.filter(lambda r: r.value is not None))
def test_unknown_value_version(record):
    key, value = codec.encode(record)
    with pytest.raises(RecordDecodeError, match="version 1"):
        codec.decode(key, i16(1) + value[2:])


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


@given(st.sampled_from(sorted(codec.STREAMS_RECORD_TYPES)), st.binary(max_size=60))
def test_garbage_gives_a_record_or_a_decode_error(record_type, garbage):
    key = i16(record_type) + s16("g") + (s16("m") if record_type in (19, 21, 22) else b"")
    for raw_key, raw_value in ((key, V0 + garbage), (i16(record_type) + garbage, None)):
        with contextlib.suppress(RecordDecodeError):
            assert isinstance(codec.decode(raw_key, raw_value), Record)


# A compact array or string length near 2**32 (uvarint 0xfffffffe + 1).
HUGE_COUNT = b"\xff\xff\xff\xff\x0f"


@pytest.mark.parametrize("record_type", sorted(codec.STREAMS_RECORD_TYPES))
@pytest.mark.parametrize("skip", range(12))
def test_a_declared_count_near_2_to_the_32_is_a_decode_error(record_type, skip):
    """kio's native reader reserves an array's declared count before reading it: such a
    count in a damaged record aborted the process (found by the garbage property above, 1
    run in 4). The bounds walk refuses it first: a decode error, wherever it sits."""
    key = i16(record_type) + s16("g") + (s16("m") if record_type in (19, 21, 22) else b"")
    for version in (0, 1):
        with contextlib.suppress(RecordDecodeError):
            codec.decode(key, i16(version) + b"\x01" * skip + HUGE_COUNT + b"\x00" * 8)
    with pytest.raises(RecordDecodeError):
        codec.decode(i16(record_type) + HUGE_COUNT, None)


def test_nulls_where_the_schema_allows_none():
    key = codec.encode(Record(StreamsGroupTargetAssignmentMemberKey("g", "m"), None))[0]
    with pytest.raises(RecordDecodeError, match="field active_tasks was serialized as null"):
        codec.decode(key, V0 + b"\x00" + arr() + arr() + NO_TAGS)
    with pytest.raises(RecordDecodeError, match="field partitions was serialized as null"):
        codec.decode(key, V0 + arr(cs("0") + b"\x00" + NO_TAGS) + arr() + arr() + NO_TAGS)
    key = codec.encode(Record(StreamsGroupMemberMetadataKey("g", "m"), None))[0]
    null_client_id = V0 + b"\x00\x00" + b"\x00" + cs("h") + i32(1) + i32(0) + cs("p") + b"\xff"
    with pytest.raises(RecordDecodeError):
        codec.decode(key, null_client_id + arr() + NO_TAGS)
    with pytest.raises(RecordDecodeError, match="field client_tags was serialized as null"):
        codec.decode(key, V0 + b"\x00\x00" + cs("c") + cs("h") + i32(1) + i32(0) + cs("p")
                     + b"\xff" + b"\x00" + NO_TAGS)


def test_other_record_types_are_unknown_here():
    consumer_key, consumer_value = consumer_codec.encode(
        Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(1)))
    for raw_key in (consumer_key, i16(18) + s16("g"), i16(24) + s16("g"), i16(2) + s16("g")):
        with pytest.raises(UnknownRecordType):
            codec.decode(raw_key, consumer_value)
    with pytest.raises(RecordDecodeError):
        codec.decode(b"\x00", None)


def test_encode_refuses_what_kafka_could_not_read():
    bad = [
        Record(ConsumerGroupMetadataKey("g"), None),  # another family's key
        Record(StreamsGroupMetadataKey("g"), StreamsGroupTargetAssignmentMetadataValue(1)),
        Record(StreamsGroupTargetAssignmentMetadataKey("g"),
               StreamsGroupTargetAssignmentMetadataValue(2**31)),
        Record(StreamsGroupMemberMetadataKey("g", "m"), StreamsGroupMemberMetadataValue(
            None, None, "c", "h", 1, 0, "p", Endpoint("h", 2**16), ())),
        Record(StreamsGroupTopologyKey("g"), StreamsGroupTopologyValue(
            1, (Subtopology("0", repartition_source_topics=(TopicInfo("t", 1, 2**15),)),))),
        # Kafka reads no string longer than 32,767 bytes, compact or not.
        Record(StreamsGroupTopologyKey("g"), StreamsGroupTopologyValue(
            1, (Subtopology("0", source_topics=("t" * 32_768,)),))),
        Record(StreamsGroupMetadataKey("g" * 32_768), None),
        Record(StreamsGroupTargetAssignmentMemberKey("g", "m"),
               StreamsGroupTargetAssignmentMemberValue(TaskSet.of(active={"0": ["x"]}))),
    ]
    for record in bad:
        with pytest.raises(RecordEncodeError):
            codec.encode(record)


# --------------------------------------------------------------------------------------------
# The family beside the others.
# --------------------------------------------------------------------------------------------


def test_family_collides_with_no_other():
    families = (classic_codec.FAMILY, consumer_codec.FAMILY, codec.FAMILY)
    types = [t for f in families for t in f.record_types]
    assert len(types) == len(set(types))
    keys = [k for f in families for k in f.key_types]
    assert len(keys) == len(set(keys))
    assert codec.FAMILY.record_types == {17, 19, 20, 21, 22, 23}
    assert codec.FAMILY.key_types == STREAMS_RECORD_KEY_TYPES
    # Kafka 4.2's other coordinator record types: offsets and classic groups 0-2, consumer
    # groups 3-8 and 16, share groups 10-15 (9 is not in 4.2.1).
    assert codec.FAMILY.record_types.isdisjoint(range(17))
