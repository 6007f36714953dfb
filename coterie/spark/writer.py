"""The sink: rows (key, value, optional headers / topic / partition) produced as record batches.

Input columns, as in Spark's Kafka sink: `value` (binary or string, required), `key` (binary
or string, optional), `headers` (array<struct<key: string, value: binary>>, optional),
`topic` (string, optional; else the `topic` option) and `partition` (int, optional; else
Kafka's default partitioner: murmur2 of the key for keyed rows, so keys land where Java
clients would put them, and for rows without a key one partition until its batch is sent,
then the next).

Each task groups its rows by topic partition, encodes them with kio's record-batch writer
(v2 batches, uncompressed) and sends one Produce (acks=all by default) whenever a partition's
batch reaches `kafka.batch.size` bytes, and at the end of the task. The task returns only
once every batch is acknowledged.

Semantics: at-least-once. A task that fails after some of its batches were acknowledged is
retried by Spark and produces them again; a micro-batch replayed after a restart produces its
rows again. Nothing is ever rolled back: `abort` only logs. Readers that need exactly-once
must deduplicate (e.g. on a key they put in the rows).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from kio.static.primitive import TZAwareMicros
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from coterie.spark.brokers import Brokers
from coterie.spark.options import CoterieOptionError, WriteOptions
from coterie.wire.batch_builder import TP, BatchBuilder

log = logging.getLogger("coterie.spark")


def check_write_schema(schema: StructType, opts: WriteOptions) -> None:
    """Fail at planning on columns the sink cannot take (naming the column or option)."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise CoterieOptionError("value", "(column) is required to write to coterie")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], BinaryType | StringType):
            raise CoterieOptionError(name, f"(column) must be binary or string, got "
                                     f"{types[name].simpleString()}")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise CoterieOptionError("topic", "(column) must be a string")
    if "topic" not in types and opts.topic is None:
        raise CoterieOptionError("topic", "is required when the rows have no topic column")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise CoterieOptionError("partition", "(column) must be an int")
    if "headers" in types:
        h = types["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"])
        if not ok:
            raise CoterieOptionError("headers", "(column) must be "
                                     "array<struct<key: string, value: binary>>")


@dataclass
class CoterieCommitMessage(WriterCommitMessage):
    """What one task wrote: records per topic partition."""

    written: dict[TP, int] = field(default_factory=dict)


def _bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)  # type: ignore[call-overload]


class _Batches:
    """Per-partition buffers (`BatchBuilder`, shared with coterie's Python producer),
    flushed as Produce requests."""

    def __init__(self, brokers: Brokers, opts: WriteOptions) -> None:
        self.brokers = brokers
        self.opts = opts
        self.batches = BatchBuilder(opts.batch_bytes)
        self.written: dict[TP, int] = {}
        self.partition_counts: dict[str, int] = {}
        self.now = TZAwareMicros.parse(datetime.datetime.now(datetime.UTC))

    def count(self, topic: str) -> int:
        n = self.partition_counts.get(topic)
        if n is None:
            n = len(self.brokers.partitions([topic], create=True)[topic])
            self.partition_counts[topic] = n
        return n

    def add(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
            headers: Sequence[tuple[str, bytes | None]]) -> None:
        if partition is None:
            partition = self.batches.partition_for(topic, key, self.count(topic))
        tp = (topic, partition)
        if self.batches.add(tp, key, value, headers, self.now):
            self.flush(tp)

    def flush(self, tp: TP) -> None:
        taken = self.batches.take(tp)
        if taken is None:
            return
        batch, count = taken
        self.brokers.produce(tp, batch, acks=self.opts.acks,
                             timeout_ms=self.opts.connect.request_timeout_ms)
        self.written[tp] = self.written.get(tp, 0) + count
        self.now = TZAwareMicros.parse(datetime.datetime.now(datetime.UTC))

    def flush_all(self) -> None:
        for tp in self.batches.waiting():
            self.flush(tp)


def write_batches(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> CoterieCommitMessage:
    """Produce every row of `batches` (runs in an executor task)."""
    with Brokers(opts.connect) as brokers:
        out = _Batches(brokers, opts)
        for batch in batches:
            cols = {name: batch.column(i).to_pylist()
                    for i, name in enumerate(batch.schema.names)}
            n = batch.num_rows
            nones = [None] * n
            keys, values = cols.get("key", nones), cols["value"]
            topics, parts = cols.get("topic", nones), cols.get("partition", nones)
            headers = cols.get("headers", nones)
            for i in range(n):
                topic = topics[i] or opts.topic
                if topic is None:
                    raise ValueError("coterie sink: a row has a null topic and no 'topic' "
                                     "option is set")
                hdrs = [(h["key"], _bytes(h["value"])) for h in headers[i] or ()]
                out.add(topic, parts[i], _bytes(keys[i]), _bytes(values[i]), hdrs)
        out.flush_all()
        return CoterieCommitMessage(out.written)


def _summary(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(sum(m.written.values()) for m in messages
               if isinstance(m, CoterieCommitMessage))


class CoterieBatchWriter(DataSourceArrowWriter):
    """`df.write.format("coterie")`: append-only, at-least-once."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("coterie sink: %d records written", _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("coterie sink: write aborted; %d records already acknowledged stay in the "
                    "topics (at-least-once)", _summary(messages))


class CoterieStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("coterie")`: at-least-once (a replayed micro-batch is produced
    again)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("coterie sink: batch %d: %d records written", batchId, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("coterie sink: batch %d aborted; %d records already acknowledged stay in "
                    "the topics (at-least-once)", batchId, _summary(messages))
