"""Real Kafka clients driven the same way, for round-trip tests against a broker.

Three client libraries take part: confluent-kafka (librdkafka), kafka-python and aiokafka.
Each producer helper sends a list of `Record`s (explicit partition, key, value, headers and
CreateTime timestamp) and returns them with the offsets the broker acknowledged. Each consumer
helper assigns partitions manually (no group, no commits), starts from the beginning and reads
until it has the expected number of records or its deadline passes, and also reports the end
offsets the client sees. Every wait is bounded, so a misbehaving broker fails a test instead
of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import random
import struct
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import confluent_kafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from tests.kafka_raw import RawConnection

PRODUCERS = ("confluent", "kafka_python", "aiokafka")
CONSUMERS = ("confluent", "kafka_python", "aiokafka")
CODECS = ("gzip", "snappy", "lz4", "zstd")
# Codec ids in the low three bits of a v2 batch's attributes.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

CREATE_TIME = 0
LOG_APPEND_TIME = 1

CONSUME_TIMEOUT = 60.0
PRODUCE_TIMEOUT = 60.0

Headers = tuple[tuple[str, bytes], ...]
TopicSpec = Mapping[str, int]  # topic name -> partition count


@dataclass(frozen=True, slots=True)
class Record:
    """One record as produced or consumed; `offset` is -1 until the broker assigned one."""

    topic: str
    partition: int
    key: bytes
    value: bytes
    headers: Headers
    timestamp: int
    timestamp_type: int = CREATE_TIME
    offset: int = -1


@dataclass(slots=True)
class Consumed:
    """What one consumer read, plus the end offset it saw for every assigned partition."""

    records: list[Record]
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)


# -- data ------------------------------------------------------------------------------------


def make_records(topic: str, count: int, partitions: int, seed: int,
                 timestamps: Sequence[int] | None = None,
                 compressible: bool = False) -> list[Record]:
    """Deterministic records: distinct keys and values, 1-2 headers, explicit timestamps.

    Values are random binary of varying size (or, with `compressible`, repetitive text, so
    that a producer which skips compression when it does not pay off still compresses).
    Partitions are chosen at random but explicitly, so every client puts a record in the
    same place. Timestamps default to millisecond values within the last day, in no
    particular order, so batches contain negative timestamp deltas.
    """
    rng = random.Random(seed)
    now_ms = time.time_ns() // 1_000_000
    if timestamps is None:
        timestamps = [now_ms - 86_400_000 + rng.randrange(0, 82_800_000) for _ in range(count)]
    assert len(timestamps) == count
    out = []
    for i in range(count):
        headers: list[tuple[str, bytes]] = [("seq", str(i).encode())]
        if i % 2:
            headers.append(("trace-ü", rng.randbytes(rng.randrange(1, 24))))
        out.append(Record(
            topic=topic,
            partition=rng.randrange(partitions),
            key=f"{topic}/key-{i:06d}".encode(),
            value=f"v{i}:".encode() + (
                (f"record {i} of {topic} " * rng.randrange(1, 20)).encode() if compressible
                else rng.randbytes(rng.randrange(1, 300))),
            headers=tuple(headers),
            timestamp=timestamps[i],
        ))
    return out


def assert_same_records(expected: Sequence[Record], got: Sequence[Record], label: str) -> None:
    """Compare by (topic, partition, offset) and report the first few differences only.

    A plain `==` on 30,000 records would make pytest print an unreadable diff.
    """
    exp = {(r.topic, r.partition, r.offset): r for r in expected}
    act: dict[tuple[str, int, int], Record] = {}
    dupes = []
    for r in got:
        k = (r.topic, r.partition, r.offset)
        if k in act:
            dupes.append(k)
        act[k] = r
    problems = []
    if dupes:
        problems.append(f"{len(dupes)} offsets delivered more than once, e.g. {dupes[:3]}")
    missing = sorted(exp.keys() - act.keys())
    extra = sorted(act.keys() - exp.keys())
    if missing:
        problems.append(f"{len(missing)} records missing, e.g. {missing[:3]}")
    if extra:
        problems.append(f"{len(extra)} unexpected records, e.g. {extra[:3]}")
    differing = [k for k in sorted(exp.keys() & act.keys()) if exp[k] != act[k]]
    for k in differing[:3]:
        problems.append(f"at {k}:\n  produced {exp[k]!r}\n  consumed {act[k]!r}")
    if len(differing) > 3:
        problems.append(f"... {len(differing)} differing records in all")
    assert not problems, f"{label}: " + "\n".join(problems)


def expected_end_offsets(records: Sequence[Record], topics: TopicSpec) -> dict[tuple[str, int],
                                                                                 int]:
    counts = Counter((r.topic, r.partition) for r in records)
    return {(t, p): counts.get((t, p), 0) for t, n in topics.items() for p in range(n)}


# -- admin -----------------------------------------------------------------------------------


def create_topics(bootstrap: str, topics: TopicSpec,
                  config: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
    """Create topics with the confluent-kafka AdminClient and wait for every result."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=1, config=dict(config or {}))
         for name, n in topics.items()],
        operation_timeout=timeout, request_timeout=timeout)
    for fut in futures.values():
        fut.result(timeout=timeout)


