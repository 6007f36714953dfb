"""coterie's share-group records read by Apache Kafka's own record serde (the reference
version's group-coordinator jar): Kafka must parse every record coterie writes into the fields
coterie meant, and write it back byte for byte."""

from __future__ import annotations

import base64
import uuid

import pytest

from coterie.group.records import share_codec as codec
from coterie.group.records.record import Record
from coterie.group.records.share import (
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

# The harness (javac'd against the reference jars) is the consumer records' one.
from tests.unit.group.test_consumer_record_codec_kafka import kafka_serde  # noqa: F401

pytestmark = pytest.mark.reference

T1, T2 = uuid.UUID(int=0x1234), uuid.UUID("6d3c0b8e-4f3a-4d7e-9a51-3c2f1e0d9b8a")


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """How Kafka prints a topic id: URL-safe base64 of its 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


CASES: list[tuple[Record, list[str]]] = [
    (Record(ShareGroupMemberMetadataKey("sg", "m-1"), ShareGroupMemberMetadataValue(
        "rack-a", "client", "/10.0.0.1", ("orders", "events"))),
     ["groupId='sg'", "memberId='m-1'", "rackId='rack-a'", "clientId='client'",
      "clientHost='/10.0.0.1'", "subscribedTopicNames=[orders, events]"]),
    (Record(ShareGroupMemberMetadataKey("sg", "m-2"),
            ShareGroupMemberMetadataValue(None, "c", "h")),
     ["rackId=null", "subscribedTopicNames=[]"]),
    (Record(ShareGroupMemberMetadataKey("sg", "m-2"), None), ["memberId='m-2'"]),
    (Record(ShareGroupMetadataKey("sg"), ShareGroupMetadataValue(21, -42)),
     ["groupId='sg'", "epoch=21", "metadataHash=-42"]),
    (Record(ShareGroupMetadataKey("sg"), None), ["groupId='sg'"]),
    (Record(ShareGroupTargetAssignmentMetadataKey("sg"),
            ShareGroupTargetAssignmentMetadataValue(22)), ["assignmentEpoch=22"]),
    (Record(ShareGroupTargetAssignmentMemberKey("sg", "m-1"),
            ShareGroupTargetAssignmentMemberValue(frozenset({(T1, 0), (T1, 5), (T2, 2)}))),
     [f"topicId={kafka_uuid(T1)}", "partitions=[0, 5]", f"topicId={kafka_uuid(T2)}",
      "partitions=[2]"]),
    (Record(ShareGroupCurrentMemberAssignmentKey("sg", "m-1"),
            ShareGroupCurrentMemberAssignmentValue(22, 21, 0, frozenset({(T2, 3), (T2, 4)}))),
     ["memberEpoch=22", "previousMemberEpoch=21", "state=0", "partitions=[3, 4]"]),
    (Record(ShareGroupCurrentMemberAssignmentKey("sg", "m-1"),
            ShareGroupCurrentMemberAssignmentValue(1, 0, 0)), ["assignedPartitions=[]"]),
    (Record(ShareGroupCurrentMemberAssignmentKey("sg", "m-1"), None), ["memberId='m-1'"]),
    (Record(ShareGroupStatePartitionMetadataKey("sg"), ShareGroupStatePartitionMetadataValue(
        initializing_topics={T2: InitTopic("events", frozenset({1, 2}))},
        initialized_topics={T1: InitTopic("orders", frozenset({0, 1, 2})),
                            T2: InitTopic("events", frozenset({0}))},
        deleting_topics={uuid.UUID(int=7): "gone"})),
     ["initializingTopics=[", "topicName='events'", "partitions=[1, 2]",
      "topicName='orders'", "partitions=[0, 1, 2]", "deletingTopics=[",
      f"topicId={kafka_uuid(uuid.UUID(int=7))}", "topicName='gone'"]),
    (Record(ShareGroupStatePartitionMetadataKey("sg"), ShareGroupStatePartitionMetadataValue()),
     ["initializingTopics=[]", "initializedTopics=[]", "deletingTopics=[]"]),
    (Record(ShareGroupStatePartitionMetadataKey("sg"), None), ["groupId='sg'"]),
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
