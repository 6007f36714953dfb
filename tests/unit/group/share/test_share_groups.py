"""Share groups (KIP-932) in a shard, with virtual time: Kafka 4.2's ShareGroupHeartbeat and
ShareGroupDescribe answers, the records they write, and the rules of "any group" applied to
a share group (ListGroups, DeleteGroups, offsets, ids held by other types)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coterie.group.classic.messages import DescribeGroupRequest, JoinGroupRequest
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.offsets.messages import (
    CommitPartition,
    DeleteGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from coterie.group.records.share import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
)
from coterie.group.share.config import ShareGroupConfig
from coterie.group.share.kinds import ShareTimer
from coterie.group.share.messages import ShareHeartbeatRequest
from coterie.group.timers import TimerKey

from .share_harness import ShareHarness

CONSUMER_MEMBER = "ZxvNvsjoQVWWwNJ3rNSjCw"  # a Kafka Uuid string, as KIP-1082 wants


def keys(records) -> list[type]:
    return [type(r.key) for r in records]


def test_a_join_creates_the_group_and_assigns_every_partition() -> None:
    h = ShareHarness({"t": 3})
    r = h.join("m1")
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (
        ErrorCode.none, "m1", 1, 5000)
    assert h.names(r) == {("t", 0), ("t", 1), ("t", 2)}
    # Kafka 4.2's records, in its order, then the partitions' share state (initialized).
    assert keys(h.records) == [
        ShareGroupMemberMetadataKey, ShareGroupMetadataKey,
        ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMetadataKey,
        ShareGroupCurrentMemberAssignmentKey, ShareGroupStatePartitionMetadataKey]
    state = h.records[-1].value
    assert state.initialized_topics[h.topic_ids["t"]].partitions == {0, 1, 2}
    assert not state.initializing_topics
    group = h.group()
    assert (group.state(), group.group_epoch, group.assignment_epoch) == ("Stable", 1, 1)
    assert h.timers == {TimerKey(ShareTimer.SHARE_SESSION, "g", "m1"): 45_000}
    h.check_replay()


def test_a_second_member_gets_its_share_and_the_first_gives_some_up() -> None:
    h = ShareHarness({"t": 4})
    h.join("m1")
    r2 = h.join("m2")
    assert r2.member_epoch == 2 and len(h.names(r2)) == 2
    # m1 learns of the new epoch and its smaller assignment at its next heartbeat.
    r1 = h.heartbeat("m1", 1)
    assert r1.member_epoch == 2 and len(h.names(r1)) == 2
    assert h.names(r1) | h.names(r2) == {("t", p) for p in range(4)}
    # A settled heartbeat writes nothing and sends no assignment.
    before = len(h.records)
    r1 = h.heartbeat("m1", 2)
    assert (r1.error, r1.member_epoch, r1.assignment) == (ErrorCode.none, 2, None)
    assert len(h.records) == before
    h.check_replay()


def test_more_members_than_partitions_share_partitions() -> None:
    h = ShareHarness({"t": 2})
    for m in ("m1", "m2", "m3", "m4", "m5"):
        h.join(m)
    for m in ("m1", "m2", "m3", "m4", "m5"):
        h.heartbeat(m, h.group().members[m].member_epoch)
    held = {m: h.held(m) for m in ("m1", "m2", "m3", "m4", "m5")}
    assert all(held.values())  # nobody idles
    assert sum(len(p) for p in held.values()) == 6  # ceil(5 / 2) holders per partition
    assert {tp for parts in held.values() for tp in parts} == {("t", 0), ("t", 1)}
    h.check_replay()


def test_partitions_added_to_a_topic_bump_the_epoch_and_are_assigned() -> None:
    h = ShareHarness({"t": 2})
    h.join("m1")
    epoch = h.group().group_epoch
    h.set_topics({"t": 4})
    assert h.group().group_epoch == epoch + 1
    assert h.group().initialized[h.topic_ids["t"]].partitions == {0, 1, 2, 3}
    r = h.heartbeat("m1", 1)
    assert r.member_epoch == epoch + 1
    assert h.names(r) == {("t", p) for p in range(4)}
    h.check_replay()


def test_a_topic_created_after_the_join_is_assigned_then() -> None:
    h = ShareHarness()
    r = h.join("m1", ("later",))
    assert r.assignment == ()
    h.set_topics({"later": 1})
    r = h.heartbeat("m1", 1)
    assert r.member_epoch == 2 and h.names(r) == {("later", 0)}
    h.delete_topic("later")
    assert not h.group().initialized
    r = h.heartbeat("m1", 2)
    assert r.member_epoch == 3 and r.assignment == ()
    h.check_replay()


def test_a_subscription_change_bumps_the_epoch() -> None:
    h = ShareHarness({"a": 1, "b": 1})
    h.join("m1", ("a",))
    r = h.heartbeat("m1", 1, subscribed_topic_names=("a", "b"))
    assert r.member_epoch == 2 and h.names(r) == {("a", 0), ("b", 0)}
    # The same subscription again: no bump, but the full request gets the assignment.
    r = h.heartbeat("m1", 2, subscribed_topic_names=("b", "a"))
    assert r.member_epoch == 2 and h.names(r) == {("a", 0), ("b", 0)}
    h.check_replay()


def test_leave_removes_the_member_and_bumps_the_epoch() -> None:
    h = ShareHarness({"t": 2})
    h.join("m1")
    h.join("m2")
    before = len(h.records)
    r = h.leave("m2")
    assert (r.error, r.member_id, r.member_epoch) == (ErrorCode.none, "m2", -1)
    assert keys(h.records[before:]) == [ShareGroupCurrentMemberAssignmentKey,
                                        ShareGroupTargetAssignmentMemberKey,
                                        ShareGroupMemberMetadataKey, ShareGroupMetadataKey]
    assert TimerKey(ShareTimer.SHARE_SESSION, "g", "m2") not in h.timers
    assert h.group().group_epoch == 3
    # m1 never heard of epoch 2 (where it was to give t-1 to m2): it keeps both, and as its
    # partitions did not change, the answer carries none.
    r = h.heartbeat("m1", 1)
    assert (r.member_epoch, r.assignment) == (3, None)
    assert h.held("m1") == {("t", 0), ("t", 1)}
    h.leave("m1")
    assert h.group().state() == "Empty"
    h.check_replay()


def test_session_timeout_fences_a_silent_member() -> None:
    h = ShareHarness({"t": 2})
    h.join("m1")
    h.join("m2")
    h.advance(30_000)
    h.heartbeat("m1", 1)
    fired = h.advance(20_000)
    assert fired == [TimerKey(ShareTimer.SHARE_SESSION, "g", "m2")]
    assert set(h.group().members) == {"m1"}
    r = h.heartbeat("m2", 2)
    assert r.error == ErrorCode.unknown_member_id
    assert r.error_message == "Member m2 is not a member of group g."
    h.check_replay()


def test_per_group_session_timeout_and_heartbeat_interval() -> None:
    h = ShareHarness({"t": 1})
    h.kind.set_group_config("g", {"share.session.timeout.ms": 50_000,
                                  "share.heartbeat.interval.ms": 6_000})
    assert h.join("m1").heartbeat_interval_ms == 6_000
    assert h.timers[TimerKey(ShareTimer.SHARE_SESSION, "g", "m1")] == 50_000


def test_stale_and_future_epochs_are_fenced() -> None:
    h = ShareHarness({"t": 2})
    h.join("m1")
    h.join("m2")
    h.heartbeat("m1", 1)  # now at epoch 2, previous 1
    assert h.heartbeat("m1", 1).error == ErrorCode.none  # the previous epoch: a lost answer
    r = h.heartbeat("m1", 3)
    assert r.error == ErrorCode.fenced_member_epoch
    assert r.error_message == (
        "The share group member has a greater member epoch (3) than the one known by the "
        "group coordinator (2). The member must abandon all its partitions and rejoin.")
    h.leave("m2")
    h.heartbeat("m1", 2)  # epoch 4, previous 2
    r = h.heartbeat("m1", 1)
    assert r.error == ErrorCode.fenced_member_epoch
    assert "smaller member epoch (1)" in (r.error_message or "")


@pytest.mark.parametrize(("fields", "message"), [
    ({"member_id": ""}, "MemberId can't be empty."),
    ({"group_id": " "}, "GroupId can't be empty."),
    ({"rack_id": ""}, "RackId can't be empty."),
    ({"subscribed_topic_names": None}, "SubscribedTopicNames must be set in first request."),
    ({"subscribed_topic_names": ()}, "SubscribedTopicNames must be set in first request."),
    ({"member_epoch": -2}, "MemberEpoch is invalid."),
    ({"subscribed_topic_names": ("t" * 32_768,)},
     "A subscribed topic name is longer than 32767 bytes."),
])
def test_invalid_requests(fields, message) -> None:
    h = ShareHarness({"t": 1})
    base = {"group_id": "g", "member_id": "m", "member_epoch": 0,
            "subscribed_topic_names": ("t",)}
    r = h.request(ShareHeartbeatRequest(**{**base, **fields}))
    assert (r.error, r.error_message) == (ErrorCode.invalid_request, message)
    assert not h.records


def test_a_group_id_no_record_can_hold_is_invalid() -> None:
    h = ShareHarness({"t": 1})
    r = h.join("m", group_id="g" * 32_768)
    assert (r.error, r.error_message) == (ErrorCode.invalid_group_id,
                                          "GroupId is longer than 32767 bytes.")
    d = h.describe("g" * 32_768)
    assert d.error == ErrorCode.invalid_group_id


def test_unknown_group_and_unknown_member() -> None:
    h = ShareHarness({"t": 1})
    r = h.heartbeat("m1", 3)
    assert (r.error, r.error_message) == (ErrorCode.group_id_not_found,
                                          "Share group g not found.")
    r = h.leave("m1")
    assert (r.error, r.error_message) == (ErrorCode.group_id_not_found, "Group g not found.")
    h.join("m1")
    r = h.heartbeat("other", 1)
    assert r.error == ErrorCode.unknown_member_id
    r = h.leave("other")
    assert r.error == ErrorCode.unknown_member_id


def test_a_full_group_refuses_new_members() -> None:
    h = ShareHarness({"t": 1}, ShareGroupConfig(max_size=2))
    h.join("m1")
    h.join("m2")
    r = h.join("m3")
    assert (r.error, r.error_message) == (
        ErrorCode.group_max_size_reached,
        "The share group has reached its maximum capacity of 2 members.")
    assert h.heartbeat("m1", 1).error == ErrorCode.none


def test_ids_of_other_group_types_are_not_taken_over() -> None:
    h = ShareHarness({"t": 1})
    # A consumer group, and an id with only committed offsets (a "simple" classic group).
    joined = h.request(ConsumerHeartbeatRequest(
        group_id="cg", member_id=CONSUMER_MEMBER, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",), version=1))
    assert joined.error == ErrorCode.none
    h.request(OffsetCommitRequest("simple", "", -1, (CommitPartition("t", 0, 5),)))
    assert h.shard.offsets.has_offsets("simple")
    for gid in ("cg", "simple"):
        r = h.join("m1", group_id=gid)
        assert (r.error, r.error_message) == (ErrorCode.group_id_not_found,
                                              f"Group {gid} is not a share group.")
        d = h.describe(gid)
        assert (d.error, d.error_message) == (ErrorCode.group_id_not_found,
                                              f"Group {gid} is not a share group.")
    d = h.describe("nobody")
    assert (d.error, d.error_message) == (ErrorCode.group_id_not_found,
                                          "Group nobody not found.")
    # And a share group is not taken over by the other types.
    h.join("m1")
    r = h.request(ConsumerHeartbeatRequest(
        group_id="g", member_id=CONSUMER_MEMBER, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",), version=1))
    assert (r.error, r.error_message) == (ErrorCode.group_id_not_found,
                                          "Group g is not a consumer group.")
    h.leave("m1")
    r = h.request(JoinGroupRequest(group_id="g", member_id="", protocol_type="consumer",
                                   protocols=(("range", b""),), session_timeout_ms=10_000,
                                   rebalance_timeout_ms=10_000, client_id="c",
                                   client_host="/127.0.0.1"))
    assert r.error != ErrorCode.none
    assert h.group().state() == "Empty"


def test_offsets_of_a_share_group_are_refused_as_kafka_does() -> None:
    h = ShareHarness({"t": 1})
    h.join("m1")
    commit = h.request(OffsetCommitRequest("g", "m1", 1, (CommitPartition("t", 0, 5),)))
    assert commit.codes == (ErrorCode.group_id_not_found,)
    admin = h.request(OffsetCommitRequest("g", "", -1, (CommitPartition("t", 0, 5),)))
    assert admin.codes == (ErrorCode.group_id_not_found,)
    # Kafka 4.2.1 answers OffsetFetch without error, with no offsets, whoever asks.
    fetched = h.request(OffsetFetchRequest("g", None))
    assert (fetched.error, fetched.offsets) == (ErrorCode.none, ())
    fetched = h.request(OffsetFetchRequest("g", (("t", 0),), "m1", 1))
    assert fetched.error == ErrorCode.none and fetched.offsets[0].value is None
    deleted = h.request(OffsetDeleteRequest("g", (("t", 0),)))
    assert deleted.error == ErrorCode.group_id_not_found


def test_list_describe_and_delete() -> None:
    h = ShareHarness({"t": 2})
    h.join("m1", rack_id="r1")
    (listed,) = h.shard.list_groups()
    assert (listed.group_id, listed.protocol_type, listed.state, listed.group_type) == (
        "g", "share", "Stable", "share")
    assert h.shard.list_groups(types=["share"]) == [listed]
    assert h.shard.list_groups(types=["consumer"]) == []
    d = h.describe()
    assert (d.error, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
        ErrorCode.none, "Stable", 1, 1, "simple")
    (m,) = d.members
    assert (m.member_id, m.rack_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == (
        "m1", "r1", 1, "client-m1", ("t",))
    assert [(t.topic_name, t.partitions) for t in m.assignment] == [("t", (0, 1))]
    classic = h.request(DescribeGroupRequest("g", version=6))
    assert classic.error == ErrorCode.group_id_not_found

    assert h.request(DeleteGroupRequest("g")) == ErrorCode.non_empty_group
    h.leave("m1")
    assert h.shard.list_groups(states=["empty"])[0].group_id == "g"
    before = len(h.records)
    assert h.request(DeleteGroupRequest("g")) == ErrorCode.none
    assert keys(h.records[before:]) == [ShareGroupTargetAssignmentMetadataKey,
                                        ShareGroupStatePartitionMetadataKey,
                                        ShareGroupMetadataKey]
    assert "g" not in h.shard.groups
    h.check_replay()
    # The id is free again: a new share group starts from epoch 1.
    assert h.join("m2").member_epoch == 1


def test_restart_replays_the_same_groups_and_arms_their_sessions() -> None:
    h = ShareHarness({"t": 3, "u": 2})
    h.join("m1", ("t",))
    h.join("m2", ("t", "u"))
    h.heartbeat("m1", 1)
    h.leave("m2")
    h.join("m3", ("u",), group_id="other")
    h.check_replay()
    fresh = h.replayed_shard()
    timers = fresh.timers_after_load(1_000)
    assert {op.key for op in timers} == {TimerKey(ShareTimer.SHARE_SESSION, "g", "m1"),
                                         TimerKey(ShareTimer.SHARE_SESSION, "other", "m3")}
    assert all(op.deadline_ms == 46_000 for op in timers)


def test_group_events_of_a_share_group() -> None:
    from coterie.group.events import EventDeriver

    h = ShareHarness({"t": 2})
    deriver = EventDeriver()
    h.join("m1")
    names = {h.topic_ids["t"]: "t"}.get
    events = deriver.observe("g", h.group().event_snapshot(), 0, name_of=names)
    kinds = [e["type"] for e in events]
    assert "member_joined" in kinds and "partitions_assigned" in kinds
    assert all(e["protocol"] == "share" for e in events)
    h.join("m2")
    h.advance(46_000)
    events = deriver.observe("g", h.group().event_snapshot(), h.now,
                             cause=ShareTimer.SHARE_SESSION, name_of=names)
    assert next(e["type"] for e in events if e["member"] == "m1") == "member_fenced"
