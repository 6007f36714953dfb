"""Record batches straight into Arrow columns: the read path's hot loop.

`coterie.client.records.decode_batches` builds one frozen `ConsumerRecord` per record, which
is what a consumer's user wants and about half of the cost of a Spark read. Here the same
bytes go straight into per-column Python lists (offsets, timestamps, keys, values, headers),
from which Arrow builds its arrays in one call each; topic and partition are constant per
task. The batch framing is the consumer decoder's, not a copy:
`coterie.client.records.fetched_batches` (over the wire format's batch walker,
`coterie.wire.record_batch.batch_headers`) does the CRC check and decompression and applies
the same rules: v2 batches only, a trailing partial batch ignored, control batches skipped.
Only the record loop is inlined here, and with it the record-level rules: records before
`from_offset` dropped, LogAppendTime batches stamped with the batch's max timestamp.
`tests/spark/test_units.py` holds the two decoders to the same answers.

(kio's own record-batch reader is not used: it reads uncompressed batches only and rounds
timestamps down to whole seconds.)

Pure: bytes in, columns out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from coterie.client.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordDecodeError,
    fetched_batches,
    read_varint,
)


@dataclass(slots=True)
class Columns:
    """Decoded records of one partition, column by column."""

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)  # milliseconds
    timestamp_types: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[list[dict]] | None = None  # only when asked for
    next_offset: int = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def to_arrow(self, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
        """One Arrow batch with `schema`'s columns (the source's), in its order."""
        n = len(self.offsets)
        arrays = []
        for f in schema:
            name = f.name
            if name == "key":
                arrays.append(pa.array(self.keys, type=f.type))
            elif name == "value":
                arrays.append(pa.array(self.values, type=f.type))
            elif name == "topic":
                arrays.append(pa.array([topic] * n, type=f.type))
            elif name == "partition":
                arrays.append(pa.array([partition] * n, type=f.type))
            elif name == "offset":
                arrays.append(pa.array(self.offsets, type=f.type))
            elif name == "timestamp":
                millis = pa.array(self.timestamps, type=pa.timestamp("ms", tz="UTC"))
                arrays.append(millis.cast(f.type))
            elif name == "timestampType":
                arrays.append(pa.array(self.timestamp_types, type=f.type))
            else:  # headers
                arrays.append(pa.array(self.headers or [[]] * n, type=f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _records(body: bytes, count: int, base_offset: int, base_timestamp: int,
             append_time: int | None, from_offset: int, end_offset: int, out: Columns) -> None:
    offsets, timestamps, kinds = out.offsets, out.timestamps, out.timestamp_types
    keys, values, headers = out.keys, out.values, out.headers
    kind = CREATE_TIME if append_time is None else LOG_APPEND_TIME
    size = len(body)
    pos = 0
    for _ in range(count):
        b = body[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = read_varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise RecordDecodeError(f"record of {length} bytes overruns its batch")
        pos += 1  # record attributes: unused
        b = body[pos]
        if b < 0x80:
            ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            ts_delta, pos = read_varint(body, pos)
        b = body[pos]
        if b < 0x80:
            offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            offset_delta, pos = read_varint(body, pos)
        b = body[pos]
        if b < 0x80:
            n, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            n, pos = read_varint(body, pos)
        if n < 0:
            key = None
        else:
            key, pos = body[pos:pos + n], pos + n
        b = body[pos]
        if b < 0x80:
            n, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            n, pos = read_varint(body, pos)
        if n < 0:
            value = None
        else:
            value, pos = body[pos:pos + n], pos + n
        n_headers, pos = read_varint(body, pos)
        record_headers = []
        for _ in range(n_headers):
            n, pos = read_varint(body, pos)
            if n < 0:
                raise RecordDecodeError("a header with a null key")
            name, pos = body[pos:pos + n], pos + n
            n, pos = read_varint(body, pos)
            hvalue = None if n < 0 else body[pos:pos + n]
            pos += max(n, 0)
            record_headers.append({"key": name.decode("utf-8", errors="replace"),
                                   "value": hvalue})
        if pos != end:
            raise RecordDecodeError(f"record length {length} disagrees with its fields")
        offset = base_offset + offset_delta
        if from_offset <= offset < end_offset:
            offsets.append(offset)
            timestamps.append(append_time if append_time is not None
                              else base_timestamp + ts_delta)
            kinds.append(kind)
            keys.append(key)
            values.append(value)
            if headers is not None:
                headers.append(record_headers)


def decode_columns(data: bytes | memoryview | None, topic: str, partition: int,
                   from_offset: int, end_offset: int, *, with_headers: bool,
                   check_crc: bool = True) -> Columns:
    """The records in [from_offset, end_offset) of fetched v2 batches, as columns, and where
    the next fetch starts (see `coterie.client.records.decode_batches` for the rules)."""
    out = Columns(headers=[] if with_headers else None, next_offset=from_offset)
    for h, body in fetched_batches(bytes(data or b""), topic, partition, from_offset,
                                   check_crc):
        if body is not None:
            append_time = h.max_timestamp if h.is_log_append_time else None
            try:
                _records(bytes(body), h.records_count, h.base_offset, h.base_timestamp,
                         append_time, from_offset, end_offset, out)
            except IndexError:
                raise RecordDecodeError(f"{topic}-{partition}: batch at offset "
                                        f"{h.base_offset} is cut short") from None
        out.next_offset = max(out.next_offset, h.next_offset)
    return out
