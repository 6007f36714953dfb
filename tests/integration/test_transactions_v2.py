"""Transactions version 2 (KIP-890 part 2) on the wire, request by request, as Kafka 4.x's
Java client drives it once ApiVersions finalizes `transaction.version` at 2:

* ApiVersions v3 reports the feature finalized at 2.
* Produce v12 of a transactional batch adds its partition to the transaction itself (no
  AddPartitionsToTxn), and TxnOffsetCommit v5 adds the group's offsets partition (no
  AddOffsetsToTxn); the same writes at v11 and v4 are still refused until added.
* EndTxn v5 answers with the producer id and the bumped epoch; the markers carry that epoch
  and fence the transaction's own late writes; the next transaction starts at sequence 0
  under the new epoch; a retried EndTxn gets the same answer.
"""

from __future__ import annotations

import datetime
import io
import time
import uuid
from typing import Any

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.produce.v11.request import PartitionProduceData as PartitionV11
from kio.schema.produce.v11.request import ProduceRequest as ProduceV11
from kio.schema.produce.v11.request import TopicProduceData as TopicV11
from kio.schema.produce.v12.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest as TxnCommitV4
from kio.schema.txn_offset_commit.v4.request import (
    TxnOffsetCommitRequestPartition as PartitionV4,
)
from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequestTopic as TopicV4
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

from tests.integration.test_data_plane_raw import create
from tests.integration.test_java_producer import _describe_transaction
from tests.integration.test_transactions import _read
from tests.kafka_raw import RawConnection

TRANSACTIONAL = 0x10


def _batch(pid: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    ts = datetime.datetime(2026, 11, 25, tzinfo=datetime.UTC)
    records = tuple(Record(attributes=0, timestamp=ts, offset=i, key=None, value=v, headers=())
                    for i, v in enumerate(values))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=pid, producer_epoch=epoch,
                                        base_sequence=sequence, records=records,
                                        attributes=TRANSACTIONAL))
    return buf.getvalue()


def _produce(conn: RawConnection, tid: str, topic: str, batch: bytes, v12: bool = True) -> Any:
    if v12:
        request = ProduceRequest(
            transactional_id=tid, acks=-1, timeout=datetime.timedelta(seconds=5),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=0, records=batch),)),))
    else:
        request = ProduceV11(
            transactional_id=tid, acks=-1, timeout=datetime.timedelta(seconds=5),
            topic_data=(TopicV11(name=topic, partition_data=(
                PartitionV11(index=0, records=batch),)),))
    return conn.request(request).responses[0].partition_responses[0]


def _init_producer_id(conn: RawConnection, tid: str) -> Any:
    """FindCoordinator for the transactional id, then InitProducerId, retried as clients
    do while the coordinator gets ready (Kafka creates __transaction_state on first use)."""
    retriable = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                 ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions}
    deadline = time.monotonic() + 30
    while True:
        conn.request(FindCoordinatorRequest(key_type=1, coordinator_keys=(tid,)))
        init = conn.request(InitProducerIdRequest(
            transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1, producer_epoch=-1))
        if init.error_code not in retriable or time.monotonic() > deadline:
            assert init.error_code == ErrorCode.none, init
            return init
        time.sleep(0.2)


RETRIABLE = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
             ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions,
             ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available}


def _retried(send: Any, code: Any) -> Any:
    """Send until the answer's code (`code(answer)`) is not one clients retry: Kafka writes
    markers asynchronously (CONCURRENT_TRANSACTIONS meanwhile) and creates its internal
    topics on first use; coterie answers at once."""
    deadline = time.monotonic() + 30
    while True:
        answer = send()
        if code(answer) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _end(conn: RawConnection, tid: str, pid: int, epoch: int, commit: bool) -> Any:
    return _retried(lambda: conn.request(EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)),
        lambda a: a.error_code)


