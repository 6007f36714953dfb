"""The pure parts of the consumer group protocol (KIP-848) client: member ids as Kafka writes
them, which heartbeat fields are sent when, the reconciliation diff, the membership state
machine and what each heartbeat error leads to; and the Consumer's protocol settings."""

from __future__ import annotations

import base64
import random
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from coterie.client import Consumer, TopicPartition
from coterie.client.consumer_membership import (
    HeartbeatAction,
    IllegalTransition,
    Membership,
    MembershipState,
    heartbeat_action,
    plan_reconciliation,
)
from coterie.client.errors import (
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    InvalidGroupRequestError,
    InvalidRegularExpressionError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    fatal_group_error,
)
from coterie.client.heartbeat_fields import (
    NO_ASSIGNMENT,
    HeartbeatFields,
    LocalAssignment,
    MemberSubscription,
    encode_member_id,
    leave_fields,
    new_member_id,
)
from coterie.wire.build import build, field_names
from coterie.wire.codec import encode_request

S = MembershipState
T1, T2 = uuid.UUID(int=11), uuid.UUID(int=22)
SUB = MemberSubscription(topic_names=frozenset({"b", "a"}), regex=None, server_assignor="uniform",
                         rack_id="r1", rebalance_timeout_ms=300_000, instance_id=None)


# -- member ids -----------------------------------------------------------------------------------


