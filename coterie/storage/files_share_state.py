"""Share partitions' state in files of the data directory (`share_state.ShareStateStore`), for
the single broker.

Why this shape (docs/share-state-storage.md has the long form):

- **One file per (group, partition)**, `share-state/<group dir>/<topic id>-<partition>.state`,
  so that a replace rewrites one partition's state and nothing else, and deleting a group
  is removing one directory.
- **Group ids never become paths.** A group id is any string (`/`, `..`, NUL aside, 32,767
  bytes); its directory is named by 128 bits of the SHA-256 of its UTF-8, after a short
  readable prefix of its lower-case ASCII letters and digits (`orders-3f1c...`). No group id
  can name a path outside the store's directory, collide with another's, or overflow a
  file name. The id itself is kept in the directory's `group-id` file, for people.
- **An append is one checksummed frame** at the end of the file, holding all its entries
  (length, CRC-32C, then the entries), so after a crash an append is there whole or not at
  all: a torn frame at the end fails its length or CRC, and loading drops it with a warning
  rather than failing. The next append to the file cuts it off first, so entries written
  after a torn one are never hidden behind it.
- **Durable as a committed offset.** An append is written to the file (the OS page cache)
  before it returns, so a broker crash (kill -9) loses nothing acknowledged, which is how
  durable the single broker's `__consumer_offsets` appends are; power loss is covered as
  far as the flush policy says: `fsync=True` syncs every append (as
  `log.flush.interval.messages=1`), and `flush()` syncs what was appended since the last one
  (the broker's flush tick; `close()` does it too).
- **Replace writes a new file and renames it over the old one** (the file fsynced before
  the rename, the directory after), so the old list or the new one is there, never a mix;
  replacing with nothing, like deleting, removes the file.

The lease is accepted and not checked (one broker holds every lease for ever, as
`files_log.FilesLog`); only that it is the partition's. Every call does its file work
synchronously, so calls on one store never interleave.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import struct
import uuid
from collections.abc import Sequence
from pathlib import Path

import crc32c

from coterie.log.files import atomic_write, fsync_dir
from coterie.storage.api import Lease, TopicIdPartition
from coterie.storage.errors import StateEpochFenced, StorageError
from coterie.storage.share_state import check_group_id, check_lease

__all__ = ["SHARE_STATE_DIR", "FilesShareStateStore", "group_dir_name"]

log = logging.getLogger("coterie.storage")

SHARE_STATE_DIR = "share-state"  # under the data directory
GROUP_ID_FILE = "group-id"
STATE_SUFFIX = ".state"
_DELETED_SUFFIX = ".deleted"  # a group directory being removed (no group's name has a '.')

# A state file: a header (magic, format version), then one frame per append or replace:
# the body's length, a CRC-32C of the length's four bytes and the body, then the body: the
# number of entries, and each entry's length and bytes. All big-endian.
_MAGIC = b"CSST"
_VERSION = 1
_HEADER = struct.Struct(">4sI")
_FRAME = struct.Struct(">II")  # body length, CRC-32C
_U32 = struct.Struct(">I")
_MAX_U32 = (1 << 32) - 1
_FILE_NAME = re.compile(r"(?P<topic>[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12})-(?P<partition>\d+)"
                        + re.escape(STATE_SUFFIX))
_PREFIX_CHARS = 24


def group_dir_name(group_id: str) -> str:
    """The directory of `group_id`'s state (module docstring): up to 24 characters of its
    lower-case ASCII letters, digits and '_' (any other run becomes one '_'), '-', and 32 hex
    digits of the SHA-256 of its UTF-8. Only [a-z0-9_-], never '.' or '..', at most 57
    characters: safe on every file system, case-insensitive ones included."""
    digest = hashlib.sha256(check_group_id(group_id)).hexdigest()[:32]
    prefix = re.sub(r"[^a-z0-9_]+", "_", group_id[:_PREFIX_CHARS].lower())[:_PREFIX_CHARS]
    return f"{prefix}-{digest}"


class FilesShareStateStore:
    """`ShareStateStore` in `<data_dir>/share-state` (module docstring). `fsync`: sync every
    append before it returns, rather than at `flush()`."""

    def __init__(self, data_dir: Path, *, fsync: bool = False) -> None:
        self._root = Path(data_dir) / SHARE_STATE_DIR
        self._fsync = fsync
        # The length of each file's valid frames, as this process last wrote or read it (a
        # file missing here is checked before it is appended to).
        self._ends: dict[Path, int] = {}
        self._unsynced: set[Path] = set()  # files and directories flush() must sync
        # The state epoch of each partition's state, as written by this process (0 when
        # not): kept in memory only, since a leader's copy older than a reset cannot outlive
        # the process that holds it, and one broker leads every partition of its files.
        self._state_epochs: dict[Path, int] = {}
        self._root.mkdir(parents=True, exist_ok=True)
        for left in self._root.glob(f"*{_DELETED_SUFFIX}"):
            shutil.rmtree(left, ignore_errors=True)  # a deletion a crash interrupted

    @property
    def directory(self) -> Path:
        return self._root

    # -------------------------------------------------------------------------- writing

    async def append(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                     lease: Lease, *, state_epoch: int = 0) -> None:
        """One frame of `entries` at the end of the partition's file, written to the OS (and
        synced with `fsync`) before returning. A torn frame left at the end by a crash is
        cut off first."""
        group_dir = self._group_dir(group_id)
        check_lease(tp, lease)
        if not entries:
            return
        frame = _frame(entries)
        path = group_dir / _file_name(tp)
        self._fence(path, state_epoch, newer=False)
        self._make_group_dir(group_dir, group_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            size = os.fstat(fd).st_size
            end = self._ends.get(path)
            if end is None or end > size:
                end = _valid_length(os.pread(fd, size, 0), path)
            if size > end:
                os.ftruncate(fd, end)
            data = frame if end else _HEADER.pack(_MAGIC, _VERSION) + frame
            try:
                _write_all(fd, data, end)
                if self._fsync:
                    os.fsync(fd)
            except BaseException:
                # Nothing of a failed append may stay (all or nothing), nor be assumed.
                self._ends.pop(path, None)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, end)
                raise
            self._ends[path] = end + len(data)
        finally:
            os.close(fd)
        if self._fsync:
            if end == 0:
                fsync_dir(group_dir)
        else:
            self._unsynced.add(path)
            if end == 0:
                self._unsynced.add(group_dir)

    async def replace(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                      lease: Lease, *, state_epoch: int = 0) -> None:
        """A new file of `entries` renamed over the partition's (synced both sides of the
        rename), or no file when `entries` is empty."""
        group_dir = self._group_dir(group_id)
        check_lease(tp, lease)
        self._fence(group_dir / _file_name(tp), state_epoch, newer=False)
        if not entries:
            self._delete_partition(group_dir, tp)
            return
        self._rewrite(group_dir, group_id, tp, entries, state_epoch)

    async def reset(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                    state_epoch: int) -> None:
        """`replace` with no lease, if `state_epoch` is above the stored one."""
        group_dir = self._group_dir(group_id)
        if not entries:
            raise ValueError("a reset writes a new snapshot: entries must not be empty")
        self._fence(group_dir / _file_name(tp), state_epoch, newer=True)
        self._rewrite(group_dir, group_id, tp, entries, state_epoch)

    def _fence(self, path: Path, state_epoch: int, *, newer: bool) -> None:
        stored = self._state_epochs.get(path, 0)
        if stored > state_epoch or (newer and stored == state_epoch):
            raise StateEpochFenced(f"the share state in {path.name} has state epoch {stored}, "
                                   f"newer than {state_epoch}; nothing was written")

    def _rewrite(self, group_dir: Path, group_id: str, tp: TopicIdPartition,
                 entries: Sequence[bytes], state_epoch: int) -> None:
        data = _HEADER.pack(_MAGIC, _VERSION) + _frame(entries)
        path = group_dir / _file_name(tp)
        self._make_group_dir(group_dir, group_id)
        self._ends.pop(path, None)
        atomic_write(path, data)
        self._ends[path] = len(data)
        self._unsynced.discard(path)
        self._state_epochs[path] = state_epoch

    async def delete(self, group_id: str, tp: TopicIdPartition | None = None) -> None:
        """Remove the partition's file, or the group's whole directory (renamed away first,
        so that a crash leaves all of it or none)."""
        group_dir = self._group_dir(group_id)
        if tp is not None:
            self._delete_partition(group_dir, tp)
        else:
            self._delete_group_dir(group_dir)

    def flush(self) -> None:
        """Sync every file appended to, and directory created, since the last flush."""
        pending, self._unsynced = self._unsynced, set()
        for path in sorted(pending):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # deleted since: nothing left to sync
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        self.flush()

    # -------------------------------------------------------------------------- reading

    async def load(self, group_id: str, tp: TopicIdPartition) -> list[bytes]:
        """The entries of every whole frame of the partition's file; a torn last one (a
        crash while appending) is dropped with a warning."""
        path = self._group_dir(group_id) / _file_name(tp)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        entries: list[bytes] = []
        end = _valid_length(data, path, entries)
        self._ends[path] = end
        return entries

    async def partitions_of(self, group_id: str) -> list[TopicIdPartition]:
        group_dir = self._group_dir(group_id)
        try:
            names = [p.name for p in group_dir.iterdir()]
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            match = _FILE_NAME.fullmatch(name)
            if match is not None and _has_state(group_dir / name):
                found.append(TopicIdPartition(uuid.UUID(match["topic"]),
                                              int(match["partition"])))
        return sorted(found)

    # -------------------------------------------------------------------------- files

    def _group_dir(self, group_id: str) -> Path:
        return self._root / group_dir_name(group_id)

    def _make_group_dir(self, group_dir: Path, group_id: str) -> None:
        """Create the group's directory with its `group-id` file, if missing."""
        if group_dir.is_dir():
            return
        group_dir.mkdir()
        atomic_write(group_dir / GROUP_ID_FILE, group_id.encode("utf-8"))
        fsync_dir(self._root)

    def _delete_partition(self, group_dir: Path, tp: TopicIdPartition) -> None:
        path = group_dir / _file_name(tp)
        self._ends.pop(path, None)
        self._state_epochs.pop(path, None)
        self._unsynced.discard(path)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        if any(_FILE_NAME.fullmatch(p.name) for p in group_dir.iterdir()):
            fsync_dir(group_dir)
        else:
            self._delete_group_dir(group_dir)  # the group's last partition with state

    def _delete_group_dir(self, group_dir: Path) -> None:
        trash = group_dir.with_name(group_dir.name + _DELETED_SUFFIX)
        try:
            group_dir.rename(trash)
        except FileNotFoundError:
            return
        fsync_dir(self._root)
        for path in [p for p in self._ends if p.parent == group_dir]:
            del self._ends[path]
        for path in [p for p in self._state_epochs if p.parent == group_dir]:
            del self._state_epochs[path]
        self._unsynced = {p for p in self._unsynced if p != group_dir and p.parent != group_dir}
        shutil.rmtree(trash, ignore_errors=True)