def test_a_version_2_transaction_on_the_wire(coterie):
    topic = f"tv2-{uuid.uuid4().hex[:6]}"
    tid = f"tv2-tx-{uuid.uuid4().hex[:6]}"
    group = f"tv2-g-{uuid.uuid4().hex[:6]}"
    with RawConnection(coterie.host, coterie.port) as conn:
        versions = conn.request(ApiVersionsRequest(client_software_name="t",
                                                   client_software_version="1"))
        assert {(f.name, f.max_version_level) for f in versions.finalized_features} >= {
            ("transaction.version", 2)}
        assert create(conn, topic, 1).error_code == ErrorCode.none
        init = _init_producer_id(conn, tid)
        pid, epoch = init.producer_id, init.producer_epoch

        # Version 1 forms (Produce v11, TxnOffsetCommit v4) still need the explicit adds:
        # without them the write is TRANSACTION_ABORTABLE, as Kafka answers.
        # (Kafka may not have a leader for the new topic yet: retried, as clients do.)
        old = _retried(lambda: _produce(conn, tid, topic, _batch(pid, epoch, 0, [b"v1"]),
                                        v12=False), lambda a: a.error_code)
        assert old.error_code == ErrorCode.transaction_abortable
        conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
        old_commit = _retried(lambda: conn.request(TxnCommitV4(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=(TopicV4(name=topic, partitions=(PartitionV4(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                committed_metadata=""),)),))),
            lambda a: a.topics[0].partitions[0].error_code)
        assert old_commit.topics[0].partitions[0].error_code == (
            ErrorCode.transaction_abortable)

        # Version 2: the writes add their partitions themselves.
        first = _retried(lambda: _produce(conn, tid, topic, _batch(pid, epoch, 0, [b"a", b"b"])),
                         lambda a: a.error_code)
        assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
        commit = _retried(lambda: conn.request(TxnOffsetCommitRequest(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=(TxnOffsetCommitRequestTopic(name=topic, partitions=(
                TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                    committed_metadata=""),)),))),
            lambda a: a.topics[0].partitions[0].error_code)
        assert commit.topics[0].partitions[0].error_code == ErrorCode.none
        state = _describe_transaction(conn, tid)
        assert state.transaction_state == "Ongoing"
        assert {t.topic for t in state.topics} == {topic, "__consumer_offsets"}

        ended = _end(conn, tid, pid, epoch, commit=True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.none, pid, epoch + 1)
        again = _end(conn, tid, pid, epoch, commit=True)  # a retry: the same answer
        assert (again.error_code, again.producer_epoch) == (ErrorCode.none, epoch + 1)
        # The marker's epoch fences a late write of the finished transaction...
        late = _produce(conn, tid, topic, _batch(pid, epoch, 2, [b"late"]))
        assert late.error_code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch)
        # ...and the next transaction starts its sequence afresh under the new epoch.
        nxt = _retried(lambda: _produce(conn, tid, topic, _batch(pid, epoch + 1, 0, [b"c"])),
                       lambda a: a.error_code)
        assert (nxt.error_code, nxt.base_offset) == (ErrorCode.none, 3)  # after the marker
        aborted = _end(conn, tid, pid, epoch + 1, commit=False)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, epoch + 2)
        assert _describe_transaction(conn, tid).producer_epoch == epoch + 2
    assert _read(coterie, topic, 1, "read_committed", 2) == [b"a", b"b"]
    from confluent_kafka import Consumer, TopicPartition

    checker = Consumer({"bootstrap.servers": coterie.bootstrap, "group.id": group})
    try:
        assert checker.committed([TopicPartition(topic, 0)], 10)[0].offset == 7
    finally:
        checker.close()


def test_supported_features_cover_the_finalized_ones(coterie):
    """coterie also lists what it supports (0-2; Kafka 4.2.1 in KRaft mode lists only
    metadata.version there, a field clients do not read for transactions)."""
    with RawConnection(coterie.host, coterie.port) as conn:
        versions = conn.request(ApiVersionsRequest(client_software_name="t",
                                                   client_software_version="1"))
    supported = {f.name: (f.min_version, f.max_version) for f in versions.supported_features}
    assert supported["transaction.version"] == (0, 2)
    for f in versions.finalized_features:
        low, high = supported[f.name]
        assert low <= f.min_version_level <= f.max_version_level <= high
    assert versions.finalized_features_epoch >= 0
