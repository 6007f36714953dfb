"""Size-prefixed frames, sans-IO.

Every Kafka request and response is a 4-byte big-endian length followed by that many bytes.
`FrameBuffer` accumulates whatever the socket delivered and hands out complete frames, so the
broker's connection code never has to reason about partial reads. The size bound is checked on
the prefix alone, before any allocation, which is how `socket.request.max.bytes` protects the
broker from a client announcing a gigantic frame.
"""

from __future__ import annotations

import mmap
import struct
from typing import Protocol

_SIZE = struct.Struct(">i")


class FrameTooLarge(Exception):
    """A frame announced a size above the configured bound (or a negative size)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class MemoryPool(Protocol):
    """Where a frame buffer takes the memory of a large frame (the broker's
    `queued.max.request.bytes`)."""

    def reserve(self, size: int) -> bool: ...

    def release(self, size: int) -> None: ...


# Frames up to this size are gathered in the connection's own buffer, outside any pool: a
# heartbeat never waits for memory.
SMALL_FRAME = 64 * 1024


class FrameBuffer:
    """Accumulates bytes and yields whole frames (without their length prefix).

    With a `pool`, a frame larger than SMALL_FRAME reserves its whole size there when its
    size prefix arrives (Kafka's `queued.max.request.bytes`), and is gathered in an
    anonymous memory map of that size: the pages a half-sent frame touched go back to the
    system when it is dropped (`close`), where a heap buffer grown a byte at a time left
    the allocator holding them after the connection was gone (issue 23). When the pool has
    no room, `blocked` is set and the owner stops reading until `next_frame` succeeds."""

    __slots__ = ("_big", "_buf", "_filled", "_limit", "_pool", "blocked")

    def __init__(self, max_frame_bytes: int, pool: MemoryPool | None = None) -> None:
        self._buf = bytearray()
        self._limit = max_frame_bytes
        self._pool = pool
        self._big: mmap.mmap | None = None  # the large frame being gathered, prefix and all
        self._filled = 0
        self.blocked = False

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        big = self._big
        if big is None:
            self._buf += data
            return
        take = min(len(data), len(big) - self._filled)
        big[self._filled:self._filled + take] = data[:take]
        self._filled += take
        if take < len(data):
            self._buf += data[take:]

    def next_frame(self) -> bytes | None:
        """Return the next complete frame, or None if more bytes (or memory) are needed."""
        big = self._big
        if big is not None:
            if self._filled < len(big):
                return None
            out = big[4:]
            self._drop_big()
            return out
        buf = self._buf
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < 0 or size > self._limit:
            raise FrameTooLarge(size, self._limit)
        end = 4 + size
        if len(buf) < end:
            if self._pool is not None and size > SMALL_FRAME:
                self._start_big(end)
            return None
        self.blocked = False
        frame = bytes(buf[4:end])
        del buf[:end]
        return frame

    def _start_big(self, total: int) -> None:
        pool = self._pool
        assert pool is not None
        if not pool.reserve(total):
            self.blocked = True
            return
        self.blocked = False
        big = self._big = mmap.mmap(-1, total)
        buf = self._buf
        big[:len(buf)] = buf
        self._filled = len(buf)
        self._buf = bytearray()

    def _drop_big(self) -> None:
        big = self._big
        if big is not None:
            self._big = None
            self._filled = 0
            assert self._pool is not None
            self._pool.release(len(big))
            big.close()

    def close(self) -> None:
        """Give back what a half-received frame holds (the connection is gone)."""
        self._drop_big()
        self._buf = bytearray()
        self.blocked = False

    @property
    def limit(self) -> int:
        """The largest frame accepted (larger ones raise FrameTooLarge)."""
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = value

    @property
    def pending(self) -> int:
        return len(self._buf) + self._filled

    @property
    def gathering_large(self) -> bool:
        """A large frame has its memory and is being received (read it in big chunks)."""
        return self._big is not None


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its size."""
    return _SIZE.pack(len(payload)) + payload
