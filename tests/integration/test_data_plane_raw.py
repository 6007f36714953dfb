"""Data-plane requests sent byte-exact with kio: errors, offsets, long polls, bad input."""

from __future__ import annotations

import datetime
import struct
import threading
import time

import pytest
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition as FetchPartitionV12
from kio.schema.fetch.v12.request import FetchRequest as FetchV12
from kio.schema.fetch.v12.request import FetchTopic as FetchTopicV12
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4
from kio.schema.metadata.v4.request import MetadataRequestTopic as MetadataTopicV4
from kio.schema.metadata.v13.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.fixtures.coterie_broker import both_storages
from tests.kafka_raw import RawConnection, make_batch

pytestmark = both_storages  # every scenario on local files and on PostgreSQL


def create(conn, name, partitions=1, replication=-1, configs=()):
    return conn.request(CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=partitions,
                               replication_factor=replication, assignments=(),
                               configs=configs),),
        timeout=datetime.timedelta(seconds=5), validate_only=False)).topics[0]


def produce(conn, topic, partition, records, acks=1):
    resp = conn.request(ProduceRequest(acks=acks, timeout=datetime.timedelta(seconds=5),
                                       topic_data=(TopicProduceData(name=topic, partition_data=(
                                           PartitionProduceData(index=partition,
                                                                records=records),)),)))
    return resp.responses[0].partition_responses[0]


def fetch(conn, topic_id, partition, offset, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20):
    resp = conn.request(FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
        max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes),)),),
        forgotten_topics_data=(), rack_id=""))
    return resp.responses[0].partitions[0]


def list_offset(conn, topic, partition, ts):
    resp = conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=ts),)),)))
    return resp.topics[0].partitions[0]


@pytest.fixture
def conn(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        yield c


def test_create_topic_then_metadata_has_stable_id(coterie, conn):
    created = create(conn, "orders", 6)
    assert created.error_code == ErrorCode.none
    md = conn.request(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None,
                                                                    name="orders"),),
                                      allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False))
    t = md.topics[0]
    assert t.topic_id == created.topic_id
    assert [p.partition_index for p in t.partitions] == list(range(6))
    # A leader epoch of 0 on files; a lease epoch (from 1) on PostgreSQL.
    assert all(p.leader_id == 1 and p.leader_epoch >= 0 for p in t.partitions)
    assert md.brokers[0].port == coterie.port
    coterie.restart_after_kill9()
    with RawConnection(coterie.host, coterie.port) as c2:
        md2 = c2.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
    assert {t.name: t.topic_id for t in md2.topics}["orders"] == created.topic_id
    assert md2.cluster_id == md.cluster_id


def test_metadata_auto_creates_with_num_partitions(coterie_factory):
    broker = coterie_factory(config={"num.partitions": "3"})
    with RawConnection(broker.host, broker.port) as c:
        md = c.request(MetadataV4(topics=(MetadataTopicV4(name="auto-made"),),
                                  allow_auto_topic_creation=True))
        # A single broker on files creates it at once; on PostgreSQL the first answer may
        # be LEADER_NOT_AVAILABLE while it is created and led, as on Kafka. Clients retry.
        deadline = time.monotonic() + 15
        while md.topics[0].error_code == ErrorCode.leader_not_available:
            assert time.monotonic() < deadline, "the auto-created topic led in time"
            time.sleep(0.1)
            md = c.request(MetadataV4(topics=(MetadataTopicV4(name="auto-made"),),
                                      allow_auto_topic_creation=True))
    assert md.topics[0].error_code == ErrorCode.none
    assert len(md.topics[0].partitions) == 3


def test_auto_create_off(coterie_factory):
    broker = coterie_factory(config={"auto.create.topics.enable": "false"})
    with RawConnection(broker.host, broker.port) as c:
        md = c.request(MetadataV4(topics=(MetadataTopicV4(name="nope"),),
                                  allow_auto_topic_creation=True))
        assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        r = produce(c, "nope", 0, make_batch([b"v"]))
        assert r.error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("name", ["bad/name", "a" * 250, ".", "..", "", "sp ace", "ü"])
def test_illegal_topic_names(conn, name):
    assert create(conn, name).error_code == ErrorCode.invalid_topic_exception


def test_metadata_with_illegal_name(conn):
    md = conn.request(MetadataV4(topics=(MetadataTopicV4(name="bad/name"),),
                                 allow_auto_topic_creation=True))
    assert md.topics[0].error_code == ErrorCode.invalid_topic_exception


def test_longest_legal_name_is_accepted(conn):
    assert create(conn, "a" * 249).error_code == ErrorCode.none


@pytest.mark.parametrize("count", [0, -2, -100])
def test_bad_partition_counts(conn, count):
    assert create(conn, "t-bad-count", count).error_code == ErrorCode.invalid_partitions


def test_replication_factor_above_one(conn):
    assert create(conn, "rf3", 1, replication=3).error_code == (
        ErrorCode.invalid_replication_factor)


