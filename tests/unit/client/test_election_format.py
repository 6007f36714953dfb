"""The leader-election protocol's bytes: exactly one member of an assignment leads, and
bytes that are not an election assignment are refused (so the member reports them)."""

from __future__ import annotations

import pytest

from coterie.client.election import (
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from coterie.client.protocol import JoinedMember


def test_round_trip_names_the_leader_for_everyone() -> None:
    leader = JoinedMember("m1", "inst-1", encode_metadata("10.0.0.1:8080"))
    mine, info = decode_assignment(encode_assignment(5, leader, True))
    theirs, info2 = decode_assignment(encode_assignment(5, leader, False))
    assert (mine, theirs) == (True, False)
    assert info == info2
    assert (info.generation_id, info.member_id, info.group_instance_id, info.info) == (
        5, "m1", "inst-1", "10.0.0.1:8080")


def test_unreadable_candidate_metadata_reads_as_no_info() -> None:
    assert decode_metadata(b"\x00garbage") == ""
    assert decode_metadata(encode_metadata("x")) == "x"


@pytest.mark.parametrize("data", [b"", b"\xde\xad", b"{}", b'{"version": 1, "leader": "yes"}',
                                  b'{"version": 1, "generation": 1, "leader_member_id": "m"}'])
def test_foreign_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_assignment(data)
