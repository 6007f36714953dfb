"""Sparse time index: (largest batch maxTimestamp so far -> last offset of that batch).

Entries are added next to offset-index entries, and only when the largest timestamp grew,
so timestamps strictly increase and bisect works. An entry (T, o) promises that every batch
up to the one ending at offset o has maxTimestamp <= T; a lookup for ts therefore starts
scanning at the last entry with T < ts. When a segment stops being active a final entry
records its overall largest timestamp, which is what time-based retention and
ListOffsets(MAX_TIMESTAMP) read. File format: big-endian int64 timestamp, int32 relative
offset, like Kafka's.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from pathlib import Path

from coterie.log.index_file import IndexFile

_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    ENTRY_SIZE = _ENTRY.size  # 12

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    @classmethod
    def load(cls, path: Path, base_offset: int, max_bytes: int) -> tuple[TimeIndex, bool]:
        """Open the index at `path`; the flag is False if the file is missing or malformed."""
        index = cls(path, base_offset, max_bytes)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return index, False
        index._on_disk = True
        if len(data) % cls.ENTRY_SIZE:
            return index, False
        for ts, rel in _ENTRY.iter_unpack(data):
            index.timestamps.append(ts)
            index.relative_offsets.append(rel)
        return index, True

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.relative_offsets[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if it raises the largest timestamp recorded."""
        if timestamp > self.last_timestamp:
            rel = offset - self.base_offset
            self.timestamps.append(timestamp)
            self.relative_offsets.append(rel)
            self._pending += _ENTRY.pack(timestamp, rel)

    def clear(self) -> None:
        self.timestamps = array("q")
        self.relative_offsets = array("i")
        self._pending.clear()

    def start_offset_for(self, timestamp: int) -> int:
        """An offset from which to scan for the first batch with maxTimestamp >= timestamp."""
        i = bisect_left(self.timestamps, timestamp) - 1
        return self.base_offset + self.relative_offsets[i] if i >= 0 else self.base_offset

    def _encode_all(self) -> bytes:
        return b"".join(
            _ENTRY.pack(t, r) for t, r in zip(self.timestamps, self.relative_offsets, strict=True)
        )
