"""coterie's streams-group records read by Apache Kafka's own record serde (the reference
version's group-coordinator jar): Kafka must parse every record coterie writes into the fields
coterie meant, and write it back byte for byte."""

from __future__ import annotations

import pytest

from coterie.group.records import streams_codec as codec
from coterie.group.records.record import Record
from coterie.group.records.streams import (
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

# The harness (javac'd against the reference jars) is the consumer records' one.
from tests.unit.group.test_consumer_record_codec_kafka import kafka_serde  # noqa: F401

pytestmark = pytest.mark.reference

TOPOLOGY = StreamsGroupTopologyValue(epoch=3, subtopologies=(
    Subtopology(
        subtopology_id="0",
        source_topics=("orders", "customers"),
        state_changelog_topics=(TopicInfo("app-store-changelog", 0, 0,
                                          (("cleanup.policy", "compact"),)),),
        repartition_sink_topics=("app-repartition",),
        copartition_groups=(CopartitionGroup(source_topics=(0, 1)),),
    ),
    Subtopology(
        subtopology_id="1",
        source_topic_regex=("events-.*",),
        repartition_source_topics=(TopicInfo("app-repartition", 6, 3),),
        copartition_groups=(CopartitionGroup(source_topic_regex=(0,),
                                             repartition_source_topics=(0,)),),
    ),
))

CASES: list[tuple[Record, list[str]]] = [
    (Record(StreamsGroupMetadataKey("app"), StreamsGroupMetadataValue(
        12, -42, 3, (("num.standby.replicas", "1"),))),
     ["groupId='app'", "epoch=12", "metadataHash=-42", "validatedTopologyEpoch=3",
      "key='num.standby.replicas'", "value='1'"]),
    (Record(StreamsGroupMetadataKey("app"), StreamsGroupMetadataValue(1)),
     ["epoch=1", "metadataHash=0", "validatedTopologyEpoch=-1", "lastAssignmentConfigs=[]"]),
    (Record(StreamsGroupMetadataKey("app"), None), ["groupId='app'"]),
    (Record(StreamsGroupMemberMetadataKey("app", "m-1"), StreamsGroupMemberMetadataValue(
        "inst", "rack-a", "client", "/10.0.0.1", 30000, 3, "proc-1", Endpoint("host", 8080),
        (("az", "eu-1"), ("zone", "b")))),
     ["memberId='m-1'", "instanceId='inst'", "rackId='rack-a'", "clientHost='/10.0.0.1'",
      "rebalanceTimeoutMs=30000", "topologyEpoch=3", "processId='proc-1'", "host='host'",
      "port=8080", "key='az'", "value='eu-1'"]),
    (Record(StreamsGroupMemberMetadataKey("app", "m-2"), StreamsGroupMemberMetadataValue(
        None, None, "c", "h", 1, 0, "p", None, ())),
     ["instanceId=null", "rackId=null", "userEndpoint=null", "clientTags=[]"]),
    (Record(StreamsGroupTargetAssignmentMetadataKey("app"),
            StreamsGroupTargetAssignmentMetadataValue(12)), ["assignmentEpoch=12"]),
    (Record(StreamsGroupTargetAssignmentMemberKey("app", "m-1"),
            StreamsGroupTargetAssignmentMemberValue(TaskSet.of(
                active={"0": [0, 2], "1": [1]}, standby={"0": [1]}, warmup={"1": [0]}))),
     ["subtopologyId='0'", "partitions=[0, 2]", "partitions=[1]"]),
    (Record(StreamsGroupCurrentMemberAssignmentKey("app", "m-1"),
            StreamsGroupCurrentMemberAssignmentValue(
                12, 11, 2, TaskSet.of(active={"0": [0, 2]}, standby={"1": [1]}),
                TaskSet.of(active={"1": [3]}, warmup={"0": [5]}),
                active_tasks_epochs={"0": {0: 10, 2: 12}},
                active_tasks_pending_revocation_epochs={"1": {3: 9}})),
     ["memberEpoch=12", "previousMemberEpoch=11", "state=2", "assignmentEpochs=[10, 12]",
      "assignmentEpochs=[9]"]),
    (Record(StreamsGroupCurrentMemberAssignmentKey("app", "m-1"),
            StreamsGroupCurrentMemberAssignmentValue(1, 0, 1, TaskSet.of(active={"0": [4]}))),
     ["partitions=[4], assignmentEpochs=[]"]),
    (Record(StreamsGroupCurrentMemberAssignmentKey("app", "m-1"), None), ["memberId='m-1'"]),
    (Record(StreamsGroupTopologyKey("app"), TOPOLOGY),
     ["epoch=3", "sourceTopics=[orders, customers]", "name='app-store-changelog'",
      "replicationFactor=3", "partitions=6", "sourceTopicRegex=[events-.*]",
      "key='cleanup.policy'", "sourceTopics=[0, 1]", "repartitionSourceTopics=[0]"]),
]


def test_kafka_reads_what_coterie_writes(kafka_serde):  # noqa: F811
    lines = []
    for record, _ in CASES:
        key, value = codec.encode(record)
        lines.append(f"{key.hex()} {'-' if value is None else value.hex()}")
    answers = kafka_serde(lines)
    assert len(answers) == len(CASES)
    for (record, expected), line, answer in zip(CASES, lines, answers, strict=True):
        assert not answer.startswith("ERROR"), (record, answer)
        key_hex, value_hex, text = answer.split(" ", 2)
        assert f"{key_hex} {value_hex}" == line, (record, answer)
        for fragment in expected:
            assert fragment in text, (fragment, text)
        # And coterie reads back what Kafka wrote.
        value = None if value_hex == "-" else bytes.fromhex(value_hex)
        assert codec.decode(bytes.fromhex(key_hex), value) == record
