"""Small durable-file helpers shared by the partition log and the log manager.

Metadata files must never be seen half-written after a crash, so they are replaced
atomically: write a temp file, fsync it, rename it over the old one, fsync the directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically; `mode` is the new file's permissions, less
    the umask (0o600 for what only the broker may read, such as credentials)."""
    # The temp name must stay short: a topic name may use up to 249 of the 255 bytes a file
    # name may have, so appending to it could overflow.
    digest = hashlib.blake2b(path.name.encode(), digest_size=8).hexdigest()
    tmp = path.with_name(f".{digest}{TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make creations, renames and deletions in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_all(paths: list[Path]) -> None:
    """Unlink files retired from a log (`Segment.retire`); run on a worker thread, since
    unlinking a large file can take tens of milliseconds. Missing ones are fine."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
