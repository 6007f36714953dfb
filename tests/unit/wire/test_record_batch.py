"""The record-batch header format and the walk over a buffer of batches (coterie.wire.record_batch),
against batches from three independent writers: kio, kafka-python (the client tests' `build`)
and the log tests' hand-rolled `make_batch`."""

from __future__ import annotations

import struct

import pytest

from coterie.wire.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LEADER_EPOCH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    BatchHeader,
    RecordBatchError,
    batch_crc,
    batch_headers,
    parse_batch_header,
)
from tests.unit.client.test_records import build
from tests.unit.log.batches import kio_batch, make_batch


def test_layout_constants_agree_with_the_header_struct():
    assert (HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH) == (61, 12, 49)
    fields = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)
    packed = HEADER.pack(*fields)
    assert struct.unpack_from(">i", packed, LEADER_EPOCH_OFFSET)[0] == 3
    assert packed[MAGIC_OFFSET] == 4
    assert struct.unpack_from(">I", packed, CRC_OFFSET)[0] == 5
    assert struct.unpack_from(">h", packed, ATTRIBUTES_OFFSET)[0] == 6
    assert struct.unpack_from(">q", packed, MAX_TIMESTAMP_OFFSET)[0] == 9
    assert CRC_START == ATTRIBUTES_OFFSET == CRC_OFFSET + 4


def test_header_of_a_kio_batch():
    data = kio_batch(3)
    h = parse_batch_header(data, 0)
    assert isinstance(h, BatchHeader)
    assert (h.magic, h.records_count, h.last_offset_delta) == (2, 3, 2)
    assert (h.base_timestamp, h.max_timestamp) == (1704067200000, 1704067200000)
    assert (h.position, h.size, h.end) == (0, len(data), len(data))
    assert h.size == h.batch_length + LOG_OVERHEAD
    assert h.compression == 0 and not (h.is_control or h.is_transactional)
    assert batch_crc(data, h) == h.crc


def test_header_of_a_kafka_python_batch_in_a_codec():
    data = build([(5, b"k", b"v" * 100, []), (9, None, b"w", [("h", b"x")])],
                 base_offset=40, codec=4, attributes=0x10 | 0x08)
    h = parse_batch_header(data, 0)
    assert (h.base_offset, h.last_offset, h.next_offset) == (40, 41, 42)
    assert (h.base_timestamp, h.max_timestamp, h.records_count) == (5, 9, 2)
    assert h.compression == 4 and h.is_transactional and h.is_log_append_time
    assert not h.is_control
    assert batch_crc(data, h) == h.crc


def test_header_fields_and_properties():
    data = make_batch(4, timestamps=[5, 9, 7, 8], attributes=0x10 | 0x20 | 3, producer_id=77)
    h = parse_batch_header(data, 0)
    assert (h.magic, h.last_offset_delta, h.records_count) == (2, 3, 4)
    assert (h.base_timestamp, h.max_timestamp, h.producer_id) == (5, 9, 77)
    assert (h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (-1, -1, -1)
    assert h.size == len(data) == h.batch_length + 12
    assert h.is_control and h.is_transactional and h.compression == 3
    assert not h.is_log_append_time
    assert (h.last_offset, h.next_offset) == (3, 4)


def test_parse_refuses_what_cannot_be_a_v2_header():
    data = make_batch(2)
    with pytest.raises(RecordBatchError, match="truncated record batch at byte 0: 60 bytes"):
        parse_batch_header(data[:60], 0)
    with pytest.raises(RecordBatchError, match="truncated"):
        parse_batch_header(data, -1)
    with pytest.raises(RecordBatchError, match="magic 1"):
        parse_batch_header(make_batch(1, magic=1), 0)
    short = bytearray(data)
    struct.pack_into(">i", short, 8, MIN_BATCH_LENGTH - 1)
    with pytest.raises(RecordBatchError, match="batchLength 48"):
        parse_batch_header(short, 0)
    assert issubclass(RecordBatchError, ValueError)
    # A header on its own parses: whether the body is there is the caller's concern.
    assert parse_batch_header(data[:HEADER_SIZE], 0).size == len(data)


def several() -> tuple[bytes, list[bytes]]:
    parts = [kio_batch(2), make_batch(3, base_offset=2), build([(1, b"a", b"b", [])] * 4,
                                                               base_offset=5, codec=1)]
    return b"".join(parts), parts


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_iterates_over_several_batches_in_any_buffer(kind):
    data, parts = several()
    headers = batch_headers(kind(data))
    assert [h.records_count for h in headers] == [2, 3, 4]
    assert [h.base_offset for h in headers] == [0, 2, 5]
    assert [h.size for h in headers] == [len(p) for p in parts]
    assert [h.position for h in headers] == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert headers[-1].end == len(data)
    assert [batch_crc(kind(data), h) for h in headers] == [h.crc for h in headers]
    assert batch_headers(kind(data), strict=True) == headers
    # From a later batch start, positions stay those of the whole buffer.
    assert batch_headers(kind(data), headers[1].position) == headers[1:]


def test_empty_buffer_yields_nothing():
    assert batch_headers(b"") == []
    assert batch_headers(b"", strict=True) == []


@pytest.mark.parametrize("cut", [1, 10, 60, 61, 70])
def test_a_truncated_trailing_batch(cut):
    """A Fetch may end inside a batch: the walk stops quietly before it. A Produce may not:
    strict raises, naming the batch."""
    data, parts = several()
    cut_data = data[: len(data) - cut]
    headers = batch_headers(cut_data)
    assert [h.records_count for h in headers] == [2, 3]
    assert headers[-1].end == len(parts[0]) + len(parts[1])
    with pytest.raises(RecordBatchError, match=f"at byte {headers[-1].end}"):
        batch_headers(cut_data, strict=True)
    remaining = len(parts[2]) - cut
    message = "truncated" if remaining < HEADER_SIZE else "remain"
    with pytest.raises(RecordBatchError, match=message):
        batch_headers(cut_data, strict=True)


def test_a_broken_header_raises_in_both_modes():
    data, parts = several()
    broken = bytearray(data)
    broken[len(parts[0]) + MAGIC_OFFSET] = 1
    for strict in (False, True):
        with pytest.raises(RecordBatchError, match=f"at byte {len(parts[0])} has magic 1"):
            batch_headers(bytes(broken), strict=strict)
    struct.pack_into(">i", broken, len(parts[0]) + 8, 10)  # batchLength below a header's
    broken[len(parts[0]) + MAGIC_OFFSET] = 2
    with pytest.raises(RecordBatchError, match="batchLength 10"):
        batch_headers(bytes(broken))


def test_batch_crc_covers_attributes_to_the_end():
    data, _ = several()
    headers = batch_headers(data)
    flipped = bytearray(data)
    flipped[headers[1].end - 1] ^= 0x01  # last byte of the middle batch
    assert [batch_crc(flipped, h) == h.crc for h in headers] == [True, False, True]
    # baseOffset and leader epoch are outside the CRC: rewriting them keeps it valid.
    moved = bytearray(data)
    struct.pack_into(">qii", moved, headers[1].position, 999, 8, 7)
    assert batch_crc(moved, headers[1]) == headers[1].crc