def test_duplicate_create(conn):
    assert create(conn, "dup").error_code == ErrorCode.none
    assert create(conn, "dup").error_code == ErrorCode.topic_already_exists


def test_create_partitions_and_errors(conn):
    create(conn, "grow", 2)

    def grow(name, count):
        return conn.request(CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name=name, count=count, assignments=None),),
            timeout=datetime.timedelta(seconds=5), validate_only=False)).results[0]

    assert grow("grow", 2).error_code == ErrorCode.invalid_partitions
    assert grow("grow", 1).error_code == ErrorCode.invalid_partitions
    assert grow("missing", 4).error_code == ErrorCode.unknown_topic_or_partition
    assert grow("grow", 5).error_code == ErrorCode.none
    assert produce(conn, "grow", 4, make_batch([b"x"])).error_code == ErrorCode.none

    # A name given twice: answered once with INVALID_REQUEST and not grown (Kafka's rule);
    # the other topic of the request is grown.
    create(conn, "grow-too", 1)
    answer = conn.request(CreatePartitionsRequest(topics=(
        CreatePartitionsTopic(name="grow", count=7, assignments=None),
        CreatePartitionsTopic(name="grow-too", count=2, assignments=None),
        CreatePartitionsTopic(name="grow", count=8, assignments=None)),
        timeout=datetime.timedelta(seconds=5), validate_only=False))
    assert [(r.name, r.error_code, r.error_message) for r in answer.results] == [
        ("grow", ErrorCode.invalid_request, "Duplicate topic name."),
        ("grow-too", ErrorCode.none, None)]
    assert grow("grow", 5).error_code == ErrorCode.invalid_partitions  # still 5


def test_delete_topic(conn):
    created = create(conn, "doomed", 2)
    produce(conn, "doomed", 0, make_batch([b"x"]))
    resp = conn.request(DeleteTopicsRequest(
        topics=(DeleteTopicState(name="doomed", topic_id=created.topic_id),),
        timeout=datetime.timedelta(seconds=5)))
    assert resp.responses[0].error_code == ErrorCode.none
    assert produce(conn, "doomed", 0, make_batch([b"x"])).error_code == (
        ErrorCode.unknown_topic_or_partition)
    again = conn.request(DeleteTopicsRequest(
        topics=(DeleteTopicState(name="doomed", topic_id=created.topic_id),),
        timeout=datetime.timedelta(seconds=5)))
    assert again.responses[0].error_code == ErrorCode.unknown_topic_or_partition


def test_produce_assigns_offsets_and_fetch_returns_batches(conn):
    topic_id = create(conn, "plain", 1).topic_id
    r1 = produce(conn, "plain", 0, make_batch([b"a", b"b", b"c"]))
    r2 = produce(conn, "plain", 0, make_batch([b"d"]))
    assert (r1.error_code, r1.base_offset, r2.base_offset) == (ErrorCode.none, 0, 3)
    part = fetch(conn, topic_id, 0, 0)
    assert part.error_code == ErrorCode.none
    assert part.high_watermark == 4
    from kio.records.readers import read_batch
    first, size = read_batch(part.records, 0)
    second, _ = read_batch(part.records, size)
    assert [r.offset for r in first.records] == [0, 1, 2]
    assert [r.value for r in second.records] == [b"d"]
    # A fetch starting mid-batch returns the whole batch holding that offset.
    mid = fetch(conn, topic_id, 0, 1)
    batch, _ = read_batch(mid.records, 0)
    assert batch.base_offset == 0


def test_produce_to_missing_partition(conn):
    create(conn, "six", 6)
    assert produce(conn, "six", 6, make_batch([b"x"])).error_code == (
        ErrorCode.unknown_topic_or_partition)
    assert list_offset(conn, "six", 9, -1).error_code == ErrorCode.unknown_topic_or_partition


def test_fetch_missing_partition_and_unknown_topic_id(conn):
    topic_id = create(conn, "onep", 1).topic_id
    assert fetch(conn, topic_id, 3, 0).error_code == ErrorCode.unknown_topic_or_partition
    import uuid
    assert fetch(conn, uuid.uuid4(), 0, 0).error_code == ErrorCode.unknown_topic_id


def test_corrupt_crc_and_old_magic_rejected(conn):
    create(conn, "crc", 1)
    good = bytearray(make_batch([b"hello"]))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    assert produce(conn, "crc", 0, bytes(bad_crc)).error_code == ErrorCode.corrupt_message
    magic1 = bytearray(good)
    magic1[16] = 1
    assert produce(conn, "crc", 0, bytes(magic1)).error_code == ErrorCode.corrupt_message
    truncated = bytes(good[:-3])
    assert produce(conn, "crc", 0, truncated).error_code == ErrorCode.corrupt_message
    # Nothing of the rejected batches is visible; a good one still lands at offset 0.
    assert produce(conn, "crc", 0, bytes(good)).base_offset == 0


