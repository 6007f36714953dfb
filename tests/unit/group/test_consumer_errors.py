"""Every error a ConsumerGroupHeartbeat can get, each from a request that produces it, with a
message, and the group exactly as it was (state, records written, timers)."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace

import pytest
from kio.schema.errors import ErrorCode

from coterie.assign.registry import register
from coterie.assign.spec import AssignorError
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.messages import ConsumerHeartbeatRequest, TopicPartitions

from .consumer_harness import ConsumerHarness, mid

A, B, S1, S2 = mid("A"), mid("B"), mid("S1"), mid("S2")


def stable(h: ConsumerHarness) -> None:
    """A stable group "g": A (dynamic) and S1 (static, instance i1), both at epoch 2."""
    h.join(A)
    h.join(S1, instance_id="i1")
    ra = h.heartbeat(A, 1)
    owned = sorted(h.assigned(ra))
    h.heartbeat(A, 1, owned=owned)
    h.heartbeat(S1, 2)
    assert h.group().state().value == "Stable"


def join_request(**kw) -> ConsumerHeartbeatRequest:
    base = dict(group_id="g", member_id=B, member_epoch=0, rebalance_timeout_ms=30_000,
                subscribed_topic_names=("foo",), owned=(), version=1)
    base.update(kw)
    return ConsumerHeartbeatRequest(**base)


def refused(h: ConsumerHarness, req: ConsumerHeartbeatRequest, code: ErrorCode) -> str:
    """Send `req`; it must fail with `code`, a message, and change nothing."""
    group = h.coordinator.groups.get(req.group_id)
    before = None if group is None else group.snapshot()
    records, timers = len(h.records), dict(h.timers)
    groups = set(h.coordinator.groups)
    r = h.request(req)
    assert r.error == code, r
    assert r.error_message
    assert r.assignment is None
    assert len(h.records) == records and h.timers == timers
    assert set(h.coordinator.groups) == groups
    if group is not None:
        assert group.snapshot() == before
    return r.error_message


INVALID = [
    ("no rebalance timeout on a join without subscription",
     dict(rebalance_timeout_ms=-1, subscribed_topic_names=None),
     "RebalanceTimeoutMs must be provided in first request."),
    ("owned partitions on join",
     dict(owned=(TopicPartitions(uuid.uuid4(), (0,)),)),
     "TopicPartitions must be empty when (re-)joining."),
    ("owned not sent on a join without subscription",
     dict(owned=None, subscribed_topic_names=None),
     "TopicPartitions must be empty when (re-)joining."),
    ("no subscription on join", dict(subscribed_topic_names=None),
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    ("v1 without member id", dict(member_id=""), "MemberId can't be empty."),
    ("v1 member id not a uuid", dict(member_id="consumer-1"), "is not a UUID"),
    ("empty group id", dict(group_id=" "), "GroupId can't be empty."),
    ("blank instance id", dict(instance_id=""), "InstanceId can't be empty."),
    ("blank rack id", dict(rack_id="  "), "RackId can't be empty."),
    ("epoch below -2", dict(member_epoch=-3), "MemberEpoch is invalid."),
    ("static leave without instance id", dict(member_epoch=-2), "InstanceId can't be null."),
    ("leave without member id", dict(member_epoch=-1, member_id="", version=0),
     "MemberId can't be empty."),
    ("heartbeat without member id", dict(member_epoch=3, member_id="", version=0),
     "MemberId can't be empty."),
    ("regex in v0", dict(version=0, subscribed_topic_regex="foo.*"), "version 1"),
    ("negative rebalance timeout", dict(rebalance_timeout_ms=-5), "RebalanceTimeoutMs"),
]


@pytest.mark.parametrize("case,changes,message", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_request(case, changes, message):
    h = ConsumerHarness({"foo": 3})
    stable(h)
    assert message in refused(h, join_request(**changes), ErrorCode.invalid_request)


def test_member_ids_that_are_uuids():
    h = ConsumerHarness({"foo": 3})
    java = "AAAAAAAAAAAAAAAAAAAAAA"  # Java's Uuid.toString(): URL-safe base64, no padding
    librdkafka = "a+b/AAAAAAAAAAAAAAAAAA"  # librdkafka: standard base64
    canonical = str(uuid.UUID(int=7))
    for member_id in (java, librdkafka, canonical, "A-b_" * 5 + "AA"):
        assert h.request(join_request(member_id=member_id)).error == ErrorCode.none
    refused(h, join_request(member_id="A" * 21), ErrorCode.invalid_request)
    refused(h, join_request(member_id="A" * 23), ErrorCode.invalid_request)
    # v0: the coordinator makes the id up when the member has none.
    r = h.request(join_request(member_id="", version=0))
    assert r.error == ErrorCode.none and r.member_id


def test_unsupported_assignor():
    h = ConsumerHarness({"foo": 3})
    stable(h)
    msg = refused(h, join_request(server_assignor="sticky"), ErrorCode.unsupported_assignor)
    assert msg == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."


def test_invalid_regular_expression():
    h = ConsumerHarness({"foo": 3})
    stable(h)
    msg = refused(h, join_request(subscribed_topic_names=None, subscribed_topic_regex="foo("),
                  ErrorCode.invalid_regular_expression)
    assert msg.startswith("SubscribedTopicRegex `foo(` is not a valid regular expression: ")
    # Also when an existing member changes to a bad regex.
    refused(h, ConsumerHeartbeatRequest("g", A, 2, subscribed_topic_regex="[a-"),
            ErrorCode.invalid_regular_expression)


def test_group_id_not_found():
    h = ConsumerHarness({"foo": 3})
    stable(h)
    msg = refused(h, ConsumerHeartbeatRequest("other", A, 2), ErrorCode.group_id_not_found)
    assert msg == "Consumer group other not found."
    refused(h, ConsumerHeartbeatRequest("other", A, -1), ErrorCode.group_id_not_found)


def test_unknown_member_id():
    h = ConsumerHarness({"foo": 3})
    stable(h)
    msg = refused(h, ConsumerHeartbeatRequest("g", B, 2), ErrorCode.unknown_member_id)
    assert msg == f"Member {B} is not a member of group g."
    refused(h, ConsumerHeartbeatRequest("g", B, -1), ErrorCode.unknown_member_id)
    msg = refused(h, ConsumerHeartbeatRequest("g", S2, 2, instance_id="i9"),
                  ErrorCode.unknown_member_id)
    assert msg == "Instance id i9 is unknown."
    refused(h, ConsumerHeartbeatRequest("g", S2, -2, instance_id="i9"),
            ErrorCode.unknown_member_id)


def test_fenced_member_epoch():
    h = ConsumerHarness({"foo": 3})
    stable(h)
    msg = refused(h, ConsumerHeartbeatRequest("g", A, 3), ErrorCode.fenced_member_epoch)
    assert "greater member epoch (3)" in msg and "(2)" in msg
    # Behind, and not the previous epoch.
    assert h.group().members[S1].previous_member_epoch == 2
    refused(h, ConsumerHeartbeatRequest("g", S1, 1, owned=()), ErrorCode.fenced_member_epoch)
    # The previous epoch, but claiming partitions it does not have.
    owned_by_s1 = sorted(h.names(h.group().members[S1].assigned))
    msg = refused(h, ConsumerHeartbeatRequest("g", A, 1, owned=h.wire(owned_by_s1)),
                  ErrorCode.fenced_member_epoch)
    assert "smaller member epoch (1)" in msg
    # The previous epoch without saying what it owns.
    refused(h, ConsumerHeartbeatRequest("g", A, 1), ErrorCode.fenced_member_epoch)


def test_group_max_size_reached():
    h = ConsumerHarness({"foo": 3}, config=ConsumerGroupConfig(max_size=2))
    stable(h)
    msg = refused(h, join_request(), ErrorCode.group_max_size_reached)
    assert msg == "The consumer group has reached its maximum capacity of 2 members."
    # Members already in the group still rejoin.
    assert h.request(join_request(member_id=A)).error == ErrorCode.none


def test_unreleased_instance_id():
    h = ConsumerHarness({"foo": 3})
    stable(h)
    msg = refused(h, join_request(member_id=S2, instance_id="i1"),
                  ErrorCode.unreleased_instance_id)
    assert msg == (f"Static member {S2} with instance id i1 cannot join the group because the "
                   f"instance id is owned by {S1} member.")


def test_fenced_instance_id():
    h = ConsumerHarness({"foo": 3})
    stable(h)
    msg = refused(h, ConsumerHeartbeatRequest("g", S2, 2, instance_id="i1"),
                  ErrorCode.fenced_instance_id)
    assert msg == f"Static member {S2} with instance id i1 was fenced by member {S1}."
    refused(h, ConsumerHeartbeatRequest("g", S2, -2, instance_id="i1"),
            ErrorCode.fenced_instance_id)
    refused(h, ConsumerHeartbeatRequest("g", S2, -1, instance_id="i1"),
            ErrorCode.fenced_instance_id)


class _Failing:
    name = "coterie-test-failing"
    cooperative = False

    def assign(self, spec):
        raise AssignorError("cannot do it")


def test_assignor_failure_is_unknown_server_error():
    register(_Failing.name, _Failing, replace=True)
    h = ConsumerHarness({"foo": 3}, config=ConsumerGroupConfig(
        assignors=("uniform", _Failing.name)))
    stable(h)
    msg = refused(h, join_request(server_assignor=_Failing.name), ErrorCode.unknown_server_error)
    assert msg == "Failed to compute a new target assignment for epoch 3: cannot do it"


def test_errors_leave_a_new_group_uncreated():
    h = ConsumerHarness({"foo": 3})
    refused(h, join_request(group_id="new", server_assignor="nope"),
            ErrorCode.unsupported_assignor)
    refused(h, join_request(group_id="new", subscribed_topic_names=None,
                            subscribed_topic_regex="("), ErrorCode.invalid_regular_expression)
    assert "new" not in h.coordinator.groups


def test_config_bounds():
    with pytest.raises(ValueError, match=re.escape("heartbeat.interval.ms must be less than")):
        ConsumerGroupConfig(heartbeat_interval_ms=45_000, max_heartbeat_interval_ms=50_000,
                            session_timeout_ms=45_000)
    with pytest.raises(ValueError, match=re.escape("session.timeout.ms must be greater than")):
        ConsumerGroupConfig(session_timeout_ms=10_000)
    with pytest.raises(ValueError, match="must be greater than or equal to 1"):
        ConsumerGroupConfig(max_size=0)
    with pytest.raises(ValueError, match=re.escape("migration.policy")):
        ConsumerGroupConfig(migration_policy="sideways")
    cfg = ConsumerGroupConfig()
    assert (cfg.session_timeout_ms, cfg.heartbeat_interval_ms, cfg.assignors) == (
        45_000, 5_000, ("uniform", "range"))
    assert replace(cfg, session_timeout_ms=50_000).session_timeout_ms == 50_000


def test_a_rejoin_without_rebalance_timeout_or_owned_partitions_is_read_as_a_join():
    """librdkafka's subscribe-right-after-unsubscribe race (issue 10, item 12): after its
    leave it sends epoch 0 with the new subscription but neither a rebalance timeout nor its
    owned partitions. Kafka 4.2 refuses that with INVALID_REQUEST, fatal for librdkafka;
    coterie takes it as the join it means."""
    h = ConsumerHarness({"foo": 3})
    stable(h)
    assert h.leave(A).error == ErrorCode.none
    r = h.request(join_request(member_id=A, rebalance_timeout_ms=-1, owned=None))
    assert r.error == ErrorCode.none, r
    assert r.member_epoch > 0
    member = h.group().members[A]
    assert member.rebalance_timeout_ms == 300_000
    assert member.subscribed_topic_names == frozenset({"foo"})
    # A timeout that is sent is kept; owned partitions on a join are still refused.
    r = h.request(join_request(member_id=B, rebalance_timeout_ms=-1))
    assert r.error == ErrorCode.none and h.group().members[B].rebalance_timeout_ms == 300_000
    r = h.request(join_request(member_id=mid("C"), owned=None, rebalance_timeout_ms=45_000))
    assert r.error == ErrorCode.none
    assert h.group().members[mid("C")].rebalance_timeout_ms == 45_000
    r = h.request(join_request(member_id=mid("D"), rebalance_timeout_ms=-1,
                               owned=(TopicPartitions(uuid.uuid4(), (0,)),)))
    assert r.error == ErrorCode.invalid_request
