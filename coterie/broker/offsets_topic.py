"""Where the group runtime's records go: the partitions of `__consumer_offsets`.

The runtime (`coterie.broker.groups`) needs these things of its log: append a result's
records to one partition as one batch (a transactional batch of a producer, for
TxnOffsetCommit), append a transaction marker, read a partition's records back at start-up
(with the producer of transactional ones, and the markers), say how many partitions there
are, and bound the history a reload replays (compaction). `OffsetsLog` names them;
`OffsetsTopic` does them on the broker's real log, `MemoryOffsetsLog` in memory, for tests of
the runtime (it can also be told to refuse appends, like a full disk).
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Protocol

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as WireRecord
from kio.records.writers import write_new_batch

from coterie.group import Record, UnknownRecordType, decode, encode
from coterie.log.manager import LogManager
from coterie.log.partition import PartitionLog
from coterie.wire.record_batch import CONTROL_FLAG, TRANSACTIONAL_FLAG
from coterie.wire.txn_markers import COMMIT, control_batch, marker_type

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK_BYTES = 4 * 1024 * 1024
# Fewest records written since the last roll that make the active segment worth rolling for
# the cleaner (below it, only a full segment rolls).
DIRTY_FLOOR = 20_000


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record written in a transactional batch of `producer_id` (a TxnOffsetCommit)."""

    record: Record
    producer_id: int


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """The end of `producer_id`'s transaction in this partition."""

    producer_id: int
    commit: bool


# What reading a partition yields, in log order. None: a record of a type this version
# cannot read.
Logged = Record | TxnRecord | TxnMarker | None


class OffsetsLog(Protocol):
    partitions: int

    def append(self, partition: int, records: list[Record], now_ms: int,
               producer: tuple[int, int] | None = None) -> None:
        """Append `records` as one batch (a transactional batch of the (producer id,
        epoch) `producer`, if set); raises if they could not be made durable."""
        ...

    def append_marker(self, partition: int, producer: tuple[int, int], commit: bool,
                      coordinator_epoch: int, now_ms: int) -> None:
        """Append the COMMIT or ABORT marker of `producer`'s transaction."""
        ...

    def read(self, partition: int) -> Iterator[list[Logged]]:
        """The partition's records in log order, in chunks (the loader yields to the event
        loop between them)."""
        ...

    def compact(self, partition: int, live: Collection[Record], now_ms: int,
                min_segments: int) -> bool:
        """Bound what a reload replays. The in-memory log, with `min_segments` batches or
        more, becomes `live` (the last value of every live key); the broker's topic rolls
        its active segment once enough history piled up there, for the log cleaner."""
        ...


