"""Streaming reads through the `coterie` format: checkpoints, AvailableNow, admission control
and group commits, against a real coterie broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from tests.spark.helpers import create_topic, group_offsets, produce

pytestmark = pytest.mark.timeout(300)


def _stream(spark, bootstrap: str, topic: str, **options: str):
    reader = (spark.readStream.format("coterie").option("bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _wait_for_group(bootstrap: str, group: str, want: dict, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    got: dict = {}
    while time.monotonic() < deadline:
        got = group_offsets(bootstrap, group)
        if got == want:
            break
        time.sleep(0.2)
    return got


def test_restarted_stream_delivers_every_record_once(spark, broker, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "stream-in", 2)
    produce(broker.bootstrap, "stream-in", 100, partitions=2, headers=False)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> None:
        query = (_stream(spark, broker.bootstrap, "stream-in", **{"group.id": "stream-grp"})
                 .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
                 .writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(processingTime="100 milliseconds").start())
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    run()
    # the group follows the stream: its lag shows in any Kafka tool
    first = _wait_for_group(broker.bootstrap, "stream-grp",
                            {("stream-in", 0): 50, ("stream-in", 1): 50})
    assert first == {("stream-in", 0): 50, ("stream-in", 1): 50}

    produce(broker.bootstrap, "stream-in", 60, partitions=2, start=100, headers=False)
    run()  # restarts from the checkpoint
    second = _wait_for_group(broker.bootstrap, "stream-grp",
                             {("stream-in", 0): 80, ("stream-in", 1): 80})
    assert second == {("stream-in", 0): 80, ("stream-in", 1): 80}

    rows = spark.read.parquet(str(out)).collect()
    positions = sorted((r.partition, r.offset) for r in rows)
    assert positions == sorted((p, o) for p in (0, 1) for o in range(80))  # each exactly once
    assert sorted(int(r.value.split("-")[1]) for r in rows) == list(range(160))


def test_available_now_drains_in_limited_batches_and_stops(spark, broker) -> None:
    create_topic(broker.bootstrap, "drain", 2)
    produce(broker.bootstrap, "drain", 100, partitions=2, headers=False)
    query = (_stream(spark, broker.bootstrap, "drain", maxOffsetsPerTrigger="30",
                     **{"group.id": "drain-grp"})
             .writeStream.format("memory").queryName("drained")
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180), "an AvailableNow query must stop by itself"
    assert query.exception() is None
    assert spark.table("drained").count() == 100
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 100
    assert max(sizes) <= 30 and len(sizes) == 4, sizes  # 30 + 30 + 30 + 10
    assert _wait_for_group(broker.bootstrap, "drain-grp", {("drain", 0): 50, ("drain", 1): 50}) \
        == {("drain", 0): 50, ("drain", 1): 50}


def test_stream_to_stream_copy_through_the_sink(spark, broker, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "copy-from", 2)
    create_topic(broker.bootstrap, "copy-to", 3)
    produce(broker.bootstrap, "copy-from", 50, partitions=2)
    query = (_stream(spark, broker.bootstrap, "copy-from", includeHeaders="true")
             .selectExpr("key", "value", "headers")
             .writeStream.format("coterie").option("bootstrap.servers", broker.bootstrap)
             .option("topic", "copy-to").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None
    copied = (spark.read.format("coterie").option("bootstrap.servers", broker.bootstrap)
              .option("subscribe", "copy-to").option("includeHeaders", "true").load()
              .collect())
    assert sorted(r.value for r in copied) == sorted(f"value-{i}".encode() for i in range(50))
    assert all([h.key for h in r.headers] == ["n", "parity"] for r in copied)
    assert {r.partition for r in copied} == {0, 1, 2}  # keyed: spread by murmur2
