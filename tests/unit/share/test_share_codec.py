"""The bytes of `__share_group_state` records: exact bytes of small records worked out from
Kafka's JSON schemas, round trips, and what a reader refuses."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.share import (
    ShareRecordDecodeError,
    ShareRecordEncodeError,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
    decode,
    encode,
    tombstones,
)

T = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)


def test_a_snapshot_key_and_value_byte_for_byte():
    key, value = encode(ShareStateRecord(
        ShareSnapshotKey("g", T, 5),
        ShareSnapshotValue(1, 2, 3, 40, 50, 60, (StateBatch(40, 41, 2, 1),))))
    assert key == bytes.fromhex("0000" "0001" "67" "0102030405060708090a0b0c0d0e0f10" "00000005")
    assert value == bytes.fromhex(
        "0000"                                   # value version 0
        "00000001" "00000002" "00000003"         # snapshot, state, leader epochs
        "0000000000000028"                       # start offset 40
        "0000000000000032" "000000000000003c"    # create, write timestamps
        "02"                                     # one batch (compact array: n + 1)
        "0000000000000028" "0000000000000029" "02" "0001" "00"
        "00")                                    # no tagged field: delivery count -1


def test_an_update_writes_its_delivery_complete_count_as_tag_0():
    key, value = encode(ShareStateRecord(ShareUpdateKey("g", T, 0),
                                         ShareUpdateValue(0, 3, -1, (), 7)))
    assert key[:2] == b"\x00\x01"
    assert value == bytes.fromhex("0000" "00000000" "00000003" "ffffffffffffffff" "01"
                                  "01" "00" "04" "00000007")


batches = st.lists(st.builds(StateBatch, st.integers(0, 2**62), st.integers(0, 2**62),
                             st.sampled_from([0, 2, 4]), st.integers(0, 32767)),
                   max_size=300).map(tuple)
keys = st.builds(lambda g, t, p, snap: (ShareSnapshotKey if snap else ShareUpdateKey)(g, t, p),
                 st.text(max_size=40), st.uuids(), st.integers(0, 2**31 - 1), st.booleans())
counts = st.integers(-1, 2**31 - 1)


@given(keys, batches, counts, st.integers(-1, 2**62), st.booleans())
def test_round_trip(key, state_batches, count, start, tombstone):
    if tombstone:
        value = None
    elif isinstance(key, ShareSnapshotKey):
        value = ShareSnapshotValue(2, 1, 0, start, 10, 20, state_batches, count)
    else:
        value = ShareUpdateValue(2, 0, start, state_batches, count)
    record = ShareStateRecord(key, value)
    assert decode(*encode(record)) == record


def test_tombstones_cover_both_keys():
    snapshot, update = tombstones("g", T, 1)
    assert encode(snapshot) == (encode(ShareStateRecord(ShareSnapshotKey("g", T, 1), None))[0],
                                None)
    assert decode(*encode(update)) == update


def test_values_out_of_their_fields_are_refused_at_encoding():
    with pytest.raises(ShareRecordEncodeError):
        encode(ShareStateRecord(ShareUpdateKey("g", T, 0),
                                ShareUpdateValue(0, 0, 0, (StateBatch(0, 0, 2, 40000),))))
    with pytest.raises(ShareRecordEncodeError):
        encode(ShareStateRecord(ShareUpdateKey("x" * 40000, T, 0), None))
    with pytest.raises(TypeError):
        ShareStateRecord(ShareUpdateKey("g", T, 0), ShareSnapshotValue(0, 0, 0, 0, 0, 0))


def test_damaged_bytes_are_refused():
    key, value = encode(ShareStateRecord(ShareUpdateKey("g", T, 0),
                                         ShareUpdateValue(0, 0, 5, (StateBatch(5, 6, 2, 1),))))
    assert value is not None
    for bad_key, bad_value in [
        (b"\x00\x02" + key[2:], value),   # another coordinator's record type
        (key[:-1], value),                 # truncated key
        (key, value[:-1]),                 # truncated value
        (key, value + b"\x00"),            # trailing bytes
        (key, b"\x00\x01" + value[2:]),    # unknown value version
        (key, value[:18] + b"\x00" + value[19:19]),  # a null StateBatches array
    ]:
        with pytest.raises(ShareRecordDecodeError):
            decode(bad_key, bad_value)


def test_unknown_tagged_fields_are_skipped():
    key, value = encode(ShareStateRecord(ShareUpdateKey("g", T, 0),
                                         ShareUpdateValue(0, 0, 5, (), 2)))
    assert value is not None
    # Replace the tagged section (1 field: tag 0) by two: tag 0 and an unknown tag 9.
    with_unknown = value[:-7] + b"\x02" + value[-6:] + b"\x09\x01\xff"
    assert decode(key, with_unknown).value == ShareUpdateValue(0, 0, 5, (), 2)