def test_invalid_acks(conn):
    create(conn, "acks", 1)
    assert produce(conn, "acks", 0, make_batch([b"x"]), acks=2).error_code == (
        ErrorCode.invalid_required_acks)


def test_acks_zero_gets_no_response(conn):
    create(conn, "fire", 1)
    conn.send(ProduceRequest(acks=0, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name="fire", partition_data=(
            PartitionProduceData(index=0, records=make_batch([b"x"])),)),)))
    # The next answer on the connection is the list-offsets one: produce sent nothing back.
    # (On PostgreSQL the record counts once the database has it: asked again until then.)
    deadline = time.monotonic() + 10
    while (latest := list_offset(conn, "fire", 0, -1).offset) == 0 and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert latest == 1


def test_offset_out_of_range(conn):
    topic_id = create(conn, "oor", 1).topic_id
    produce(conn, "oor", 0, make_batch([b"x"]))
    part = fetch(conn, topic_id, 0, 5)
    assert part.error_code == ErrorCode.offset_out_of_range
    assert part.high_watermark == 1


def test_list_offsets_earliest_latest_timestamp_max(conn):
    create(conn, "times", 1)
    produce(conn, "times", 0, make_batch([b"a", b"b"], ts_ms=1000))
    produce(conn, "times", 0, make_batch([b"c"], ts_ms=5000))
    produce(conn, "times", 0, make_batch([b"d"], ts_ms=3000))
    assert list_offset(conn, "times", 0, -2).offset == 0
    assert list_offset(conn, "times", 0, -1).offset == 4
    by_ts = list_offset(conn, "times", 0, 4000)
    assert (by_ts.offset, by_ts.timestamp) == (2, 5000)
    assert list_offset(conn, "times", 0, 9000).offset == -1
    mx = list_offset(conn, "times", 0, -3)
    assert (mx.offset, mx.timestamp) == (2, 5000)


def test_offset_for_leader_epoch(conn):
    create(conn, "epochs", 1)
    produce(conn, "epochs", 0, make_batch([b"a", b"b"]))
    md = conn.request(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None,
                                                                    name="epochs"),),
                                      allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False))
    epoch = md.topics[0].partitions[0].leader_epoch  # 0 on files, the lease's on PostgreSQL
    resp = conn.request(OffsetForLeaderEpochRequest(replica_id=-2, topics=(
        OffsetForLeaderTopic(topic="epochs", partitions=(
            OffsetForLeaderPartition(partition=0, current_leader_epoch=epoch,
                                     leader_epoch=epoch),
        )),)))
    p = resp.topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (ErrorCode.none, epoch, 2)
    stale = conn.request(OffsetForLeaderEpochRequest(replica_id=-2, topics=(
        OffsetForLeaderTopic(topic="epochs", partitions=(
            OffsetForLeaderPartition(partition=0, current_leader_epoch=epoch + 1,
                                     leader_epoch=epoch),
        )),))).topics[0].partitions[0]
    assert stale.error_code == ErrorCode.unknown_leader_epoch  # the client is ahead


def test_fetch_long_poll_waits_and_is_woken_by_produce(coterie, conn):
    topic_id = create(conn, "poll", 1).topic_id
    start = time.monotonic()
    part = fetch(conn, topic_id, 0, 0, max_wait_ms=400, min_bytes=1)
    waited = time.monotonic() - start
    assert part.records in (b"", None)
    assert waited >= 0.35

    def later():
        time.sleep(0.3)
        with RawConnection(coterie.host, coterie.port) as other:
            produce(other, "poll", 0, make_batch([b"wake"]))

    t = threading.Thread(target=later)
    t.start()
    start = time.monotonic()
    part = fetch(conn, topic_id, 0, 0, max_wait_ms=10_000, min_bytes=1)
    woke = time.monotonic() - start
    t.join()
    assert part.records
    assert woke < 5.0


def test_fetch_by_name_below_v13(conn):
    create(conn, "legacy", 1)
    produce(conn, "legacy", 0, make_batch([b"x"]))
    resp = conn.request(FetchV12(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopicV12(topic="legacy", partitions=(FetchPartitionV12(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id=""))
    assert resp.responses[0].topic == "legacy"
    assert resp.responses[0].partitions[0].records


def test_invalid_topic_config(conn):
    from kio.schema.create_topics.v7.request import CreatableTopicConfig
    r = create(conn, "cfg", 1, configs=(CreatableTopicConfig(name="no.such.config",
                                                             value="1"),))
    assert r.error_code == ErrorCode.invalid_config


def test_frame_size_prefix_garbage_is_contained(coterie, conn):
    # A header whose client id length runs past the frame: undecodable, connection closed.
    with RawConnection(coterie.host, coterie.port) as c:
        body = struct.pack(">hhih", 18, 0, 1, 200)
        c.send_bytes(struct.pack(">i", len(body)) + body)
        assert c.is_closed_by_peer()
    assert list_offset(conn, "__none__", 0, -1).error_code == (
        ErrorCode.unknown_topic_or_partition)