def _file_name(tp: TopicIdPartition) -> str:
    if tp.partition < 0:
        raise ValueError(f"no partition {tp}")
    return f"{tp.topic_id}-{tp.partition}{STATE_SUFFIX}"


def _frame(entries: Sequence[bytes]) -> bytes:
    """One frame holding `entries` (the file format above)."""
    body = bytearray(_U32.pack(len(entries)))
    for entry in entries:
        body += _U32.pack(len(entry))
        body += entry
    if len(body) > _MAX_U32:
        raise ValueError(f"share state entries of {len(body)} bytes in one write; at most "
                         f"{_MAX_U32}")
    return _FRAME.pack(len(body), _crc(_U32.pack(len(body)), body)) + bytes(body)


def _crc(length: bytes | memoryview, body: bytes | bytearray | memoryview) -> int:
    """A frame's CRC-32C: of its length's four bytes, then its body."""
    return crc32c.crc32c(body, value=crc32c.crc32c(length))


def _valid_length(data: bytes, path: Path, entries: list[bytes] | None = None) -> int:
    """How many bytes at the start of a state file are whole frames (0 when not even the
    header is there), their entries added to `entries`. A torn end is logged and left out;
    a file that is not a state file, or of a newer format, is a StorageError."""
    view = memoryview(data)
    if len(data) < _HEADER.size or not any(view[:_HEADER.size]):
        if data:
            log.warning("share state file %s: dropped %d bytes of a torn first write", path,
                        len(data))
        return 0
    magic, version = _HEADER.unpack_from(view, 0)
    if magic != _MAGIC:
        raise StorageError(f"{path} is not a share state file")
    if version != _VERSION:
        raise StorageError(f"share state file {path} is of format {version}, this coterie "
                           f"knows {_VERSION}: it was written by a newer coterie")
    pos = _HEADER.size
    while pos < len(data):
        parsed = _parse_frame(view, pos)
        if parsed is None:
            log.warning("share state file %s: dropped %d bytes of a torn write at its end",
                        path, len(data) - pos)
            break
        pos, found = parsed
        if entries is not None:
            entries += found
    return pos