def test_member_ids_are_printed_as_kafka_prints_uuids() -> None:
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding (its reserved
    # METADATA_TOPIC_ID, uuid 0...01, prints as "AAAAAAAAAAAAAAAAAAAAAQ").
    assert encode_member_id(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    member_id = new_member_id(random.Random(7))
    assert len(member_id) == 22
    raw = base64.urlsafe_b64decode(member_id + "==")
    assert uuid.UUID(bytes=raw).version == 4
    assert member_id == new_member_id(random.Random(7))  # the random source decides
    assert member_id != new_member_id(random.Random(8))


class _Scripted(random.Random):
    def __init__(self, values: list[int]) -> None:
        super().__init__()
        self.values = values

    def getrandbits(self, k: int) -> int:
        return self.values.pop(0)


def test_a_member_id_never_starts_with_a_dash() -> None:
    dash_first = 0xF8 << 120  # base64url of a first byte 0xF8 starts with "-"
    assert encode_member_id(uuid.UUID(int=dash_first, version=4)).startswith("-")
    member_id = new_member_id(_Scripted([dash_first, 12345 << 64]))
    assert not member_id.startswith("-")
    assert member_id == encode_member_id(uuid.UUID(int=12345 << 64, version=4))


# -- heartbeat fields -----------------------------------------------------------------------------


def _build(fields: HeartbeatFields, *, joining: bool, owned: LocalAssignment = NO_ASSIGNMENT,
           sub: MemberSubscription = SUB, epoch: int = 3) -> dict:
    return fields.build(group_id="g", member_id="m", member_epoch=epoch, subscription=sub,
                        owned=owned, joining=joining)


UNCHANGED = {"rack_id": None, "rebalance_timeout": -1, "subscribed_topic_names": None,
             "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None}


def test_a_join_sends_every_field_and_an_empty_owned_list() -> None:
    got = _build(HeartbeatFields(), joining=True, epoch=0)
    assert got == {"group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None,
                   "rack_id": "r1", "rebalance_timeout": 300_000,
                   "subscribed_topic_names": ["a", "b"], "subscribed_topic_regex": None,
                   "server_assignor": "uniform", "topic_partitions": []}


def test_later_heartbeats_send_only_what_changed() -> None:
    fields = HeartbeatFields()
    _build(fields, joining=True, epoch=0)
    assert _build(fields, joining=False) == {
        "group_id": "g", "member_id": "m", "member_epoch": 3, "instance_id": None, **UNCHANGED}
    wider = MemberSubscription(topic_names=frozenset({"a", "b", "c"}), regex=None,
                               server_assignor="uniform", rack_id="r1",
                               rebalance_timeout_ms=300_000, instance_id=None)
    got = _build(fields, joining=False, sub=wider)
    assert got["subscribed_topic_names"] == ["a", "b", "c"]
    assert {k: got[k] for k in UNCHANGED if k != "subscribed_topic_names"} == {
        k: v for k, v in UNCHANGED.items() if k != "subscribed_topic_names"}


def test_owned_partitions_are_sent_after_each_reconciliation_even_if_the_same() -> None:
    fields = HeartbeatFields()
    _build(fields, joining=True, epoch=0)
    first = LocalAssignment.of(0, {T1: [1, 0], T2: [4]})
    assert _build(fields, joining=False, owned=first)["topic_partitions"] == [
        {"topic_id": T1, "partitions": [0, 1]}, {"topic_id": T2, "partitions": [4]}]
    assert _build(fields, joining=False, owned=first)["topic_partitions"] is None
    # A new target with the same partitions (a new local epoch) is acknowledged again.
    again = LocalAssignment(1, first.partitions)
    assert _build(fields, joining=False, owned=again)["topic_partitions"] is not None


def test_after_an_error_everything_is_sent_again() -> None:
    fields = HeartbeatFields()
    owned = LocalAssignment.of(0, {T1: [0]})
    _build(fields, joining=True, epoch=0)
    _build(fields, joining=False, owned=owned)
    fields.reset()
    got = _build(fields, joining=False, owned=owned)
    assert got["rebalance_timeout"] == 300_000
    assert got["subscribed_topic_names"] == ["a", "b"]
    assert got["server_assignor"] == "uniform" and got["rack_id"] == "r1"
    assert got["topic_partitions"] == [{"topic_id": T1, "partitions": [0]}]
    assert got["subscribed_topic_regex"] is None  # no pattern: nothing to (re)send


def test_a_pattern_is_sent_on_join_and_cleared_with_an_empty_string() -> None:
    fields = HeartbeatFields()
    pattern = MemberSubscription(topic_names=frozenset(), regex="orders-.*",
                                 server_assignor=None, rack_id=None,
                                 rebalance_timeout_ms=1000, instance_id="i-1")
    got = _build(fields, joining=True, sub=pattern, epoch=0)
    assert got["subscribed_topic_regex"] == "orders-.*"
    assert got["subscribed_topic_names"] == []
    assert got["server_assignor"] is None and got["rack_id"] is None
    assert got["instance_id"] == "i-1"
    assert _build(fields, joining=False, sub=pattern)["subscribed_topic_regex"] is None
    names = MemberSubscription(topic_names=frozenset({"x"}), regex=None, server_assignor=None,
                               rack_id=None, rebalance_timeout_ms=1000, instance_id="i-1")
    got = _build(fields, joining=False, sub=names)
    assert got["subscribed_topic_regex"] == ""
    assert got["subscribed_topic_names"] == ["x"]
    assert got["instance_id"] == "i-1"  # a static member names itself in every heartbeat


def test_leave_heartbeats_use_epoch_minus_one_or_minus_two_for_static_members() -> None:
    assert leave_fields(group_id="g", member_id="m", instance_id=None)["member_epoch"] == -1
    static = leave_fields(group_id="g", member_id="m", instance_id="i")
    assert static["member_epoch"] == -2 and static["instance_id"] == "i"


@pytest.mark.parametrize("version", [0, 1])
def test_every_field_we_send_exists_in_the_schema_and_encodes(version: int) -> None:
    cls = load_request_schema(68, version)
    fields = _build(HeartbeatFields(), joining=True, owned=NO_ASSIGNMENT, epoch=0)
    fields["topic_partitions"] = [{"topic_id": T1, "partitions": [0, 1]}]
    names = set(fields) - ({"subscribed_topic_regex"} if version == 0 else set())
    assert names <= field_names(cls)  # build() would silently drop a misspelled key
    request = build(cls, fields)
    assert request.rebalance_timeout.total_seconds() == 300
    assert request.topic_partitions[0].partitions == (0, 1)
    assert encode_request(1, request, client_id="t")  # kio writes it
    assert build(cls, leave_fields(group_id="g", member_id="m", instance_id=None)
                 ).topic_partitions is None


# -- reconciliation -------------------------------------------------------------------------------


def test_the_plan_revokes_owned_minus_target_and_adds_target_minus_owned() -> None:
    target = LocalAssignment.of(4, {T1: [0, 1], T2: [0]})
    plan = plan_reconciliation(target, {T1: "a"}, [("a", 1), ("a", 2), ("b", 0)])
    assert plan.assigned == {TopicPartition("a", 0), TopicPartition("a", 1)}
    assert plan.revoked == {TopicPartition("a", 2), TopicPartition("b", 0)}
    assert plan.added == {TopicPartition("a", 0)}
    assert plan.unresolved == {T2}  # its name is not known yet: reconciled later
    assert plan.resolved == LocalAssignment(4, frozenset({(T1, 0), (T1, 1)}))


topic_ids = st.sampled_from([uuid.UUID(int=i) for i in range(1, 5)])
assignments = st.dictionaries(topic_ids, st.sets(st.integers(0, 5), max_size=4), max_size=4)


@given(target=assignments, owned=st.sets(st.tuples(st.sampled_from("abcd"), st.integers(0, 5))),
       known=st.sets(topic_ids))
def test_the_plan_always_ends_at_the_resolvable_target(target: dict, owned: set,
                                                       known: set) -> None:
    names = {t: "abcd"[t.int - 1] for t in known}
    plan = plan_reconciliation(LocalAssignment.of(1, target), names, owned)
    held = {TopicPartition(*tp) for tp in owned}
    assert not plan.revoked & plan.added
    assert (held - plan.revoked) | plan.added == plan.assigned
    assert plan.revoked <= held and not plan.added & held
    assert plan.unresolved == {t for t, ps in target.items() if ps and t not in known}
    assert {(names[t], p) for t, p in plan.resolved.partitions} == set(plan.assigned)


def test_a_target_with_the_same_partitions_keeps_its_local_epoch() -> None:
    first = NO_ASSIGNMENT.updated_with(frozenset({(T1, 0)}))
    assert first.local_epoch == 0
    assert first.updated_with(frozenset({(T1, 0)})) is first
    assert first.updated_with(frozenset({(T1, 1)})).local_epoch == 1


# -- the membership state machine -----------------------------------------------------------------


def test_join_reconcile_acknowledge_stable() -> None:
    m = Membership("m")
    m.join()
    assert m.state is S.JOINING and m.epoch == 0 and m.wants_heartbeat_now
    assert not m.in_group
    m.on_success(5, {T1: [0, 1]})
    assert m.state is S.RECONCILING and m.epoch == 5 and m.in_group
    plan = plan_reconciliation(m.target, {T1: "a"}, [])
    assert m.reconciled_to(plan.resolved, m.joins)
    assert m.state is S.ACKNOWLEDGING and m.wants_heartbeat_now
    m.on_sent()
    assert m.state is S.STABLE and not m.wants_heartbeat_now
    m.on_success(5, None)  # nothing new: stays stable
    assert m.state is S.STABLE


def test_an_empty_first_assignment_is_stable_at_once() -> None:
    m = Membership("m")
    m.join()
    m.on_success(2, {})
    assert m.state is S.STABLE and m.current == m.target == NO_ASSIGNMENT


def test_a_newer_target_during_acknowledgement_is_reconciled_after_it() -> None:
    m = Membership("m")
    m.join()
    m.on_success(1, {T1: [0, 1]})
    m.reconciled_to(plan_reconciliation(m.target, {T1: "a"}, []).resolved, m.joins)
    m.on_success(2, {T1: [0]})  # the answer to a heartbeat sent before the ack
    assert m.state is S.ACKNOWLEDGING  # the ack still has to go out
    m.on_sent()
    assert m.state is S.RECONCILING and not m.reconciled


def test_fencing_voids_a_running_reconciliation_and_rejoins_with_epoch_zero() -> None:
    m = Membership("m")
    m.join()
    m.on_success(3, {T1: [0]})
    joins = m.joins
    m.fence()
    assert m.state is S.FENCED and m.epoch == 0 and not m.in_group
    m.on_success(9, {T1: [1]})  # a stale answer changes nothing
    assert m.epoch == 0
    m.join()
    assert not m.reconciled_to(LocalAssignment.of(1, {T1: [0]}), joins)
    assert m.state is S.JOINING and m.member_id == "m" and m.target == NO_ASSIGNMENT


@pytest.mark.parametrize(("start", "to"), [(S.CREATED, S.STABLE), (S.LEFT, S.JOINING),
                                           (S.LEAVING, S.STABLE), (S.STABLE, S.JOINING)])
def test_illegal_transitions_are_named_errors(start: MembershipState,
                                              to: MembershipState) -> None:
    m = Membership("m")
    m.state = start
    with pytest.raises(IllegalTransition, match=f"from {start.name} to {to.name}"):
        m.move(to)


def test_leaving_reports_nothing_owned_and_ends_left() -> None:
    m = Membership("m")
    m.join()
    m.on_success(1, {T1: [0]})
    m.leave()
    assert m.state is S.LEAVING and m.current == NO_ASSIGNMENT and not m.in_group
    m.left()
    assert m.state is S.LEFT


# -- heartbeat errors -----------------------------------------------------------------------------


def test_what_each_heartbeat_error_leads_to() -> None:
    assert heartbeat_action(ErrorCode.fenced_member_epoch) is HeartbeatAction.FENCED
    assert heartbeat_action(ErrorCode.unknown_member_id) is HeartbeatAction.FENCED
    assert heartbeat_action(ErrorCode.not_coordinator) is HeartbeatAction.REDISCOVER
    assert heartbeat_action(ErrorCode.coordinator_not_available) is HeartbeatAction.REDISCOVER
    assert heartbeat_action(ErrorCode.coordinator_load_in_progress) is HeartbeatAction.BACKOFF
    fatal = {
        ErrorCode.group_max_size_reached: GroupMaxSizeReachedError,
        ErrorCode.unsupported_assignor: UnsupportedAssignorError,
        ErrorCode.invalid_request: InvalidGroupRequestError,
        ErrorCode.invalid_regular_expression: InvalidRegularExpressionError,
        ErrorCode.fenced_instance_id: FencedInstanceIdError,
        ErrorCode.unreleased_instance_id: UnreleasedInstanceIdError,
        ErrorCode.group_authorization_failed: GroupAuthorizationFailedError,
    }
    for code, kind in fatal.items():
        assert heartbeat_action(code) is HeartbeatAction.FATAL
        error = fatal_group_error(code, "ConsumerGroupHeartbeat", "g")
        assert type(error) is kind and error.error_code == code


# -- Consumer settings ----------------------------------------------------------------------------


def test_the_consumer_protocol_refuses_classic_only_settings() -> None:
    with pytest.raises(ValueError, match="group_protocol must be one of"):
        Consumer("h:1", "g", topics=["t"], group_protocol="eager")
    for option in ({"assignors": ["range"]}, {"session_timeout_ms": 10_000},
                   {"heartbeat_interval_ms": 1_000}):
        with pytest.raises(ValueError, match="cannot be set with group_protocol='consumer'"):
            Consumer("h:1", "g", topics=["t"], group_protocol="consumer", **option)
    with pytest.raises(ValueError, match="group_remote_assignor needs"):
        Consumer("h:1", "g", topics=["t"], group_remote_assignor="uniform")


def test_a_consumer_protocol_consumer_before_start() -> None:
    c = Consumer("h:1", "g", topics=["t"], group_protocol="consumer",
                 group_remote_assignor="range", rng=random.Random(3))
    assert c.cooperative and c.generation_id == -1
    assert c.member_id == new_member_id(random.Random(3))
    classic = Consumer("h:1", "g", topics=["t"], session_timeout_ms=10_000)
    assert classic.member_id == "" and not classic.cooperative
