"""The batch and streaming readers, and the task that reads one offset range.

Split of work. The driver plans (`planning`): partitions, offsets, ranges of at most
`maxRecordsPerPartition` offsets (more with `minPartitions`), one InputPartition each. An
executor task (`read_range`) opens its own connection to the partition's leader through
coterie.client, fetches from the range's start until its end, and yields one Arrow batch per
Fetch answer. Readers carry only checked options (`ReadOptions`) and never a connection:
Spark pickles them into every task.

Streaming. Offsets are Spark-Kafka-shaped JSON, `{"topic": {"0": 42}}` (next offset to read).
`latestOffset(start, limit)` asks the leaders for their high watermarks and, under
`ReadMaxRows` (from `maxOffsetsPerTrigger`, which `getDefaultReadLimit` reports), admits at
most that many offsets, shared among partitions by backlog. `prepareForTriggerAvailableNow`
freezes the high watermarks of the moment as the target, so an AvailableNow query drains
what was there when it started and stops (the read limit still splits it into batches).
Partitions that appear later start at their earliest offset; partitions that vanish are data
loss. With `group.id`, finished batches' end offsets are committed to that consumer group (in
`commit(end)` and at the next `latestOffset(start)`, see `_commit_group`): for visibility only
(lag in every group tool); Spark's checkpoint remains what a restarted query resumes from, and
a failed group commit is logged, never fatal.

Out-of-range fetches in a task (retention deleted the range's start after planning): with
failOnDataLoss=true the task fails with DataLossError; with false it logs a warning and skips
to the log start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from kio.schema.errors import ErrorCode
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from coterie.client.errors import AuthenticationError, ClientError
from coterie.spark.brokers import EARLIEST_TS, LATEST_TS, Brokers
from coterie.spark.columns import decode_columns
from coterie.spark.options import ReadOptions
from coterie.spark.planning import (
    check_order,
    data_loss,
    resolve,
    topic_partitions,
)
from coterie.spark.ranges import (
    OffsetRange,
    from_offset_json,
    rate_limit,
    split_ranges,
    to_offset_json,
)
from coterie.spark.schema import arrow_schema

log = logging.getLogger("coterie.spark")
E = ErrorCode
TP = tuple[str, int]

RETRIABLE_FETCH = frozenset({E.not_leader_or_follower, E.leader_not_available,
                             E.unknown_topic_or_partition, E.fenced_leader_epoch,
                             E.unknown_leader_epoch, E.request_timed_out})
FETCH_ATTEMPTS = 20
EMPTY_FETCH_LIMIT = 50


class CoterieInputPartition(InputPartition):
    """One Spark task: the records [start, end) of one topic partition."""

    def __init__(self, offsets: OffsetRange) -> None:
        super().__init__(offsets)
        self.offsets = offsets


def read_range(opts: ReadOptions, rng: OffsetRange, schema: pa.Schema,
               ) -> Iterator[pa.RecordBatch]:
    """Fetch and decode [rng.start, rng.end) of one partition (runs in an executor)."""
    tp = (rng.topic, rng.partition)
    pos = rng.start
    failures = empty = 0
    with Brokers(opts.connect) as brokers:
        while pos < rng.end:
            try:
                result = brokers.fetch(tp, pos, max_bytes=opts.fetch_max_bytes)
            except ClientError as e:
                failures += 1
                if failures >= FETCH_ATTEMPTS or isinstance(e, AuthenticationError):
                    raise  # (a refused login or certificate does not get better by retrying)
                log.info("%s-%d: fetch at %d failed (%s); retrying", *tp, pos, e)
                time.sleep(min(1.0, 0.05 * failures))
                continue
            if result.error == E.offset_out_of_range:
                start = brokers.list_offsets([tp], EARLIEST_TS)[tp]
                end = brokers.list_offsets([tp], LATEST_TS)[tp]
                if pos < start:
                    data_loss(opts, f"{tp[0]}-{tp[1]}: offsets {pos}..{min(start, rng.end) - 1}"
                                    f" are gone (the log now starts at {start})")
                    pos = start
                    continue
                data_loss(opts, f"{tp[0]}-{tp[1]}: offset {pos} is beyond the end of the log "
                                f"({end})")
                return
            if result.error in RETRIABLE_FETCH:
                failures += 1
                if failures >= FETCH_ATTEMPTS:
                    raise ClientError(f"{tp[0]}-{tp[1]}: fetch kept failing with "
                                      f"{result.error.name}")
                time.sleep(min(1.0, 0.05 * failures))
                continue
            if result.error != E.none:
                raise ClientError(f"{tp[0]}-{tp[1]}: fetch at {pos} failed with "
                                  f"{result.error.name}")
            failures = 0
            columns = decode_columns(result.records, tp[0], tp[1], pos, rng.end,
                                     with_headers="headers" in schema.names)
            if len(columns):
                yield columns.to_arrow(tp[0], tp[1], schema)
            if columns.next_offset > pos:
                pos = columns.next_offset
                empty = 0
                continue
            if result.high_watermark <= pos:
                data_loss(opts, f"{tp[0]}-{tp[1]}: the log ends at {result.high_watermark}, "
                                f"before the planned end {rng.end}")
                return
            empty += 1
            if empty >= EMPTY_FETCH_LIMIT:
                raise ClientError(f"{tp[0]}-{tp[1]}: no records at offset {pos} after "
                                  f"{empty} fetches (high watermark {result.high_watermark})")


class _Reading:
    """What the batch and the stream reader share: options, schema, the read itself."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, CoterieInputPartition):
            return iter(())  # Spark's stand-in when there was nothing to read
        return read_range(self.opts, partition.offsets, arrow_schema(self.schema))

    def _tasks(self, starts: dict[TP, int], ends: dict[TP, int]) -> list[InputPartition]:
        ranges = split_ranges(starts, ends, max_records=self.opts.max_records_per_partition,
                              min_partitions=self.opts.min_partitions)
        return [CoterieInputPartition(r) for r in ranges]


