"""The log cleaner: compaction of topics whose cleanup.policy includes "compact".

A compacted topic keeps, for every key, at least its last value: Kafka Connect and Kafka
Streams keep their state in such topics, and `__consumer_offsets` is one. The cleaner
follows Kafka's rules (the broker's `LogCleaner`), restated in coterie's own structure:

* Only sealed segments are cleaned, and only a prefix of them: the cleanable range ends at
  the first segment that is the active one, that holds an offset at or past the last stable
  offset (an open transaction), or whose newest record is younger than
  min.compaction.lag.ms. Offsets are never renumbered: a record that survives keeps its
  offset, and the log gets gaps (as on Kafka; consumers skip them).
* The log is split at the cleaner's checkpoint (`first_dirty`) into a clean section, already
  compacted, and a dirty section. A pass runs when dirty bytes are at least
  min.cleanable.dirty.ratio of the cleanable bytes, or when the first dirty segment has
  waited longer than max.compaction.lag.ms.
* A pass reads the dirty section into a map of key -> last offset (aborted transactional
  records and transaction markers are not keys), then rewrites every cleanable segment from
  the log start, keeping a record when no later offset of its key is in the map.
* Tombstones (a null value) and transaction markers whose transaction kept no records are
  removed only from the clean section, once their segment was last written more than
  delete.retention.ms ago: a consumer that reads from the start within that time sees every
  delete. (Kafka 2.x's rule; Kafka 3.1+ stamps the horizon into the batch instead, which
  coterie does not do; written down in docs/decisions.md.)
* Records of aborted transactions are dropped, and so are records without a key (Kafka
  refuses those on produce to a compacted topic; they can exist from before the policy
  changed). A batch that loses every record goes, except the last batch of a producer the
  partition still tracks, kept with no records so that its sequence survives a reload.
* Batches that keep all their records are copied byte for byte; thinned ones are rebuilt
  with the same base offset, last offset delta, producer fields and codec (recompressed).
* Consecutive segments are cleaned into one file while their original sizes fit in
  segment.bytes, so the segment count stays bounded.

This module does the part that takes time: reading and writing files, on a worker thread,
with no state shared with the broker's event loop. `plan_cleaning` (on the loop) says what
to clean from a snapshot of the partition's segments; `run_cleaning` (on the worker) writes
each group's cleaned `.cleaned` file, fsyncs it and reports where its batches are, so that
`PartitionLog.install_cleaned` (back on the loop) swaps files and builds indexes without
reading a byte. Sealed segments never change while they are cleaned; retention or
DeleteRecords may delete one, and then the result is thrown away.

Crash safety, with the swap in coterie.log.partition: a cleaned file becomes `.swap` only
when complete and synced; at open a `.cleaned` file is deleted and a `.swap` completes its
swap. Every version of every segment holds the last value of every key whose last value it
ever held, so any mix of old and new segments after a crash still gives each key its last
value; the checkpoint moves only after the whole pass is installed.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from coterie.wire.compression import compress, decompress
from coterie.wire.record_batch import (
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
)
from coterie.wire.records import iter_keys

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# What one key costs the offset map, counted against log.cleaner.dedupe.buffer.size: a
# Python dict entry with a bytes key and an int is about this much before the key itself.
KEY_OVERHEAD_BYTES = 100
_READ_CHUNK = 4 * 1024 * 1024
_CRC = struct.Struct(">I")

# HEADER field positions.
_BASE, _LENGTH, _EPOCH, _MAGIC, _ATTRS, _LAST_DELTA = 0, 1, 2, 3, 5, 6
_BASE_TS, _MAX_TS, _PID, _PEPOCH, _SEQ, _COUNT = 7, 8, 9, 10, 11, 12


@dataclass(frozen=True, slots=True)
class SegmentView:
    """What the cleaner needs of one sealed segment (taken on the loop, read on the worker)."""

    base_offset: int
    next_offset: int
    size: int
    path: Path
    last_modified_ms: int  # the last append: tombstone and marker expiry count from it
    largest_time: int  # the newest record (min.compaction.lag.ms counts from it)


@dataclass(frozen=True, slots=True)
class CleanJob:
    """One pass over one partition."""

    segments: tuple[SegmentView, ...]  # the log's first segment .. the last cleanable one
    first_dirty: int  # below it the log is already compacted (a segment boundary)
    aborted: tuple[tuple[int, int, int], ...]  # (producer id, first offset, marker offset)
    producer_last: Mapping[int, int]  # producer id -> offset of its last batch
    delete_horizon_ms: int  # segments last written before it lose their tombstones
    key_budget_bytes: int  # log.cleaner.dedupe.buffer.size
    group_bytes: int  # the largest a cleaned file may get (segment.bytes)
    dirty_ratio: float = 0.0  # of the cleanable bytes, how much is dirty (the dirtiest goes first)

    @property
    def end(self) -> int:
        return self.segments[-1].next_offset if self.segments else self.first_dirty


@dataclass(slots=True)
class CleanedGroup:
    """Segments `replaced` cleaned into the file `path` (a `.cleaned` file, synced)."""

    replaced: tuple[SegmentView, ...]
    path: Path
    size: int
    # (position, base offset, last offset, size, max timestamp) of each batch, in order.
    batches: list[tuple[int, int, int, int, int]]
    # What the pass did to the replaced segments' batches, by base offset: the ones it
    # dropped, and the indexes in `batches` of the ones it rebuilt with fewer records (every
    # other batch is copied byte for byte). A cluster's leader does the same to the rows of
    # the database (coterie.broker.cluster), which hold the same batches.
    dropped: list[int] = field(default_factory=list)
    rebuilt: list[int] = field(default_factory=list)


@dataclass(slots=True)
class CleanResult:
    job: CleanJob
    groups: list[CleanedGroup]
    cleaned_to: int  # the new first dirty offset
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0


def plan_cleaning(segments: list[SegmentView], first_dirty: int, last_stable_offset: int,
                  now_ms: int, *, min_dirty_ratio: float, min_lag_ms: int, max_lag_ms: int,
                  delete_retention_ms: int, first_dirty_timestamp: int | None,
                  aborted: tuple[tuple[int, int, int], ...], producer_last: Mapping[int, int],
                  key_budget_bytes: int, group_bytes: int) -> CleanJob | None:
    """The pass to run now over a partition whose sealed segments are `segments` (the
    active one left out), or None when it is not due. `first_dirty_timestamp` is the first
    record time of the first dirty segment, for max.compaction.lag.ms."""
    cleanable: list[SegmentView] = []
    for seg in segments:
        if seg.next_offset > last_stable_offset or now_ms - seg.largest_time < min_lag_ms:
            break
        cleanable.append(seg)
    if not cleanable or cleanable[-1].next_offset <= first_dirty:
        return None
    dirty = sum(s.size for s in cleanable if s.next_offset > first_dirty)
    total = sum(s.size for s in cleanable)
    overdue = (first_dirty_timestamp is not None and first_dirty_timestamp >= 0
               and now_ms - first_dirty_timestamp > max_lag_ms)
    if not overdue and (total == 0 or dirty / total < min_dirty_ratio):
        return None
    return CleanJob(tuple(cleanable), first_dirty, aborted, producer_last,
                    now_ms - delete_retention_ms, key_budget_bytes, group_bytes,
                    dirty / total if total else 1.0)


# ------------------------------------------------------------------------------ reading

def iter_batches(path: Path, size: int) -> Iterator[tuple[int, tuple, memoryview]]:
    """(position, HEADER fields, the whole batch) of every batch in a segment file."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        pos = 0
        buf = memoryview(b"")
        buf_pos = 0
        while pos < size:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf, buf_pos, off = memoryview(os.pread(fd, _READ_CHUNK, pos)), pos, 0
                if len(buf) < HEADER_SIZE:
                    raise OSError(f"{path}: batch header at byte {pos} is cut short")
            fields = HEADER.unpack_from(buf, off)
            length = fields[_LENGTH] + LOG_OVERHEAD
            if off + length > len(buf):
                buf, buf_pos, off = (memoryview(os.pread(fd, max(_READ_CHUNK, length), pos)),
                                     pos, 0)
                if len(buf) < length:
                    raise OSError(f"{path}: batch at byte {pos} is cut short")
            yield pos, fields, buf[off:off + length]
            pos += length
    finally:
        os.close(fd)


