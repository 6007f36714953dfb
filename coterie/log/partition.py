"""One partition's log: an ordered run of segments in one directory.

Appends go to the last ("active") segment, which is rolled when it gets too big, too old or
its index fills up. Reads serve whole batches as stored, found by bisecting segment base
offsets and then the segment's sparse index. Old segments are dropped whole by retention,
which is what advances the log start offset.

Durability follows Kafka: writes go to the page cache (enough to survive a broker crash),
fsync happens per flush.messages / flush.ms, and rolled segments are synced by the next
maybe_flush() tick (Kafka does that on a background thread; here the broker's periodic
tick does it, since this package starts no threads). A clean close leaves a marker file;
without it, open() re-verifies every segment written since the last fsync and cuts off a
torn tail.

Producer state (coterie.log.producers) rides along: every append is checked against it (a
retried batch of an idempotent producer is answered with its first offsets and not written
again), transactions open and close in it (the last stable offset), aborted ones are indexed
(coterie.log.txn_index) for read_committed fetches, and it is snapshotted at every roll and
at close, then rebuilt on open from the newest snapshot and the batches after it.

Segments open their .log files through a shared OpenFiles set (coterie.log.open_files), so a
partition holds a descriptor only while one of its segments is in use; `release_files` gives
them all back at once (done for partitions just created, which nobody uses yet).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from coterie.log.batch import assign_offsets, stamp_log_append_time, validate_batches
from coterie.log.cleaner import (
    CHECKPOINT_FILE,
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    CleanJob,
    CleanResult,
    SegmentView,
    iter_batches,
    plan_cleaning,
    read_checkpoint,
)
from coterie.log.config import INT_MAX, LogConfig
from coterie.log.errors import (
    BelowCopyError,
    CorruptRecordError,
    InvalidRecordError,
    LogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from coterie.log.files import TMP_SUFFIX, atomic_write, fsync_dir
from coterie.log.open_files import OpenFiles, default_open_files
from coterie.log.producers import (
    SNAPSHOT_SUFFIX,
    BatchMeta,
    CompletedTxn,
    PendingUpdate,
    ProducerEntry,
    ProducerStates,
)
from coterie.log.record_scan import OffsetAndTimestamp
from coterie.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    Segment,
    parse_segment_base,
)
from coterie.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, AbortedTxnIndex
from coterie.wire.compression import decompress
from coterie.wire.record_batch import HEADER_SIZE, BatchHeader, batch_headers
from coterie.wire.records import iter_keys, read_varint
from coterie.wire.txn_markers import marker_type

CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
RECOVERY_POINT_FILE = "recovery-point-offset"
# The log start offset DeleteRecords set, when it lies inside the first segment.
LOG_START_FILE = "log-start-offset"


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What Produce answers with."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime
    record_count: int
    duplicate: bool = False  # a retried batch already in the log: nothing was written


class PartitionLog:
    """A partition's segments, with append/read/retention/recovery."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[Segment],
        now_ms: int,
        files: OpenFiles,
    ):
        self._directory = directory
        self._config = config
        self._files = files
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._sealed_unflushed: list[Segment] = []
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._closed = False
        self.recovered_bytes = 0  # bytes cut off at open; the broker may log it
        self._producers = ProducerStates()
        self._aborted = AbortedTxnIndex(directory)
        # The first offset a reader may see: the first segment's base, or above it where
        # DeleteRecords moved it (durable in LOG_START_FILE).
        self._start = segments[0].base_offset
        # The log cleaner's checkpoint: offsets below it are compacted (CHECKPOINT_FILE).
        self._first_dirty = 0
        self.cleaning = False  # a cleaning pass over this partition is under way
        # A broker of a cluster keeps this log as its copy of a partition stored in the
        # shared database (coterie.broker.cluster): every append is handed on (`on_append`,
        # with its first offset and the bytes as written) and readers see only what the
        # database holds (`durable_end`, the high watermark). None on a single broker.
        self.on_append: Callable[[int, bytes], None] | None = None
        self.durable_end: int | None = None
        # A cluster broker may keep only a partition's recent batches (a copy from a recent
        # point, or trimmed as it grew: `trim_copy`): then `store_start` is the database's
        # log start, which is the partition's, and the offsets from it up to the copy's own
        # start (`local_start_offset`) are read from the database, not here (reads of them
        # raise BelowCopyError). None: this log holds everything from its log start.
        self.store_start: int | None = None

    # --------------------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        now_ms: int,
        files: OpenFiles | None = None,
    ) -> PartitionLog:
        """Create the partition directory or load it, recovering after an unclean stop.

        `files` is the set of open segment files shared with other partitions (the
        process-wide default if None)."""
        files = default_open_files() if files is None else files
        directory.mkdir(parents=True, exist_ok=True)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        # Removed before anything else: a crash from here on must count as unclean.
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()
        recovery_point = _read_recovery_point(directory)

        _complete_swaps(directory)
        bases: set[int] = set()
        others: list[tuple[int, Path]] = []
        for path in directory.iterdir():
            if path.name.endswith((TMP_SUFFIX, CLEANED_SUFFIX, DELETED_SUFFIX)):
                path.unlink()
                continue
            base = parse_segment_base(path.name)
            if base is None:
                continue
            if path.name.endswith(LOG_SUFFIX):
                bases.add(base)
            elif path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
                others.append((base, path))
        for base, path in others:
            if base not in bases:  # index left behind by a deleted segment
                path.unlink()

        if not bases:
            with contextlib.suppress(FileNotFoundError):
                (directory / LOG_START_FILE).unlink()
            for stale in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
                stale.unlink()
            for stale in directory.glob(f"*{TXN_INDEX_SUFFIX}"):
                stale.unlink()
            first = Segment(directory, 0, config, create=True, files=files)
            return cls(directory, config, [first], now_ms, files)

        ordered = sorted(bases)
        segments: list[Segment] = []
        cut = 0
        try:
            for b in ordered:
                segments.append(Segment(directory, b, config, create=False, files=files))
            first_unsynced = 0 if not clean else len(segments) - 1
            if not clean and recovery_point > 0:
                first_unsynced = max(bisect_right(ordered, recovery_point) - 1, 0)
            cuts = []
            for i, seg in enumerate(segments[:-1]):
                if i < first_unsynced:
                    cuts.append(seg.load_trusted(ordered[i + 1]))
                else:
                    cuts.append(seg.recover(verify_crc=True))
            cuts.append(segments[-1].load_tail() if clean
                        else segments[-1].recover(verify_crc=True))
            cut = sum(cuts)
            # A segment that lost its tail (or overlaps the next) leaves a hole: what comes
            # after it goes (as in Kafka). A segment may end short of the next one's base
            # without losing anything: the cleaner removes records and leaves gaps.
            for i in range(len(segments) - 1):
                if cuts[i] or segments[i].next_offset > segments[i + 1].base_offset:
                    for dropped in segments[i + 1 :]:
                        cut += dropped.size
                        dropped.delete()
                    del segments[i + 1 :]
                    break
                segments[i].next_offset = segments[i + 1].base_offset
        except BaseException:
            for seg in segments:
                seg.close_unwritten()
            raise
        active = segments[-1]
        if active.size:
            active.first_append_ms = now_ms
        log = cls(directory, config, segments, now_ms, files)
        log.recovered_bytes = cut
        log._start = min(max(_read_offset_file(directory / LOG_START_FILE),
                             segments[0].base_offset), log.log_end_offset)
        log._load_producer_state()
        log._first_dirty = read_checkpoint(directory)
        return log

    def _load_producer_state(self) -> None:
        """The newest usable snapshot at or below the log end, then every batch after it
        (a snapshot beyond the end, left by a tail that recovery cut, is removed)."""
        end = self.log_end_offset
        self._aborted = AbortedTxnIndex.load(self._directory, list(self._bases), end)
        start = self.log_start_offset
        loaded_at = start
        for offset, path in sorted(self._snapshots(), reverse=True):
            if offset > end or offset < start:
                path.unlink()
                continue
            try:
                self._producers = ProducerStates.decode(path.read_bytes())
            except (CorruptRecordError, OSError):
                path.unlink()
                continue
            loaded_at = offset
            break
        if loaded_at < end:
            self._replay_producers(loaded_at)

    def _snapshots(self) -> list[tuple[int, Path]]:
        found = []
        for path in self._directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            try:
                found.append((int(path.name[: -len(SNAPSHOT_SUFFIX)]), path))
            except ValueError:
                continue
        return found

    def _replay_producers(self, from_offset: int) -> None:
        i = max(bisect_right(self._bases, from_offset) - 1, 0)
        for seg in self._segments[i:]:
            for pos, fields in seg.headers_from(0):
                h = BatchHeader(*fields, pos, fields[1] + 12)
                if h.last_offset < from_offset or h.producer_id < 0:
                    continue
                kind = self._marker_of(seg, h) if h.is_control else None
                for txn in self._producers.replay_batch(h, kind):
                    self._index_completed(txn, seg.base_offset)

    @staticmethod
    def _marker_of(seg: Segment, h: BatchHeader) -> int | None:
        data = seg.read_range(h.position, h.position + h.size)
        return control_marker(data, 0)

    def _index_completed(self, txn: CompletedTxn, segment_base: int) -> None:
        if not txn.aborted:
            return
        lso = self._producers.first_unstable_offset()
        self._aborted.append(segment_base, AbortedTxn(
            txn.producer_id, txn.first_offset, txn.last_offset,
            txn.last_offset + 1 if lso is None else lso))

    def _write_snapshot(self) -> None:
        end = self.log_end_offset
        atomic_write(self._directory / f"{end:020d}{SNAPSHOT_SUFFIX}", self._producers.encode())
        for offset, path in sorted(self._snapshots())[:-2]:
            if offset < end:
                path.unlink()

    # ------------------------------------------------------------------------ properties

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply new topic settings; they take effect from the next operation."""
        self._config = config
        for seg in self._segments:
            seg.update_config(config)

    @property
    def log_start_offset(self) -> int:
        """The first offset a reader may ask for: the database's log start when this log is
        a cluster broker's copy of recent batches only (`store_start`), else this log's."""
        if self.store_start is not None:
            return self.store_start
        return self.local_start_offset

    @property
    def local_start_offset(self) -> int:
        """The first offset this log's own files serve."""
        first = self._segments[0].base_offset
        return self._start if self._start > first else first

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (also the high watermark on a single node)."""
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        """What readers may see up to: the log end on a single broker; in a cluster, what the
        shared database holds of it (`durable_end`)."""
        durable = self.durable_end
        return self._segments[-1].next_offset if durable is None else durable

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction; the high watermark if none is
        open (or if it lies above). A read_committed consumer reads below it."""
        first = self._producers.first_unstable_offset()
        hw = self.high_watermark
        return hw if first is None or first > hw else first

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [fetch_offset, upper_offset)."""
        return self._aborted.overlapping(fetch_offset, upper_offset)

    def active_producers(self) -> list[ProducerEntry]:
        """Every producer this partition tracks (DescribeProducers)."""
        return list(self._producers.entries.values())

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for `expiration_ms` (producer.id.expiration.ms)."""
        return self._producers.expire(now_ms, expiration_ms)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def open_file_count(self) -> int:
        """How many of this partition's segment files are open right now."""
        return sum(seg.is_open for seg in self._segments)

    def release_files(self) -> None:
        """Close every open segment file now; each reopens when next read or written."""
        for seg in self._segments:
            seg.release_fd()

    # -------------------------------------------------------------------------- writing

    def append(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int,
        *, coordinator: bool = False,
    ) -> AppendInfo:
        """Validate, number and store a produce request's batches for this partition.

        Batches of idempotent producers are checked against the producer state first
        (coterie.log.producers): a retry of a batch already here returns the original's
        offsets with `duplicate` set and writes nothing. `coordinator` marks the broker's own
        transactional writes and markers, which skip the sequence checks."""
        self._check_open()
        headers = validate_batches(records)
        config = self._config
        for h in headers:
            if h.size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"The record batch at byte {h.position} is {h.size} bytes, larger than "
                    f"max.message.bytes ({config.max_message_bytes})"
                )
        total = len(records)
        if total > config.segment_bytes:
            raise RecordTooLargeError(
                f"The record batches are {total} bytes in one append, more than the "
                f"segment size segment.bytes ({config.segment_bytes})"
            )
        if config.compacts and not coordinator:
            self._check_keys(records, headers)
        first = self.log_end_offset
        span = sum(h.last_offset_delta + 1 for h in headers)
        last = first + span - 1
        update = None
        if not coordinator and any(h.is_control for h in headers):
            raise CorruptRecordError(
                "control batches (transaction markers) are written by the broker, not by "
                "producers")
        if any(h.producer_id >= 0 for h in headers):
            markers = [control_marker(records, h.position) for h in headers if h.is_control]
            found = self._producers.prepare(headers, first, coordinator=coordinator,
                                            marker_types=markers)
            if isinstance(found, BatchMeta):
                stamped = found.max_timestamp if config.message_timestamp_type == \
                    "LogAppendTime" else -1
                return AppendInfo(found.first_offset, found.last_offset, stamped, 0,
                                  duplicate=True)
            update = found
        self._maybe_roll(total, last, now_ms)
        data = assign_offsets(records, headers, first, leader_epoch)
        append_time = -1
        if config.message_timestamp_type == "LogAppendTime":
            stamp_log_append_time(data, headers, now_ms)
            for h in headers:
                h.max_timestamp = now_ms
            append_time = now_ms
        active = self._segments[-1]
        active.append(data, headers, first, now_ms)
        if self.on_append is not None:
            self.on_append(first, bytes(data))
        if isinstance(update, PendingUpdate):
            for txn in self._producers.apply(update):
                self._index_completed(txn, active.base_offset)
        count = sum(h.records_count for h in headers)
        self._unflushed_messages += count
        if self._unflushed_messages >= config.flush_messages:
            self.flush()
            self._last_flush_ms = now_ms
        return AppendInfo(first, last, append_time, count)

    def _check_keys(self, records: bytes | bytearray | memoryview,
                    headers: list[BatchHeader]) -> None:
        """A compacted log keeps records by key: one without a key is refused, as Kafka
        refuses it (the cleaner would only drop it)."""
        for h in headers:
            if h.is_control:
                continue
            try:
                body = decompress(h.compression, bytes(records[h.position + HEADER_SIZE:h.end]))
                if any(key is None for _, _, _, _, key, _ in iter_keys(body, h.records_count)):
                    raise InvalidRecordError(
                        "Compacted topic cannot accept message without key in topic "
                        f"partition {self._directory.name}.")
            except ValueError as exc:
                raise CorruptRecordError(f"record batch at byte {h.position}: {exc}") from exc

    def _maybe_roll(self, incoming: int, last_offset: int, now_ms: int) -> None:
        active = self._segments[-1]
        if active.size == 0:
            return
        config = self._config
        if (
            active.size + incoming > config.segment_bytes
            or (
                active.first_append_ms is not None
                and now_ms - active.first_append_ms > config.roll_ms
            )
            or active.offset_index.is_full
            or active.time_index.is_full
            or last_offset - active.base_offset > INT_MAX
        ):
            self.roll()

    def roll(self) -> None:
        """Start a new active segment at the log end offset (no-op if the active is empty)."""
        old = self._segments[-1]
        if old.size == 0:
            return
        old.seal()
        new = Segment(
            self._directory, old.next_offset, self._config, create=True, files=self._files
        )
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._sealed_unflushed.append(old)
        if self._producers.entries:
            self._write_snapshot()

    # -------------------------------------------------------------------------- reading

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing `offset`, up to `max_bytes` in total but
        always at least one batch (KIP-74), from a single segment."""
        span = self.locate(offset, max_bytes)
        if span is None:
            return b""
        seg, start, end = span
        return seg.read_range(start, end)

    def locate(self, offset: int, max_bytes: int,
               max_offset: int | None = None) -> tuple[Segment, int, int] | None:
        """Where `read(offset, max_bytes)` would read: (segment, start, end) byte positions,
        or None when it would return nothing. Fetch plans a whole response with this before
        reading a byte, then reads each range straight into the response buffer
        (Segment.read_into); the range stays valid until the log is next changed."""
        self._check_open()
        start_offset, end_offset = self.log_start_offset, self.log_end_offset
        if offset < start_offset or offset > end_offset:
            raise OffsetOutOfRangeError(
                f"Offset {offset} is out of range: the log holds [{start_offset}, {end_offset}]"
            )
        if offset == end_offset or (max_offset is not None and offset >= max_offset):
            return None
        if offset < self.local_start_offset:
            raise BelowCopyError(offset, self.local_start_offset)
        i = bisect_right(self._bases, offset) - 1
        for seg in self._segments[i:]:
            if offset >= seg.next_offset:
                continue
            found = seg.locate(max(offset, seg.base_offset))
            if found is None:
                continue
            start, size = found
            limit = start + max(max_bytes, 0)
            if max_offset is not None and max_offset < seg.next_offset:
                # read_committed: stop before the batch holding the last stable offset.
                stop = seg.locate(max_offset)
                if stop is not None:
                    if stop[0] <= start:
                        return None
                    limit = min(limit, stop[0])
                    end = seg.batch_end_within(start, start + size, limit)
                    return seg, start, min(end, stop[0])
            end = seg.batch_end_within(start, start + size, limit)
            return seg, start, end
        return None

    def offset_for_timestamp(self, timestamp: int,
                             within_copy: bool = False) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record, in offset order, whose timestamp is >=
        `timestamp`; None if there is none. Kafka's ListOffsets rule: record timestamps need
        not grow inside a batch or from batch to batch, so this is the first such record, not
        the smallest timestamp >= the target. Only the batch holding it is read
        (Segment.find_timestamp). BelowCopyError when this log holds recent batches only:
        the record may lie below them, and the database answers; unless `within_copy`, which
        asks for the first such record of this log's own files."""
        self._check_open()
        if not within_copy:
            self._check_whole()
        start = self.local_start_offset
        for seg in self._segments:
            if seg.next_offset <= start:
                continue
            found = seg.find_timestamp(timestamp, start)
            if found is not None:
                return found
        return None

    def max_timestamp(self) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp, as
        Kafka answers ListOffsets(MAX_TIMESTAMP): the first segment with the largest
        maxTimestamp, the first batch in it with that maxTimestamp, and the first record of
        that batch with that timestamp. None when no batch has a timestamp. BelowCopyError
        when this log holds recent batches only."""
        self._check_open()
        self._check_whole()
        best: Segment | None = None
        for seg in self._segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        return None if best is None else best.find_max_timestamp()

    # --------------------------------------------------------------------- maintenance

    def flush(self) -> None:
        """fsync everything written so far and record it as the recovery point."""
        self._check_open()
        for seg in self._sealed_unflushed:
            seg.flush()
        self._sealed_unflushed.clear()
        self._segments[-1].flush()
        self._unflushed_messages = 0
        self._write_recovery_point(self.log_end_offset)

    def maybe_flush(self, now_ms: int) -> None:
        """Periodic tick: sync rolled segments, and everything if flush.ms has passed."""
        if self._closed:
            return
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self._config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms
        elif self._sealed_unflushed:
            for seg in self._sealed_unflushed:
                seg.flush()
            self._sealed_unflushed.clear()
            self._write_recovery_point(self._segments[-1].base_offset)

    def enforce_retention(self, now_ms: int, retired: list[Path] | None = None) -> int:
        """Delete whole old segments per retention.ms / retention.bytes; never the active one.

        Time: a segment goes once its largest timestamp is more than retention.ms old.
        Size (Kafka's rule): the oldest segment goes while the log would still hold at
        least retention.bytes without it. Returns how many segments were deleted. With
        `retired`, their files are renamed and listed there for the caller to unlink off
        the event loop (`Segment.retire`).
        """
        self._check_open()
        config = self._config
        if not config.deletes:
            return 0
        deleted = 0
        segs = self._segments
        if config.retention_ms >= 0:
            while len(segs) > 1 and now_ms - segs[0].largest_time() > config.retention_ms:
                self._delete_oldest(retired)
                deleted += 1
        if config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes
            while len(segs) > 1 and excess - segs[0].size >= 0:
                excess -= segs[0].size
                self._delete_oldest(retired)
                deleted += 1
        return deleted

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: make `offset` the log start (nothing below it is read again),
        durably before it takes effect, and delete the segments wholly below it. An offset
        at or below the log start changes nothing. Returns the log start (the low
        watermark). Raises OffsetOutOfRangeError above the log end."""
        self._check_open()
        end = self.log_end_offset
        if offset > end:
            raise OffsetOutOfRangeError(
                f"Cannot delete records up to {offset}: the log ends at {end}")
        if self.store_start is not None and offset > self.store_start:
            self.store_start = offset
        if offset <= self.local_start_offset:
            return self.log_start_offset
        atomic_write(self._directory / LOG_START_FILE, f"{offset}\n".encode())
        self._start = offset
        self.delete_segments_before(offset)
        return self.log_start_offset

    def copy_cut(self, keep_bytes: int, below: int) -> int | None:
        """Where `trim_copy` would cut to keep at least `keep_bytes` of this log's files,
        dropping only sealed segments that end at or below `below` (what the database
        holds); None when no segment would go."""
        size = self.size_bytes
        k = 0
        for seg in self._segments[:-1]:
            if seg.next_offset > below or size - seg.size < keep_bytes:
                break
            size -= seg.size
            k += 1
        return self._segments[k].base_offset if k else None

    def trim_copy(self, offset: int) -> int:
        """A cluster broker's copy kept to its bound: the whole segments below `offset`
        (never the active one) go from this log's files, and reads of their offsets go to
        the database from now on (`store_start`, which this sets). Unlike retention, the
        log start stays where it is and so does the producer state (a producer's sequence
        and open transaction do not depend on which of its batches are copied here).
        Returns how many segments went."""
        self._check_open()
        if self.store_start is None:
            self.store_start = self.log_start_offset
        dropped = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            seg = self._segments.pop(0)
            self._bases.pop(0)
            self._drop_files(seg, None)
            self._aborted.delete_file(seg.base_offset)
            dropped += 1
        if dropped:
            self._aborted.drop_before(self.local_start_offset)
        return dropped

    def delete_segments_before(self, offset: int) -> int:
        """Delete every whole segment that lies entirely below `offset` (never the active
        one), advancing the log start. Used by the group coordinator to drop history that a
        snapshot of the current state has made redundant. Returns how many went."""
        self._check_open()
        deleted = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            self._delete_oldest()
            deleted += 1
        return deleted

    # ------------------------------------------------------------------------ cleaning

    @property
    def first_dirty_offset(self) -> int:
        """Where the cleaner's next pass starts reading keys (below it, the log is
        compacted): the checkpoint, kept within the log."""
        if not self._start <= self._first_dirty <= self.log_end_offset:
            return self.local_start_offset
        return max(self._first_dirty, self._segments[0].base_offset)

    def cleaning_job(self, now_ms: int, key_budget_bytes: int) -> CleanJob | None:
        """The cleaner pass due now over this partition (coterie.log.cleaner), or None:
        not compacted, not dirty enough, or a pass already under way."""
        config = self._config
        if self._closed or self.cleaning or not config.compacts or len(self._segments) < 2:
            return None
        if self.store_start is not None:
            return None  # a copy of recent batches only: compacted after its next take
        first_dirty = self.first_dirty_offset
        views = [SegmentView(seg.base_offset, seg.next_offset, seg.size, seg.log_path,
                             seg.last_append_ms, seg.largest_time())
                 for seg in self._segments[:-1]]
        first_ts = None
        if config.max_compaction_lag_ms < 2**63 - 1:
            first_ts = self._first_timestamp_from(first_dirty)
        aborted = tuple((a.producer_id, a.first_offset, a.last_offset)
                        for a in self._aborted.overlapping(self._segments[0].base_offset,
                                                           self.log_end_offset))
        producer_last = {pid: e.last_offset for pid, e in self._producers.entries.items()}
        return plan_cleaning(
            views, first_dirty, self.last_stable_offset, now_ms,
            min_dirty_ratio=config.min_cleanable_dirty_ratio,
            min_lag_ms=config.min_compaction_lag_ms, max_lag_ms=config.max_compaction_lag_ms,
            delete_retention_ms=config.delete_retention_ms, first_dirty_timestamp=first_ts,
            aborted=aborted, producer_last=producer_last, key_budget_bytes=key_budget_bytes,
            group_bytes=config.segment_bytes)

    def _first_timestamp_from(self, offset: int) -> int | None:
        """The first batch timestamp of the first sealed segment at or after `offset`."""
        for seg in self._segments[:-1]:
            if seg.next_offset > offset and seg.size >= HEADER_SIZE:
                fields = next(seg.headers_from(0))[1]
                return fields[7]  # baseTimestamp
        return None

    def install_cleaned(self, result: CleanResult, retired: list[Path] | None = None) -> bool:
        """Swap in the files a cleaner pass wrote, then move the checkpoint. Returns False
        (and deletes them) when the log changed under the pass: a replaced segment is gone
        (retention, DeleteRecords), or the log was closed.

        Per group, crash-safe at every step: the `.cleaned` file becomes `.swap` (complete
        and synced), the replaced segments go, the `.swap` becomes the first one's `.log`;
        `_complete_swaps` finishes an interrupted swap at open. The indexes are built from
        the positions the pass reported, without reading the file. With `retired`, the
        replaced segments' files are renamed to `*.deleted` and listed there for the caller
        to unlink off the event loop (unlinking a 128 MiB file takes 10-30 ms); without,
        they are unlinked at once."""
        current = {seg.base_offset: seg for seg in self._segments[:-1]}
        stale = self._closed or any(
            current.get(v.base_offset) is None or current[v.base_offset].size != v.size
            for g in result.groups for v in g.replaced)
        if stale:
            for g in result.groups:
                with contextlib.suppress(FileNotFoundError):
                    g.path.unlink()
            return False
        for group in result.groups:
            first = group.replaced[0]
            swap = first.path.with_name(first.path.name + SWAP_SUFFIX)
            os.replace(group.path, swap)
            fsync_dir(self._directory)
            old = [current[v.base_offset] for v in group.replaced]
            at = self._segments.index(old[0])
            for seg in old:
                self._drop_files(seg, retired)
                if seg is not old[0]:
                    self._aborted.delete_file(seg.base_offset)
            os.replace(swap, first.path)
            fsync_dir(self._directory)
            new = Segment(self._directory, first.base_offset, self._config, create=False,
                          files=self._files)
            new.adopt(group.batches, old[-1].next_offset)
            new.release_fd()
            self._segments[at:at + len(old)] = [new]
        self._bases = [seg.base_offset for seg in self._segments]
        self._first_dirty = result.cleaned_to
        atomic_write(self._directory / CHECKPOINT_FILE, f"{result.cleaned_to}\n".encode())
        return True

    def _drop_files(self, seg: Segment, retired: list[Path] | None) -> None:
        """Delete a segment's files now, or rename them into `retired` to unlink later."""
        if seg in self._sealed_unflushed:
            self._sealed_unflushed.remove(seg)
        if retired is None:
            seg.delete()
        else:
            retired += seg.retire()

    def _delete_oldest(self, retired: list[Path] | None = None) -> None:
        seg = self._segments.pop(0)
        self._bases.pop(0)
        self._drop_files(seg, retired)
        start = self.log_start_offset
        self._aborted.drop_before(start)
        self._aborted.delete_file(seg.base_offset)
        self._producers.truncate_head(start)
        for offset, path in self._snapshots():
            if offset < start:
                path.unlink()

    def close(self) -> None:
        """Flush, leave the clean-shutdown marker, and release the files. Idempotent."""
        if self._closed:
            return
        self._segments[-1].seal()
        self.flush()
        if self._producers.entries:
            self._write_snapshot()
        self._closed = True
        for seg in self._segments:
            seg.close()
        marker = self._directory / CLEAN_SHUTDOWN_FILE
        marker.write_bytes(b"")
        fsync_dir(self._directory)

    def close_unclean(self) -> None:
        """Release the files without flushing, writing or the marker, as a crash would (for
        tests, for deleting, and for giving up on a broken disk)."""
        if self._closed:
            return
        self._closed = True
        for seg in self._segments:
            seg.close_unwritten()

    def delete(self) -> None:
        """Close and remove the partition directory with all its data."""
        self.close_unclean()
        shutil.rmtree(self._directory, ignore_errors=True)

    def _check_whole(self) -> None:
        if self.store_start is not None and self.store_start < self.local_start_offset:
            raise BelowCopyError(self.store_start, self.local_start_offset)

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"partition log {self._directory} is closed")

    def _write_recovery_point(self, offset: int) -> None:
        atomic_write(self._directory / RECOVERY_POINT_FILE, f"{offset}\n".encode())