class CoterieBatchReader(_Reading, DataSourceReader):
    """A batch query: startingOffsets (default earliest) to endingOffsets (default latest),
    resolved once, on the driver, when Spark asks for the partitions."""

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        with Brokers(opts.connect) as brokers:
            tps = topic_partitions(brokers, opts)
            starts = resolve(brokers, opts, tps, opts.starting, "startingOffsets", -2)
            ends = resolve(brokers, opts, tps, opts.ending, "endingOffsets", -1)
        return self._tasks(starts, check_order(opts, starts, ends))


class CoterieStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming query (see the module docstring). Lives in the driver's streaming runner
    for the life of the query, which is why it may keep a `Brokers` between calls; that
    connection is dropped when Spark pickles the reader for its tasks."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        super().__init__(opts, schema)
        self._brokers: Brokers | None = None
        self._target: dict[TP, int] | None = None
        self._latest: dict[TP, int] | None = None
        self._committed: dict[TP, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "schema": self.schema}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opts"], state["schema"])  # type: ignore[misc]

    @property
    def brokers(self) -> Brokers:
        if self._brokers is None:
            self._brokers = Brokers(self.opts.connect)
        return self._brokers

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run one broker round on the kept connection; a broken one is replaced once."""
        try:
            return fn(self.brokers, *args)
        except ClientError:
            self._reset()
            return fn(self.brokers, *args)

    def _reset(self) -> None:
        if self._brokers is not None:
            self._brokers.close()
            self._brokers = None

    # -- offsets ------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        def plan(brokers: Brokers) -> dict[TP, int]:
            tps = topic_partitions(brokers, self.opts)
            return resolve(brokers, self.opts, tps, self.opts.starting, "startingOffsets", -2)
        return to_offset_json(self._call(plan))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        def target(brokers: Brokers) -> dict[TP, int]:
            return brokers.list_offsets(topic_partitions(brokers, self.opts), LATEST_TS)
        self._target = self._call(target)

    def _begin(self, brokers: Brokers, start: dict[TP, int], tps: list[TP]) -> dict[TP, int]:
        """Where each current partition starts: its offset in `start`, or its earliest
        offset if it is new."""
        new = [tp for tp in tps if tp not in start]
        earliest = brokers.list_offsets(new, EARLIEST_TS) if new else {}
        return {tp: start.get(tp, earliest.get(tp, 0)) for tp in tps}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin_json = from_offset_json(start)
        self._commit_group(begin_json)

        def plan(brokers: Brokers) -> tuple[dict[TP, int], dict[TP, int]]:
            tps = topic_partitions(brokers, self.opts)
            if self._target is not None:
                tps = [tp for tp in tps if tp in self._target]
            gone = sorted(set(begin_json) - set(tps))
            if gone and self._target is None:
                data_loss(self.opts, "partitions " + ", ".join(f"{t}-{p}" for t, p in gone)
                          + " no longer exist")
            latest = brokers.list_offsets(tps, LATEST_TS) if tps else {}
            return self._begin(brokers, begin_json, tps), latest

        begin, latest = self._call(plan)
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items()}
        for tp in sorted(latest):
            if latest[tp] < begin[tp]:
                data_loss(self.opts, f"{tp[0]}-{tp[1]}: the log now ends at {latest[tp]}, "
                                     f"before offset {begin[tp]} already read (was the topic "
                                     "recreated?)")
        ahead = {tp: max(latest[tp], begin[tp]) if self.opts.fail_on_data_loss else latest[tp]
                 for tp in latest}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, ahead, limit.max_rows)
            end = {tp: min(off, ahead[tp]) for tp, off in end.items()}
        else:
            end = ahead
        return to_offset_json(end)

    def reportLatestOffset(self) -> dict | None:
        return to_offset_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ends = from_offset_json(end)
        begins = from_offset_json(start)
        if any(tp not in begins for tp in ends):
            begins = self._call(lambda b: self._begin(b, begins, sorted(ends)))
        return self._tasks(begins, ends)

    # -- progress -----------------------------------------------------------------------------
    def commit(self, end: dict) -> None:
        self._commit_group(from_offset_json(end))

    def _commit_group(self, offsets: dict[TP, int]) -> None:
        """Commit `offsets` (processed up to, exclusive) to `group.id`, if set and new.

        Spark calls `commit(end)` for a batch only when it plans the next one that has data,
        so the group would trail by a batch (forever, once the stream is idle, and for the
        last batch of an AvailableNow query). `latestOffset(start)` is only called once the
        batch ending at `start` is complete, so it commits `start` as well."""
        group = self.opts.group_id
        if group is None or not offsets or offsets == self._committed:
            return
        try:
            self._call(lambda b: b.commit(group, offsets))
            self._committed = dict(offsets)
        except ClientError as e:
            log.warning("group %s: committing %s failed (%s); the query goes on (Spark's "
                        "checkpoint, not the group, is what a restart resumes from)",
                        group, to_offset_json(offsets), e)

    def stop(self) -> None:
        self._reset()
