"""`CoterieDataSource`: the `coterie` format, tying options, schema, readers and writers.

Spark constructs the data source on the driver when a query is defined (`load()` / `save()`),
which is where `__init__` checks the options and `schema()` checks that the topics named by
`subscribe` or `assign` exist: both fail the definition of the query with a message naming
the option, before any task runs. The object holds only the raw option map, as Spark pickles
it to executors.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from coterie.spark.brokers import Brokers
from coterie.spark.options import CoterieOptionError, read_options, write_options
from coterie.spark.planning import topic_partitions
from coterie.spark.reader import CoterieBatchReader, CoterieStreamReader
from coterie.spark.schema import check_read_schema, source_schema
from coterie.spark.writer import CoterieBatchWriter, CoterieStreamWriter, check_write_schema

READ_ONLY = ("subscribe", "subscribepattern", "assign")


class CoterieDataSource(DataSource):
    """Read and write coterie (or any Kafka-protocol) topics: `spark.read.format("coterie")`.

    Register it with `spark.dataSource.register(CoterieDataSource)` or
    `coterie.spark.register(spark)`. Options and columns mirror Spark's Kafka source; see
    docs/spark.md.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.options = dict(options)
        lowered = {k.lower() for k in self.options}
        if lowered & set(READ_ONLY):
            read_options(self.options, streaming=None)
        else:
            write_options(self.options)

    @classmethod
    def name(cls) -> str:
        return "coterie"

    def schema(self) -> StructType:
        """Only reads ask for the schema, so the read options are checked here too, and the
        topics that `subscribe` / `assign` name must exist (a pattern may match nothing
        yet)."""
        opts = read_options(self.options, streaming=None)
        if opts.pattern is None:
            with Brokers(opts.connect) as brokers:
                topic_partitions(brokers, opts)
        return source_schema(opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        check_read_schema(schema)
        return CoterieBatchReader(read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        check_read_schema(schema)
        return CoterieStreamReader(read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise CoterieOptionError("mode", "overwrite is not supported: topics are "
                                     "append-only (use mode append)")
        opts = write_options(self.options)
        check_write_schema(schema, opts)
        return CoterieBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = write_options(self.options)
        check_write_schema(schema, opts)
        return CoterieStreamWriter(opts)