def write_copy(directory: Path, log_start: int, log_end: int, chunks: Iterable[bytes],
               segment_bytes: int, producers: ProducerStates | None = None) -> None:
    """Lay out a partition's batches, as stored elsewhere, as this log's files: segments of
    whole batches (a new one where the next chunk would pass `segment_bytes`), each named by
    its first batch's offset, and the log start. `PartitionLog.open` then recovers them as
    after an unclean stop, building the indexes, the producer state and the aborted
    transactions from the batches themselves. A log with no batches left starts empty at
    `log_end`, and so does the active segment when the last batches are gone (compaction
    removed them: the log end stays where it was). `directory` must be empty or missing.
    `producers`: the producer state as of `log_start` (a copy of recent batches only: the
    state the batches before them left), written as the snapshot the open starts from."""
    directory.mkdir(parents=True, exist_ok=True)
    out = None
    size = 0
    end = 0
    try:
        for chunk in chunks:
            if not chunk:
                continue
            end = batch_headers(chunk, strict=True)[-1].next_offset
            if out is None or (size and size + len(chunk) > segment_bytes):
                if out is not None:
                    out.close()
                base = int.from_bytes(chunk[:8], "big", signed=True)
                out = (directory / f"{base:020d}{LOG_SUFFIX}").open("xb")
                size = 0
            out.write(chunk)
            size += len(chunk)
    finally:
        if out is not None:
            out.close()
    if (out is None and log_end > 0) or (out is not None and end < log_end):
        (directory / f"{log_end:020d}{LOG_SUFFIX}").touch()
    if log_start > 0:
        atomic_write(directory / LOG_START_FILE, f"{log_start}\n".encode())
    if producers is not None and producers.entries:
        atomic_write(directory / f"{log_start:020d}{SNAPSHOT_SUFFIX}", producers.encode())


