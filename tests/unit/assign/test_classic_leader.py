"""The classic leader step: subscription bytes in, assignment bytes out."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment

from coterie.assign.classic_leader import JoinedMember, build_spec, lead, subscribed_union
from coterie.assign.range import RangeAssignor
from coterie.wire.consumer_protocol import (
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    encode_subscription,
)


def _member(mid: str, topics: tuple[str, ...], version: int = 3, **kw: object) -> JoinedMember:
    sub = Subscription(topics, version=version, **kw)  # type: ignore[arg-type]
    return JoinedMember(mid, None, encode_subscription(sub))


def test_leader_assigns_every_member_in_its_own_version() -> None:
    members = [_member("m-a", ("t",), version=0), _member("m-b", ("t", "u"), version=3),
               _member("m-c", ("u",), version=1)]
    assert subscribed_union(members) == {"t", "u"}
    out = lead(RangeAssignor(), members, {"t": 4, "u": 2})
    assert set(out) == {"m-a", "m-b", "m-c"}
    got = {mid: decode_assignment(data) for mid, data in out.items()}
    # range: t's 4 partitions over m-a, m-b; u's 2 over m-b, m-c (member ids sorted)
    assert got["m-a"].partitions == {("t", 0), ("t", 1)}
    assert got["m-b"].partitions == {("t", 2), ("t", 3), ("u", 0)}
    assert got["m-c"].partitions == {("u", 1)}
    assert [got[m].version for m in ("m-a", "m-b", "m-c")] == [0, 3, 1]
    # an independent decoder reads them too
    theirs = KpAssignment.decode(out["m-b"])
    assert sorted((g.topic, p) for g in theirs.assigned_partitions for p in g.partitions) == [
        ("t", 2), ("t", 3), ("u", 0)]


def test_member_without_partitions_gets_an_empty_assignment() -> None:
    members = [_member("a", ("t",)), _member("b", ("t",))]
    out = lead(RangeAssignor(), members, {"t": 1})
    assert decode_assignment(out["b"]).partitions == frozenset()
    assert decode_assignment(out["a"]).partitions == {("t", 0)}


def test_spec_carries_owned_generation_rack_and_user_data() -> None:
    m = _member("a", ("t",), owned_partitions=frozenset({("t", 1)}), generation_id=4,
                rack_id="r1", user_data=b"ud")
    spec, versions = build_spec([m], {"t": 2}, {"t": {0: frozenset({"r1"})}})
    ms = spec.members["a"]
    assert (ms.owned, ms.generation, ms.rack, ms.metadata) == (
        frozenset({("t", 1)}), 4, "r1", b"ud")
    assert spec.topics["t"].partition_racks == {0: frozenset({"r1"})}
    assert versions == {"a": 3}


def test_undecodable_member_metadata_names_the_member() -> None:
    members = [_member("good", ("t",)), JoinedMember("bad", None, b"\x00\x00\x7f")]
    assert subscribed_union(members) == {"t"}
    with pytest.raises(ConsumerProtocolError, match="member bad"):
        lead(RangeAssignor(), members, {"t": 1})
