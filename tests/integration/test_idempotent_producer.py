"""Idempotent producers against a real coterie broker (issue 12, build item 1).

Every Kafka client since 3.0 turns idempotence on by default: it asks InitProducerId for a
producer id, numbers its batches per partition, and relies on the broker to acknowledge a
retried batch once with its original offsets. Here:

* the default producer of kafka-python, and those of confluent-kafka and aiokafka with
  idempotence on (both leave it off by default), deliver every record exactly once, and the
  stored batches really carry the producer id the broker handed out (so idempotence was not
  quietly off);
* over raw requests: a batch sent twice is stored once and acknowledged twice with the same
  offset; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER and a stale epoch
  INVALID_PRODUCER_EPOCH, with nothing written; producer ids are never reused, not even
  after a kill -9;
* a batch acknowledged before a kill -9 of the broker and retried after the restart is still
  recognised as a duplicate.

The Java client's default producer (console producer, producer perf test) is in
test_java_producer.py.
"""

from __future__ import annotations

import datetime
import io
import uuid

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

from coterie.wire.record_batch import batch_headers
from tests.fixtures.coterie_broker import STORAGES
from tests.integration.clients import consume
from tests.integration.test_data_plane_raw import create, list_offset, produce
from tests.kafka_raw import RawConnection

# Every scenario on both storages: local files, and a broker alone on PostgreSQL.
pytestmark = pytest.mark.parametrize("storage", STORAGES, indirect=True)

LATEST = -1


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def init_producer_id(conn: RawConnection) -> tuple[ErrorCode, int, int]:
    resp = conn.request(InitProducerIdRequest(
        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1, producer_epoch=-1))
    return resp.error_code, resp.producer_id, resp.producer_epoch


def idempotent_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    """An uncompressed v2 batch as an idempotent producer numbers it."""
    ts = datetime.datetime(2026, 11, 24, tzinfo=datetime.UTC)
    records = tuple(Record(attributes=0, timestamp=ts, offset=i, key=b"k", value=v, headers=())
                    for i, v in enumerate(values))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, records=records, attributes=0))
    return buf.getvalue()


def stored_producers(conn: RawConnection, topic: str, partitions: int) -> dict[int, int]:
    """How many records each producer id wrote to `topic`, from the stored batch headers."""
    counts: dict[int, int] = {}
    for p in range(partitions):
        offset = 0
        while True:
            resp = conn.request(FetchRequest(
                replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                max_bytes=8 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                    partition=p, current_leader_epoch=-1, fetch_offset=offset,
                    last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=8 << 20),)),),
                forgotten_topics_data=(), rack_id=""))
            part = resp.responses[0].partitions[0]
            assert part.error_code == ErrorCode.none
            headers = batch_headers(part.records or b"")
            if not headers:
                break
            for h in headers:
                counts[h.producer_id] = counts.get(h.producer_id, 0) + h.records_count
                offset = h.next_offset
            if offset >= part.high_watermark:
                break
    return counts


def _check_exactly_once(coterie, topic: str, partitions: int, count: int) -> None:
    got = consume("confluent", coterie.bootstrap, {topic: partitions}, count)
    values = sorted(r.value for r in got.records)
    assert values == sorted(f"v{i}".encode() for i in range(count))
    with RawConnection(coterie.host, coterie.port) as conn:
        written = stored_producers(conn, topic, partitions)
    assert sum(written.values()) == count
    assert -1 not in written, f"some batches carry no producer id: {written}"
    assert len(written) == 1, f"one producer, one producer id: {written}"


def test_kafka_python_default_producer_is_idempotent(coterie):
    topic = _name("kp-idem")
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic, 3).error_code == ErrorCode.none
    producer = KafkaProducer(bootstrap_servers=coterie.bootstrap)  # every setting default
    try:
        futures = [producer.send(topic, key=str(i % 7).encode(), value=f"v{i}".encode())
                   for i in range(300)]
        producer.flush(timeout=30)
        assert all(f.get(timeout=1).offset >= 0 for f in futures)
    finally:
        producer.close(timeout=10)
    _check_exactly_once(coterie, topic, 3, 300)


def test_confluent_idempotent_producer(coterie):
    topic = _name("ck-idem")
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic, 3).error_code == ErrorCode.none
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": coterie.bootstrap, "enable.idempotence": True})

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(str(err))

    for i in range(300):
        producer.produce(topic, key=str(i % 7).encode(), value=f"v{i}".encode(),
                         on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors[:5]
    _check_exactly_once(coterie, topic, 3, 300)


def test_aiokafka_idempotent_producer(coterie):
    import asyncio

    from aiokafka import AIOKafkaProducer

    topic = _name("aio-idem")
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic, 3).error_code == ErrorCode.none

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=coterie.bootstrap,
                                    enable_idempotence=True)
        await producer.start()
        try:
            sent = [await producer.send(topic, key=str(i % 7).encode(),
                                        value=f"v{i}".encode()) for i in range(300)]
            metas = [await f for f in sent]
            assert all(m.offset >= 0 for m in metas)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
    _check_exactly_once(coterie, topic, 3, 300)


