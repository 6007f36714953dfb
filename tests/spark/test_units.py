"""The data source's pure parts: option checking, offset ranges, admission control, murmur2."""

from __future__ import annotations

import datetime
import io
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from kafka.partitioner.default import murmur2 as reference_murmur2  # Java's algorithm, ported
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from coterie.client.records import decode_batches
from coterie.common.partitioning import murmur2
from coterie.spark.columns import decode_columns
from coterie.spark.options import (
    EARLIEST,
    LATEST,
    CoterieOptionError,
    read_options,
    write_options,
)
from coterie.spark.ranges import (
    from_offset_json,
    rate_limit,
    split_ranges,
    to_offset_json,
)
from coterie.spark.schema import arrow_schema, source_schema

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_options_mirror_spark_kafka() -> None:
    opts = read_options({**BASE, "subscribe": "a, b", "startingOffsets": '{"a":{"0":-2,"1":7}}',
                         "maxOffsetsPerTrigger": "100", "includeHeaders": "TRUE",
                         "kafka.group.id": "g"}, streaming=True)
    assert opts.subscribe == ("a", "b")
    assert opts.starting == {"a": {0: EARLIEST, 1: 7}}
    assert (opts.max_offsets_per_trigger, opts.include_headers, opts.group_id) == (100, True, "g")
    assert opts.fail_on_data_loss is True
    batch = read_options({**BASE, "assign": '{"t":[2,0]}', "endingOffsets": '{"t":{"0":-1}}'},
                         streaming=False)
    assert batch.assign == (("t", 0), ("t", 2)) and batch.starting == "earliest"
    assert batch.ending == {"t": {0: LATEST}}
    assert read_options({**BASE, "subscribePattern": "ev.*"}, streaming=True).matches("events")
    assert not read_options({**BASE, "subscribePattern": "ev"}, streaming=True).matches("events")


@pytest.mark.parametrize(("options", "streaming", "named"), [
    ({"subscribe": "t"}, True, "bootstrap.servers"),
    ({**BASE}, True, "subscribe"),
    ({**BASE, "subscribe": "t", "startingOffsets": "latest"}, False, "startingOffsets"),
    ({**BASE, "subscribe": "t", "endingOffsets": "latest"}, True, "endingOffsets"),
    ({**BASE, "subscribe": "t", "endingOffsets": "earliest"}, False, "endingOffsets"),
    ({**BASE, "assign": '{"t":"0"}'}, True, "assign"),
    ({**BASE, "subscribe": "t", "startingOffsets": '{"t":{"x":1}}'}, True, "startingOffsets"),
    ({**BASE, "subscribe": "t", "startingTimestamp": "1"}, True, "startingtimestamp"),
    ({"bootstrap.servers": "nohostport", "subscribe": "t"}, True, "bootstrap.servers"),
])
def test_bad_read_options_name_the_option(options, streaming, named) -> None:
    with pytest.raises(CoterieOptionError) as info:
        read_options(options, streaming=streaming)
    assert info.value.option == named


def test_write_options() -> None:
    assert write_options({**BASE, "topic": "t"}).acks == -1
    with pytest.raises(CoterieOptionError, match=r"kafka\.acks"):
        write_options({**BASE, "kafka.acks": "0"})


def test_kafka_prefixed_security_options_become_the_clients_settings() -> None:
    """Spark's Kafka source convention: Kafka's client properties with the kafka. prefix;
    the settings travel to the executors pickled with the options."""
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="bob" password="bob-secret";')
    opts = read_options({**BASE, "subscribe": "t", "kafka.security.protocol": "SASL_SSL",
                         "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": jaas,
                         "kafka.ssl.truststore.type": "PEM",
                         "kafka.ssl.truststore.location": "/etc/ca.pem",
                         "kafka.ssl.endpoint.identification.algorithm": ""}, streaming=True)
    security = opts.connect.security
    assert (security.protocol, security.ca_location, security.check_hostname) == (
        "SASL_SSL", "/etc/ca.pem", False)
    assert security.sasl is not None
    assert (security.sasl.mechanism, security.sasl.username, security.sasl.password) == (
        "SCRAM-SHA-512", "bob", "bob-secret")
    assert pickle.loads(pickle.dumps(opts)) == opts
    plain = write_options({**BASE, "kafka.security.protocol": "SSL",
                           "kafka.ssl.ca.location": "/ca.pem"})
    assert (plain.connect.security.protocol, plain.connect.security.ca_location) == (
        "SSL", "/ca.pem")
    assert read_options({**BASE, "subscribe": "t"}, streaming=True).connect.security.protocol \
        == "PLAINTEXT"


