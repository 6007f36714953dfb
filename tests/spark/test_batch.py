"""Batch reads and writes through the `coterie` format against a real coterie broker."""

from __future__ import annotations

import re
import time

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from coterie.common.partitioning import default_partition
from coterie.spark.brokers import Brokers
from coterie.spark.options import Connect, read_options
from coterie.spark.planning import DataLossError
from coterie.spark.ranges import OffsetRange
from coterie.spark.reader import read_range
from coterie.spark.schema import arrow_schema, source_schema
from tests.spark.helpers import by_position, create_topic, produce

pytestmark = pytest.mark.timeout(240)


def _read(spark, bootstrap: str, **options: str):
    reader = spark.read.format("coterie").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_equals_what_was_produced(spark, broker) -> None:
    create_topic(broker.bootstrap, "batch-in", 3)
    sent = produce(broker.bootstrap, "batch-in", 90, partitions=3)
    df = _read(spark, broker.bootstrap, subscribe="batch-in", includeHeaders="true",
               maxRecordsPerPartition="10")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert df.rdd.getNumPartitions() == 9  # 3 partitions x 30 offsets, split by 10
    rows = by_position(df.withColumn("ts_ms", F.unix_millis("timestamp")).collect())
    assert len(rows) == 90
    for s in sent:
        row = rows[(s.topic, s.partition, s.offset)]
        assert (row.key, row.value) == (s.key, s.value)
        assert row.ts_ms == s.timestamp
        assert row.timestampType == 0
        assert tuple((h.key, h.value) for h in row.headers) == s.headers


def test_batch_read_offset_bounds_and_assign(spark, broker) -> None:
    create_topic(broker.bootstrap, "batch-bounds", 2)
    produce(broker.bootstrap, "batch-bounds", 40, partitions=2, headers=False)
    df = _read(spark, broker.bootstrap, assign='{"batch-bounds":[1]}',
               startingOffsets='{"batch-bounds":{"1":5}}',
               endingOffsets='{"batch-bounds":{"1":15}}')
    assert "headers" not in df.columns
    offsets = sorted(r.offset for r in df.select("offset", "partition").collect())
    assert offsets == list(range(5, 15))
    pattern = _read(spark, broker.bootstrap, subscribePattern="batch-b.*s")
    assert pattern.count() == 40


@pytest.mark.parametrize(("options", "named"), [
    ({"subscribe": "no-such-topic"}, "subscribe"),
    ({"assign": '{"no-such-topic":[0]}'}, "assign"),
    ({"subscribe": "batch-in", "startingOffsets": "soon"}, "startingOffsets"),
    ({"subscribe": "batch-in", "assign": '{"batch-in":[0]}'}, "subscribe"),
    ({"subscribe": "batch-in", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"subscribe": "batch-in", "maxOffsetsPerTrigger": "-3"}, "maxOffsetsPerTrigger"),
    ({"subscribePattern": "(unclosed"}, "subscribePattern"),
])
def test_bad_options_fail_at_planning_naming_the_option(spark, broker, options, named) -> None:
    with pytest.raises(PySparkException, match=re.escape(f"option '{named}'")):
        _read(spark, broker.bootstrap, **options)  # load() only: no task has run


def test_bad_stream_option_fails_at_load(spark, broker) -> None:
    with pytest.raises(PySparkException, match="option 'subscribe'"):
        (spark.readStream.format("coterie").option("bootstrap.servers", broker.bootstrap)
         .option("subscribe", "no-such-stream").load())
    with pytest.raises(PySparkException, match=r"option 'bootstrap\.servers'"):
        spark.readStream.format("coterie").option("subscribe", "x").load()


def test_fail_on_data_loss(spark, broker) -> None:
    create_topic(broker.bootstrap, "batch-loss", 1)
    produce(broker.bootstrap, "batch-loss", 10, partitions=1, headers=False)
    beyond = '{"batch-loss":{"0":1000}}'
    with pytest.raises(PySparkException, match="failOnDataLoss"):
        _read(spark, broker.bootstrap, subscribe="batch-loss", startingOffsets=beyond).collect()
    lenient = _read(spark, broker.bootstrap, subscribe="batch-loss", startingOffsets=beyond,
                    failOnDataLoss="false")
    assert lenient.count() == 0


def test_writer_round_trip(spark, broker) -> None:
    create_topic(broker.bootstrap, "written", 3)
    header = ArrayType(StructType([StructField("key", StringType()),
                                   StructField("value", BinaryType())]))
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("partition", IntegerType()),
                         StructField("headers", header)])
    rows = [(f"k{i}", f"v{i}".encode(), i % 3 if i % 2 else None,
             [("i", str(i).encode())]) for i in range(60)]
    (spark.createDataFrame(rows, schema).write.format("coterie")
     .option("bootstrap.servers", broker.bootstrap).option("topic", "written")
     .mode("append").save())
    back = _read(spark, broker.bootstrap, subscribe="written", includeHeaders="true").collect()
    assert len(back) == 60
    got = {r.key: r for r in back}
    for key, value, partition, headers in rows:
        row = got[key.encode()]
        assert row.value == value
        assert [(h.key, h.value) for h in row.headers] == headers
        # an explicit partition is kept; otherwise Kafka's default partitioner (murmur2)
        assert row.partition == (partition if partition is not None
                                 else default_partition(key.encode(), 3))


def test_writer_needs_a_topic(spark, broker) -> None:
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(PySparkException, match="option 'topic'"):
        df.write.format("coterie").option("bootstrap.servers", broker.bootstrap) \
            .mode("append").save()


def test_offsets_deleted_by_retention_are_data_loss(spark, coterie_factory) -> None:
    broker = coterie_factory(config={"log.retention.check.interval.ms": "200"})
    create_topic(broker.bootstrap, "aged", 1,
                 config={"segment.bytes": "1024", "retention.bytes": "1024"})
    produce(broker.bootstrap, "aged", 120, partitions=1, headers=False, one_by_one=True)
    with Brokers(Connect(broker.bootstrap)) as brokers:
        deadline = time.monotonic() + 30
        while (log_start := brokers.list_offsets([("aged", 0)], -2)[("aged", 0)]) == 0:
            assert time.monotonic() < deadline, "retention never deleted a segment"
            time.sleep(0.2)
    from_zero = '{"aged":{"0":0}}'
    with pytest.raises(PySparkException, match="below the log start"):
        _read(spark, broker.bootstrap, subscribe="aged", startingOffsets=from_zero).collect()
    rows = _read(spark, broker.bootstrap, subscribe="aged", startingOffsets=from_zero,
                 failOnDataLoss="false").select("offset").collect()
    offsets = sorted(r.offset for r in rows)
    assert offsets[0] >= log_start and offsets[-1] == 119
    assert offsets == list(range(offsets[0], 120))
    # a task whose planned range was deleted before it ran (the executor's side)
    schema = arrow_schema(source_schema(False))
    task = OffsetRange("aged", 0, 0, 120)
    strict = read_options({"bootstrap.servers": broker.bootstrap, "subscribe": "aged"},
                          streaming=True)
    with pytest.raises(DataLossError, match="are gone"):
        list(read_range(strict, task, schema))
    lenient = read_options({"bootstrap.servers": broker.bootstrap, "subscribe": "aged",
                            "failOnDataLoss": "false"}, streaming=True)
    read = [o for b in read_range(lenient, task, schema) for o in b.column("offset").to_pylist()]
    assert read == offsets
