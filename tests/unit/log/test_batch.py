import io
import struct
from datetime import UTC, datetime

import pytest
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from coterie.log.batch import (
    BatchHeader,
    CorruptRecordError,
    assign_offsets,
    parse_batch_header,
    stamp_log_append_time,
    validate_batches,
)
from coterie.log.errors import LogError

from .batches import make_batch, split_batches


def kio_batch(n: int) -> bytes:
    ts = datetime(2024, 1, 1, tzinfo=UTC)
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=ts,
            offset=i64(i),
            key=b"k",
            value=b"value %d" % i,
            headers=(),
        )
        for i in range(n)
    )
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            records=records,
            attributes=i16(0),
        ),
    )
    return buf.getvalue()


def test_kio_batches_validate():
    data = kio_batch(3) + kio_batch(1)
    headers = validate_batches(data)
    assert [h.records_count for h in headers] == [3, 1]
    assert headers[0].size + headers[1].size == len(data)
    assert headers[1].position == headers[0].size
    assert headers[0].max_timestamp == 1704067200000


def test_header_fields_and_properties():
    data = make_batch(4, timestamps=[5, 9, 7, 8], attributes=0x10 | 0x20 | 3, producer_id=77)
    h = parse_batch_header(data, 0)
    assert isinstance(h, BatchHeader)
    assert (h.magic, h.last_offset_delta, h.records_count) == (2, 3, 4)
    assert (h.base_timestamp, h.max_timestamp, h.producer_id) == (5, 9, 77)
    assert h.size == len(data) == h.batch_length + 12
    assert h.is_control and h.is_transactional and h.compression == 3
    assert (h.last_offset, h.next_offset) == (3, 4)


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
