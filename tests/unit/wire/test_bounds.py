"""Declared sizes are checked before kio's native reader sees a frame (coterie.wire.bounds).

Without the check, the two frames from issue 10 abort the whole Python process inside kio
(a failed multi-gigabyte allocation); with it they are ordinary DecodeErrors. The properties
hold the check to two promises: it never refuses a request a client could legitimately send
(every advertised API and version, values drawn from the schemas), and whatever bytes arrive,
decoding ends in a value or a DecodeError.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from kio.index import load_request_schema

from coterie.wire.bounds import BoundsError, check_request
from coterie.wire.codec import DecodeError, decode_request_and_header, peek_api
from tests.wire_requests import advertised, frame_of, mutated_frames, requests

ISSUE_FRAMES = {
    "Metadata v12": "000000150003000c000000010005637261736800ffffffff0f",
    "JoinGroup v9": "00000023000b000900000001000563726173680002670000271000002710010002"
                    "638080808010",
}


def _decode(frame: bytes):
    key, version = peek_api(frame)
    return decode_request_and_header(frame, key, version)


@pytest.mark.parametrize("name", sorted(ISSUE_FRAMES))
def test_issue_frames_are_decode_errors_not_aborts(name):
    frame = bytes.fromhex(ISSUE_FRAMES[name])[4:]
    with pytest.raises(DecodeError, match="cannot fit"):
        _decode(frame)


def _header(key: int, version: int, flexible: bool) -> bytes:
    head = key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\0\0\0\1" + b"\0\1c"
    return head + (b"\0" if flexible else b"")


def test_legacy_array_count_beyond_the_frame_is_refused():
    # Metadata v1: topics is an int32-counted array of int16-length strings (2 bytes each).
    frame = _header(3, 1, False) + (4).to_bytes(4, "big") + b"\0\1a" + b"\0\1b"
    with pytest.raises(BoundsError, match="array of 4 elements"):
        check_request(frame, load_request_schema(3, 1))
    ok = _header(3, 1, False) + (2).to_bytes(4, "big") + b"\0\1a" + b"\0\1b"
    check_request(ok, load_request_schema(3, 1))
    assert [t.name for t in _decode(ok)[1].topics] == ["a", "b"]


def test_string_longer_than_the_frame_is_refused():
    frame = _header(3, 1, False) + (1).to_bytes(4, "big") + b"\x7f\xffabc"
    with pytest.raises(BoundsError, match="string of 32767 bytes"):
        check_request(frame, load_request_schema(3, 1))


def test_tagged_field_size_and_long_varints_are_checked():
    schema = load_request_schema(3, 12)
    body = b"\x01" + b"\x01" + b"\x00"  # no topics (empty), allow auto-create, no operations
    with pytest.raises(BoundsError, match="tagged field 7"):
        check_request(_header(3, 12, True) + body + b"\x01\x07\x20", schema)
    with pytest.raises(BoundsError, match="longer than five bytes"):
        check_request(_header(3, 12, True) + b"\x80\x80\x80\x80\x80\x01", schema)
    check_request(_header(3, 12, True) + body + b"\x01\x07\x02ab", schema)  # unknown tag


def test_every_advertised_api_has_a_bounds_rule():
    for key, version in advertised():
        request = _minimal(key, version)
        check_request(frame_of(request)[4:], type(request))


def _minimal(key: int, version: int):
    from coterie.wire.build import build
    from coterie.wire.codec import request_schema
    return build(request_schema(key, version), {})


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_valid_requests_of_every_advertised_version_pass_and_decode(drawn):
    _, _, request = drawn
    frame = frame_of(request)[4:]
    _, decoded = _decode(frame)
    assert type(decoded) is type(request)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_frames())
def test_damaged_frames_decode_or_fail_cleanly(frame):
    try:
        outcome = _decode(frame[4:])
    except DecodeError as refused:
        outcome = refused
    assert isinstance(outcome, (tuple, DecodeError))


def test_null_where_the_schema_allows_none_is_refused_as_kafka_refuses_it():
    """Kafka's parser refuses a null array or string in a non-nullable field (and closes the
    connection); kio would hand the handler a None where it expects a list."""
    delete_groups_v0 = _header(42, 0, False) + b"\xff\xff\xff\xff"
    with pytest.raises(DecodeError, match="non-nullable field groups_names"):
        _decode(delete_groups_v0)
    delete_groups_v2 = _header(42, 2, True) + b"\x00" + b"\x00"
    with pytest.raises(DecodeError, match="non-nullable field groups_names"):
        _decode(delete_groups_v2)
    join_null_group = _header(11, 5, False) + b"\xff\xff" + bytes(30)
    with pytest.raises(DecodeError, match="non-nullable field group_id"):
        _decode(join_null_group)
    metadata_all_topics = _header(3, 1, False) + b"\xff\xff\xff\xff"  # nullable from v1
    assert _decode(metadata_all_topics)[1].topics is None
