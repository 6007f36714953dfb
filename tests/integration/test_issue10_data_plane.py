"""Issue 10, data plane: what real clients (librdkafka through confluent-kafka) hit, over TCP
against a real `coterie serve`.

- A partition error came with null records, which librdkafka cannot parse ("invalid
  MessageSetSize -1"): it never saw OFFSET_OUT_OF_RANGE, never applied auto.offset.reset, and
  a consumer positioned outside the log stalled.
- The first partition of a Fetch ignored the request's max_bytes (fetch.max.bytes), and every
  later one returned at least a batch, so librdkafka refused the response ("Invalid response
  size") and stalled.
- ListOffsets answered timestamp lookups with batch offsets; Kafka answers with the first
  record whose timestamp is >= the target, and MAX_TIMESTAMP with the first record carrying
  the largest timestamp.
- A Fetch v13+ naming the zero topic id crashed the handler; Kafka answers UNKNOWN_TOPIC_ID
  on each partition.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.fixtures.coterie_broker import CoterieBroker
from tests.integration.clients import broker_log_on_failure, create_topics
from tests.kafka_raw import RawConnection, make_batch

DEADLINE = 20.0  # how long a consumer may take before it counts as stalled


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    root: Path = tmp_path_factory.mktemp("issue10")
    # Retention runs often, for the test that needs a log start above 0.
    b = CoterieBroker(root / "data", config={"log.retention.check.interval.ms": "100"})
    b.start()
    with broker_log_on_failure(b.log_text):
        yield b
    b.stop()


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _produce_raw(broker: CoterieBroker, topic: str, partition: int, batches: list[bytes]) -> None:
    with RawConnection(broker.host, broker.port) as conn:
        for batch in batches:
            resp = conn.request(ProduceRequest(
                acks=1, timeout=datetime.timedelta(seconds=5), transactional_id=None,
                topic_data=(TopicProduceData(name=topic, partition_data=(
                    PartitionProduceData(index=partition, records=batch),)),)))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none


def _list_offset(broker: CoterieBroker, topic: str, partition: int, timestamp: int) -> int:
    with RawConnection(broker.host, broker.port) as conn:
        resp = conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
            ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp),)),)))
    return resp.topics[0].partitions[0].offset


def _consumer(broker: CoterieBroker, **config: object) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex,
                     "enable.auto.commit": False, "fetch.wait.max.ms": 100, **config})


def _consume(consumer: Consumer, count: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of the next `count` records; fails if the consumer stalls."""
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + DEADLINE
    while len(out) < count:
        assert time.monotonic() < deadline, f"consumer stalled after {len(out)}/{count} records"
        for m in consumer.consume(num_messages=1000, timeout=0.2):
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.value()))
    return out


