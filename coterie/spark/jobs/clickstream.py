"""The events pipeline: synthetic clickstream events into a coterie topic, and a Structured
Streaming job that counts them per page and event-time window into Parquet.

    python -m coterie.spark.jobs.clickstream run --bootstrap-servers localhost:9092 \\
        --output /tmp/clicks

`run` produces `--events` synthetic events and then aggregates everything in the topic with
Trigger.AvailableNow (drain, then stop); `produce` and `aggregate` do one half each, and
`aggregate --processing-time "10 seconds"` keeps the query running.

Events are JSON `{"user": "u17", "page": "/cart", "ts": 1763700000000}` (ts: event time, epoch
ms), keyed by page. The query reads them with format "coterie" (offsets, and the rows of each
micro-batch, come from coterie's Spark source), parses them, puts a watermark on the event
time, and counts per (window, page) in append mode: a window's count is written once, when
the watermark (latest event time seen minus `--watermark`) passes the window's end, and never
changes afterwards; events later than that are dropped. The checkpoint (`--checkpoint`,
default `<output>/_checkpoint`) holds the offsets read and the aggregation state, so a
restarted query continues where it stopped and writes every window exactly once.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import click

from coterie.spark.jobs.session import spark_session

PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/account", "/help", "/blog")
CLICK_SCHEMA = "user string, page string, ts long"


def synthetic_clicks(count: int, users: int = 50, pages: int = len(PAGES),
                     start_ms: int = 1_763_700_000_000, span_ms: int = 10 * 60_000,
                     seed: int = 1) -> list[dict[str, Any]]:
    """`count` clickstream events with event times spread over [start, start + span),
    in time order, deterministic for a seed."""
    rng = random.Random(seed)
    names = [PAGES[i] if i < len(PAGES) else f"/page/{i}" for i in range(pages)]
    stamps = sorted(start_ms + rng.randrange(span_ms) for _ in range(count))
    return [{"user": f"u{rng.randrange(users)}", "page": rng.choice(names), "ts": ts}
            for ts in stamps]


def produce(spark: Any, bootstrap: str, topic: str, events: list[dict[str, Any]]) -> int:
    """Write events to `topic` through the coterie sink (key: page, value: the JSON)."""
    rows = [(e["page"].encode(), json.dumps(e, separators=(",", ":")).encode())
            for e in events]
    df = spark.createDataFrame(rows, "key binary, value binary")
    (df.write.format("coterie").mode("append").option("bootstrap.servers", bootstrap)
     .option("topic", topic).save())
    return len(rows)


def page_counts(raw: Any, window: str = "1 minute", watermark: str = "1 minute") -> Any:
    """Counts per (event-time window, page) of a DataFrame of coterie rows (streaming or
    batch; batch ignores the watermark). Columns: window_start, window_end, page, count."""
    from pyspark.sql import functions as F

    clicks = (raw.select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("e"))
              .select("e.*")
              .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
              .withColumn("event_time", F.timestamp_millis(F.col("ts"))))
    counts = (clicks.withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", window).alias("w"), F.col("page"))
              .count())
    return counts.select(F.col("w.start").alias("window_start"),
                         F.col("w.end").alias("window_end"), "page", "count")


def start_query(spark: Any, bootstrap: str, topic: str, output: str, checkpoint: str,
                window: str = "1 minute", watermark: str = "1 minute",
                processing_time: str | None = None,
                max_offsets_per_trigger: int | None = None,
                starting_offsets: str = "earliest") -> Any:
    """Start the streaming aggregation; AvailableNow unless `processing_time` is given."""
    reader = (spark.readStream.format("coterie").option("bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", starting_offsets))
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    counts = page_counts(reader.load(), window, watermark)
    writer = (counts.writeStream.format("parquet").outputMode("append")
              .option("path", output).option("checkpointLocation", checkpoint)
              .queryName("clickstream_page_counts"))
    if processing_time is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


# -- command line --------------------------------------------------------------------------------
_common = [
    click.option("--bootstrap-servers", "-b", default="localhost:9092", show_default=True),
    click.option("--topic", default="clicks", show_default=True),
    click.option("--master", default="local[2]", show_default=True,
                 help="Spark master URL (local[N], spark://..., yarn, k8s://...)."),
]


def common(f: Any) -> Any:
    for option in reversed(_common):
        f = option(f)
    return f


@click.group()
def cli() -> None:
    """Synthetic clickstream into coterie, counted per page and window by Spark."""


@cli.command("produce")
@common
@click.option("--events", default=10_000, show_default=True)
@click.option("--users", default=50, show_default=True)
@click.option("--span-seconds", default=600, show_default=True,
              help="Event times spread over this many seconds.")
@click.option("--start-ms", type=int, default=None,
              help="First event time (epoch ms); default: now minus the span.")
@click.option("--seed", default=1, show_default=True)
def produce_cmd(bootstrap_servers: str, topic: str, master: str, events: int, users: int,
                span_seconds: int, start_ms: int | None, seed: int) -> None:
    """Write synthetic clickstream events to TOPIC."""
    spark = spark_session("coterie-clickstream-producer", master)
    try:
        _produce(spark, bootstrap_servers, topic, events, users, span_seconds, start_ms, seed)
    finally:
        spark.stop()


def _produce(spark: Any, bootstrap: str, topic: str, events: int, users: int,
             span_seconds: int, start_ms: int | None, seed: int) -> None:
    import time

    span_ms = span_seconds * 1000
    start = start_ms if start_ms is not None else int(time.time() * 1000) - span_ms
    n = produce(spark, bootstrap, topic,
                synthetic_clicks(events, users, start_ms=start, span_ms=span_ms, seed=seed))
    click.echo(f"produced {n} events to {topic}")


def _aggregate_options(f: Any) -> Any:
    for option in reversed([
        click.option("--output", "-o", required=True, help="Parquet output directory."),
        click.option("--checkpoint", default=None,
                     help="Checkpoint directory (default: <output>/_checkpoint)."),
        click.option("--window", default="1 minute", show_default=True),
        click.option("--watermark", default="1 minute", show_default=True),
        click.option("--max-offsets-per-trigger", type=int, default=None),
    ]):
        f = option(f)
    return f


@cli.command("aggregate")
@common
@_aggregate_options
@click.option("--processing-time", default=None,
              help='Run continuously with this trigger interval ("10 seconds"); '
                   "default: Trigger.AvailableNow (drain what is there, then stop).")
def aggregate_cmd(bootstrap_servers: str, topic: str, master: str, output: str,
                  checkpoint: str | None, window: str, watermark: str,
                  max_offsets_per_trigger: int | None, processing_time: str | None) -> None:
    """Count TOPIC's events per page and event-time window into Parquet."""
    spark = spark_session("coterie-clickstream", master)
    try:
        _aggregate(spark, bootstrap_servers, topic, output, checkpoint, window, watermark,
                   max_offsets_per_trigger, processing_time)
    finally:
        spark.stop()


