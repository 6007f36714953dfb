"""Rebalance analytics: `__group_events` in, figures per group and protocol out.

    python -m coterie.spark.jobs.rebalance_analytics --bootstrap-servers localhost:9092 \\
        --output /tmp/rebalances

A batch job: it reads the whole event topic with format "coterie" (earliest to latest), keeps
each group's events in log order (one group's events share a partition: they are keyed by
group id), and hands every (group, protocol) to `rebalance_figures.rebalances` through
`applyInArrow`, so the figures are computed where the data is, by the same plain function the
tests check against hand-computed values. It writes

    <output>/rebalances/   Parquet, one row per rebalance
    <output>/summary/      Parquet, one row per group and protocol
    <output>/rebalances.png

(`rebalance_figures` defines every figure; docs/spark-pipelines.md explains them.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from coterie.spark.jobs.rebalance_figures import REBALANCE_COLUMNS, rebalances
from coterie.spark.jobs.session import spark_session

EVENTS_TOPIC = "__group_events"
REBALANCE_DDL = ("group string, protocol string, rebalance int, generation long, "
                 "start_ts long, end_ts long, outcome string, time_to_stable_ms long, "
                 "partitions_moved int, unowned_partition_seconds double")


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("group", pa.string()), ("protocol", pa.string()), ("rebalance", pa.int32()),
        ("generation", pa.int64()), ("start_ts", pa.int64()), ("end_ts", pa.int64()),
        ("outcome", pa.string()), ("time_to_stable_ms", pa.int64()),
        ("partitions_moved", pa.int32()), ("unowned_partition_seconds", pa.float64()),
    ])


def _figures_of_group(table: Any) -> Any:
    """applyInArrow: one (group, protocol)'s events -> its rebalance rows."""
    import pyarrow as pa

    rows = sorted(table.select(["partition", "offset", "json"]).to_pylist(),
                  key=lambda r: (r["partition"], r["offset"]))
    figures = rebalances(json.loads(r["json"]) for r in rows)
    return pa.Table.from_pylist([{c: f[c] for c in REBALANCE_COLUMNS} for f in figures],
                                schema=_arrow_schema())


def events_frame(raw: Any) -> Any:
    """Coterie rows of `__group_events` -> json, partition, offset, group, protocol."""
    from pyspark.sql import functions as F

    events = raw.select(F.col("value").cast("string").alias("json"), "partition", "offset")
    return (events.withColumn("group", F.get_json_object("json", "$.group"))
            .withColumn("protocol", F.get_json_object("json", "$.protocol"))
            .where(F.col("group").isNotNull() & F.col("protocol").isNotNull()))


def rebalance_frame(raw: Any) -> Any:
    """One row per rebalance (columns `REBALANCE_COLUMNS`)."""
    return (events_frame(raw).groupBy("group", "protocol")
            .applyInArrow(_figures_of_group, REBALANCE_DDL))


def summary_frame(per_rebalance: Any) -> Any:
    """One row per group and protocol (the figures of `rebalance_figures.summarize`)."""
    from pyspark.sql import functions as F

    return (per_rebalance.groupBy("group", "protocol").agg(
        F.count("*").alias("rebalances"),
        F.count("time_to_stable_ms").alias("stable_rebalances"),
        F.avg("time_to_stable_ms").alias("time_to_stable_avg_ms"),
        F.max("time_to_stable_ms").alias("time_to_stable_max_ms"),
        F.sum("partitions_moved").alias("partitions_moved"),
        F.sum("unowned_partition_seconds").alias("unowned_partition_seconds"))
        .orderBy("group", "protocol"))


def read_events(spark: Any, bootstrap: str, topic: str = EVENTS_TOPIC,
                starting_offsets: str = "earliest", ending_offsets: str = "latest") -> Any:
    return (spark.read.format("coterie").option("bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", starting_offsets)
            .option("endingOffsets", ending_offsets).load())


def chart(summary: list[dict[str, Any]], path: Path) -> None:
    """A PNG with three bar charts per group and protocol: rebalances, mean time to Stable,
    partition-seconds without an owner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{s['group']} ({s['protocol']})" for s in summary] or ["(no rebalances)"]
    panels = [
        ("rebalances", "rebalances", 1.0),
        ("time_to_stable_avg_ms", "mean time to Stable (s)", 1 / 1000),
        ("unowned_partition_seconds", "partition-seconds without an owner", 1.0),
    ]
    height = max(2.5, 0.45 * len(labels) + 1.5)
    fig, axes = plt.subplots(1, len(panels), figsize=(15, height), sharey=True)
    for ax, (column, title, scale) in zip(axes, panels, strict=True):
        values = [(s[column] or 0) * scale for s in summary] or [0]
        ax.barh(labels, values, color="#4c72b0")
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
    axes[0].invert_yaxis()
    fig.suptitle("coterie group rebalances (from __group_events)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def analyze(spark: Any, raw: Any, output: str) -> list[dict[str, Any]]:
    """Write the Parquet outputs and the chart; return the summary rows."""
    per_rebalance = rebalance_frame(raw).cache()
    per_rebalance.write.mode("overwrite").parquet(str(Path(output) / "rebalances"))
    summary = summary_frame(per_rebalance)
    summary.write.mode("overwrite").parquet(str(Path(output) / "summary"))
    rows = [r.asDict() for r in summary.collect()]
    per_rebalance.unpersist()
    chart(rows, Path(output) / "rebalances.png")
    return rows


@click.command()
@click.option("--bootstrap-servers", "-b", default="localhost:9092", show_default=True)
@click.option("--output", "-o", required=True, help="Output directory.")
@click.option("--topic", default=EVENTS_TOPIC, show_default=True)
@click.option("--starting-offsets", default="earliest", show_default=True)
@click.option("--ending-offsets", default="latest", show_default=True)
@click.option("--master", default="local[2]", show_default=True,
              help="Spark master URL (local[N], spark://..., yarn, k8s://...).")
def cli(bootstrap_servers: str, output: str, topic: str, starting_offsets: str,
        ending_offsets: str, master: str) -> None:
    """Rebalance figures per group and protocol from the group-event stream."""
    spark = spark_session("coterie-rebalance-analytics", master)
    try:
        raw = read_events(spark, bootstrap_servers, topic, starting_offsets, ending_offsets)
        rows = analyze(spark, raw, output)
    finally:
        spark.stop()
    for r in rows:
        avg = r["time_to_stable_avg_ms"]
        click.echo(f"{r['group']} ({r['protocol']}): {r['rebalances']} rebalances, "
                   f"time to Stable {'-' if avg is None else f'{avg:.0f} ms'} on average, "
                   f"{r['partitions_moved']} partitions moved, "
                   f"{r['unowned_partition_seconds']:.1f} partition-seconds without an owner")
    click.echo(f"written to {output}/rebalances, {output}/summary, {output}/rebalances.png")


if __name__ == "__main__":
    cli()
