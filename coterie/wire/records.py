"""The record format inside a v2 record batch: the one parser of it in the tree.

The broker stores and serves batches without opening them; three readers do open them, and
all use these functions: the consumer (`coterie.client.records` builds its
`ConsumerRecord`s from `iter_records`), the log cleaner and the produce check of compacted
topics (`iter_keys`, a lighter walk: key and byte span of each record, no values or
headers), and the log's record-level timestamp lookups (`coterie.log.record_scan`). It sits
in the wire layer, below the log and the client, so that the client does not reach into the
log for it. (`coterie.spark.columns` keeps a hand-inlined copy of the record loop because it
is the Spark source's hot path; tests hold the two to the same answers.)

One record, after the 61-byte batch header (all integers zigzag varints except `attributes`)::

    length  attributes:int8  timestampDelta  offsetDelta  keyLength key  valueLength value
    headerCount [headerKeyLength headerKey headerValueLength headerValue]...

A length of -1 is a null key, value or header value. A record's offset is the batch's base
offset plus its delta; its timestamp the batch's base timestamp plus its delta, unless the
batch says LogAppendTime, when every record carries the batch's max timestamp.

Pure: bytes in, values out.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["RawRecord", "RecordDecodeError", "iter_keys", "iter_records", "read_varint"]


class RecordDecodeError(ValueError):
    """Bytes that are not valid v2 record batches (bad CRC, lengths, varints or codec)."""


# One record as stored: (offset delta, timestamp delta, key, value, headers), the deltas
# against its batch's base offset and base timestamp, each header a (key, value) pair. A
# plain tuple: the consumer decodes every record it delivers through here, and a named tuple
# costs measurably more per record.
RawRecord = tuple[int, int, bytes | None, bytes | None, tuple[tuple[bytes, bytes | None], ...]]



def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos` -> (value, position after it)."""
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise RecordDecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint longer than 10 bytes")


def _bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    size, pos = read_varint(buf, pos)
    if size < 0:
        return None, pos
    end = pos + size
    if end > len(buf):
        raise RecordDecodeError(f"a {size}-byte field runs past the end of its record")
    return buf[pos:end], end


def iter_records(body: bytes, count: int) -> Iterator[RawRecord]:
    """The `count` records of a batch's (decompressed) records section, in stored order.
    Raises RecordDecodeError on bytes that do not parse as records."""
    pos = 0
    size = len(body)
    for _ in range(count):
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise RecordDecodeError(f"record of {length} bytes overruns its batch")
        pos += 1  # record attributes: unused
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        n_headers, pos = read_varint(body, pos)
        headers: tuple[tuple[bytes, bytes | None], ...] = ()
        if n_headers:
            if n_headers < 0:
                raise RecordDecodeError(f"negative header count {n_headers}")
            pairs = []
            for _ in range(n_headers):
                name, pos = _bytes(body, pos)
                if name is None:
                    raise RecordDecodeError("a header with a null key")
                header_value, pos = _bytes(body, pos)
                pairs.append((name, header_value))
            headers = tuple(pairs)
        if pos != end:
            raise RecordDecodeError(f"record length {length} disagrees with its fields")
        yield offset_delta, ts_delta, key, value, headers


def iter_keys(body: bytes, count: int) -> Iterator[tuple[int, int, int, int, bytes | None, bool]]:
    """(start, end, offset delta, timestamp delta, key, is a tombstone) of each record in
    a batch's decompressed records section, without reading values or headers: what the log
    cleaner needs (which key, where the record's bytes lie, to copy them) and the produce
    check of a compacted topic (every record has a key). Raises RecordDecodeError on bad
    bytes."""
    pos = 0
    size = len(body)
    for _ in range(count):
        start = pos
        length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise RecordDecodeError(f"record of {length} bytes overruns its batch")
        pos += 1
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key_len, pos = read_varint(body, pos)
        key = None
        if key_len >= 0:
            key = body[pos:pos + key_len]
            pos += key_len
        value_len, _ = read_varint(body, pos)
        yield start, end, offset_delta, ts_delta, key, value_len < 0
        pos = end