def _has_state(path: Path) -> bool:
    """Whether the state file begins with a whole frame: only a crash during its first
    write leaves one without (loaded, it is []). Reads the header and that frame only."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        head = os.pread(fd, _HEADER.size + _FRAME.size, 0)
        if len(head) < _HEADER.size + _FRAME.size:
            return False
        (length, _) = _FRAME.unpack_from(head, _HEADER.size)
        first_end = _HEADER.size + _FRAME.size + length
        if first_end > os.fstat(fd).st_size:
            return False  # torn (or a corrupt length: never read past the file)
        first = os.pread(fd, first_end, 0)
    finally:
        os.close(fd)
    return _valid_length(first, path) > 0


def _parse_frame(view: memoryview, pos: int) -> tuple[int, list[bytes]] | None:
    """The end of the whole frame at `pos` and its entries; None for a torn one."""
    if pos + _FRAME.size > len(view):
        return None
    length, crc = _FRAME.unpack_from(view, pos)
    body_start = pos + _FRAME.size
    end = body_start + length
    if end > len(view) or _crc(view[pos:pos + 4], view[body_start:end]) != crc:
        return None
    entries = []
    p = body_start
    try:
        (count,) = _U32.unpack_from(view, p)
        p += 4
        for _ in range(count):
            (size,) = _U32.unpack_from(view, p)
            p += 4
            if p + size > end:
                return None
            entries.append(bytes(view[p:p + size]))
            p += size
    except struct.error:
        return None
    return (end, entries) if p == end else None


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
