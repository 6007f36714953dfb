"""Size-prefixed frames, sans-IO.

Every Kafka request and response is a 4-byte big-endian length followed by that many bytes.
`FrameBuffer` accumulates whatever the socket delivered and hands out complete frames, so the
broker's connection code never has to reason about partial reads. The size bound is checked on
the prefix alone, before any allocation, which is how `socket.request.max.bytes` protects the
broker from a client announcing a gigantic frame.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameTooLarge(Exception):
    """A frame announced a size above the configured bound (or a negative size)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class FrameBuffer:
    """Accumulates bytes and yields whole frames (without their length prefix)."""

    __slots__ = ("_buf", "_limit")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buf = bytearray()
        self._limit = max_frame_bytes

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """Return the next complete frame, or None if more bytes are needed."""
        buf = self._buf
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < 0 or size > self._limit:
            raise FrameTooLarge(size, self._limit)
        end = 4 + size
        if len(buf) < end:
            return None
        frame = bytes(buf[4:end])
        del buf[:end]
        return frame

    @property
    def pending(self) -> int:
        return len(self._buf)


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its size."""
    return _SIZE.pack(len(payload)) + payload
