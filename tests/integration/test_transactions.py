"""Transactions against a real coterie broker (issue 12, build items 2-4), with
confluent-kafka (librdkafka) as the client:

* a transactional producer commits one transaction and aborts another; a read_committed
  consumer sees exactly the committed records, a read_uncommitted one sees both;
* exactly-once consume-transform-produce, with a classic and with a consumer-protocol
  (KIP-848) group: offsets sent with `send_offsets_to_transaction` count only once the
  transaction commits and vanish on abort;
* kafka-python's transactional producer commits and aborts the same way;
* zombie fencing: a second producer with the same transactional.id fences the first, whose
  open transaction is aborted;
* a kill -9 of the broker mid-transaction: after the restart the transaction is aborted on
  its timeout, read_committed consumers never see its records, and what was committed
  before stays.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.fixtures.coterie_broker import STORAGES
from tests.integration.test_data_plane_raw import create
from tests.kafka_raw import RawConnection

# Every scenario on both storages: local files, and a broker alone on PostgreSQL.
pytestmark = pytest.mark.parametrize("storage", STORAGES, indirect=True)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _producer(coterie, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": coterie.bootstrap, "transactional.id": tid, **extra})
    p.init_transactions(30)
    return p


def _read(coterie, topic: str, partitions: int, isolation: str, expect: int,
          settle: float = 1.5) -> list[bytes]:
    """Every record of `topic` from the beginning with `isolation`; waits for `expect`
    records, then `settle` seconds more to catch any extra."""
    c = Consumer({"bootstrap.servers": coterie.bootstrap, "group.id": _name("reader"),
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        quiet_until = None
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
                continue
            if len(got) >= expect:
                quiet_until = quiet_until or time.monotonic() + settle
                if time.monotonic() >= quiet_until:
                    break
        return got
    finally:
        c.close()


def _topic(coterie, partitions: int = 2) -> str:
    topic = _name("txn")
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic, partitions).error_code == 0
    return topic


def test_commit_and_abort_with_read_committed_consumers(coterie):
    topic = _topic(coterie)
    p = _producer(coterie, _name("tx"))
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed-last", partition=0)
    p.commit_transaction(30)
    committed = _read(coterie, topic, 2, "read_committed", 21)
    assert sorted(committed) == sorted([f"committed-{i}".encode() for i in range(20)]
                                       + [b"committed-last"])
    everything = _read(coterie, topic, 2, "read_uncommitted", 31)
    assert len(everything) == 31


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_offsets_sent_to_a_transaction_commit_with_it(coterie, protocol):
    source, sink = _topic(coterie, 1), _topic(coterie, 1)
    feeder = Producer({"bootstrap.servers": coterie.bootstrap})
    for i in range(10):
        feeder.produce(source, f"in-{i}".encode(), partition=0)
    assert feeder.flush(30) == 0
    group = _name("eos")
    consumer = Consumer({"bootstrap.servers": coterie.bootstrap, "group.id": group,
                         "group.protocol": protocol,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([source])
    try:
        seen: list = []
        deadline = time.monotonic() + 30
        while len(seen) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg)
        assert len(seen) == 10
        p = _producer(coterie, _name("eos-tx"))
        # An aborted round first: its offsets must vanish.
        p.begin_transaction()
        p.produce(sink, b"dropped", partition=0)
        p.send_offsets_to_transaction([TopicPartition(source, 0, 5)],
                                      consumer.consumer_group_metadata(), 30)
        p.abort_transaction(30)
        assert consumer.committed([TopicPartition(source, 0)], 10)[0].offset < 0
        # Then the real one.
        p.begin_transaction()
        for msg in seen:
            p.produce(sink, msg.value().replace(b"in", b"out"), partition=0)
        p.send_offsets_to_transaction([TopicPartition(source, 0, 10)],
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert consumer.committed([TopicPartition(source, 0)], 10)[0].offset == 10
    finally:
        consumer.close()
    out = _read(coterie, sink, 1, "read_committed", 10)
    assert sorted(out) == sorted(f"out-{i}".encode() for i in range(10))


def test_kafka_python_transactional_producer(coterie):
    from kafka import KafkaProducer

    topic = _topic(coterie, 2)
    p = KafkaProducer(bootstrap_servers=coterie.bootstrap, transactional_id=_name("kp-tx"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send(topic, f"kp-{i}".encode(), partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-aborted", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=10)
    assert sorted(_read(coterie, topic, 2, "read_committed", 6)) == sorted(
        f"kp-{i}".encode() for i in range(6))


def test_a_second_producer_fences_the_first(coterie):
    topic = _topic(coterie, 1)
    tid = _name("zombie")
    first = _producer(coterie, tid)
    first.begin_transaction()
    first.produce(topic, b"zombie-write", partition=0)
    first.flush(30)
    second = _producer(coterie, tid)  # aborts the first one's open transaction
    second.begin_transaction()
    second.produce(topic, b"live-write", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException):
        first.produce(topic, b"more", partition=0)
        first.commit_transaction(10)
    assert _read(coterie, topic, 1, "read_committed", 1) == [b"live-write"]


def test_kill9_mid_transaction_aborts_on_its_timeout(coterie):
    topic = _topic(coterie, 1)
    p = _producer(coterie, _name("crash"), **{"transaction.timeout.ms": 3000})
    p.begin_transaction()
    p.produce(topic, b"before", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"in-flight", partition=0)
    p.flush(30)
    coterie.restart_after_kill9()
    with RawConnection(coterie.host, coterie.port) as conn:
        # Offsets: 0 before, 1 its COMMIT marker, 2 in-flight. The last stable offset stays
        # at 2 until the open transaction dies with its timeout (checked every 10 s), which
        # writes its ABORT marker at 3. (A Kafka broker answers -1 until it has loaded the
        # partition again after the kill: wait for that; coterie answers at once.)
        deadline = time.monotonic() + 30
        while _stable_end(conn, topic) < 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _stable_end(conn, topic) == 2
        deadline = time.monotonic() + 40
        while _stable_end(conn, topic) != 4 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _stable_end(conn, topic) == 4
    assert _read(coterie, topic, 1, "read_committed", 1) == [b"before"]
    assert sorted(_read(coterie, topic, 1, "read_uncommitted", 2)) == [b"before", b"in-flight"]


def _stable_end(conn: RawConnection, topic: str) -> int:
    """ListOffsets LATEST with read_committed: the last stable offset."""
    from kio.schema.list_offsets.v8.request import (
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
    )

    resp = conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=(
        ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1),)),)))
    return resp.topics[0].partitions[0].offset


def test_write_txn_markers_closes_a_transaction_on_its_partitions(coterie):
    """WriteTxnMarkers v1, the coordinators' API (a cluster's coordinator sends it to the
    leaders of the other partitions: docs/cluster.md): a COMMIT marker for an open
    transaction makes its records readable read_committed; an unknown partition is
    UNKNOWN_TOPIC_OR_PARTITION, and the connection stays usable."""
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
    from kio.schema.write_txn_markers.v1.request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    topic = _name("marked")
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic).error_code == 0
    producer = _producer(coterie, _name("tid"))
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    assert _read(coterie, topic, 1, "read_committed", 0, settle=0.5) == []
    with RawConnection(coterie.host, coterie.port) as conn:
        described = conn.request(DescribeProducersRequest(
            topics=(TopicRequest(name=topic, partition_indexes=(0,)),)))
        (state,) = described.topics[0].partitions[0].active_producers
        assert state.current_txn_start_offset == 0
        answer = conn.request(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=state.producer_id, producer_epoch=state.producer_epoch,
            transaction_result=True, coordinator_epoch=0,
            topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(0, 7)),)),)))
        codes = {p.partition_index: p.error_code
                 for p in answer.markers[0].topics[0].partitions}
        assert codes == {0: 0, 7: 3}  # 3: UNKNOWN_TOPIC_OR_PARTITION
    assert sorted(_read(coterie, topic, 1, "read_committed", 5)) == [
        f"m{i}".encode() for i in range(5)]
    producer.abort_transaction(30)  # the coordinator's own ABORT finds it closed already
