"""One group id, one group: GroupNamespace's rules between classic and consumer groups, and
the one codec through which both families of records reach and leave __consumer_offsets.

Pure: the two cores are driven directly with virtual time; records are "persisted" by
encoding them with `offsets_topic_codec`, and replaying the decoded log into fresh cores must
give the same groups.
"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from coterie.group.classic_coordinator import ClassicConfig, ClassicCoordinator
from coterie.group.classic_messages import JoinGroupRequest, LeaveGroupRequest, LeavingMember
from coterie.group.consumer_config import ConsumerGroupConfig
from coterie.group.consumer_coordinator import ConsumerCoordinator
from coterie.group.consumer_messages import ConsumerHeartbeatRequest
from coterie.group.consumer_records import ConsumerGroupMetadataKey
from coterie.group.group_namespace import GroupNamespace
from coterie.group.offsets_topic_codec import decode, encode
from coterie.group.record_codec import UnknownRecordType
from coterie.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from coterie.group.results import Result

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-4697-8877-665544332211")


def _mid(name: str) -> str:
    return (name + "_" * 22)[:22]


class Shard:
    """Both cores behind a GroupNamespace, with every record kept as bytes."""

    def __init__(self, policy: str = "bidirectional") -> None:
        self.classic = ClassicCoordinator(ClassicConfig(initial_rebalance_delay_ms=0),
                                          lambda client: f"{client}-{uuid.uuid4()}")
        self.consumer = ConsumerCoordinator(ConsumerGroupConfig(migration_policy=policy),
                                            lambda: _mid("generated"))
        self.consumer.on_metadata_change({"t": (TOPIC_ID, 4)}, 0)
        self.ns = GroupNamespace(self.classic, self.consumer)
        self.log: list[tuple[bytes, bytes | None]] = []

    def keep(self, result: Result) -> object:
        self.log += [encode(r) for r in result.records]
        return result.response

    def join_classic(self, group: str, member_id: str = "",
                     protocol_type: str = "consumer") -> object:
        return self.keep(self.ns.join_group(JoinGroupRequest(
            group_id=group, member_id=member_id, protocol_type=protocol_type,
            protocols=(("range", b"\x00\x01"),), session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000, require_known_member_id=False), 0))

    def heartbeat(self, group: str, member: str, epoch: int = 0, **fields: object) -> object:
        if epoch == 0:
            fields.setdefault("subscribed_topic_names", ("t",))
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("owned", ())
        return self.keep(self.ns.consumer_heartbeat(ConsumerHeartbeatRequest(
            group_id=group, member_id=_mid(member), member_epoch=epoch, **fields), 0))

    def replayed(self) -> GroupNamespace:
        fresh = Shard()
        for key, value in self.log:
            fresh.ns.replay(decode(key, value))
        return fresh.ns


def _snapshot(ns: GroupNamespace) -> tuple[object, ...]:
    return ({gid: g.snapshot() for gid, g in ns.consumer.groups.items()},
            {gid: (g.protocol_type, sorted(g.members)) for gid, g in ns.classic.groups.items()})


def test_the_codec_dispatches_on_the_record_type() -> None:
    """Offset commits, classic group metadata and consumer-group records go through one
    encode/decode pair; record types neither family models are UnknownRecordType."""
    shard = Shard()
    shard.keep(Result(records=[Record(OffsetCommitKey("g", "t", 0),
                                      OffsetCommitValue(7, -1, "", 1000, -1))]))
    shard.heartbeat("g", "a")
    decoded = [decode(k, v) for k, v in shard.log]
    assert isinstance(decoded[0].key, OffsetCommitKey)
    assert any(isinstance(r.key, ConsumerGroupMetadataKey) for r in decoded)
    assert [encode(r) for r in decoded] == shard.log
    type4 = (4).to_bytes(2, "big") + (1).to_bytes(2, "big") + b"g"
    with pytest.raises(UnknownRecordType):
        decode(type4, None)


def test_a_classic_group_with_members_is_not_taken_over() -> None:
    """A consumer-protocol join into a classic group with a member is GROUP_ID_NOT_FOUND with
    Kafka's reason; a heartbeat that is not a join is "not a consumer group"; an invalid
    heartbeat is refused for what it is first. Nothing changes."""
    shard = Shard()
    shard.join_classic("g", protocol_type="other")
    before = _snapshot(shard.ns)
    refused = shard.heartbeat("g", "a")
    assert refused.error == ErrorCode.group_id_not_found
    assert refused.error_message == ("Cannot upgrade classic group g to consumer group because "
                                     "the group does not use the consumer embedded protocol.")
    assert shard.heartbeat("g", "a", epoch=3).error_message == "Group g is not a consumer group."
    bad = shard.heartbeat("g", "a", rebalance_timeout_ms=-1)
    assert bad.error == ErrorCode.invalid_request
    assert _snapshot(shard.ns) == before and shard.ns.group_type("g") == "classic"


@pytest.mark.parametrize(("policy", "reason"), [
    ("disabled", "because online upgrade is disabled."),
    ("bidirectional", "coterie does not convert groups with members online yet."),
])
def test_a_classic_consumer_group_is_not_converted_yet(policy: str, reason: str) -> None:
    shard = Shard(policy)
    shard.join_classic("g")
    refused = shard.heartbeat("g", "a")
    assert refused.error == ErrorCode.group_id_not_found
    assert refused.error_message.endswith(reason)


def test_an_empty_classic_group_gives_way_to_a_consumer_group() -> None:
    """Once the classic group is empty, a join replaces it: the classic tombstone is
    written first, and replaying the log gives the same groups. A join refused on its own
    terms (a bad regex) leaves the empty classic group in place."""
    shard = Shard()
    joined = shard.join_classic("g")
    shard.keep(shard.classic.on_timer(("join", "g"), 10_000))
    member_id = next(iter(shard.classic.groups["g"].members))
    shard.keep(shard.ns.leave_group(LeaveGroupRequest("g", (LeavingMember(member_id),)), 0))
    assert joined is None and shard.ns.group_type("g") == "classic"

    bad = shard.heartbeat("g", "a", subscribed_topic_names=None,
                          subscribed_topic_regex="[unclosed")
    assert bad.error == ErrorCode.invalid_regular_expression
    assert shard.ns.group_type("g") == "classic"

    mark = len(shard.log)
    ok = shard.heartbeat("g", "a")
    assert ok.error == ErrorCode.none and ok.member_epoch == 1
    assert shard.ns.group_type("g") == "consumer"
    first = decode(*shard.log[mark])
    assert first.key == GroupMetadataKey("g") and first.value is None
    assert _snapshot(shard.replayed()) == _snapshot(shard.ns)


def test_joingroup_into_a_consumer_group() -> None:
    """A JoinGroup into a consumer group with members is INCONSISTENT_GROUP_PROTOCOL and
    changes nothing; once the consumer group is empty a JoinGroup replaces it (its
    tombstones first), and the log replays to the same groups."""
    shard = Shard()
    assert shard.heartbeat("g", "a").error == ErrorCode.none
    before = _snapshot(shard.ns)
    refused = shard.join_classic("g")
    assert refused.error == ErrorCode.inconsistent_group_protocol
    assert _snapshot(shard.ns) == before

    assert shard.heartbeat("g", "a", epoch=-1).error == ErrorCode.none
    mark = len(shard.log)
    shard.join_classic("g")
    assert shard.ns.group_type("g") == "classic"
    written = [decode(k, v) for k, v in shard.log[mark:]]
    last = next(i for i, r in enumerate(written) if r.key == ConsumerGroupMetadataKey("g"))
    assert all(r.value is None for r in written[:last + 1])
    assert all(isinstance(r.key, GroupMetadataKey) for r in written[last + 1:])
    assert _snapshot(shard.replayed()) == _snapshot(shard.ns)


def test_offset_requests_check_the_member_epoch() -> None:
    """Kafka 4.2's OffsetCommit / OffsetFetch checks for a consumer group."""
    shard = Shard()
    epoch = shard.heartbeat("g", "a").member_epoch
    ns, a = shard.ns, _mid("a")
    assert ns.validate_commit("g", a, epoch, None, 9) is None
    for wrong in (epoch + 1, epoch - 1):
        refusal = ns.validate_commit("g", a, wrong, None, 9)
        assert refusal is not None and refusal.code == ErrorCode.stale_member_epoch
    assert ns.validate_commit("g", _mid("b"), epoch, None, 9).code == (
        ErrorCode.unknown_member_id)
    assert ns.validate_commit("g", a, epoch, None, 8).code == ErrorCode.unsupported_version
    assert ns.validate_commit("g", "", -1, None, 9).code == ErrorCode.unknown_member_id
    assert ns.validate_commit("nope", a, 3, None, 9).code == ErrorCode.group_id_not_found
    assert ns.validate_commit("nope", a, 3, None, 8).code == ErrorCode.illegal_generation
    assert ns.validate_commit("nope", "", -1, None, 9) is None

    assert ns.validate_fetch("g", a, epoch) is None
    assert ns.validate_fetch("g", None, -1) is None
    assert ns.validate_fetch("g", a, epoch + 1).code == ErrorCode.stale_member_epoch
    assert ns.validate_fetch("g", _mid("b"), epoch).code == ErrorCode.unknown_member_id
    assert ns.validate_fetch("classic-or-none", a, 5) is None

    shard.heartbeat("g", "a", epoch=-1)
    assert ns.validate_commit("g", "", -1, None, 9) is None  # empty group: anyone
