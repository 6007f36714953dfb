"""One log segment: a .log file of batches plus its offset and time indexes.

A segment is named by its base offset (20 digits, like Kafka) and holds the batches
byte-for-byte as they were appended, so serving a fetch is a byte-range read. The segment
knows how to find batch boundaries (index bisect, then a short header scan), and how to
rescan itself after a crash, cutting the file at the first batch that is torn or fails its
CRC.

Its .log descriptor is not its own to keep: it comes from the partition logs' shared
OpenFiles set, which may close it at any time to make room, and `fd` reopens the file on
demand. So code here reads `self.fd` at each system call and never keeps the number across
a call that could open another segment's file (coterie.log.open_files has the design).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import crc32c

from coterie.log.batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from coterie.log.config import LogConfig
from coterie.log.errors import StorageError
from coterie.log.offset_index import OffsetIndex
from coterie.log.open_files import OpenFiles
from coterie.log.record_scan import (
    OffsetAndTimestamp,
    first_at_or_after,
    first_with_max_timestamp,
)
from coterie.log.time_index import TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"  # a retired segment's files, unlinked later (Segment.retire)

# Field positions in HEADER's unpacked tuple.
F_BASE_OFFSET = 0
F_BATCH_LENGTH = 1
F_MAGIC = 3
F_CRC = 4
F_LAST_OFFSET_DELTA = 6
F_MAX_TIMESTAMP = 8
F_RECORDS_COUNT = 12

_CREATE = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
# Reopening never creates: a segment whose file vanished must fail, not come back empty.
_REOPEN = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
_SCAN_CHUNK = 16 * 1024  # header scans read this much at a time
_RECOVERY_CHUNK = 4 * 1024 * 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_base(name: str) -> int | None:
    """Base offset from a file name like 00000000000000000042.log, else None."""
    stem, _, _ = name.partition(".")
    if len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class Segment:
    """A segment's files and the in-memory facts the partition needs about it."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        create: bool,
        files: OpenFiles,
    ):
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_index_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        if create:
            for stale in (index_path, time_index_path):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
        self._files = files
        self._closed = False
        self._fd = files.open(self, self.log_path, _CREATE if create else _REOPEN)
        try:
            stat = os.fstat(self._fd)
            self.offset_index, self.offset_index_ok = OffsetIndex.load(
                index_path, base_offset, config.segment_index_bytes
            )
            self.time_index, self.time_index_ok = TimeIndex.load(
                time_index_path, base_offset, config.segment_index_bytes
            )
        except BaseException:
            self._closed = True
            self.release_fd()
            raise
        self.size = stat.st_size
        self.index_interval_bytes = config.index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = self.time_index.last_timestamp
        self.max_timestamp_offset = self.time_index.last_offset
        self.bytes_since_index = 0
        # Used for segment.ms rolling: when the first batch arrived (in this process).
        self.first_append_ms: int | None = None
        # Used for time retention when batches carry no timestamps; Kafka uses mtime too.
        self.last_append_ms = stat.st_mtime_ns // 1_000_000
        self.dirty = False  # log bytes written since the last fsync

    # ------------------------------------------------------------------------ descriptor

    @property
    def fd(self) -> int:
        """The open .log descriptor, reopened if the shared set closed it. Valid until the
        next call that may open another segment's file: use it at once (a Fetch answer
        duplicates it for sendfile)."""
        fd = self._fd
        if fd >= 0:
            self._files.touch(self)
            return fd
        if self._closed:
            raise StorageError(f"{self.log_path}: segment is closed")
        try:
            self._fd = self._files.open(self, self.log_path, _REOPEN)
        except OSError as e:
            raise StorageError(f"cannot open {self.log_path}: {e.strerror or e}") from e
        return self._fd

    @property
    def is_open(self) -> bool:
        """Whether the .log descriptor is open right now (not closed or set aside)."""
        return self._fd >= 0

    def _evicted(self) -> None:
        """Called by the shared set when it closes this segment's descriptor for room."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def release_fd(self) -> None:
        """Close the descriptor now (the next read or write reopens the file)."""
        self._files.release(self)
        self._evicted()

    # ----------------------------------------------------------------------------- writes

    def append(
        self,
        data: bytes | bytearray,
        headers: Sequence[BatchHeader],
        first_offset: int,
        now_ms: int,
    ) -> None:
        """Write already offset-assigned batches at the end and index them."""
        start = self.size
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError as e:
            # Never leave half a batch behind for the next append to build on.
            with contextlib.suppress(OSError, StorageError):
                os.ftruncate(self.fd, start)
            raise StorageError(f"cannot append to {self.log_path}: {e.strerror or e}") from e
        offset = first_offset
        for h in headers:
            last = offset + h.last_offset_delta
            self._track(start + h.position, offset, last, h.size, h.max_timestamp)
            offset = last + 1
        self.size = start + len(data)
        self.dirty = True
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self.last_append_ms = now_ms
        # New index entries stay in memory until the segment is sealed, flushed or closed.

    def _track(self, position: int, base: int, last: int, size: int, max_ts: int) -> None:
        """Account for one batch in the indexes and the running facts."""
        oi = self.offset_index
        last_indexed = oi.positions[-1] if len(oi) else 0
        if position > last_indexed and self.bytes_since_index >= self.index_interval_bytes:
            oi.append(base - self.base_offset, position)
            # The time entry describes the batches before this one, like the offset entry.
            if self.max_timestamp_offset >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.max_timestamp_offset = last
        self.next_offset = last + 1

    def adopt(self, batches: Sequence[tuple[int, int, int, int, int]], next_offset: int) -> None:
        """Index a file written elsewhere (the log cleaner's), from its batches'
        (position, base offset, last offset, size, max timestamp), without reading it, and
        seal it: it is a sealed segment whose offsets run to `next_offset`."""
        for position, base, last, size, max_ts in batches:
            self._track(position, base, last, size, max_ts)
        self.next_offset = next_offset
        self.seal()

    def seal(self) -> None:
        """Record the segment's largest timestamp in its time index (on roll and close)."""
        if self.max_timestamp_offset >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def flush(self) -> None:
        if self.dirty:
            # A reopened descriptor is as good: fsync syncs the file, not the descriptor.
            os.fsync(self.fd)
            self.dirty = False
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        """Write pending index entries and close the file for good. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.offset_index.close()
            self.time_index.close()
        finally:
            self.release_fd()

    def close_unwritten(self) -> None:
        """Close for good without writing anything (a crash, or a segment being deleted)."""
        self._closed = True
        self.offset_index.discard()
        self.time_index.discard()
        self.release_fd()

    def delete(self) -> None:
        self.close_unwritten()
        self.offset_index.delete()
        self.time_index.delete()
        with contextlib.suppress(FileNotFoundError):
            self.log_path.unlink()

    def retire(self) -> list[Path]:
        """Close for good and rename the files to `*.deleted` (a rename is metadata only,
        where unlinking a large file can take tens of milliseconds); returns the new paths
        for the caller to unlink off the event loop. A partition deletes leftovers at open."""
        self.close_unwritten()
        self.offset_index.discard()
        self.time_index.discard()
        retired = []
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            target = path.with_name(path.name + DELETED_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, target)
                retired.append(target)
        return retired

    def update_config(self, config: LogConfig) -> None:
        self.index_interval_bytes = config.index_interval_bytes
        self.offset_index.set_max_bytes(config.segment_index_bytes)
        self.time_index.set_max_bytes(config.segment_index_bytes)

    # ------------------------------------------------------------------------------ reads

    def headers_from(self, position: int, end: int | None = None) -> Iterator[tuple[int, tuple]]:
        """(position, HEADER fields) of each batch from `position` (a batch start) to `end`.

        Reads the file in chunks so a scan over many small batches costs few syscalls.
        """
        stop = self.size if end is None else end
        buf = b""
        buf_pos = position
        while position < stop:
            off = position - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, _SCAN_CHUNK, position)
                buf_pos, off = position, 0
                if len(buf) < HEADER_SIZE:
                    raise StorageError(
                        f"{self.log_path}: batch header at byte {position} is truncated"
                    )
            fields = HEADER.unpack_from(buf, off)
            yield position, fields
            position += fields[F_BATCH_LENGTH] + LOG_OVERHEAD

    def locate(self, offset: int) -> tuple[int, int] | None:
        """(position, size) of the batch containing `offset`, or None if past the end."""
        for pos, f in self.headers_from(self.offset_index.lookup(offset)):
            if f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA] >= offset:
                return pos, f[F_BATCH_LENGTH] + LOG_OVERHEAD
        return None

    def batch_end_within(self, start: int, first_end: int, limit: int) -> int:
        """The largest batch boundary <= `limit`, at least `first_end` (which is one)."""
        if first_end >= limit or first_end >= self.size:
            return first_end
        boundary = max(self.offset_index.position_at_or_before(limit), first_end)
        for pos, f in self.headers_from(boundary):
            end = pos + f[F_BATCH_LENGTH] + LOG_OVERHEAD
            if end > limit:
                return pos
            boundary = end
        return boundary

    def read_range(self, start: int, end: int) -> bytes:
        data = os.pread(self.fd, end - start, start)
        if len(data) != end - start:
            raise StorageError(f"{self.log_path}: short read at byte {start}")
        return data

    def read_into(self, buffer: memoryview, start: int) -> None:
        """Fill `buffer` with the log bytes from position `start` (no intermediate copy)."""
        done, want = 0, len(buffer)
        while done < want:
            n = os.preadv(self.fd, [buffer[done:]], start + done)
            if n <= 0:
                raise StorageError(f"{self.log_path}: short read at byte {start + done}")
            done += n

    def find_timestamp(self, timestamp: int, min_offset: int = 0) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record, in offset order, whose timestamp is >=
        `timestamp` (Kafka's rule). The time index and the batch headers find the first batch
        whose maxTimestamp reaches it; only that batch is read and its records scanned."""
        if self.max_timestamp < timestamp:
            return None
        start = self.offset_index.lookup(
            max(self.time_index.start_offset_for(timestamp), min_offset))
        for pos, f in self.headers_from(start):
            if (f[F_MAX_TIMESTAMP] >= timestamp
                    and f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA] >= min_offset):
                batch = self.read_range(pos, pos + f[F_BATCH_LENGTH] + LOG_OVERHEAD)
                found = first_at_or_after(batch, timestamp, min_offset)
                if found is not None:
                    return found
        return None

    def find_max_timestamp(self) -> OffsetAndTimestamp | None:
        """(offset, timestamp) of the first record carrying this segment's largest timestamp
        (Kafka's MAX_TIMESTAMP answer), or None if no batch has a timestamp. The batch is the
        first whose maxTimestamp is that largest one; its records say which offset has it."""
        if self.max_timestamp_offset < 0:
            return None
        for pos, f in self.headers_from(self.offset_index.lookup(self.max_timestamp_offset)):
            if f[F_MAX_TIMESTAMP] == self.max_timestamp:
                batch = self.read_range(pos, pos + f[F_BATCH_LENGTH] + LOG_OVERHEAD)
                return first_with_max_timestamp(batch)
        return None

    def largest_time(self) -> int:
        """What time retention compares with: the largest batch timestamp, or the last
        append time when batches carry none (Kafka falls back to the file's mtime)."""
        return self.max_timestamp if self.max_timestamp > 0 else self.last_append_ms

    # --------------------------------------------------------------------------- recovery

    def recover(self, *, verify_crc: bool) -> int:
        """Rescan the whole segment, rebuild both indexes, and cut the file at the first
        batch that is torn, out of sequence, or (if verify_crc) fails its CRC.

        Returns the number of bytes cut off.
        """
        self.offset_index.clear()
        self.time_index.clear()
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.bytes_since_index = 0
        self.next_offset = self.base_offset
        valid_end = self._scan(0, self.base_offset, verify_crc)
        cut = self._truncate(valid_end)
        self.offset_index.rewrite()
        self.time_index.rewrite()
        self.offset_index_ok = self.time_index_ok = True
        return cut

    def load_tail(self) -> int:
        """After a clean shutdown: trust the indexes, scan only the batches after the last
        offset-index entry to learn the next offset. If that tail does not add up exactly
        to the file size, fall back to a full CRC-checked recovery. Returns bytes cut."""
        if not (self.offset_index_ok and self.time_index_ok) or not self._indexes_plausible():
            return self.recover(verify_crc=True)
        oi = self.offset_index
        if len(oi):
            start, expected = oi.positions[-1], self.base_offset + oi.relative_offsets[-1]
        else:
            start, expected = 0, self.base_offset
        self.next_offset = expected
        self.bytes_since_index = 0
        end = self._scan(start, expected, verify_crc=False)
        if end != self.size or not self._time_index_within(self.next_offset):
            return self.recover(verify_crc=True)
        return 0

    def load_trusted(self, next_offset: int) -> int:
        """For a segment that is not the active one and needs no recovery: take
        `next_offset` from the following segment and check the indexes cheaply, rebuilding
        them (by a header scan) if they look wrong. Returns bytes cut, if any."""
        self.next_offset = next_offset
        if (
            self.offset_index_ok
            and self.time_index_ok
            and self._indexes_plausible()
            and self._time_index_within(next_offset)
        ):
            return 0
        return self.recover(verify_crc=False)

    def _indexes_plausible(self) -> bool:
        """Cheap checks: the files are well-formed, the last offset entry points at a batch
        with the right base offset, and the time index stays inside the segment."""
        oi, ti = self.offset_index, self.time_index
        if len(oi):
            pos, rel = oi.positions[-1], oi.relative_offsets[-1]
            if not 0 < pos <= self.size - HEADER_SIZE:
                return False
            fields = HEADER.unpack_from(os.pread(self.fd, HEADER_SIZE, pos))
            if fields[F_MAGIC] != 2 or fields[F_BASE_OFFSET] != self.base_offset + rel:
                return False
        return not (len(ti) and self.size == 0)

    def _time_index_within(self, next_offset: int) -> bool:
        ti = self.time_index
        return not len(ti) or self.base_offset <= ti.last_offset < next_offset

    def _scan(self, position: int, expected: int, verify_crc: bool) -> int:
        """Walk batches from `position`, tracking each; return where valid data ends."""
        size = self.size
        buf = b""
        buf_pos = position
        while position < size:
            off = position - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, _RECOVERY_CHUNK, position)
                buf_pos, off = position, 0
                if len(buf) < HEADER_SIZE:
                    break
            f = HEADER.unpack_from(buf, off)
            length = f[F_BATCH_LENGTH] + LOG_OVERHEAD
            if (
                f[F_MAGIC] != 2
                or length < HEADER_SIZE
                or position + length > size
                # Offsets only grow; the cleaner leaves gaps between batches (as on Kafka).
                or f[F_BASE_OFFSET] < expected
                or f[F_LAST_OFFSET_DELTA] < 0
                or f[F_RECORDS_COUNT] < 0
            ):
                break
            if verify_crc:
                if off + length > len(buf):
                    buf = os.pread(self.fd, max(_RECOVERY_CHUNK, length), position)
                    buf_pos, off = position, 0
                    if len(buf) < length:
                        break
                if crc32c.crc32c(memoryview(buf)[off + CRC_START : off + length]) != f[F_CRC]:
                    break
            base = f[F_BASE_OFFSET]
            last = base + f[F_LAST_OFFSET_DELTA]
            self._track(position, base, last, length, f[F_MAX_TIMESTAMP])
            expected = last + 1
            position += length
        return position

    def _truncate(self, valid_end: int) -> int:
        cut = self.size - valid_end
        if cut:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
            self.dirty = True
        return cut
