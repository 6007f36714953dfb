"""What the offset and time indexes share: an append-only file of fixed-size entries that is
mirrored in memory.

Indexes are small (one entry per index.interval.bytes of log), so each is kept fully in
memory for bisecting and the file exists only to avoid rescanning segments at startup. An
index holds no open file: new entries wait in memory and reach the file by open-append-close
when the segment is sealed, flushed or closed (coterie.log.open_files says why descriptors are
scarce). That is also when they matter: a clean start trusts only indexes written by a clean
close, and an unclean one trusts only segments below the recovery point, which were flushed;
everything else is rescanned. A file that turns out not to match its segment is simply
rewritten from a rescan, so it never needs to be more durable than the log.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
_REPLACE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


class IndexFile:
    """File handling for one index: deferred appends, rewrite, fsync, delete."""

    ENTRY_SIZE = 0  # set by subclasses

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_bytes // self.ENTRY_SIZE, 1)
        self._pending = bytearray()
        self._dirty = False  # written since the last fsync
        self._on_disk = False  # the file exists (a flush creates it even when empty)

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
        """Append the entries added since the last write to the file."""
        if self._pending:
            self._write(_APPEND, self._pending, sync=False)
            self._pending.clear()

    def rewrite(self) -> None:
        """Replace the file with the in-memory entries (after a rebuild or truncation)."""
        self._pending.clear()
        self._write(_REPLACE, self._encode_all(), sync=False)

    def flush(self) -> None:
        """Write what is pending and fsync the file, with one open. An index with no entries
        to sync only has its (empty) file created, without an fsync: a clean start wants the
        file to exist, and an empty file has no bytes to lose."""
        if self._pending or self._dirty:
            self._write(_APPEND, self._pending, sync=True)
            self._pending.clear()
        elif not self._on_disk:
            self._write(_APPEND, b"", sync=False)
            self._dirty = False

    def close(self) -> None:
        """Write what is pending (no fsync: a clean close flushed before)."""
        self.write_pending()

    def discard(self) -> None:
        """Forget pending entries without writing them (the segment is going away)."""
        self._pending.clear()

    def delete(self) -> None:
        self.discard()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._on_disk = False

    def _write(self, flags: int, data: bytes | bytearray, *, sync: bool) -> None:
        fd = os.open(self.path, flags, 0o644)
        try:
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._on_disk = True
        self._dirty = not sync


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
