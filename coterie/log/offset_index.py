"""Sparse offset index: relative offset -> byte position of a batch in its segment.

One entry is added for the first batch after every index.interval.bytes of log, so finding
an offset costs a bisect plus a scan of at most that many bytes of batch headers. The file
format is Kafka's (big-endian int32 relative offset, int32 position); the first batch of a
segment is never indexed because position 0 is implied.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from coterie.log.index_file import IndexFile

_SWAP = sys.byteorder == "little"


class OffsetIndex(IndexFile):
    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.relative_offsets = array("i")
        self.positions = array("i")

    @classmethod
    def load(cls, path: Path, base_offset: int, max_bytes: int) -> tuple[OffsetIndex, bool]:
        """Open the index at `path`; the flag is False if the file is missing or malformed
        (the index is then empty and the caller should rebuild it)."""
        index = cls(path, base_offset, max_bytes)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return index, False
        index._on_disk = True
        if len(data) % cls.ENTRY_SIZE:
            return index, False
        flat = array("i")
        flat.frombytes(data)
        if _SWAP:
            flat.byteswap()
        index.relative_offsets = flat[0::2]
        index.positions = flat[1::2]
        return index, True

    def __len__(self) -> int:
        return len(self.positions)

    def append(self, relative_offset: int, position: int) -> None:
        self.relative_offsets.append(relative_offset)
        self.positions.append(position)
        entry = array("i", (relative_offset, position))
        if _SWAP:
            entry.byteswap()
        self._pending += entry.tobytes()

    def clear(self) -> None:
        self.relative_offsets = array("i")
        self.positions = array("i")
        self._pending.clear()

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose base offset is <= `offset` (else 0)."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        return self.positions[i] if i >= 0 else 0

    def position_at_or_before(self, position: int) -> int:
        """The largest indexed batch position <= `position` (else 0): a known batch start."""
        i = bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else 0

    def _encode_all(self) -> bytes:
        flat = array("i", bytes(8 * len(self.positions)))
        flat[0::2] = self.relative_offsets
        flat[1::2] = self.positions
        if _SWAP:
            flat.byteswap()
        return flat.tobytes()