def control_marker(buf: bytes | bytearray | memoryview, position: int) -> int | None:
    """The marker type (0 ABORT, 1 COMMIT) of the control batch at `position`: its first
    record's key, read in place (control batches are never compressed)."""
    try:
        body = bytes(buf[position + HEADER_SIZE : position + HEADER_SIZE + 64])
        _, pos = read_varint(body, 0)  # record length
        pos += 1  # attributes
        _, pos = read_varint(body, pos)  # timestamp delta
        _, pos = read_varint(body, pos)  # offset delta
        size, pos = read_varint(body, pos)
        return marker_type(body[pos : pos + size]) if size >= 0 else None
    except Exception:  # a malformed control record is no marker
        return None


def _complete_swaps(directory: Path) -> None:
    """Finish the cleaner swaps a crash interrupted (see `install_cleaned`): each `.swap`
    file is a complete cleaned segment; the segments whose offsets it covers go, and it
    takes the first one's name. Segments past its last offset stay: they hold only records
    that later ones supersede, so keeping them loses nothing."""
    for swap in sorted(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = parse_segment_base(swap.name)
        if base is None:
            swap.unlink()
            continue
        last = base
        for _, fields, _ in iter_batches(swap, swap.stat().st_size):
            last = fields[0] + fields[6]
        for path in directory.iterdir():
            other = parse_segment_base(path.name)
            if (other is not None and base <= other <= last and path != swap
                    and path.name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX,
                                            TXN_INDEX_SUFFIX))
                    and not (other == base and path.name.endswith(TXN_INDEX_SUFFIX))):
                path.unlink()
        os.replace(swap, directory / f"{base:020d}{LOG_SUFFIX}")
    fsync_dir(directory)


def _read_recovery_point(directory: Path) -> int:
    return _read_offset_file(directory / RECOVERY_POINT_FILE)


def _read_offset_file(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return 0
