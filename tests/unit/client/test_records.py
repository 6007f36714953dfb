"""The consumer's record-batch reader, against batches built by an independent writer
(kafka-python's DefaultRecordBatchBuilder) in every codec, plus the edge cases a fetch
response really contains: a partial last batch, a start offset inside a batch, control
batches, LogAppendTime, corruption."""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from coterie.client.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordDecodeError,
    decode_batches,
)
from coterie.wire import compression

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def build(records: list[Rec], *, base_offset: int = 0, codec: int = 0,
          attributes: int = 0) -> bytes:
    """One v2 batch of (timestamp, key, value, headers), written by kafka-python."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec,
                                        is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    if attributes:
        (attrs,) = struct.unpack_from(">h", data, 21)
        struct.pack_into(">h", data, 21, attrs | attributes)
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


records_strategy = st.lists(st.tuples(
    st.integers(0, 2**41),
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=300),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=10)), max_size=3),
), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(sorted(CODECS.values())),
       base=st.integers(0, 2**40))
def test_records_read_back_as_written(records: list[Rec], codec: int, base: int) -> None:
    decoded = decode_batches(build(records, base_offset=base, codec=codec), "t", 3)
    assert decoded.next_offset == base + len(records)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded.records] \
        == [(base + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]
    assert {(r.topic, r.partition, r.timestamp_type) for r in decoded.records} == {
        ("t", 3, CREATE_TIME)}


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_fetch_starting_inside_a_batch_skips_earlier_records(codec: str) -> None:
    recs: list[Rec] = [(1000 + i, b"k%d" % i, b"v" * 50, []) for i in range(10)]
    data = build(recs[:5], base_offset=100, codec=CODECS[codec]) + build(
        recs[5:], base_offset=105, codec=CODECS[codec])
    decoded = decode_batches(data, "t", 0, from_offset=103)
    assert [r.offset for r in decoded.records] == [103, 104, 105, 106, 107, 108, 109]
    assert decoded.next_offset == 110
    assert decode_batches(data, "t", 0, from_offset=106).records[0].key == b"k6"


def test_a_partial_last_batch_is_left_for_the_next_fetch() -> None:
    first = build([(1, b"a", b"1", [])], base_offset=7)
    second = build([(2, b"b", b"2", []), (3, b"c", b"3", [])], base_offset=8)
    for cut in (1, 30, 61, len(second) - 1):
        decoded = decode_batches(first + second[:cut], "t", 0, from_offset=7)
        assert [r.key for r in decoded.records] == [b"a"]
        assert decoded.next_offset == 8
    empty = decode_batches(second[:40], "t", 0, from_offset=8)
    assert (empty.records, empty.next_offset) == ([], 8)
    assert decode_batches(None, "t", 0, from_offset=5).next_offset == 5


def test_control_batches_are_skipped_but_advance_the_position() -> None:
    marker = build([(5, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])],
                   base_offset=10, attributes=0x20 | 0x10)
    data = build([(4, b"x", b"y", [])], base_offset=9) + marker
    decoded = decode_batches(data, "t", 0, from_offset=9)
    assert [r.offset for r in decoded.records] == [9]
    assert decoded.next_offset == 11
    only_marker = decode_batches(marker, "t", 0, from_offset=10)
    assert (only_marker.records, only_marker.next_offset) == ([], 11)


def test_log_append_time_gives_every_record_the_batch_timestamp() -> None:
    data = bytearray(build([(5, None, b"a", []), (9, None, b"b", [])], attributes=0x08))
    struct.pack_into(">q", data, 35, 123_456)  # maxTimestamp, as the broker stamps it
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    decoded = decode_batches(bytes(data), "t", 0)
    assert [(r.timestamp, r.timestamp_type) for r in decoded.records] == [
        (123_456, LOG_APPEND_TIME), (123_456, LOG_APPEND_TIME)]


def test_corrupt_batches_raise() -> None:
    good = build([(1, b"k", b"value", [])], base_offset=0)
    flipped = bytearray(good)
    flipped[-3] ^= 0x01  # a byte of the value: the structure stays readable
    with pytest.raises(RecordDecodeError, match="CRC"):
        decode_batches(bytes(flipped), "t", 0)
    assert decode_batches(bytes(flipped), "t", 0, check_crc=False).next_offset == 1
    old_magic = bytearray(good)
    old_magic[16] = 1
    with pytest.raises(RecordDecodeError, match="magic 1"):
        decode_batches(bytes(old_magic), "t", 0)
    bad_codec = build([(1, b"k", b"v", [])], attributes=0x05)
    with pytest.raises(RecordDecodeError, match="codec"):
        decode_batches(bad_codec, "t", 0)


def test_snappy_reads_raw_blocks_and_xerial_framing() -> None:
    payload = b"librdkafka writes raw snappy, Java xerial frames " * 40
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert compression.decompress(compression.SNAPPY, raw) == payload
    half = len(payload) // 2
    blocks = [bytes(cramjam.snappy.compress_raw(p)) for p in (payload[:half], payload[half:])]
    xerial = compression.XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(b)) + b for b in blocks)
    assert compression.decompress(compression.SNAPPY, xerial) == payload
    with pytest.raises(compression.DecompressionError):
        compression.decompress(compression.SNAPPY, xerial[:-3])


def test_zstd_frames_without_a_content_size_are_read() -> None:
    import zstandard

    writer = zstandard.ZstdCompressor().compressobj()
    frame = writer.compress(b"streamed " * 100) + writer.flush()
    assert compression.decompress(compression.ZSTD, frame) == b"streamed " * 100
