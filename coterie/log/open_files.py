"""A bounded set of open segment files, shared by the partition logs of one data directory.

Why: a segment used to keep its .log, .index and .timeindex files open for as long as it
existed, three descriptors per segment. 400 partitions exhausted a 1,024-descriptor limit, and
a broker holding more partitions than the limit allows could not even start again.

The design, in three parts:

* Indexes hold no descriptor. They live in memory (they always did, for bisecting) and reach
  their files by open-append-close when a segment is sealed, flushed or closed.
* A segment's .log descriptor is opened on demand and kept in this least-recently-used set of
  at most `capacity` descriptors. Opening one more closes the one used longest ago; its
  segment reopens its file the next time it is read or written. A closed descriptor loses
  nothing: every write already went to the file, and fsync on a new descriptor syncs the
  file's pages whichever descriptor wrote them.
* The capacity comes from `log.max.open.files`, or by default half the process's soft
  RLIMIT_NOFILE, which leaves the other half for client connections, the descriptors a Fetch
  answer duplicates for sendfile, and the short-lived opens of index and metadata writes.

The partitions being produced to or fetched from stay in the set, so those hot paths reopen
nothing as long as the working set fits (raise the process's descriptor limit for more). If
an open still fails with EMFILE/ENFILE (sockets took the rest), half the set is given back,
the set stays at that smaller size, and the open is tried again: the log yields descriptors
to the rest of the process instead of failing a produce.
"""

from __future__ import annotations

import errno
import os
import resource
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from coterie.log.errors import InvalidConfigError

MAX_OPEN_FILES_KEY = "log.max.open.files"
MIN_CAPACITY = 8
_UNLIMITED_FALLBACK = 1 << 20  # what an unlimited RLIMIT_NOFILE counts as
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class Holder(Protocol):
    """What the set closes when it needs room: one open file of its owner."""

    def _evicted(self) -> None:
        """Close the owner's descriptor (the set has already forgotten it)."""


def descriptor_limit() -> int:
    """The process's soft RLIMIT_NOFILE (an unlimited one counts as 2**20)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return _UNLIMITED_FALLBACK
    return soft


def default_capacity() -> int:
    """Half the soft descriptor limit, at least MIN_CAPACITY."""
    return max(MIN_CAPACITY, descriptor_limit() // 2)


def capacity_from(props: Mapping[str, str]) -> int:
    """`log.max.open.files` (-1, the default, means half the descriptor limit).

    Raises InvalidConfigError for anything that is not -1 or at least 1."""
    raw = props.get(MAX_OPEN_FILES_KEY, "-1").strip()
    try:
        value = int(raw)
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {MAX_OPEN_FILES_KEY}: not an integer"
        ) from None
    if value == -1:
        return default_capacity()
    if value < 1:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {MAX_OPEN_FILES_KEY}: must be -1 "
            "(half the process's open-file limit) or at least 1"
        )
    return value


class OpenFiles:
    """Least-recently-used set of open descriptors, each held by one owner (a segment).

    Single-threaded by design, like the rest of the log: the broker calls it from its event
    loop only."""

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = default_capacity() if capacity is None else max(1, capacity)
        self._lru: OrderedDict[Holder, None] = OrderedDict()
        self.opened = 0  # descriptors opened so far (tests and diagnostics)
        self.evicted = 0  # descriptors closed to make room
        self.shrunk = 0  # times an EMFILE/ENFILE made the set smaller

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, owner: Holder) -> bool:
        return owner in self._lru

    def open(self, owner: Holder, path: Path, flags: int, mode: int = 0o644) -> int:
        """Open `path` for `owner`, making room first; the caller keeps the descriptor until
        its `_evicted` is called or it calls `release`."""
        while len(self._lru) >= self._capacity:
            self._evict_oldest()
        while True:
            try:
                fd = os.open(path, flags, mode)
                break
            except OSError as e:
                if e.errno not in _OUT_OF_DESCRIPTORS or not self._lru:
                    raise
                # The process is out of descriptors (sockets, most likely): give back half,
                # and stay at that size, so that the short-lived opens of index and metadata
                # writes find room too.
                for _ in range(max(1, len(self._lru) // 2)):
                    self._evict_oldest()
                self._capacity = max(1, len(self._lru))
                self.shrunk += 1
        self._lru[owner] = None
        self.opened += 1
        return fd

    def touch(self, owner: Holder) -> None:
        """Mark `owner`'s descriptor as just used (cheap: one dict reordering)."""
        self._lru.move_to_end(owner)

    def release(self, owner: Holder) -> None:
        """Forget `owner` (it closes its descriptor itself)."""
        self._lru.pop(owner, None)

    def shrink(self, keep: int = 0) -> int:
        """Close the least recently used descriptors until at most `keep` stay open; returns
        how many were closed."""
        closed = 0
        while len(self._lru) > keep:
            self._evict_oldest()
            closed += 1
        return closed

    def _evict_oldest(self) -> None:
        owner, _ = self._lru.popitem(last=False)
        self.evicted += 1
        owner._evicted()


_default: OpenFiles | None = None


def default_open_files() -> OpenFiles:
    """The set used by partition logs opened without one (tests, tools): one per process,
    sized from the descriptor limit when first used."""
    global _default
    if _default is None:
        _default = OpenFiles()
    return _default
