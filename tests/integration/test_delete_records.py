"""DeleteRecords (issue 14): a partition's log start moves forward durably, as on Kafka
4.2 (the scenario passes against Apache Kafka 4.2.1 in tests/reference).

Ten records in each of two partitions; confluent-kafka's AdminClient deletes up to offset 4
of partition 0 and everything of partition 1 (the high watermark). Low watermarks, the
earliest offsets and what a consumer reads from "earliest" follow; a fetch below the start
is OFFSET_OUT_OF_RANGE; an offset above the high watermark, an unknown partition and an
internal topic are refused with Kafka's codes. On coterie the start survives a kill -9, and
Kafka's kafka-delete-records tool works. DescribeLogDirs is read request by request and by
Kafka's kafka-log-dirs tool.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.errors import ErrorCode

from tests.fixtures.coterie_broker import both_storages
from tests.fixtures.reference_broker import kafka_tool
from tests.kafka_raw import RawConnection


def _raw_delete(bootstrap: str, topic: str, partition: int, offset: int) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        answer = conn.request(DeleteRecordsRequest(topics=(DeleteRecordsTopic(
            name=topic, partitions=(DeleteRecordsPartition(partition_index=partition,
                                                           offset=offset),)),),
            timeout=datetime.timedelta(seconds=10)))
    return answer.topics[0].partitions[0]


def _first_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 2)])  # below the start: reset to earliest
        got = consumer.poll(30)
        assert got is not None and got.error() is None, got
        return {got.partition(): got.offset()}
    finally:
        consumer.close()


def scenario(bootstrap: str, topic: str = "purged") -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in (0, 1):
        for i in range(10):
            producer.produce(topic, f"r{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    futures = admin.delete_records([TopicPartition(topic, 0, 4), TopicPartition(topic, 1, -1)],
                                   operation_timeout=30)
    low = {tp.partition: f.result(30).low_watermark for tp, f in futures.items()}
    assert low == {0: 4, 1: 10}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (4, 10)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=30) == (10, 10)
    finally:
        consumer.close()
    # A consumer asking for offset 2 is told it is out of range and starts at the new start.
    assert _first_offsets(bootstrap, topic) == {0: 4}
    # Again at or below the start: nothing changes.
    assert (_raw_delete(bootstrap, topic, 0, 3).error_code,
            _raw_delete(bootstrap, topic, 0, 3).low_watermark) == (ErrorCode.none, 4)
    assert _raw_delete(bootstrap, topic, 0, 11).error_code == ErrorCode.offset_out_of_range
    assert _raw_delete(bootstrap, topic, 5, 1).error_code == (
        ErrorCode.unknown_topic_or_partition)
    assert _raw_delete(bootstrap, "__consumer_offsets", 0, 0).error_code == (
        ErrorCode.invalid_topic_exception)


@both_storages
def test_delete_records(coterie):
    scenario(coterie.bootstrap)
    coterie.kill9()
    coterie.restart_after_kill9()
    consumer = Consumer({"bootstrap.servers": coterie.bootstrap, "group.id": "after"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("purged", 0), timeout=30) == (
            4, 10)
    finally:
        consumer.close()


def test_kafka_delete_records_tool(coterie, tmp_path):
    admin = AdminClient({"bootstrap.servers": coterie.bootstrap})
    admin.create_topics([NewTopic("tooled", 1, 1)])["tooled"].result(30)
    producer = Producer({"bootstrap.servers": coterie.bootstrap})
    for _ in range(6):
        producer.produce("tooled", b"x", partition=0)
    assert producer.flush(30) == 0
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "tooled", "partition": 0,
                                                "offset": 5}], "version": 1}))
    out = kafka_tool("org.apache.kafka.tools.DeleteRecordsCommand", coterie.bootstrap,
                     "--offset-json-file", str(spec))
    assert "low_watermark: 5" in out, out


def test_describe_log_dirs(coterie, tmp_path):
    """DescribeLogDirs request by request (sizes, the asked partitions only), then Kafka's
    kafka-log-dirs tool (it failed before)."""
    from kio.schema.describe_log_dirs.v4.request import (
        DescribableLogDirTopic,
        DescribeLogDirsRequest,
    )

    admin = AdminClient({"bootstrap.servers": coterie.bootstrap})
    admin.create_topics([NewTopic("sized", 2, 1)])["sized"].result(30)
    producer = Producer({"bootstrap.servers": coterie.bootstrap})
    for _ in range(20):
        producer.produce("sized", b"y" * 1000, partition=1)
    assert producer.flush(30) == 0
    with RawConnection(coterie.host, coterie.port) as conn:
        everything = conn.request(DescribeLogDirsRequest(topics=None))
        (result,) = everything.results
        assert result.error_code == ErrorCode.none
        assert result.total_bytes >= result.usable_bytes > 0
        sizes = {(t.name, p.partition_index): p.partition_size
                 for t in result.topics for p in t.partitions}
        assert sizes[("sized", 0)] == 0 and sizes[("sized", 1)] > 20_000
        asked = conn.request(DescribeLogDirsRequest(topics=(
            DescribableLogDirTopic(topic="sized", partitions=(1, 7)),
            DescribableLogDirTopic(topic="nowhere", partitions=(0,)))))
        assert [(t.name, [p.partition_index for p in t.partitions])
                for t in asked.results[0].topics] == [("sized", [1])]
    out = kafka_tool("org.apache.kafka.tools.LogDirsCommand", coterie.bootstrap, "--describe",
                     "--topic-list", "sized")
    report = json.loads(out.strip().splitlines()[-1])
    (broker,) = report["brokers"]
    partitions = {p["partition"]: p["size"] for d in broker["logDirs"] for p in d["partitions"]}
    assert partitions["sized-1"] > 20_000, report
