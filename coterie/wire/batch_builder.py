"""The producing half every coterie producer shares: choosing a record's partition as Kafka's
default partitioner does, buffering records per partition, and encoding a full buffer as one
v2 record batch.

The Python producer (`coterie.client.producer`, what `coterie produce` sends with) and the
Spark sink (`coterie.spark.writer`) differ in how they send a batch (asyncio against a
blocking executor task) but must agree on where a record goes and what bytes a batch is:
keyed records land where Java clients put them, and both fill one partition's batch before
moving on to the next for records without a key (sticky partitioning). Pure: the caller
passes the timestamp in and does the I/O.

Batches are uncompressed, CreateTime, with no producer id (not idempotent).
"""

from __future__ import annotations

import io
import itertools
import random
from collections.abc import Iterable

from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from coterie.common.partitioning import default_partition

TP = tuple[str, int]
RECORD_OVERHEAD = 24  # rough bytes per record beyond key, value and headers


class BatchBuilder:
    """Records buffered per partition until `batch_bytes` (roughly) are waiting."""

    def __init__(self, batch_bytes: int, rng: random.Random | None = None) -> None:
        if batch_bytes <= 0:
            raise ValueError("batch_bytes must be positive")
        self.batch_bytes = batch_bytes
        self._pending: dict[TP, list[Record]] = {}
        self._sizes: dict[TP, int] = {}
        self._sticky: dict[str, int] = {}
        # Producers (Spark tasks, several CLI runs) start on different partitions.
        self._rotation = itertools.count((rng or random).randrange(1 << 16))

    def partition_for(self, topic: str, key: bytes | None, count: int) -> int:
        """Kafka's default partitioner: murmur2 of a key; without one, the partition whose
        batch is being filled (a new one after that batch is taken)."""
        if key is not None:
            return default_partition(key, count)
        partition = self._sticky.get(topic)
        if partition is None:  # the next partition in turn, only when a batch is started
            partition = self._sticky[topic] = next(self._rotation) % count
        return partition

    def add(self, tp: TP, key: bytes | None, value: bytes | None,
            headers: Iterable[tuple[str, bytes | None]], timestamp: TZAwareMicros) -> bool:
        """Buffer one record; True once its partition's batch is full (time to `take` it)."""
        records = self._pending.setdefault(tp, [])
        hdrs = tuple(headers)
        records.append(Record(
            attributes=i8(0), timestamp=timestamp, offset=i64(len(records)), key=key,
            value=value, headers=tuple(RecordHeader(key=k.encode("utf-8"), value=v)
                                       for k, v in hdrs)))
        size = self._sizes.get(tp, 0) + RECORD_OVERHEAD + len(key or b"") + len(value or b"") \
            + sum(len(k) + len(v or b"") for k, v in hdrs)
        self._sizes[tp] = size
        return size >= self.batch_bytes

    def take(self, tp: TP) -> tuple[bytes, int] | None:
        """The partition's buffered records as one encoded batch and their count (None when
        nothing waits); records without a key move on to another partition."""
        if self._sticky.get(tp[0]) == tp[1]:
            del self._sticky[tp[0]]
        records = self._pending.pop(tp, None)
        self._sizes.pop(tp, None)
        if not records:
            return None
        buf = io.BytesIO()
        write_new_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1),
                                            base_sequence=i32(-1), records=tuple(records),
                                            attributes=i16(0)))
        return buf.getvalue(), len(records)

    def waiting(self) -> list[TP]:
        """The partitions with buffered records, in order."""
        return sorted(self._pending)

    @property
    def buffered(self) -> int:
        return sum(len(r) for r in self._pending.values())

    def clear(self) -> None:
        self._pending.clear()
        self._sizes.clear()