# -- producers -------------------------------------------------------------------------------


def produce(client: str, bootstrap: str, records: Sequence[Record],
            config: Mapping[str, Any] | None = None,
            timeout: float = PRODUCE_TIMEOUT) -> list[Record]:
    """Send `records` with one client; return them with the broker-acknowledged offsets."""
    fn = {"confluent": _produce_confluent, "kafka_python": _produce_kafka_python,
          "aiokafka": _produce_aiokafka}[client]
    acked = fn(bootstrap, records, dict(config or {}), timeout)
    assert len(acked) == len(records)
    for sent, got in zip(records, acked, strict=True):
        assert got.partition == sent.partition, f"{client} reported a different partition"
        assert got.offset >= 0, f"{client} acknowledged {sent.key!r} without an offset"
    return acked


def _produce_confluent(bootstrap: str, records: Sequence[Record], config: dict[str, Any],
                       timeout: float) -> list[Record]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": False, **config})
    offsets: dict[int, int] = {}
    errors: list[str] = []

    def delivered(index: int) -> Callable[[Any, Any], None]:
        def callback(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {index}: {err}")
            else:
                offsets[index] = msg.offset()
        return callback

    deadline = time.monotonic() + timeout
    for i, r in enumerate(records):
        while True:
            try:
                producer.produce(r.topic, value=r.value, key=r.key, partition=r.partition,
                                 timestamp=r.timestamp, headers=list(r.headers),
                                 on_delivery=delivered(i))
                break
            except BufferError:  # local queue full: let deliveries drain
                assert time.monotonic() < deadline, "confluent producer queue stayed full"
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(max(deadline - time.monotonic(), 1.0))
    assert left == 0, f"confluent producer: {left} records undelivered after {timeout}s"
    assert not errors, f"confluent producer errors: {errors[:5]}"
    return [replace(r, offset=offsets[i]) for i, r in enumerate(records)]


def _produce_kafka_python(bootstrap: str, records: Sequence[Record], config: dict[str, Any],
                          timeout: float) -> list[Record]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                             enable_idempotence=False, **config)
    try:
        futures = [producer.send(r.topic, value=r.value, key=r.key, partition=r.partition,
                                 timestamp_ms=r.timestamp, headers=list(r.headers))
                   for r in records]
        producer.flush(timeout=timeout)
        metas = [f.get(timeout=1) for f in futures]
    finally:
        producer.close(timeout=10)
    return [replace(r, offset=m.offset) for r, m in zip(records, metas, strict=True)]


def _produce_aiokafka(bootstrap: str, records: Sequence[Record], config: dict[str, Any],
                      timeout: float) -> list[Record]:
    async def run() -> list[Any]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                    enable_idempotence=False, **config)
        await producer.start()
        try:
            futures = [await producer.send(r.topic, value=r.value, key=r.key,
                                           partition=r.partition, timestamp_ms=r.timestamp,
                                           headers=list(r.headers))
                       for r in records]
            return list(await asyncio.gather(*futures))
        finally:
            await producer.stop()

    metas = asyncio.run(asyncio.wait_for(run(), timeout))
    return [replace(r, offset=m.offset) for r, m in zip(records, metas, strict=True)]


# -- consumers -------------------------------------------------------------------------------


def consume(client: str, bootstrap: str, topics: TopicSpec, count: int,
            timeout: float = CONSUME_TIMEOUT) -> Consumed:
    """Read every partition of `topics` from offset 0 with manual assignment.

    Stops once `count` records arrived; fails if that takes longer than `timeout`.
    """
    fn = {"confluent": _consume_confluent, "kafka_python": _consume_kafka_python,
          "aiokafka": _consume_aiokafka}[client]
    return fn(bootstrap, topics, count, timeout)


def _partitions(topics: TopicSpec) -> list[tuple[str, int]]:
    return [(t, p) for t, n in topics.items() for p in range(n)]


_CK_TS_TYPES = {confluent_kafka.TIMESTAMP_CREATE_TIME: CREATE_TIME,
                confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}


