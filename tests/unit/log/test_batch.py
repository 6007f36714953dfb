import struct

import pytest

from coterie.log.batch import (
    BatchHeader,
    CorruptRecordError,
    assign_offsets,
    parse_batch_header,
    stamp_log_append_time,
    validate_batches,
)
from coterie.log.errors import LogError

from .batches import kio_batch, make_batch, split_batches


def test_kio_batches_validate():
    data = kio_batch(3) + kio_batch(1)
    headers = validate_batches(data)
    assert [h.records_count for h in headers] == [3, 1]
    assert headers[0].size + headers[1].size == len(data)
    assert headers[1].position == headers[0].size
    assert headers[0].max_timestamp == 1704067200000


def test_parse_batch_header_raises_the_logs_error():
    """The wire parser (tests/unit/wire/test_record_batch.py), with format errors surfacing as
    CorruptRecordError, the LogError the broker maps to CORRUPT_MESSAGE."""
    data = make_batch(4, producer_id=77)
    h = parse_batch_header(data, 0)
    assert isinstance(h, BatchHeader)
    assert (h.records_count, h.producer_id, h.size) == (4, 77, len(data))
    with pytest.raises(CorruptRecordError, match="magic 1"):
        parse_batch_header(make_batch(1, magic=1), 0)
    with pytest.raises(CorruptRecordError, match="truncated"):
        parse_batch_header(data[:60], 0)


def test_assign_offsets_is_consecutive_and_keeps_crc():
    data = make_batch(3) + make_batch(1) + make_batch(5)
    headers = validate_batches(data)
    out = assign_offsets(data, headers, 100, 7)
    again = validate_batches(out)  # CRCs still valid
    assert [h.base_offset for h in again] == [100, 103, 104]
    assert {h.partition_leader_epoch for h in again} == {7}
    assert bytes(data) == make_batch(3) + make_batch(1) + make_batch(5)  # input untouched


def test_log_append_time_restamps_and_rehashes():
    data = bytearray(make_batch(2, timestamp=5))
    headers = validate_batches(data)
    stamp_log_append_time(data, headers, 123456)
    (h,) = validate_batches(data)
    assert h.max_timestamp == 123456 and h.attributes & 0x08


def test_crc_mismatch():
    data = bytearray(make_batch(2))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(bytes(data))


def test_magic_1_rejected():
    with pytest.raises(CorruptRecordError, match="magic 1"):
        validate_batches(make_batch(1, magic=1))


@pytest.mark.parametrize("cut", [1, 10, 60, 61, 70])
def test_truncated_buffers(cut):
    data = make_batch(3) + make_batch(2)
    with pytest.raises(CorruptRecordError):
        validate_batches(data[: len(data) - cut])
    with pytest.raises(CorruptRecordError):
        validate_batches(data[:cut])


def test_empty_and_trailing_garbage():
    with pytest.raises(CorruptRecordError, match="no record batches"):
        validate_batches(b"")
    with pytest.raises(CorruptRecordError):
        validate_batches(make_batch(1) + b"\x00" * 5)


def test_batch_length_inconsistent():
    data = bytearray(make_batch(2))
    struct.pack_into(">i", data, 8, 10)  # below header size
    with pytest.raises(CorruptRecordError, match="batchLength"):
        validate_batches(bytes(data))
    struct.pack_into(">i", data, 8, len(data))  # claims more than present
    with pytest.raises(CorruptRecordError, match="remain"):
        validate_batches(bytes(data))


def test_negative_records_count_and_mismatched_delta():
    for count in (-1, 7):
        data = bytearray(make_batch(2))
        struct.pack_into(">i", data, 57, count)
        with pytest.raises(CorruptRecordError, match="recordsCount"):
            validate_batches(bytes(data))


def test_corrupt_is_a_log_error():
    assert issubclass(CorruptRecordError, LogError)


def test_split_helper_roundtrip():
    parts = [make_batch(1), make_batch(4), make_batch(2)]
    assert split_batches(b"".join(parts)) == parts
