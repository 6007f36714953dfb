"""What a six-minute wire fuzz found (issue 23), each shape sent over TCP to a real broker.

1. Single requests that held the event loop for seconds: a Produce whose transactional id is
   long (hashed to its coordinator partition once per partition, ~8 ms an id of 32,000
   characters) and a DescribeTransactions of megabytes of long ids. Another connection's
   requests must still be answered promptly while they are handled.
2. Transactional ids longer than 32,767 bytes crashed InitProducerId (the record key's int16
   length); every API that takes one now refuses it up front, INVALID_REQUEST.
3. A message quoting a name too long for a non-flexible answer's int16 string closed the
   connection; the entry is answered with Kafka's error for the name instead.
4. Half-sent large frames held their memory, and the allocator kept it after they closed;
   now large frames reserve from `queued.max.request.bytes` and are kept in memory maps.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_configs.v1.request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.produce.v10.request import PartitionProduceData as PartitionV10
from kio.schema.produce.v10.request import ProduceRequest as ProduceV10
from kio.schema.produce.v10.request import TopicProduceData as TopicV10
from kio.schema.produce.v12.request import PartitionProduceData as PartitionV12
from kio.schema.produce.v12.request import ProduceRequest as ProduceV12
from kio.schema.produce.v12.request import TopicProduceData as TopicV12
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

from coterie.wire.codec import encode_request
from tests.fixtures.coterie_broker import CoterieBroker
from tests.integration.clients import create_topics
from tests.kafka_raw import RawConnection

TOPIC = "fuzz-findings"
PARTITIONS = 400
TOO_LONG = "x" * 100_000  # the fuzz's id: compact length varint a18d06
LONG_OK = "y" * 32_000  # as long as a record can hold


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    root: Path = tmp_path_factory.mktemp("fuzz-findings")
    b = CoterieBroker(root / "data", config={"max.connections.per.ip": "1000"})
    b.start()
    create_topics(b.bootstrap, {TOPIC: PARTITIONS})
    yield b
    b.stop()


def _no_crash(b: CoterieBroker, since: int) -> None:
    new = b.log_text()[since:]
    assert "handler failed" not in new and "serving it failed" not in new, new[-3000:]
    assert b.proc is not None and b.proc.poll() is None


def _batch(producer_id: int = 7) -> bytes:
    ts = datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC)
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(
        producer_id=producer_id, producer_epoch=0, base_sequence=0, attributes=16,
        records=(Record(attributes=0, timestamp=ts, offset=0, key=b"k", value=b"v",
                        headers=()),)))
    return buf.getvalue()


def _produce(version: int, tid: str, partitions: int) -> object:
    cls, topic, part = ((ProduceV12, TopicV12, PartitionV12) if version == 12
                        else (ProduceV10, TopicV10, PartitionV10))
    batch = _batch()
    return cls(transactional_id=tid, acks=-1, timeout=_ms(5_000), topic_data=(topic(
        name=TOPIC, partition_data=tuple(part(index=i, records=batch)
                                         for i in range(partitions))),))


class _Probe:
    """ApiVersions on a connection of its own every 20 ms; the slowest answer's seconds."""

    def __init__(self, b: CoterieBroker) -> None:
        self.conn = RawConnection(b.host, b.port, timeout=30)
        self.worst = 0.0
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            answer = self.conn.request(ApiVersionsRequest(client_software_name="probe",
                                                          client_software_version="1"))
            assert answer.error_code == ErrorCode.none
            self.worst = max(self.worst, time.monotonic() - start)
            self.answered += 1
            time.sleep(0.02)

    def __enter__(self) -> _Probe:
        self._thread.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.2)
        self._stop.set()
        self._thread.join(30)
        self.conn.close()


