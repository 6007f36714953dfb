"""Records survive a trip through coterie intact, whichever real client writes or reads them.

Producers: confluent-kafka (librdkafka), kafka-python and aiokafka. Consumers: the same
three, reading with manual assignment from offset 0 (no group, no commits). Every record has
an explicit partition, a distinct key and value, one or two headers and an explicit
CreateTime timestamp, and must come back byte-identical at the offset the producer was
given, also after the broker was killed with SIGKILL and restarted on the same data dir.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fixtures.coterie_broker import CoterieBroker
from tests.integration.clients import (
    CODEC_IDS,
    CODECS,
    CONSUMERS,
    CREATE_TIME,
    LOG_APPEND_TIME,
    PRODUCERS,
    Record,
    TopicSpec,
    assert_same_records,
    broker_log_on_failure,
    consume,
    create_topics,
    expected_end_offsets,
    make_records,
    produce,
    stored_codecs,
)

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
MATRIX_RECORDS = 10_000
COMPRESSED_RECORDS = 500


def _start_broker(tmp_path_factory: pytest.TempPathFactory, name: str) -> CoterieBroker:
    broker = CoterieBroker(Path(tmp_path_factory.mktemp(name)) / "data")
    broker.start()
    return broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    """One broker shared by the smaller tests of this module (each uses its own topics)."""
    b = _start_broker(tmp_path_factory, "roundtrip")
    yield b
    b.stop()


# -- the 3 x 3 matrix, before and after kill -9 -------------------------------------------


class Matrix:
    """Three topics, each filled with 10,000 records by one of the three producers."""

    def __init__(self, broker: CoterieBroker) -> None:
        self.broker = broker
        self.topics: TopicSpec = {f"matrix-{p}": PARTITIONS for p in PRODUCERS}
        self.acked: dict[str, list[Record]] = {}  # producer -> records with offsets

    @property
    def all_records(self) -> list[Record]:
        return [r for recs in self.acked.values() for r in recs]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    b = _start_broker(tmp_path_factory, "matrix")
    m = Matrix(b)
    with broker_log_on_failure(b.log_text):
        create_topics(b.bootstrap, m.topics)
        for seed, producer in enumerate(PRODUCERS):
            records = make_records(f"matrix-{producer}", MATRIX_RECORDS, PARTITIONS, seed)
            m.acked[producer] = produce(producer, b.bootstrap, records)
    yield m
    b.stop()


@pytest.mark.parametrize("producer", PRODUCERS)
def test_producer_gets_contiguous_offsets_per_partition(matrix: Matrix, producer: str) -> None:
    """Each partition's acknowledged offsets are 0..n-1 in the order the records were sent."""
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in matrix.acked[producer]:
        by_partition[r.partition].append(r.offset)
    assert sorted(by_partition) == list(range(PARTITIONS))
    for p, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: {offsets[:10]}..."


def _read_and_compare(matrix: Matrix, consumer: str, when: str) -> None:
    expected = matrix.all_records
    got = consume(consumer, matrix.broker.bootstrap, matrix.topics, len(expected))
    for producer, acked in matrix.acked.items():
        topic = f"matrix-{producer}"
        assert_same_records(acked, [r for r in got.records if r.topic == topic],
                            f"{producer} -> {consumer} ({when})")
    assert len(got.records) == len(expected), f"{consumer} ({when}) read extra records"
    assert got.end_offsets == expected_end_offsets(expected, matrix.topics), (
        f"{consumer} ({when}) sees wrong end offsets")


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_every_consumer_reads_every_producer_before_and_after_kill9(
        matrix: Matrix, consumer: str) -> None:
    """3 producers x this consumer: keys, values, headers, timestamps, partitions and offsets
    are identical to what was produced, before a kill -9 and after the restart.

    The broker is killed once per consumer, so later consumers' first read already comes
    from a log recovered after one or more crashes.
    """
    b = matrix.broker
    with broker_log_on_failure(b.log_text):
        _read_and_compare(matrix, consumer, "before kill -9")
        b.restart_after_kill9()
        _read_and_compare(matrix, consumer, "after kill -9")
    assert "Traceback" not in b.log_text()


# -- compression pass-through --------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_compressed_batches_pass_through(broker: CoterieBroker, producer: str,
                                         codec: str) -> None:
    """A producer's compressed batches are stored with their codec and every consumer
    decompresses the original records from them."""
    topic = f"compressed-{producer}-{codec}"
    topics = {topic: PARTITIONS}
    option = "compression.type" if producer == "confluent" else "compression_type"
    with broker_log_on_failure(broker.log_text):
        create_topics(broker.bootstrap, topics)
        records = make_records(topic, COMPRESSED_RECORDS, PARTITIONS,
                               seed=zlib.crc32(topic.encode()), compressible=True)
        acked = produce(producer, broker.bootstrap, records, {option: codec})
        codecs = stored_codecs(broker.host, broker.port, topic, PARTITIONS)
        assert codecs and set(codecs) == {CODEC_IDS[codec]}, (
            f"stored batches by codec id: {dict(codecs)}")
        for consumer in CONSUMERS:
            got = consume(consumer, broker.bootstrap, topics, len(acked))
            assert_same_records(acked, got.records, f"{producer}/{codec} -> {consumer}")