@pytest.mark.parametrize(("options", "named"), [
    ({"kafka.security.protocol": "TLS"}, "kafka.security.protocol"),
    ({"kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.mechanism"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "JKS",
      "kafka.ssl.truststore.location": "/t.jks"}, "kafka.ssl.truststore.type"),
])
def test_bad_security_options_name_the_kafka_option(options, named) -> None:
    with pytest.raises(CoterieOptionError) as info:
        read_options({**BASE, "subscribe": "t", **options}, streaming=True)
    assert info.value.option == named


def test_offset_json_round_trip() -> None:
    offsets = {("a", 0): 5, ("a", 10): 7, ("b", 1): 0}
    assert to_offset_json(offsets) == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert from_offset_json(to_offset_json(offsets)) == offsets


def test_split_ranges_cover_exactly() -> None:
    ranges = split_ranges({("t", 0): 3, ("t", 1): 5}, {("t", 0): 28, ("t", 1): 5},
                          max_records=10)
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 3, 13), (0, 13, 23),
                                                               (0, 23, 28)]
    more = split_ranges({("t", 0): 0}, {("t", 0): 8}, max_records=100, min_partitions=4)
    assert [(r.start, r.end) for r in more] == [(0, 2), (2, 4), (4, 6), (6, 8)]


@settings(deadline=None)
@given(st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 1000), st.integers(0, 500)),
                       min_size=1, max_size=8),
       st.integers(1, 2000))
def test_rate_limit_admits_at_most_the_limit(parts, limit) -> None:
    starts = {("t", p): s for p, (s, _) in parts.items()}
    latest = {("t", p): s + lag for p, (s, lag) in parts.items()}
    ends = rate_limit(starts, latest, limit)
    admitted = sum(ends[tp] - starts[tp] for tp in latest)
    assert all(starts[tp] <= ends[tp] <= latest[tp] for tp in latest)
    assert admitted == min(limit, sum(latest[tp] - starts[tp] for tp in latest))


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(data: bytes) -> None:
    assert murmur2(data) & 0x7FFFFFFF == reference_murmur2(data) & 0x7FFFFFFF


record_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
             max_size=3),
    st.integers(0, 10**6))


@settings(deadline=None, max_examples=60)
@given(st.lists(st.lists(record_strategy, min_size=1, max_size=12), min_size=1, max_size=4),
       st.integers(0, 30), st.integers(0, 40))
def test_column_decoder_agrees_with_the_consumer_decoder(batches, start, stop) -> None:
    """coterie.spark.columns and coterie.client.records read the same bytes the same way."""
    buf = io.BytesIO()
    base = 0
    for batch in batches:
        records = tuple(Record(
            attributes=i8(0), offset=i64(base + i),
            timestamp=TZAwareMicros.parse(datetime.datetime.fromtimestamp(
                (1_700_000_000_000 + ts) / 1000, datetime.UTC)),
            key=key, value=value,
            headers=tuple(RecordHeader(key=k.encode(), value=v) for k, v in headers))
            for i, (key, value, headers, ts) in enumerate(batch))
        write_new_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1),
                                            base_sequence=i32(-1), records=records,
                                            attributes=i16(0)))
        base += len(batch)
    data = buf.getvalue() + b"\0" * 20  # a cut-off tail, as a fetch may end
    expected = decode_batches(data, "t", 3, start)
    got = decode_columns(data, "t", 3, start, stop, with_headers=True)
    want = [r for r in expected.records if r.offset < stop]
    assert got.next_offset == expected.next_offset
    assert got.offsets == [r.offset for r in want]
    assert got.keys == [r.key for r in want] and got.values == [r.value for r in want]
    assert got.timestamps == [r.timestamp for r in want]
    assert got.headers == [[{"key": k, "value": v} for k, v in r.headers] for r in want]
    schema = arrow_schema(source_schema(True))
    table = got.to_arrow("t", 3, schema)
    assert table.schema.equals(schema) and table.num_rows == len(want)
    assert table.column("partition").to_pylist() == [3] * len(want)