def _aggregate(spark: Any, bootstrap: str, topic: str, output: str, checkpoint: str | None,
               window: str, watermark: str, max_offsets_per_trigger: int | None,
               processing_time: str | None) -> None:
    checkpoint = checkpoint or str(Path(output) / "_checkpoint")
    query = start_query(spark, bootstrap, topic, output, checkpoint, window, watermark,
                        processing_time, max_offsets_per_trigger)
    query.awaitTermination()
    click.echo(f"page counts in {output} (checkpoint {checkpoint})")


@cli.command("run")
@common
@_aggregate_options
@click.option("--events", default=10_000, show_default=True)
@click.option("--users", default=50, show_default=True)
@click.option("--span-seconds", default=600, show_default=True)
@click.option("--seed", default=1, show_default=True)
def run_cmd(bootstrap_servers: str, topic: str, master: str, output: str,
            checkpoint: str | None, window: str, watermark: str,
            max_offsets_per_trigger: int | None, events: int, users: int, span_seconds: int,
            seed: int) -> None:
    """Produce synthetic events, then aggregate the topic with Trigger.AvailableNow."""
    spark = spark_session("coterie-clickstream", master)
    try:
        _produce(spark, bootstrap_servers, topic, events, users, span_seconds, None, seed)
        _aggregate(spark, bootstrap_servers, topic, output, checkpoint, window, watermark,
                   max_offsets_per_trigger, None)
    finally:
        spark.stop()


if __name__ == "__main__":
    cli()
