"""The rows the source produces: Spark's Kafka source schema, and records as Arrow batches.

The columns and their types are those of Spark's Kafka source, so that a job ports by
changing the format name: key and value binary, topic string, partition int, offset long,
timestamp (a Spark timestamp, microseconds UTC in Arrow), timestampType int (0 create time,
1 log-append time), and, only with includeHeaders, headers as
array<struct<key: string, value: binary>>.

Reads hand Spark whole Arrow record batches (one per Fetch answer, built by
`coterie.spark.columns`) instead of Python tuples: Spark checks the first batch against
`arrow_schema(schema)` and then streams the rest straight into the JVM, which spares a Python
call per row.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
           "headers")


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def check_read_schema(schema: StructType) -> None:
    """A user-given schema may only pick and reorder the source's own columns."""
    for field in schema.fields:
        if field.name not in COLUMNS:
            raise ValueError(f"coterie data source: unknown column {field.name!r} in the "
                             f"given schema (the source has {', '.join(COLUMNS)})")


def arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects back for `schema`."""
    return to_arrow_schema(schema, timezone="UTC")
