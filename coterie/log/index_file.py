"""What the offset and time indexes share: an append-only file of fixed-size entries that is
mirrored in memory.

Indexes are small (one entry per index.interval.bytes of log), so each is kept fully in
memory for bisecting and the file exists only to avoid rescanning segments at startup.
Entries are appended with plain writes; a file that turns out not to match its segment is
simply rewritten from a rescan, so it never needs to be more durable than the log.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


class IndexFile:
    """File handling for one index: buffered appends, rewrite, fsync, delete."""

    ENTRY_SIZE = 0  # set by subclasses

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_bytes // self.ENTRY_SIZE, 1)
        self._pending = bytearray()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._dirty = False

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def set_max_bytes(self, max_bytes: int) -> None:
        self.max_entries = max(max_bytes // self.ENTRY_SIZE, 1)

    def _encode_all(self) -> bytes:
        raise NotImplementedError

    def write_pending(self) -> None:
        """Append the entries added since the last call to the file."""
        if self._pending:
            _write_all(self._fd, self._pending)
            self._pending.clear()
            self._dirty = True

    def rewrite(self) -> None:
        """Replace the file with the in-memory entries (after a rebuild or truncation)."""
        self._pending.clear()
        os.ftruncate(self._fd, 0)
        _write_all(self._fd, self._encode_all())
        self._dirty = True

    def flush(self) -> None:
        self.write_pending()
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            self.write_pending()
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