class OffsetsTopic:
    """`OffsetsLog` over the broker's `__consumer_offsets` topic (compacted by the log
    cleaner, like any compacted topic)."""

    def __init__(self, logs: LogManager, partitions: int) -> None:
        self.logs = logs
        self.partitions = partitions
        # Records written to (or loaded from) each partition since its last snapshot: the
        # history a restart would replay on top of the live values.
        self._since = [0] * partitions

    def _partition(self, index: int) -> PartitionLog:
        part = self.logs.partition(OFFSETS_TOPIC, index)
        if part is None:
            raise RuntimeError(f"{OFFSETS_TOPIC}-{index} is missing")
        return part

    def append(self, partition: int, records: list[Record], now_ms: int,
               producer: tuple[int, int] | None = None) -> None:
        stamp = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC)
        wire = []
        for i, record in enumerate(records):
            key, value = encode(record)
            wire.append(WireRecord(attributes=0, timestamp=stamp, offset=i, key=key,
                                   value=value, headers=()))
        producer_id, epoch = producer if producer is not None else (-1, -1)
        buf = io.BytesIO()
        write_new_batch(buf, NewRecordBatch(
            producer_id=producer_id, producer_epoch=epoch, base_sequence=-1,
            records=tuple(wire), attributes=0 if producer is None else TRANSACTIONAL_FLAG))
        self._partition(partition).append(buf.getvalue(), 0, now_ms, coordinator=True)
        self._since[partition] += len(records)

    def append_marker(self, partition: int, producer: tuple[int, int], commit: bool,
                      coordinator_epoch: int, now_ms: int) -> None:
        batch = control_batch(producer[0], producer[1], commit, coordinator_epoch, now_ms)
        self._partition(partition).append(batch, 0, now_ms, coordinator=True)

    def read(self, partition: int) -> Iterator[list[Logged]]:
        part = self.logs.partition(OFFSETS_TOPIC, partition)
        if part is None:
            return
        offset = part.log_start_offset
        while offset < part.log_end_offset:
            data = part.read(offset, LOAD_CHUNK_BYTES)
            if not data:
                break
            chunk: list[Logged] = []
            pos = 0
            while pos < len(data):
                batch, size = read_batch(data, pos)
                pos += size
                control = bool(batch.attributes & CONTROL_FLAG)
                transactional = bool(batch.attributes & TRANSACTIONAL_FLAG)
                for wire in batch.records:
                    offset = wire.offset + 1
                    if wire.offset < part.log_start_offset or wire.key is None:
                        continue
                    if control:
                        kind = marker_type(wire.key)
                        if kind is not None:
                            chunk.append(TxnMarker(batch.producer_id, kind == COMMIT))
                        continue
                    try:
                        record = decode(wire.key, wire.value)
                    except UnknownRecordType:
                        chunk.append(None)
                        continue
                    chunk.append(TxnRecord(record, batch.producer_id) if transactional
                                 else record)
                    self._since[partition] += 1
                offset = max(offset, batch.base_offset + batch.last_offset_delta + 1)
            yield chunk

    def compact(self, partition: int, live: Collection[Record], now_ms: int,
                min_segments: int) -> bool:
        """Hand the history to the log cleaner (coterie.broker.log_cleaner), which
        compacts this topic like any compacted topic: the cleaner never touches the active
        segment, so roll it once the records written since the last roll outnumber the live
        values and `DIRTY_FLOOR` (with the default 100 MiB segments a busy group's commits
        would otherwise all stay in the active segment, and every restart would replay
        them). A restart then replays the compacted sealed segments and at most about
        that many records more, however many commits came before. `min_segments` is the
        in-memory log's; the cleaner has its own rules. Returns whether it rolled."""
        part = self.logs.partition(OFFSETS_TOPIC, partition)
        if part is None or self._since[partition] < max(DIRTY_FLOOR, len(live)):
            return False
        part.roll()
        self._since[partition] = 0
        return True


class MemoryOffsetsLog:
    """`OffsetsLog` in memory, for tests of the runtime. `failing` makes appends raise
    (a full disk, say) until it is set back to False."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.batches: dict[int, list[list[Logged]]] = {i: [] for i in range(partitions)}
        self.failing = False

    def append(self, partition: int, records: list[Record], now_ms: int,
               producer: tuple[int, int] | None = None) -> None:
        if self.failing:
            raise OSError("no space left on device (MemoryOffsetsLog.failing)")
        self.batches[partition].append(
            list(records) if producer is None
            else [TxnRecord(r, producer[0]) for r in records])

    def append_marker(self, partition: int, producer: tuple[int, int], commit: bool,
                      coordinator_epoch: int, now_ms: int) -> None:
        if self.failing:
            raise OSError("no space left on device (MemoryOffsetsLog.failing)")
        self.batches[partition].append([TxnMarker(producer[0], commit)])

    def read(self, partition: int) -> Iterator[list[Logged]]:
        for batch in self.batches[partition]:
            yield list(batch)

    def compact(self, partition: int, live: Collection[Record], now_ms: int,
                min_segments: int) -> bool:
        if len(self.batches[partition]) < min_segments:
            return False
        self.batches[partition] = [list(live)] if live else []
        return True