def _consume_confluent(bootstrap: str, topics: TopicSpec, count: int,
                       timeout: float) -> Consumed:
    # group.id is mandatory for a librdkafka consumer, but with assign() and no commits it
    # is never used on the broker.
    consumer = Consumer({"bootstrap.servers": bootstrap,
                         "group.id": f"roundtrip-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "earliest"})
    out: list[Record] = []
    try:
        consumer.assign([CkTopicPartition(t, p, confluent_kafka.OFFSET_BEGINNING)
                         for t, p in _partitions(topics)])
        deadline = time.monotonic() + timeout
        while len(out) < count:
            assert time.monotonic() < deadline, (
                f"confluent consumer: {len(out)}/{count} records after {timeout}s")
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                assert m.error() is None, f"confluent consumer error: {m.error()}"
                ts_type, ts = m.timestamp()
                out.append(Record(topic=m.topic(), partition=m.partition(), key=m.key(),
                                  value=m.value(), headers=tuple(m.headers() or ()),
                                  timestamp=ts, timestamp_type=_CK_TS_TYPES.get(ts_type, -1),
                                  offset=m.offset()))
        # The high watermarks the fetch responses carried. (A fresh ListOffsets query per
        # partition would queue behind the consumer's parked fetch on the same connection,
        # costing up to fetch.wait.max.ms each.)
        ends = {}
        for t, p in _partitions(topics):
            _, high = consumer.get_watermark_offsets(CkTopicPartition(t, p), cached=True)
            ends[(t, p)] = high
    finally:
        consumer.close()
    return Consumed(out, ends)


def _consume_kafka_python(bootstrap: str, topics: TopicSpec, count: int,
                          timeout: float) -> Consumed:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    out: list[Record] = []
    try:
        tps = [KpTopicPartition(t, p) for t, p in _partitions(topics)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while len(out) < count:
            assert time.monotonic() < deadline, (
                f"kafka-python consumer: {len(out)}/{count} records after {timeout}s")
            for batch in consumer.poll(timeout_ms=500, max_records=5000).values():
                out.extend(Record(topic=m.topic, partition=m.partition, key=m.key,
                                  value=m.value, headers=tuple(m.headers or ()),
                                  timestamp=m.timestamp, timestamp_type=m.timestamp_type,
                                  offset=m.offset)
                           for m in batch)
        ends = {(tp.topic, tp.partition): off
                for tp, off in consumer.end_offsets(tps, timeout_ms=10_000).items()}
    finally:
        consumer.close()
    return Consumed(out, ends)


def _consume_aiokafka(bootstrap: str, topics: TopicSpec, count: int,
                      timeout: float) -> Consumed:
    async def run() -> Consumed:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        out: list[Record] = []
        try:
            tps = [AioTopicPartition(t, p) for t, p in _partitions(topics)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while len(out) < count:
                got = await consumer.getmany(timeout_ms=500, max_records=5000)
                for batch in got.values():
                    out.extend(Record(topic=m.topic, partition=m.partition, key=m.key,
                                      value=m.value, headers=tuple(m.headers or ()),
                                      timestamp=m.timestamp, timestamp_type=m.timestamp_type,
                                      offset=m.offset)
                               for m in batch)
            ends = {(tp.topic, tp.partition): off
                    for tp, off in (await consumer.end_offsets(tps)).items()}
        finally:
            await consumer.stop()
        return Consumed(out, ends)

    try:
        return asyncio.run(asyncio.wait_for(run(), timeout))
    except TimeoutError as e:
        raise AssertionError(f"aiokafka consumer: not all {count} records after {timeout}s"
                             ) from e


# -- raw look at the stored batches ----------------------------------------------------------


_ATTRIBUTES = struct.Struct(">h")


def stored_codecs(host: str, port: int, topic: str, partitions: int) -> Counter[int]:
    """Codec ids of the batches the broker serves for `topic`, counted over all partitions.

    Reads with a raw Fetch and looks only at batch headers: this shows what the broker
    stored, independent of any client's decompression.
    """
    codecs: Counter[int] = Counter()
    with RawConnection(host, port) as conn:
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
                assert part.error_code == ErrorCode.none, (
                    f"raw fetch {topic}-{p}: {part.error_code!r}")
                data = part.records or b""
                batches = list(_batch_headers(data))
                if not batches:
                    break
                for attributes, next_offset in batches:
                    codecs[attributes & 0x07] += 1
                    offset = next_offset
                if offset >= part.high_watermark:
                    break
    return codecs


def _batch_headers(data: bytes) -> Iterator[tuple[int, int]]:
    """(attributes, next offset) of each complete v2 batch in a fetch response's records."""
    pos = 0
    while pos + 61 <= len(data):
        base_offset, batch_length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + batch_length > len(data):
            return  # a partial batch at the end of the response
        (attributes,) = _ATTRIBUTES.unpack_from(data, pos + 21)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        yield attributes, base_offset + last_delta + 1
        pos += 12 + batch_length


@contextlib.contextmanager
def broker_log_on_failure(log_text: Callable[[], str], tail: int = 4000) -> Iterator[None]:
    """Attach the end of the broker's log to any failure raised inside the block."""
    try:
        yield
    except BaseException as e:
        e.add_note("--- broker log tail ---\n" + log_text()[-tail:])
        raise