# -- 1. no single request holds the loop ------------------------------------------------
@pytest.mark.parametrize("version", [10, 12])
def test_produce_with_a_long_transactional_id_does_not_hold_the_loop(broker, version):
    """400 partitions named under an id of 32,000 characters: before, each partition hashed
    the id again (3 s and more of a held loop); now once."""
    since = len(broker.log_text())
    with _Probe(broker) as probe, RawConnection(broker.host, broker.port, timeout=60) as c:
        answer = c.request(_produce(version, LONG_OK, PARTITIONS))
    codes = {p.error_code for t in answer.responses for p in t.partition_responses}
    assert codes == {ErrorCode.invalid_producer_id_mapping}  # no such producer: refused
    assert probe.answered > 5
    assert probe.worst < 0.5, f"another connection waited {probe.worst:.2f} s"
    _no_crash(broker, since)


def test_megabytes_of_long_ids_in_one_request_do_not_hold_the_loop(broker):
    """A DescribeTransactions of 24 MB (750 ids of 32,000 characters): before, each id was
    hashed on the event loop (about 6 s held); now a frame that large is decoded, hashed and
    answered on a worker thread."""
    ids = tuple(f"{i:04d}" + LONG_OK[4:] for i in range(750))
    since = len(broker.log_text())
    with _Probe(broker) as probe, RawConnection(broker.host, broker.port, timeout=60) as c:
        answer = c.request(DescribeTransactionsRequest(transactional_ids=ids))
    assert [s.transactional_id for s in answer.transaction_states] == list(ids)
    assert {s.error_code for s in answer.transaction_states} == {
        ErrorCode.transactional_id_not_found}
    assert probe.answered > 5
    assert probe.worst < 0.5, f"another connection waited {probe.worst:.2f} s"
    _no_crash(broker, since)


# -- 2. transactional ids too long for a record --------------------------------------------
def _refusals(c: RawConnection) -> dict[str, set[ErrorCode]]:
    tid = TOO_LONG
    init = c.request(InitProducerIdRequest(transactional_id=tid,
                                           transaction_timeout=_ms(60_000), producer_id=-1,
                                           producer_epoch=-1))
    add = c.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=(AddPartitionsToTxnTopic(name=TOPIC, partitions=(0, 1)),)))
    offsets = c.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=1,
                                               producer_epoch=0, group_id="g"))
    end = c.request(EndTxnRequest(transactional_id=tid, producer_id=1, producer_epoch=0,
                                  committed=True))
    commit = c.request(TxnOffsetCommitRequest(
        transactional_id=tid, group_id="g", producer_id=1, producer_epoch=0,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=(TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(
            TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                            committed_leader_epoch=-1,
                                            committed_metadata=None),)),)))
    produce = {v: c.request(_produce(v, tid, 2)) for v in (10, 12)}
    described = c.request(DescribeTransactionsRequest(transactional_ids=(tid, "short")))
    listed = c.request(ListTransactionsRequest(state_filters=(tid,), producer_id_filters=(),
                                               duration_filter=-1))
    return {
        "InitProducerId": {init.error_code},
        "AddPartitionsToTxn": {p.partition_error_code for t in add.results_by_topic_v3_and_below
                               for p in t.results_by_partition},
        "AddOffsetsToTxn": {offsets.error_code},
        "EndTxn": {end.error_code},
        "TxnOffsetCommit": {p.error_code for t in commit.topics for p in t.partitions},
        **{f"Produce v{v}": {p.error_code for t in r.responses for p in t.partition_responses}
           for v, r in produce.items()},
        "DescribeTransactions": {described.transaction_states[0].error_code},
        "ListTransactions": {listed.error_code}
        | ({ErrorCode.unknown_server_error} if listed.unknown_state_filters != (tid,)
           else set()),
    }


def test_transactional_ids_too_long_for_a_record_are_refused_by_every_api(broker):
    since = len(broker.log_text())
    with RawConnection(broker.host, broker.port, timeout=30) as c:
        refusals = _refusals(c)
        # The connection is still served.
        assert c.request(ApiVersionsRequest(client_software_name="t",
                                            client_software_version="1")).error_code == 0
    expected = {api: {ErrorCode.invalid_request} for api in refusals}
    # ListTransactions takes no transactional id before v2: a long state filter is just an
    # unknown state, echoed back.
    expected["ListTransactions"] = {ErrorCode.none}
    assert refusals == expected
    assert not ErrorCode.invalid_request.retriable
    _no_crash(broker, since)


