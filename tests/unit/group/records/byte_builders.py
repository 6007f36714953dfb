"""Builders of the bytes Kafka's record schemas say, for the record codec tests to write
expected keys and values by hand."""

from __future__ import annotations


def i16(n: int) -> bytes:
    return n.to_bytes(2, "big", signed=True)


def i32(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


def i64(n: int) -> bytes:
    return n.to_bytes(8, "big", signed=True)


def s16(text: str) -> bytes:
    """A non-flexible (int16-length) string."""
    raw = text.encode()
    return i16(len(raw)) + raw


def cs(text: str) -> bytes:
    """A compact string; short ones only, so the length is one byte."""
    raw = text.encode()
    assert len(raw) + 1 < 0x80
    return bytes([len(raw) + 1]) + raw


def arr(*items: bytes) -> bytes:
    """A compact array of already encoded items (few, so the count is one byte)."""
    return bytes([len(items) + 1]) + b"".join(items)


NO_TAGS = b"\x00"
V0 = i16(0)  # the value version
