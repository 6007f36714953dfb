"""coterie.spark: a pure-Python PySpark data source for coterie (and Kafka-protocol) topics.

    CoterieDataSource   format "coterie": batch and streaming reads (admission control with
                        maxOffsetsPerTrigger, Trigger.AvailableNow, group commits with
                        group.id), batch and streaming writes (at-least-once)
    register(spark)     spark.dataSource.register(CoterieDataSource)

Needs the `spark` extra (pyspark, pyarrow, pandas) and Java for Spark itself; see
docs/spark.md for the options, columns and semantics.
"""

from __future__ import annotations

from typing import Any

from coterie.spark.options import CoterieOptionError
from coterie.spark.planning import DataLossError
from coterie.spark.source import CoterieDataSource


def register(spark: Any) -> None:
    """Register the `coterie` format with a SparkSession."""
    spark.dataSource.register(CoterieDataSource)


__all__ = ["CoterieDataSource", "CoterieOptionError", "DataLossError", "register"]