# -- 3. nothing echoed that the answer's version cannot hold ------------------------------
def test_a_name_too_long_for_a_non_flexible_answer_gets_kafkas_error(broker):
    """DescribeConfigs v1 (int16 strings) of a topic named with 32,760 characters: its
    "does not exist" message would not fit; the topic name is invalid (over 249
    characters), INVALID_TOPIC_EXCEPTION, as Kafka answers, and the connection stays."""
    name = "t" * 32_760
    since = len(broker.log_text())
    with RawConnection(broker.host, broker.port) as c:
        answer = c.request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
            resource_type=2, resource_name=name, configuration_keys=None),),
            include_synonyms=False))
        result = answer.results[0]
        assert result.error_code == ErrorCode.invalid_topic_exception
        assert result.resource_name == name
        assert len(result.error_message) < 1_000
        assert c.request(ApiVersionsRequest(client_software_name="t",
                                            client_software_version="1")).error_code == 0
    _no_crash(broker, since)


# -- 4. memory of half-sent frames ---------------------------------------------------------
def _rss_kib(b: CoterieBroker) -> int:
    assert b.proc is not None
    with open(f"/proc/{b.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _half_frames(b: CoterieBroker, count: int, declared: int, sent: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.create_connection((b.host, b.port))
        s.setblocking(False)
        data = declared.to_bytes(4, "big") + b"\x00\x12\x00\x03" + b"\x01" * (sent - 4)
        with contextlib.suppress(BlockingIOError):
            s.send(data)
        socks.append(s)
    return socks


@pytest.fixture
def small_pool(tmp_path: Path) -> Iterator[CoterieBroker]:
    b = CoterieBroker(tmp_path / "data", config={"queued.max.request.bytes": str(4 << 20),
                                                 "max.connections.per.ip": "1000"})
    b.start()
    yield b
    b.stop()


def test_half_sent_frames_hold_no_more_than_the_pool_and_give_it_back(small_pool):
    """100 connections each send 600 KB of a 1 MB frame and stop: before, the broker held
    all 60 MB (and kept it after they closed); now only the frames the 4 MiB pool took."""
    b = small_pool
    before = _rss_kib(b)
    socks = _half_frames(b, 100, 1 << 20, 600_000)
    time.sleep(1.5)
    holding = _rss_kib(b)
    for s in socks:
        s.close()
    time.sleep(1.5)
    after = _rss_kib(b)
    assert holding - before < 20_000, f"RSS {before} -> {holding} KiB while holding"
    assert after - before < 8_000, f"RSS {before} -> {after} KiB after they closed"
    with RawConnection(b.host, b.port) as c:
        assert c.request(ApiVersionsRequest(client_software_name="t",
                                            client_software_version="1")).error_code == 0


def test_a_frame_waiting_for_memory_is_served_once_it_is_given_back(small_pool):
    """One connection holds more than the pool with a half-sent frame; a second sends a
    whole large request and waits, unread; small requests of a third go on meanwhile; when
    the first closes, the second is answered."""
    b = small_pool
    holder = _half_frames(b, 1, 5 << 20, 100_000)[0]
    time.sleep(0.5)
    big = ApiVersionsRequest(client_software_name="n" * 1_200_000,
                             client_software_version="1")
    waiting = RawConnection(b.host, b.port, timeout=1.0)
    waiting.sock.sendall(encode_request(1, big, client_id="waiting"))
    with pytest.raises(TimeoutError):
        waiting.recv_frame()
    with RawConnection(b.host, b.port) as small:
        assert small.request(ApiVersionsRequest(client_software_name="t",
                                                client_software_version="1")).error_code == 0
    holder.close()
    waiting.sock.settimeout(10)
    frame = waiting.recv_frame()
    assert frame[:4] == (1).to_bytes(4, "big")  # the answer to correlation id 1
    waiting.close()

