"""Pipeline jobs on Spark that read coterie topics through the `coterie` data source.

- `clickstream`: synthetic clickstream events into a topic, and a Structured Streaming job
  that counts them per page and event-time window into Parquet, with a checkpoint;
- `rebalance_analytics`: reads `__group_events` and computes, per group and protocol, the
  number of rebalances, time to Stable, partitions moved and partition-seconds without an
  owner; writes Parquet and a PNG chart.

Each runs with one command (`python -m coterie.spark.jobs.<name> --help`), on local Spark by
default and on any cluster with `--master`. docs/spark-pipelines.md has the details.
"""
