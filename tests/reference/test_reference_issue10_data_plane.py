"""Issue 10's data-plane answers, from coterie and from Apache Kafka, compared with `==`.

The same raw requests (kio, over TCP) go to both brokers: ListOffsets by timestamp and
MAX_TIMESTAMP over batches whose records carry non-monotonic timestamps, in every codec and
under LogAppendTime; Fetch answers for errors (offset out of range, unknown and zero topic
ids, a missing partition); and Fetch size limits (max_bytes against partition_max_bytes,
the first-batch exception). Two differences are deliberate and normalised away:

- Kafka fills a size limit with the bytes of a partial last batch, which clients discard;
  coterie stops at the last whole batch. Records are compared as their whole batches.
- On OFFSET_OUT_OF_RANGE Kafka reports high watermark and log start -1; coterie reports
  the real ones. Watermarks are compared only for partitions without an error.

Run with `pytest -m reference tests/reference/test_reference_issue10_data_plane.py`.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.kafka_raw import RawConnection

pytestmark = [pytest.mark.reference, pytest.mark.timeout(600)]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _batch(records: list[tuple[int, bytes]], codec: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i, (ts, value) in enumerate(records):
        builder.append(i, timestamp=ts, key=b"k", value=value, headers=[])
    return bytes(builder.build())


def _create(conn: RawConnection, name: str, partitions: int = 1,
            configs: dict[str, str] | None = None) -> uuid.UUID:
    conn.request(CreateTopicsRequest(topics=(CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=(),
        configs=tuple(CreatableTopicConfig(name=k, value=v)
                      for k, v in (configs or {}).items())),),
        timeout=datetime.timedelta(seconds=10), validate_only=False))
    deadline = time.monotonic() + 30
    while True:  # Kafka creates topics asynchronously: wait for leaders
        md = conn.request(MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=name),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        t = md.topics[0]
        if t.error_code == 0 and len(t.partitions) == partitions and all(
                p.leader_id >= 0 for p in t.partitions):
            return t.topic_id
        assert time.monotonic() < deadline, f"topic {name} never got leaders: {t}"
        time.sleep(0.1)


def _produce(conn: RawConnection, name: str, partition: int, data: bytes) -> None:
    deadline = time.monotonic() + 30
    while True:
        r = conn.request(ProduceRequest(
            acks=-1, timeout=datetime.timedelta(seconds=10), transactional_id=None,
            topic_data=(TopicProduceData(name=name, partition_data=(
                PartitionProduceData(index=partition, records=data),)),)))
        p = r.responses[0].partition_responses[0]
        if p.error_code == 0:
            return
        assert time.monotonic() < deadline, f"produce to {name}-{partition}: {p}"
        time.sleep(0.1)


# Kafka may list a new topic's leader in Metadata before that broker serves the partition;
# until then it answers NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION): retried.
_NOT_YET = {3, 5, 6}


def _list(conn: RawConnection, name: str, timestamp: int) -> tuple:
    deadline = time.monotonic() + 30
    while True:
        r = conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
            ListOffsetsTopic(name=name, partitions=(ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),)))
        p = r.topics[0].partitions[0]
        if int(p.error_code) not in _NOT_YET or time.monotonic() > deadline:
            return int(p.error_code), p.offset, p.timestamp, p.leader_epoch
        time.sleep(0.1)


def _whole_batches(data: bytes | None) -> int | None:
    """Bytes of the complete batches at the start of `data` (None stays None)."""
    if data is None:
        return None
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if pos + 12 + length > len(data):
            break
        pos += 12 + length
    return pos


def _fetch(conn: RawConnection, topics: list[tuple[Any, list[tuple[int, int, int]]]],
           max_bytes: int = 1 << 20) -> list:
    r = conn.request(FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=tuple(FetchTopic(topic_id=tid, partitions=tuple(FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=pmb) for p, offset, pmb in parts))
            for tid, parts in topics),
        forgotten_topics_data=(), rack_id=""))
    assert r.error_code == 0
    return [[(p.partition_index, int(p.error_code), _whole_batches(p.records),
              (p.high_watermark, p.log_start_offset) if p.error_code == 0 else None)
             for p in t.partitions] for t in r.responses]


def observe(host: str, port: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    out: dict[str, Any] = {}
    with RawConnection(host, port, timeout=30) as conn:
        name = f"ts-{tag}"
        tid = _create(conn, name)
        _produce(conn, name, 0, _batch([(1000, b"a"), (3000, b"b"), (2000, b"c"), (3000, b"d")]))
        _produce(conn, name, 0, _batch([(500, b"e"), (2500, b"f"), (2600, b"g")], 1))
        _produce(conn, name, 0, _batch([(7000, b"h"), (6000, b"i"), (7000, b"j")], 2))
        _produce(conn, name, 0, _batch([(4000, b"k"), (7000, b"l")], 3))
        _produce(conn, name, 0, _batch([(100, b"m"), (4500, b"n")], 4))
        for t in (0, 1000, 1001, 2000, 2001, 2550, 3001, 4200, 4501, 6500, 7000, 7001, -1, -2,
                  -3):
            out[f"list {t}"] = _list(conn, name, t)
        empty = f"empty-{tag}"
        _create(conn, empty)
        out["empty -3"] = _list(conn, empty, -3)
        out["empty 5"] = _list(conn, empty, 5)
        lat = f"lat-{tag}"
        _create(conn, lat, configs={"message.timestamp.type": "LogAppendTime"})
        _produce(conn, lat, 0, _batch([(1, b"a"), (2, b"b"), (3, b"c")]))
        time.sleep(0.01)  # a later append time for the second batch
        _produce(conn, lat, 0, _batch([(1, b"a"), (9, b"b")], 2))
        maximum = _list(conn, lat, -3)
        out["lat -3"] = (maximum[0], maximum[1], maximum[3])  # its time is the broker's clock
        out["lat 0"] = _list(conn, lat, 0)[:2]

        out["fetch out of range"] = _fetch(conn, [(tid, [(0, 99, 1 << 20)])])
        out["fetch missing partition"] = _fetch(conn, [(tid, [(5, 0, 1 << 20)])])
        out["fetch unknown id"] = _fetch(conn, [(uuid.uuid4(), [(0, 0, 1 << 20), (1, 0, 9)])])
        out["fetch zero id"] = _fetch(conn, [(uuid.UUID(int=0), [(0, 0, 1 << 20)])])

        big = f"big-{tag}"
        tid = _create(conn, big, 2)
        for p in (0, 1):
            for i in range(3):
                _produce(conn, big, p, _batch([(1000, bytes([65 + i]) * 1000)]))
        size = len(_batch([(1000, b"A" * 1000)]))
        every = 1 << 20
        for label, max_bytes, pmb in [
            ("max < batch", 100, every), ("pmb < batch", every, 100),
            ("max 1.5", size * 3 // 2, every), ("max 2", 2 * size, every),
            ("max 2.5", size * 5 // 2, every), ("pmb 0", every, 0), ("max 0", 0, every),
            ("pmb 1.5", every, size * 3 // 2), ("max 4 pmb 1.5", 4 * size, size * 3 // 2),
        ]:
            out[f"limit {label}"] = _fetch(conn, [(tid, [(0, 0, pmb), (1, 0, pmb)])], max_bytes)
        out["limit first at end"] = _fetch(conn, [(tid, [(0, 3, every), (1, 0, 100)])], 100)
        out["limit first out of range"] = _fetch(conn, [(tid, [(0, 99, every), (1, 0, 100)])],
                                                 100)
    return out


def test_brokers_agree(request: pytest.FixtureRequest) -> None:
    answers = {}
    for kind in ("coterie", "reference_kafka"):
        broker = request.getfixturevalue(kind)
        answers[kind] = observe(broker.host, broker.port)
    coterie, kafka = answers["coterie"], answers["reference_kafka"]
    assert coterie.keys() == kafka.keys()
    differ = {k: (coterie[k], kafka[k]) for k in kafka if coterie[k] != kafka[k]}
    assert not differ, f"coterie vs Kafka: {differ}"