def _body(fields: tuple, batch: memoryview) -> bytes:
    return decompress(fields[_ATTRS] & COMPRESSION_MASK, bytes(batch[HEADER_SIZE:]))


class _Aborted:
    """Which transactional batches belong to aborted transactions."""

    def __init__(self, aborted: tuple[tuple[int, int, int], ...]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for pid, first, last in aborted:
            self._by_producer.setdefault(pid, []).append((first, last))

    def __contains__(self, batch: tuple[int, int]) -> bool:
        pid, base = batch
        return any(first <= base <= last for first, last in self._by_producer.get(pid, ()))


# ------------------------------------------------------------------------------ the pass

def build_key_map(job: CleanJob, aborted: _Aborted, stop: threading.Event | None = None
                  ) -> tuple[dict[bytes, int], int, int]:
    """key -> last offset over the dirty section, whole segments only, as far as the key
    budget allows (at least one segment). Returns the map, where it stops (the new first
    dirty offset) and the bytes read."""
    keys: dict[bytes, int] = {}
    used = 0
    read = 0
    reach = job.first_dirty
    for seg in job.segments:
        if seg.next_offset <= job.first_dirty:
            continue
        if keys and used >= job.key_budget_bytes:
            break
        if stop is not None and stop.is_set():
            raise CleaningStopped
        for _, fields, batch in iter_batches(seg.path, seg.size):
            read += len(batch)
            attrs = fields[_ATTRS]
            if attrs & CONTROL_FLAG or (attrs & TRANSACTIONAL_FLAG
                                        and (fields[_PID], fields[_BASE]) in aborted):
                continue
            base = fields[_BASE]
            try:
                for _, _, delta, _, key, _ in iter_keys(_body(fields, batch), fields[_COUNT]):
                    if key is not None:
                        if key not in keys:
                            used += KEY_OVERHEAD_BYTES + len(key)
                        keys[key] = base + delta
            except ValueError:  # an unreadable payload holds no keys the cleaner can use
                continue
        reach = seg.next_offset
    return keys, reach, read


class CleaningStopped(Exception):
    """The broker is stopping: the pass gave up (its files are removed)."""


def run_cleaning(job: CleanJob, stop: threading.Event | None = None) -> CleanResult:
    """Clean the job's segments into `.cleaned` files beside them (on a worker thread).
    `stop`, once set, ends the pass at the next segment with CleaningStopped."""
    aborted = _Aborted(job.aborted)
    keys, cleaned_to, read = build_key_map(job, aborted, stop)
    result = CleanResult(job, [], cleaned_to, bytes_read=read)
    todo = [s for s in job.segments if s.next_offset <= cleaned_to]
    groups: list[list[SegmentView]] = []
    for seg in todo:
        last = groups[-1] if groups else None
        if (last is not None and sum(s.size for s in last) + seg.size <= job.group_bytes
                and seg.next_offset - last[0].base_offset <= 2**31 - 1):
            last.append(seg)
        else:
            groups.append([seg])
    txn_kept: dict[int, bool] = {}  # producer id -> its open transaction kept a record
    try:
        for group in groups:
            if stop is not None and stop.is_set():
                raise CleaningStopped
            result.groups.append(_clean_group(job, group, keys, aborted, txn_kept, result,
                                              stop))
    except BaseException:
        for done in result.groups:
            with contextlib.suppress(FileNotFoundError):
                done.path.unlink()
        raise
    return result


def _clean_group(job: CleanJob, group: list[SegmentView], keys: dict[bytes, int],
                 aborted: _Aborted, txn_kept: dict[int, bool],
                 result: CleanResult, stop: threading.Event | None = None) -> CleanedGroup:
    first = group[0]
    path = first.path.with_name(first.path.name + CLEANED_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    placed: list[tuple[int, int, int, int, int]] = []
    dropped: list[int] = []
    rebuilt: list[int] = []
    position = 0
    pending: list[bytes | memoryview] = []
    pending_bytes = 0
    try:
        for seg in group:
            if stop is not None and stop.is_set():
                raise CleaningStopped
            expire = (seg.next_offset <= job.first_dirty
                      and seg.last_modified_ms < job.delete_horizon_ms)
            for _, fields, batch in iter_batches(seg.path, seg.size):
                result.bytes_read += len(batch)
                kept = _filter_batch(job, fields, batch, keys, aborted, txn_kept, expire,
                                     result)
                base = fields[_BASE]
                if kept is None:
                    dropped.append(base)
                    continue
                out, max_ts = kept
                if out is not batch:
                    rebuilt.append(len(placed))
                placed.append((position, base, base + fields[_LAST_DELTA], len(out), max_ts))
                position += len(out)
                pending.append(out)
                pending_bytes += len(out)
                if pending_bytes >= _READ_CHUNK:
                    _write_all(fd, b"".join(pending))
                    pending, pending_bytes = [], 0
        if pending:
            _write_all(fd, b"".join(pending))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        raise
    os.close(fd)
    newest = max(s.last_modified_ms for s in group)
    os.utime(path, ns=(newest * 1_000_000, newest * 1_000_000))
    result.bytes_written += position
    return CleanedGroup(tuple(group), path, position, placed, dropped, rebuilt)


def _filter_batch(job: CleanJob, fields: tuple, batch: memoryview, keys: dict[bytes, int],
                  aborted: _Aborted, txn_kept: dict[int, bool], expire: bool,
                  result: CleanResult) -> tuple[bytes | memoryview, int] | None:
    """The batch to write in place of `batch` and its max timestamp, or None to drop it."""
    attrs = fields[_ATTRS]
    pid = fields[_PID]
    if fields[_MAGIC] != MAGIC:
        return batch, fields[_MAX_TS]
    if attrs & CONTROL_FLAG:
        kept_data = txn_kept.pop(pid, False)
        if expire and not kept_data:
            return None
        return batch, fields[_MAX_TS]
    base = fields[_BASE]
    count = fields[_COUNT]
    if attrs & TRANSACTIONAL_FLAG and (pid, base) in aborted:
        retained: list[tuple[int, int, int]] = []
        result.records_removed += count
        body = b""
    else:
        try:
            body = _body(fields, batch)
            retained = []
            for start, end, delta, ts_delta, key, tombstone in iter_keys(body, count):
                offset = base + delta
                if key is None or keys.get(key, offset) > offset or (tombstone and expire):
                    continue
                retained.append((start, end, ts_delta))
        except ValueError:  # unreadable records: keep the batch as it is
            return batch, fields[_MAX_TS]
        result.records_removed += count - len(retained)
    if attrs & TRANSACTIONAL_FLAG and retained:
        txn_kept[pid] = True
    if len(retained) == count:
        return batch, fields[_MAX_TS]
    if not retained:
        if pid >= 0 and job.producer_last.get(pid) == base + fields[_LAST_DELTA]:
            return _rebuild(fields, b"", 0, fields[_MAX_TS], attrs & ~COMPRESSION_MASK), \
                fields[_MAX_TS]
        return None
    if attrs & TIMESTAMP_TYPE_FLAG:
        max_ts = fields[_MAX_TS]
    else:
        max_ts = max(fields[_BASE_TS] + ts for _, _, ts in retained)
    records = b"".join(body[s:e] for s, e, _ in retained)
    codec = attrs & COMPRESSION_MASK
    payload = compress(codec, records)
    if payload is None:  # no library for the codec here: store the records uncompressed
        payload, attrs = records, attrs & ~COMPRESSION_MASK
    return _rebuild(fields, payload, len(retained), max_ts, attrs), max_ts


def _rebuild(fields: tuple, payload: bytes, count: int, max_ts: int, attrs: int) -> bytes:
    """A batch with `fields`' base offset, last offset delta and producer fields around
    `payload` (its records section, `count` records), with a fresh CRC."""
    out = bytearray(HEADER.pack(
        fields[_BASE], HEADER_SIZE - LOG_OVERHEAD + len(payload), fields[_EPOCH], MAGIC, 0,
        attrs, fields[_LAST_DELTA], fields[_BASE_TS], max_ts, fields[_PID], fields[_PEPOCH],
        fields[_SEQ], count))
    out += payload
    _CRC.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def rebuilt_batches(group: CleanedGroup, indexes: Sequence[int]) -> list[bytes]:
    """The bytes of some of the batches a pass rebuilt (`indexes` from `group.rebuilt`),
    read back from its `.cleaned` file before it is installed; on a worker thread."""
    out: list[bytes] = []
    if not indexes:
        return out
    fd = os.open(group.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for i in indexes:
            position, _, _, size, _ = group.batches[i]
            data = os.pread(fd, size, position)
            if len(data) != size:
                raise OSError(f"{group.path}: batch at byte {position} is cut short")
            out.append(data)
    finally:
        os.close(fd)
    return out


def read_checkpoint(directory: Path) -> int:
    """The partition's first dirty offset as last installed (0 when never cleaned)."""
    try:
        return int((directory / CHECKPOINT_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return 0
