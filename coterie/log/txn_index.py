"""Aborted transactions of one partition: what a read_committed Fetch must tell the consumer.

A read_committed consumer reads up to the last stable offset and drops the records of
aborted transactions itself, from a list the broker sends with each partition's data: the
(producer id, first offset) of every aborted transaction that overlaps the fetched range.
Kafka keeps that list per segment in a `.txnindex` file; coterie keeps the same entries in the
same layout, one file per segment, named like the segment's other files:

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
    lastStableOffset int64                                         (34 bytes per entry)

An entry is appended to the index of the segment that holds the ABORT marker (`lastOffset`
is the marker's offset; `lastStableOffset` the partition's LSO once the transaction ended).
For lookups the partition keeps every entry in memory in marker order, so a fetch finds the
overlapping ones by bisection; aborted transactions are rare and small (42 bytes of Python
each, more or less), and Kafka also reads whole index files for this. Entries leave memory
and disk with their segment.

Files only: no clock, no sockets. Appends are written at once (page cache, as the segment's
own bytes); an index is fsynced with its segment.
"""

from __future__ import annotations

import contextlib
import os
import struct
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENTRY", "TXN_INDEX_SUFFIX", "AbortedTxn", "AbortedTxnIndex"]

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


class AbortedTxnIndex:
    """Every aborted transaction of a partition, in marker order, backed by per-segment
    `.txnindex` files."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # parallel to _entries, for bisection

    @classmethod
    def load(cls, directory: Path, segment_bases: list[int], log_end: int) -> AbortedTxnIndex:
        """Read the index files of the segments; entries at or past `log_end` (a tail cut
        off by recovery) are dropped and the files rewritten without them. Files of segments
        that no longer exist are removed."""
        index = cls(directory)
        bases = set(segment_bases)
        for path in sorted(directory.glob(f"*{TXN_INDEX_SUFFIX}")):
            try:
                base = int(path.name[: -len(TXN_INDEX_SUFFIX)])
            except ValueError:
                continue
            if base not in bases:
                path.unlink()
                continue
            data = path.read_bytes()
            kept: list[AbortedTxn] = []
            usable = len(data) - len(data) % ENTRY.size
            for pos in range(0, usable, ENTRY.size):
                version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
                if version != _VERSION or last >= log_end:
                    continue
                kept.append(AbortedTxn(pid, first, last, lso))
            if len(kept) * ENTRY.size != len(data):
                _write(path, kept)
            index._entries += kept
        index._entries.sort(key=lambda e: e.last_offset)
        index._last_offsets = [e.last_offset for e in index._entries]
        return index

    def append(self, segment_base: int, txn: AbortedTxn) -> None:
        """Record an aborted transaction whose marker is in the segment at `segment_base`."""
        if self._last_offsets and txn.last_offset <= self._last_offsets[-1]:
            return  # already indexed (recovery replays the tail of the log)
        path = index_path(self._directory, segment_base)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, ENTRY.pack(_VERSION, txn.producer_id, txn.first_offset,
                                    txn.last_offset, txn.last_stable_offset))
        finally:
            os.close(fd)
        self._entries.append(txn)
        self._last_offsets.append(txn.last_offset)

    def overlapping(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [fetch_offset, upper_offset): those whose
        marker is at or after `fetch_offset` and whose first offset is before
        `upper_offset` (Kafka's rule; the consumer skips their records)."""
        if upper_offset <= fetch_offset:
            return []
        start = bisect_left(self._last_offsets, fetch_offset)
        return [e for e in self._entries[start:] if e.first_offset < upper_offset]

    def drop_before(self, offset: int) -> None:
        """Forget entries whose marker lies below `offset` (their segment was deleted)."""
        cut = bisect_left(self._last_offsets, offset)
        if cut:
            del self._entries[:cut]
            del self._last_offsets[:cut]

    def delete_file(self, segment_base: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            index_path(self._directory, segment_base).unlink()

    def sync(self, segment_base: int) -> None:
        """fsync one segment's index (with its segment)."""
        path = index_path(self._directory, segment_base)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def __len__(self) -> int:
        return len(self._entries)


def _write(path: Path, entries: list[AbortedTxn]) -> None:
    data = b"".join(ENTRY.pack(_VERSION, e.producer_id, e.first_offset, e.last_offset,
                               e.last_stable_offset) for e in entries)
    if not data:
        path.unlink()
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