# -- timestamps ----------------------------------------------------------------------------


def _edge_timestamps(count: int) -> list[int]:
    """CreateTime values that a lossy path would change: tiny, 32-bit edges, odd ms, and
    jumps backwards and forwards by years within one batch."""
    now_ms = time.time_ns() // 1_000_000
    edges = [1, 2, 999, 1_000, 1_001, 2**31 - 1, 2**31, 2**32 - 1, 2**32 + 7,
             1_000_000_000_123, 1_234_567_890_123, 1_500_000_000_001, now_ms - 86_400_000,
             now_ms - 1, now_ms - 60_001, 1_600_000_000_999, 3, now_ms - 7]
    return [edges[i % len(edges)] + (i // len(edges)) * 1_000 for i in range(count)]


@pytest.mark.parametrize("producer", PRODUCERS)
def test_explicit_create_time_preserved_to_the_millisecond(broker: CoterieBroker,
                                                           producer: str) -> None:
    """Explicit CreateTime timestamps come back exactly, typed CreateTime, for all consumers."""
    topic = f"timestamps-{producer}"
    topics = {topic: 2}
    count = 300
    with broker_log_on_failure(broker.log_text):
        # Infinite retention: some timestamps are decades old.
        create_topics(broker.bootstrap, topics, {"retention.ms": "-1"})
        records = make_records(topic, count, 2, seed=7, timestamps=_edge_timestamps(count))
        acked = produce(producer, broker.bootstrap, records)
        for consumer in CONSUMERS:
            got = consume(consumer, broker.bootstrap, topics, count)
            assert [(r.offset, r.timestamp, r.timestamp_type)
                    for r in sorted(got.records, key=lambda r: (r.partition, r.offset))] == [
                (r.offset, r.timestamp, CREATE_TIME)
                for r in sorted(acked, key=lambda r: (r.partition, r.offset))], consumer
            assert_same_records(acked, got.records, f"{producer} -> {consumer}")


def test_log_append_time_topic_replaces_create_time(broker: CoterieBroker) -> None:
    """On a LogAppendTime topic, consumers see the broker's append time, typed as such,
    instead of the producer's CreateTime; everything else is unchanged."""
    topic = "log-append-time"
    topics = {topic: 3}
    with broker_log_on_failure(broker.log_text):
        create_topics(broker.bootstrap, topics, {"message.timestamp.type": "LogAppendTime"})
        records = make_records(topic, 200, 3, seed=11, timestamps=[1_000_000_000_000] * 200)
        before = time.time_ns() // 1_000_000
        acked = produce("confluent", broker.bootstrap, records)
        after = time.time_ns() // 1_000_000
        for consumer in CONSUMERS:
            got = consume(consumer, broker.bootstrap, topics, len(acked))
            kinds = Counter(r.timestamp_type for r in got.records)
            assert kinds == {LOG_APPEND_TIME: len(acked)}, (consumer, kinds)
            stamps = {r.timestamp for r in got.records}
            assert all(before - 1000 <= ts <= after + 1000 for ts in stamps), (consumer, stamps)
            as_produced = [replace(r, timestamp=1_000_000_000_000, timestamp_type=CREATE_TIME)
                           for r in got.records]
            assert_same_records(acked, as_produced, f"confluent -> {consumer}")


# -- appending after a crash -----------------------------------------------------------------


def test_offsets_continue_after_each_kill9(broker: CoterieBroker) -> None:
    """Each producer in turn appends to the same topic with a kill -9 in between: the
    recovered log end is where the next producer's offsets start, with no gap and no
    overlap, and every consumer reads the whole history."""
    topic = "append-after-crash"
    topics = {topic: 3}
    acked: list[Record] = []
    with broker_log_on_failure(broker.log_text):
        create_topics(broker.bootstrap, topics)
        for seed, producer in enumerate(PRODUCERS):
            records = make_records(topic, 1_000, 3, seed=100 + seed)
            records = [replace(r, key=f"{producer}/".encode() + r.key) for r in records]
            acked += produce(producer, broker.bootstrap, records)
            broker.restart_after_kill9()
        by_partition: dict[int, list[int]] = defaultdict(list)
        for r in acked:
            by_partition[r.partition].append(r.offset)
        for p, offsets in by_partition.items():
            assert offsets == list(range(len(offsets))), f"partition {p} offsets not contiguous"
        for consumer in CONSUMERS:
            got = consume(consumer, broker.bootstrap, topics, len(acked))
            assert_same_records(acked, got.records, f"all producers -> {consumer}")
            assert got.end_offsets == expected_end_offsets(acked, topics), consumer