# ------------------------------------------------------------------ offset out of range


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_consumer_beyond_log_end_is_reset(broker, topic, reset):
    create_topics(broker.bootstrap, {topic: 1})
    _produce_raw(broker, topic, 0, [make_batch([b"old-%d" % i for i in range(5)])] * 2)
    consumer = _consumer(broker, **{"auto.offset.reset": reset,
                                    "enable.partition.eof": reset == "latest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 1000)])  # far past the end (10)
        if reset == "earliest":
            got = _consume(consumer, 10)
            assert [o for _, o, _ in got] == list(range(10))
        else:
            # Reset to the end, which librdkafka reports as reaching the partition's end;
            # only what is produced after that arrives.
            deadline = time.monotonic() + DEADLINE
            while True:
                assert time.monotonic() < deadline, "consumer never reset to the log end"
                events = consumer.consume(num_messages=10, timeout=0.1)
                assert all(m.error() is not None for m in events)
                if any(m.error().code() == KafkaError._PARTITION_EOF for m in events):
                    break
            _produce_raw(broker, topic, 0, [make_batch([b"new-0", b"new-1"])])
            got = []
            while len(got) < 2:
                assert time.monotonic() < deadline, f"consumer stalled after {got}"
                got += [(m.offset(), m.value()) for m in consumer.consume(timeout=0.1)
                        if m.error() is None]
            assert got == [(10, b"new-0"), (11, b"new-1")]
    finally:
        consumer.close()


def test_consumer_below_log_start_is_reset_to_it(broker, topic):
    # Tiny segments and retention: all but the active segment go, so the log starts above 0.
    create_topics(broker.bootstrap, {topic: 1},
                  config={"segment.bytes": "600", "retention.bytes": "1"})
    _produce_raw(broker, topic, 0, [make_batch([b"r-%02d" % i]) for i in range(40)])
    # Retention (every 100 ms) may have run during the produce and run again after it: wait
    # until the log start has settled (unchanged for a second), or the consumer below could
    # see it move under its feet and be reset past records this test expects.
    deadline = time.monotonic() + DEADLINE
    start, since = 0, time.monotonic()
    while True:
        now_start = _list_offset(broker, topic, 0, -2)
        if now_start != start:
            start, since = now_start, time.monotonic()
        elif start > 0 and time.monotonic() - since >= 1.0:
            break
        assert time.monotonic() < deadline, "retention never settled the log start above 0"
        time.sleep(0.1)
    consumer = _consumer(broker, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])  # deleted by retention
        got = _consume(consumer, 40 - start)
        assert [(o, v) for _, o, v in got] == [(o, b"r-%02d" % o) for o in range(start, 40)]
    finally:
        consumer.close()


# ------------------------------------------------------------------------- size limits


def _filled(broker: CoterieBroker, topic: str, layout: dict[int, list[int]]) -> set:
    """Fill partition p with one batch per size in layout[p] (records of ~1000 bytes); the
    (partition, offset, value) of every record."""
    create_topics(broker.bootstrap, {topic: len(layout)})
    expected = set()
    for p, sizes in layout.items():
        offset = 0
        batches = []
        for records in sizes:
            values = [(b"%d:%d:" % (p, offset + i)).ljust(1000, b".") for i in range(records)]
            batches.append(make_batch(values))
            expected |= {(p, offset + i, v) for i, v in enumerate(values)}
            offset += records
        _produce_raw(broker, topic, p, batches)
    return expected


def test_consumer_with_small_fetch_max_bytes_reads_everything(broker, topic):
    """Four partitions of ~300 KB each, fetch.max.bytes 50,000 and a receive limit just
    above it: every response must fit, the first partition's included."""
    expected = _filled(broker, topic, {p: [10] * 30 for p in range(4)})
    consumer = _consumer(broker, **{"fetch.max.bytes": 50_000, "message.max.bytes": 1000,
                                    "receive.message.max.bytes": 50_512,
                                    "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
        got = _consume(consumer, len(expected))
    finally:
        consumer.close()
    assert len(got) == len(set(got)) and set(got) == expected


def test_batch_larger_than_fetch_max_bytes_is_still_served(broker, topic):
    """Kafka's exception to the limit: the first batch of the first partition with data comes
    whole, alone, so a batch bigger than fetch.max.bytes never blocks a consumer."""
    expected = _filled(broker, topic, {0: [120, 120, 120, 3], 1: [10] * 20, 2: [130, 5]})
    consumer = _consumer(broker, **{"fetch.max.bytes": 50_000, "message.max.bytes": 1000,
                                    "receive.message.max.bytes": 200_000,
                                    "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got = _consume(consumer, len(expected))
    finally:
        consumer.close()
    assert len(got) == len(set(got)) and set(got) == expected


# ------------------------------------------------------------------- timestamp lookups

BASE_TS = 1_700_000_000_000


def _stamps(n: int) -> list[int]:
    """Timestamps that jump back and forth, with repeats and a mid-stream maximum."""
    stamps = [BASE_TS + ((i * 37) % 50) * 10 for i in range(n)]
    stamps[n // 3] = BASE_TS + 1000
    stamps[n // 3 + 5] = BASE_TS + 1000
    return stamps


def _batch_record_counts(broker: CoterieBroker, topic_id: uuid.UUID) -> list[int]:
    """Records per stored batch of partition 0, from the batch headers a raw Fetch returns."""
    with RawConnection(broker.host, broker.port) as conn:
        resp = conn.request(FetchRequest(
            max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=8 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, topics=(FetchTopic(topic_id=topic_id, partitions=(
                FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                               last_fetched_epoch=-1, log_start_offset=-1,
                               partition_max_bytes=8 << 20),)),),
            forgotten_topics_data=(), rack_id=""))
    data = resp.responses[0].partitions[0].records
    counts, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        counts.append(struct.unpack_from(">i", data, pos + 57)[0])
        pos += 12 + length
    return counts


def _topic_id(broker: CoterieBroker, topic: str) -> uuid.UUID:
    with RawConnection(broker.host, broker.port) as conn:
        md = conn.request(MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return md.topics[0].topic_id


@pytest.mark.parametrize("kind", ["none", "gzip", "snappy", "lz4", "zstd", "LogAppendTime"])
def test_offsets_for_times_and_max_timestamp_are_record_level(broker, topic, kind):
    log_append = kind == "LogAppendTime"
    create_topics(broker.bootstrap, {topic: 1},
                  config={"message.timestamp.type": "LogAppendTime"} if log_append else None)
    stamps = _stamps(60)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200,
                         "batch.num.messages": 25, "enable.idempotence": False,
                         "compression.type": "none" if log_append else kind})
    for i, ts in enumerate(stamps):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts)
        if i in (30, 45):
            producer.flush(10)  # several appends, so LogAppendTime batches differ in time
            time.sleep(0.01)
    assert producer.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    counts = _batch_record_counts(broker, _topic_id(broker, topic))
    assert sum(counts) == 60 and max(counts) > 1, counts  # records share batches

    consumer = _consumer(broker, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = {}
        deadline = time.monotonic() + DEADLINE
        while len(seen) < 60:
            assert time.monotonic() < deadline
            for m in consumer.consume(num_messages=100, timeout=0.2):
                assert m.error() is None, m.error()
                seen[m.offset()] = m.timestamp()[1]
    finally:
        consumer.close()
    records = sorted(seen.items())  # (offset, timestamp) as a reader sees them
    if not log_append:
        assert [t for _, t in records] == stamps

    # A consumer with nothing assigned, so that no parked fetch delays its lookups; one
    # lookup per call, since librdkafka merges requests for the same partition.
    looker = _consumer(broker)
    try:
        for target in sorted({t for _, t in records} | {t + 1 for _, t in records} | {0}):
            (answer,) = looker.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
            want = next((o for o, t in records if t >= target), OFFSET_END)
            assert (target, answer.offset) == (target, want)
    finally:
        looker.close()

    top = max(t for _, t in records)
    first_top = next(o for o, t in records if t == top)
    result = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()},
                                request_timeout=10)[TopicPartition(topic, 0)].result(10)
    assert (result.offset, result.timestamp) == (first_top, top)


# ------------------------------------------------------------------- raw requests


def _fetch_request(topics: object, max_wait_ms: int = 0, min_bytes: int = 0) -> FetchRequest:
    return FetchRequest(max_wait=datetime.timedelta(milliseconds=max_wait_ms),
                        min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=topics,
                        forgotten_topics_data=(), rack_id="")


def _alive(conn: RawConnection) -> None:
    answer = conn.request(ApiVersionsRequest(client_software_name="t",
                                             client_software_version="1"))
    assert answer.error_code == ErrorCode.none


@pytest.mark.parametrize("topic_id", [uuid.UUID(int=0), uuid.UUID(int=12345)])
def test_fetch_unknown_topic_id_answers_at_once_per_partition(broker, topic_id):
    before = len(broker.log_text())
    with RawConnection(broker.host, broker.port) as conn:
        started = time.monotonic()
        resp = conn.request(_fetch_request((FetchTopic(topic_id=topic_id, partitions=tuple(
            FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0,
                           last_fetched_epoch=-1, log_start_offset=-1,
                           partition_max_bytes=1000) for p in (0, 1))),),
            max_wait_ms=5000, min_bytes=1))
        assert time.monotonic() - started < 2.0  # an error is answered without a long poll
        assert resp.error_code == ErrorCode.none
        (t,) = resp.responses
        assert t.topic_id == (None if topic_id.int == 0 else topic_id)  # echoed as sent
        assert [(p.partition_index, p.error_code, p.high_watermark, p.records)
                for p in t.partitions] == [(0, ErrorCode.unknown_topic_id, -1, b""),
                                            (1, ErrorCode.unknown_topic_id, -1, b"")]
        _alive(conn)  # the same connection answers the next request
    assert "handler failed" not in broker.log_text()[before:]


@pytest.mark.parametrize("request_", [
    _fetch_request(None),
    ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=None),
    ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        ListOffsetsTopic(name="x", partitions=None),)),
    OffsetForLeaderEpochRequest(replica_id=-1, topics=None),
    OffsetForLeaderEpochRequest(replica_id=-1, topics=(
        OffsetForLeaderTopic(topic="x", partitions=None),)),
], ids=["fetch-topics", "list-offsets-topics", "list-offsets-partitions",
        "leader-epoch-topics", "leader-epoch-partitions"])
def test_null_arrays_are_refused_like_kafka_and_nothing_crashes(broker, request_):
    """Apache Kafka 4.2.1 closes the connection on each of these (its parser refuses a null
    where the schema allows none); coterie's wire layer does the same, and the handlers would
    count the null as empty. Either way no handler fails and the broker keeps answering."""
    before = len(broker.log_text())
    with RawConnection(broker.host, broker.port) as conn:
        conn.send(request_)
        assert conn.is_closed_by_peer()
    with RawConnection(broker.host, broker.port) as conn:
        _alive(conn)
    assert "handler failed" not in broker.log_text()[before:]
