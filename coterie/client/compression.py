"""Batch decompression for the consumer side; the codecs live in `coterie.log.compression`.

They moved down a layer because the broker now reads inside batches too (record-level
ListOffsets answers, coterie.log.record_scan) and the log may not import the client. This
module keeps the old import path working.
"""

from coterie.log.compression import (
    CODEC_NAMES,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    DecompressionError,
    UnsupportedCodecError,
    decompress,
)

__all__ = [
    "CODEC_NAMES",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "XERIAL_MAGIC",
    "ZSTD",
    "DecompressionError",
    "UnsupportedCodecError",
    "decompress",
]