def test_a_retried_batch_is_stored_once(coterie):
    with RawConnection(coterie.host, coterie.port) as conn:
        topic = _name("dup")
        create(conn, topic, 1)
        error, pid, epoch = init_producer_id(conn)
        assert (error, epoch) == (ErrorCode.none, 0) and pid >= 0
        first = produce(conn, topic, 0, idempotent_batch(pid, 0, 0, [b"a", b"b"]), acks=-1)
        assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
        second = produce(conn, topic, 0, idempotent_batch(pid, 0, 2, [b"c"]), acks=-1)
        assert (second.error_code, second.base_offset) == (ErrorCode.none, 2)
        # Both batches again, as a producer retrying after lost responses would.
        again = produce(conn, topic, 0, idempotent_batch(pid, 0, 0, [b"a", b"b"]), acks=-1)
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 0)
        again = produce(conn, topic, 0, idempotent_batch(pid, 0, 2, [b"c"]), acks=-1)
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 2)
        assert list_offset(conn, topic, 0, LATEST).offset == 3
        assert stored_producers(conn, topic, 1) == {pid: 3}


def test_sequence_gaps_and_stale_epochs_are_refused(coterie):
    with RawConnection(coterie.host, coterie.port) as conn:
        topic = _name("refuse")
        create(conn, topic, 1)
        _, pid, _ = init_producer_id(conn)
        assert produce(conn, topic, 0, idempotent_batch(pid, 0, 0, [b"a"]), -1).error_code == 0
        gap = produce(conn, topic, 0, idempotent_batch(pid, 0, 5, [b"x"]), acks=-1)
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        assert gap.error_message
        # A higher epoch starts again at sequence 0; after it, the old epoch is stale.
        bumped = produce(conn, topic, 0, idempotent_batch(pid, 1, 0, [b"b"]), acks=-1)
        assert (bumped.error_code, bumped.base_offset) == (ErrorCode.none, 1)
        stale = produce(conn, topic, 0, idempotent_batch(pid, 0, 1, [b"y"]), acks=-1)
        assert stale.error_code == ErrorCode.invalid_producer_epoch
        not_zero = produce(conn, topic, 0, idempotent_batch(pid, 2, 3, [b"z"]), acks=-1)
        assert not_zero.error_code == ErrorCode.out_of_order_sequence_number
        assert list_offset(conn, topic, 0, LATEST).offset == 2
        # Another producer on the same partition is not held up by the refused one.
        _, other, _ = init_producer_id(conn)
        ok = produce(conn, topic, 0, idempotent_batch(other, 0, 0, [b"c"]), acks=-1)
        assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 2)


def test_duplicates_are_recognised_across_kill9(coterie):
    topic = _name("kill9")
    with RawConnection(coterie.host, coterie.port) as conn:
        create(conn, topic, 1)
        _, pid, _ = init_producer_id(conn)
        for seq in range(3):
            r = produce(conn, topic, 0, idempotent_batch(pid, 0, seq, [f"{seq}".encode()]), -1)
            assert (r.error_code, r.base_offset) == (ErrorCode.none, seq)
    coterie.restart_after_kill9()
    with RawConnection(coterie.host, coterie.port) as conn:
        # The last batch again, as a producer whose response was lost in the crash.
        again = produce(conn, topic, 0, idempotent_batch(pid, 0, 2, [b"2"]), acks=-1)
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 2)
        nxt = produce(conn, topic, 0, idempotent_batch(pid, 0, 3, [b"3"]), acks=-1)
        assert (nxt.error_code, nxt.base_offset) == (ErrorCode.none, 3)
        assert list_offset(conn, topic, 0, LATEST).offset == 4
        # A producer id handed out before the crash is never handed out again.
        _, after, _ = init_producer_id(conn)
        assert after > pid


@pytest.mark.parametrize("version", [0, 2, 3, 5])
def test_every_init_producer_id_version(coterie, version):
    import importlib

    mod = importlib.import_module(f"kio.schema.init_producer_id.v{version}.request")
    fields = {"transactional_id": None, "transaction_timeout": datetime.timedelta(seconds=60)}
    if version >= 3:
        fields |= {"producer_id": -1, "producer_epoch": -1}
    with RawConnection(coterie.host, coterie.port) as conn:
        ids = set()
        for _ in range(3):
            resp = conn.request(mod.InitProducerIdRequest(**fields))
            assert (resp.error_code, resp.producer_epoch) == (ErrorCode.none, 0)
            ids.add(resp.producer_id)
        assert len(ids) == 3


def test_describe_producers(coterie):
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    with RawConnection(coterie.host, coterie.port) as conn:
        topic = _name("describe")
        create(conn, topic, 2)
        _, pid, _ = init_producer_id(conn)
        for seq in (0, 3):
            assert produce(conn, topic, 0, idempotent_batch(pid, 0, seq, [b"a", b"b", b"c"]),
                           acks=-1).error_code == ErrorCode.none
        resp = conn.request(DescribeProducersRequest(topics=(
            TopicRequest(name=topic, partition_indexes=(0, 1, 7)),)))
        p0, p1, p7 = resp.topics[0].partitions
        assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
                for s in p0.active_producers] == [(pid, 0, 5, -1)]
        assert p0.active_producers[0].last_timestamp > 0
        assert (p1.error_code, p1.active_producers) == (ErrorCode.none, ())
        assert p7.error_code == ErrorCode.unknown_topic_or_partition
