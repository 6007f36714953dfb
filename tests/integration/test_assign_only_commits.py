"""A librdkafka consumer with group.protocol=consumer that only assign()s commits offsets.

Issue 10, item 8: librdkafka sends its own member id with member epoch -1 in that case; coterie
answered UNKNOWN_MEMBER_ID, so commits, stored offsets and commit metadata all failed. Kafka
accepts any commit with a negative generation or epoch into an unknown or empty group.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def test_assign_only_consumer_commits_with_metadata_and_stored_offsets(coterie):
    topic = f"assign-only-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": coterie.bootstrap})
    for i in range(10):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(20) == 0

    consumer = Consumer({
        "bootstrap.servers": coterie.bootstrap, "group.id": group,
        "group.protocol": "consumer", "enable.auto.commit": False,
        "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
    })
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = []
        while len(seen) < 4:
            msg = consumer.poll(10)
            assert msg is not None, "no record within 10 s"
            assert msg.error() is None, msg.error()
            seen.append(msg)
        # An explicit commit with metadata.
        tp = TopicPartition(topic, 0, 3, metadata="checkpoint-3")
        done = consumer.commit(offsets=[tp], asynchronous=False)
        assert [p.error for p in done] == [None]
        got = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert (got[0].offset, got[0].metadata) == (3, "checkpoint-3")
        # Stored offsets, then a commit of what is stored; pause and resume in between.
        consumer.pause([TopicPartition(topic, 0)])
        consumer.store_offsets(message=seen[3])
        consumer.resume([TopicPartition(topic, 0)])
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as e:
            raise AssertionError(f"commit of stored offsets failed: {e}") from e
        got = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert got[0].offset == 4
    finally:
        consumer.close()
