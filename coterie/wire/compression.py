"""Decompressing the records section of a v2 record batch.

The broker stores and serves batches as producers wrote them (coterie.log.batch) and looks
inside one only to answer a timestamp lookup (coterie.log.record_scan) or to compact a topic
(coterie.log.cleaner); consumers (coterie.client, coterie.spark) look inside every batch
they read. All need the same codecs, so they live here, in the wire layer, below both. The
codec id sits in the low three bits of the batch attributes: 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. What each id means on the wire, as Kafka's clients write it:

- gzip: a gzip stream (RFC 1952), possibly several members back to back.
- snappy: either the "xerial" framing the Java client writes (an 8-byte magic
  0x82 'SNAPPY' 0x00, two int32 version fields, then blocks of int32 length + raw snappy) or
  one raw snappy block, as librdkafka writes.
- lz4: the LZ4 frame format (magic 0x184D2204).
- zstd: one or more zstd frames, the content size not necessarily in the header.

gzip comes with Python. The other three need a library: `cramjam` covers all of them; the
single-codec packages `python-snappy`, `lz4` and `zstandard` are used when cramjam is absent.
A batch in a codec whose library is missing raises `UnsupportedCodecError` naming what to
install; nothing is imported until a batch needs it.
"""

from __future__ import annotations

import gzip
import importlib
import struct
from collections.abc import Callable
from functools import cache
from types import ModuleType

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic (8) + version int32 + compatible version int32
_I32 = struct.Struct(">i")


class UnsupportedCodecError(ValueError):
    """A batch uses a codec this process cannot decompress (unknown id or missing library)."""


class DecompressionError(ValueError):
    """The compressed bytes are not valid for their codec."""


@cache
def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _need(codec: int, *modules: str) -> ModuleType:
    for name in modules:
        module = _optional(name)
        if module is not None:
            return module
    raise UnsupportedCodecError(
        f"{CODEC_NAMES[codec]} batch: install one of {', '.join(m.split('.')[0] for m in modules)}"
        " to read it")


def _gunzip(data: bytes) -> bytes:
    return gzip.decompress(data)


def _snappy_raw(data: bytes) -> bytes:
    cramjam = _optional("cramjam")
    if cramjam is not None:
        return bytes(cramjam.snappy.decompress_raw(data))
    return bytes(_need(SNAPPY, "snappy").decompress(data))


def _unsnappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data)
    out = bytearray()
    pos = _XERIAL_HEADER
    while pos < len(data):
        if pos + 4 > len(data):
            raise DecompressionError("xerial snappy: truncated block length")
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise DecompressionError(f"xerial snappy: block of {size} bytes overruns the data")
        out += _snappy_raw(data[pos:pos + size])
        pos += size
    return bytes(out)


def _unlz4(data: bytes) -> bytes:
    cramjam = _optional("cramjam")
    if cramjam is not None:
        return bytes(cramjam.lz4.decompress(data))
    return bytes(_need(LZ4, "lz4.frame").decompress(data))


def _unzstd(data: bytes) -> bytes:
    cramjam = _optional("cramjam")
    if cramjam is not None:
        return bytes(cramjam.zstd.decompress(data))
    zstandard = _need(ZSTD, "zstandard")
    # A streaming reader: producers may leave the content size out of the frame header.
    reader = zstandard.ZstdDecompressor().decompressobj()
    return bytes(reader.decompress(data))


_DECOMPRESSORS: dict[int, Callable[[bytes], bytes]] = {
    GZIP: _gunzip, SNAPPY: _unsnappy, LZ4: _unlz4, ZSTD: _unzstd,
}


def decompress(codec: int, data: bytes) -> bytes:
    """The records section of a batch compressed with `codec`, decompressed."""
    if codec == NONE:
        return data
    fn = _DECOMPRESSORS.get(codec)
    if fn is None:
        raise UnsupportedCodecError(f"unknown compression codec id {codec}")
    try:
        return fn(bytes(data))
    except (UnsupportedCodecError, DecompressionError):
        raise
    except Exception as exc:  # each library has its own error types
        raise DecompressionError(f"{CODEC_NAMES[codec]}: {exc}") from exc


def compress(codec: int, data: bytes) -> bytes | None:
    """`data` compressed with `codec` in the framing Kafka's readers accept (gzip stream,
    raw snappy block, LZ4 frame, zstd frame), or None when this process has no library for
    it. Only the log cleaner compresses: it rewrites a compressed batch it has thinned out
    in the batch's own codec, and writes it uncompressed when it cannot."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data)
    cramjam = _optional("cramjam")
    if cramjam is None:
        return None
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    return None
