"""Mixed groups: online upgrade member by member, downgrade, the migration policies, classic
members' requests inside a consumer group, their timers, and every refusal.

Every test drives the mixed kind (`MixedGroups`: classic and consumer cores together) with
virtual time, and checks that replaying the records written (through the bytes) rebuilds the
same groups.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicState
from coterie.group.classic.messages import LeavingMember
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.group import ConsumerGroupState as G
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.member import MemberState as M
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from coterie.group.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from coterie.group.records.record import Record
from coterie.group.shard import commit_refusal
from coterie.group.timers import TimerKey
from coterie.wire.consumer_protocol import Assignment, decode_assignment, encode_assignment

from .consumer_harness import mid
from .mixed_harness import MixedHarness, subscription

REBALANCE = ErrorCode.rebalance_in_progress
X, Y, Z = mid("X"), mid("Y"), mid("Z")


def harness(policy: str = "bidirectional", consumer_max: int = 2**31 - 1,
            classic_max: int = 2**31 - 1, **topics: int) -> MixedHarness:
    return MixedHarness(
        topics or {"foo": 6},
        config=ConsumerGroupConfig(migration_policy=policy, max_size=consumer_max),
        classic_config=ClassicConfig(initial_rebalance_delay_ms=3_000, max_size=classic_max))


def classic_group(h: MixedHarness, n: int = 3, protocol_type: str = "consumer",
                  **kw) -> list[str]:
    """A classic group of `n` dynamic members formed through the classic protocol (one
    join phase, range assignment by the leader); returns the member ids."""
    tokens = {}
    for _ in range(n):
        member_id, token = h.cjoin_new(protocol_type=protocol_type, **kw)
        tokens[member_id] = token
    while h.classic_group().state is ClassicState.PREPARING_REBALANCE:
        h.advance(1_000)  # the initial rebalance delay, extended while members arrive
    if protocol_type == "consumer":
        h.sync_round(tokens)
    assert h.classic_group().state is (ClassicState.STABLE if protocol_type == "consumer"
                                       else ClassicState.COMPLETING_REBALANCE)
    return list(tokens)


def check_replay(h: MixedHarness) -> None:
    fresh = h.replayed()
    assert set(fresh.consumer.groups) == set(h.coordinator.consumer.groups)
    assert set(fresh.classic.groups) == set(h.coordinator.classic.groups)
    for gid, group in h.coordinator.consumer.groups.items():
        assert fresh.consumer.groups[gid].snapshot() == group.snapshot()
    for gid, group in h.coordinator.classic.groups.items():
        assert fresh.classic.groups[gid].to_record() == group.to_record()


def check_disjoint(h: MixedHarness) -> None:
    group = h.coordinator.consumer.groups.get("g")
    if group is None:
        return
    seen: dict = {}
    for m in group.members.values():
        for tp in m.holds():
            assert tp not in seen, f"{tp} held by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


def everything(h: MixedHarness, topic: str = "foo") -> set[str]:
    return {f"{topic}-{p}" for p in range(h.coordinator.consumer.image.by_name[topic].partitions)}


def settle_classic(h: MixedHarness, member_id: str, topics=("foo",)) -> set[str]:
    """A classic member of a consumer group heartbeats and, while told to, rejoins (an
    eager consumer: owning nothing when it does) and syncs. Returns what it may use."""
    owned: set[str] = set()
    group = h.group()
    for _ in range(5):
        generation = group.members[member_id].member_epoch
        if h.cheartbeat(member_id, generation) == ErrorCode.none:
            return owned
        join = h.join_answer(h.cjoin(member_id, topics=topics))
        assert join.error == ErrorCode.none
        owned = h.partitions(h.sync_answer(h.csync(member_id, join.generation_id)))
    return owned


def settle_consumer(h: MixedHarness, member_id: str) -> set[str]:
    """A consumer-protocol member heartbeats, acknowledging revocations at once, until it is
    stable; returns its partitions."""
    group = h.group()
    for _ in range(5):
        m = group.members[member_id]
        r = h.heartbeat(member_id, m.member_epoch, owned=h.names(m.assigned))
        assert r.error == ErrorCode.none
    return h.names(group.members[member_id].assigned)


# -- the online upgrade, member by member ----------------------------------------------------------

def test_online_upgrade_of_a_three_member_classic_group_member_by_member():
    h = harness()
    members = classic_group(h)
    generation = h.classic_group().generation
    assert generation == 1
    upgraded: dict[str, str] = {}
    for i, old in enumerate(members):
        new = mid(f"N{i}")
        # The old process stops: it leaves. In the still-classic group that starts a
        # rebalance the new process's join interrupts (parked joins get REBALANCE).
        if i == 0:
            h.cleave(LeavingMember(old))
            assert h.classic_group().state is ClassicState.PREPARING_REBALANCE
            parked = h.cjoin(members[1])  # one survivor rejoins before the upgrade
            assert h.answer(parked) is None
        else:
            h.cleave(LeavingMember(old))
            assert h.group_type("g") == "consumer"
        r = h.join(new)
        assert r.error == ErrorCode.none
        upgraded[old] = new
        assert h.group_type("g") == "consumer"
        if i == 0:
            assert h.answer(parked).error == REBALANCE
            group = h.group()
            # Converted at generation 1, then the newcomer's subscription made epoch 2.
            assert group.group_epoch == 2 and group.assignment_epoch == 2
        # Everyone settles: classic members by rejoining, consumer members by heartbeats.
        for _ in range(3):
            for m in members[i + 1:]:
                settle_classic(h, m)
            for n in upgraded.values():
                settle_consumer(h, n)
            check_disjoint(h)
        group = h.group()
        assert group.state() == G.STABLE
        assert group.num_classic_members() == len(members) - i - 1
        assert set().union(*(h.names(m.assigned) for m in group.members.values())) == (
            everything(h))
        check_replay(h)
    group = h.group()
    assert set(group.members) == set(upgraded.values())
    assert all(not m.uses_classic_protocol for m in group.members.values())
    assert sorted(len(m.assigned) for m in group.members.values()) == [2, 2, 2]


def test_upgrade_of_a_group_in_completing_rebalance_keeps_what_cooperative_members_own():
    """Converted before the leader's SyncGroup: assignments are void, but cooperative members
    still use what they owned (their subscriptions say so). Those partitions stay theirs in
    the consumer group, so the newcomer is not given them until they are revoked."""
    h = harness()
    first, second = classic_group(h, 2)
    state = h.classic_group()
    owned = {m: sorted(f"{t}-{p}" for t, p in
                       decode_assignment(state.members[m].assignment).partitions)
             for m in (first, second)}
    # A third member starts a rebalance; the two rejoin cooperatively, listing what they
    # own; the join phase completes, the leader has not sent its assignment yet.
    third, parked = h.cjoin_new()
    assert h.answer(parked) is None
    for m in (first, second):
        h.cjoin(m, owned=owned[m])
    assert h.classic_group().state is ClassicState.COMPLETING_REBALANCE
    assert all(not m.assignment for m in h.classic_group().members.values())
    r = h.join(mid("N"))
    assert r.error == ErrorCode.none and h.assigned(r) == set()
    group = h.group()
    for m in (first, second):
        assert h.names(group.members[m].holds()) == set(owned[m])
    assert group.members[third].assigned == frozenset()
    assert group.members[mid("N")].state is M.UNRELEASED_PARTITIONS
    check_disjoint(h)
    check_replay(h)


def test_a_classic_member_joins_a_consumer_group():
    h = harness()
    h.join(X)
    # KIP-394: an id first, then the join with it.
    first = h.join_answer(h.cjoin())
    assert first.error == ErrorCode.member_id_required and first.member_id
    assert first.member_id not in h.group().members
    c = first.member_id
    join = h.join_answer(h.cjoin(c))
    assert join.error == ErrorCode.none and join.member_id == c
    group = h.group()
    assert group.num_classic_members() == 1 and group.group_epoch == 2
    assert join.generation_id == group.members[c].member_epoch
    assert h.coordinator.classic_members.awaiting_sync("g", c)
    # X must give partitions back first: C waits at epoch 2 for them.
    assert group.members[c].state is M.UNRELEASED_PARTITIONS
    assert h.partitions(h.sync_answer(h.csync(c, join.generation_id))) == set()
    rx = h.heartbeat(X, 1)
    assert rx.member_epoch == 1 and len(h.assigned(rx)) == 3
    h.heartbeat(X, 1, owned=h.assigned(rx))
    # Everything C waited for is free now: its heartbeat tells it to rejoin and collect.
    assert h.cheartbeat(c, 2) == REBALANCE
    assert settle_classic(h, c) == h.names(group.target_of(c))
    assert len(h.names(group.members[c].assigned)) == 3
    # A JoinGroup below v4 does not need an id first.
    old = h.join_answer(h.cjoin(require_known=False))
    assert old.error == ErrorCode.none and old.member_id in group.members
    # ConsumerGroupDescribe shows C as a classic member (type 0).
    described = h.coordinator.consumer.describe(["g"])[0]
    types = {m.member_id: m.member_type for m in described.members}
    assert types == {X: 1, c: 0, old.member_id: 0}
    check_replay(h)


# -- downgrade -----------------------------------------------------------------------------------

def _mixed(h: MixedHarness) -> tuple[str, str]:
    """A consumer group: consumer member X, classic members C1 and C2 (settled)."""
    h.join(X)
    c1, _ = h.cjoin_new()
    c2, _ = h.cjoin_new()
    for _ in range(3):
        settle_consumer(h, X)
        settle_classic(h, c1)
        settle_classic(h, c2)
    assert h.group().state() == G.STABLE
    return c1, c2


def test_downgrade_when_the_last_consumer_member_leaves():
    h = harness()
    c1, c2 = _mixed(h)
    epoch = h.group().group_epoch
    mark = len(h.records)
    r = h.leave(X)
    assert r.error == ErrorCode.none and r.member_epoch == -1
    assert h.group_type("g") == "classic"
    classic = h.classic_group()
    # Generation = the group epoch after X left; a rebalance starts at once.
    assert classic.generation == epoch + 1
    assert classic.state is ClassicState.PREPARING_REBALANCE
    assert classic.protocol == "range" and classic.protocol_type == "consumer"
    assert set(classic.members) == {c1, c2}
    # Records: X's removal (its tombstones and the epoch bump), then the consumer group's
    # tombstones in replay order, the classic group last.
    written = h.records[mark:]
    assert [type(r.key) for r in written[:4]] == [
        ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupMemberMetadataKey, ConsumerGroupMetadataKey]
    assert written[3].value.epoch == epoch + 1
    conversion = written[4:]
    assert all(r.value is None for r in conversion[:-1])
    assert [type(r.key) for r in conversion] == (
        [ConsumerGroupCurrentMemberAssignmentKey] * 2
        + [ConsumerGroupTargetAssignmentMemberKey] * 2
        + [ConsumerGroupTargetAssignmentMetadataKey]
        + [ConsumerGroupMemberMetadataKey] * 2
        + [ConsumerGroupMetadataKey, GroupMetadataKey])
    assert conversion[-1].value.generation == epoch + 1
    # The members' assignments in the classic record are their targets.
    persisted = {m.member_id: decode_assignment(m.assignment).partitions
                 for m in written[-1].value.members}
    assert set(persisted) == {c1, c2}
    # Consumer timers are gone; classic session and join timers run.
    assert not [k for k in h.timers if k.kind.startswith("consumer-")]
    assert TimerKey(ClassicTimer.JOIN, "g") in h.timers
    assert {TimerKey(ClassicTimer.SESSION, "g", c1),
            TimerKey(ClassicTimer.SESSION, "g", c2)} <= set(h.timers)
    # The classic members notice through their heartbeats, rejoin the classic way and the
    # leader assigns everything.
    assert h.cheartbeat(c1, epoch) == ErrorCode.illegal_generation
    tokens = {c1: h.cjoin(c1), c2: h.cjoin(c2)}
    generation, assigned = h.sync_round(tokens)
    assert generation == epoch + 2
    assert h.classic_group().state is ClassicState.STABLE
    assert assigned[c1] | assigned[c2] == everything(h) and not assigned[c1] & assigned[c2]
    check_replay(h)


def test_downgrade_when_the_last_consumer_members_session_expires():
    h = harness()
    c1, c2 = _mixed(h)
    start = h.now
    while h.group_type("g") == "consumer":
        for c in (c1, c2):  # the classic members keep heartbeating; X has gone silent
            assert h.cheartbeat(c, h.group().members[c].member_epoch) == ErrorCode.none
        h.advance(5_000)
    assert h.now - start <= 45_000 + 5_000
    assert h.group_type("g") == "classic"
    assert h.classic_group().state is ClassicState.PREPARING_REBALANCE
    check_replay(h)


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_quietly():
    """The consumer-protocol static member is rolled back to the classic protocol: its
    classic incarnation takes over (same subscription), everyone is at the target, so the
    group becomes a Stable classic group without a rebalance; the member's SyncGroup
    collects its assignment from the classic group."""
    h = harness()
    h.join(X, instance_id="x")
    c1, _ = h.cjoin_new()
    for _ in range(3):
        settle_consumer(h, X)
        settle_classic(h, c1)
    group = h.group()
    x_partitions = h.names(group.members[X].assigned)
    epoch = group.group_epoch
    join = h.join_answer(h.cjoin(instance_id="x"))
    assert join.error == ErrorCode.none and join.generation_id == epoch
    assert h.group_type("g") == "classic"
    classic = h.classic_group()
    assert classic.state is ClassicState.STABLE and classic.generation == epoch
    assert classic.static_members == {"x": join.member_id}
    assert h.partitions(h.sync_answer(h.csync(join.member_id, epoch,
                                              instance_id="x"))) == x_partitions
    assert h.cheartbeat(c1, epoch) == ErrorCode.none
    check_replay(h)


# -- migration policies --------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["bidirectional", "upgrade", "downgrade", "disabled"])
def test_migration_policy(policy):
    h = harness(policy)
    classic_group(h, 2)
    before = h.classic_group().to_record()
    mark = len(h.records)
    r = h.join(X)
    if policy in ("bidirectional", "upgrade"):
        assert r.error == ErrorCode.none
        assert h.group_type("g") == "consumer"
    else:
        assert r.error == ErrorCode.group_id_not_found
        assert r.error_message == ("Cannot upgrade classic group g to consumer group because "
                                   "online upgrade is disabled.")
        assert h.group_type("g") == "classic"
        assert h.classic_group().to_record() == before and len(h.records) == mark
    # Downgrade: a consumer group whose last consumer-protocol member leaves.
    d = harness(policy)
    c1, c2 = _mixed(d)
    d.leave(X)
    if policy in ("bidirectional", "downgrade"):
        assert d.group_type("g") == "classic"
    else:
        # The group stays a consumer group of classic members, which keep working.
        assert d.group_type("g") == "consumer"
        assert d.group().num_classic_members() == 2
        assert d.cheartbeat(c1, d.group().members[c1].member_epoch) == REBALANCE
        for _ in range(3):
            settle_classic(d, c1)
            settle_classic(d, c2)
        assert d.group().state() == G.STABLE
        check_disjoint(d)
    check_replay(h)
    check_replay(d)


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade", "downgrade", "disabled"])
def test_empty_groups_change_type_whatever_the_policy(policy):
    h = harness(policy)
    # An empty classic group (its only member left) gives way to a consumer group...
    member, _ = h.cjoin_new()
    h.advance(3_000)
    h.cleave(LeavingMember(member))
    assert h.classic_group().state is ClassicState.EMPTY
    r = h.join(X)
    assert r.error == ErrorCode.none and h.group_type("g") == "consumer"
    assert Record(GroupMetadataKey("g"), None) in h.records
    check_replay(h)
    # ... and an empty consumer group to a classic group.
    h.leave(X)
    assert h.group().members == {}
    assert h.join_answer(h.cjoin()).error == ErrorCode.member_id_required
    assert h.group_type("g") == "classic"
    h.cjoin_new()
    h.advance(3_000)
    assert h.classic_group().state is ClassicState.COMPLETING_REBALANCE
    check_replay(h)


# -- refusals ------------------------------------------------------------------------------------

def test_a_classic_group_of_another_protocol_type_is_not_upgraded():
    h = harness()
    classic_group(h, 2, protocol_type="connect")
    r = h.join(X)
    assert r.error == ErrorCode.group_id_not_found
    assert r.error_message == ("Cannot upgrade classic group g to consumer group because the "
                               "group does not use the consumer embedded protocol.")
    assert h.group_type("g") == "classic"


def test_size_limits():
    h = harness(consumer_max=1)
    classic_group(h, 2)
    r = h.join(X)
    assert r.error == ErrorCode.group_id_not_found
    assert "exceeds the consumer group maximum size" in r.error_message
    # Exactly full: converted, but the newcomer does not fit; nothing is kept.
    h = harness(consumer_max=2)
    classic_group(h, 2)
    before = h.classic_group().to_record()
    mark = len(h.records)
    r = h.join(X)
    assert r.error == ErrorCode.group_max_size_reached
    assert h.group_type("g") == "classic"
    assert h.classic_group().to_record() == before and len(h.records) == mark
    assert not [k for k in h.timers if k.kind.startswith("consumer-")]
    # A downgrade that would not fit group.max.size waits until enough members are gone.
    h = harness(classic_max=1)
    c1, c2 = _mixed(h)
    h.leave(X)
    assert h.group_type("g") == "consumer"
    h.cleave(LeavingMember(c2))
    assert h.group_type("g") == "classic"
    assert set(h.classic_group().members) == {c1}
    check_replay(h)


def _classic_record(h: MixedHarness, subscription_bytes: bytes, assignment: bytes) -> None:
    h.load([Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 5, "range", "m1", 0, (
        MemberMetadata("m1", None, "c", "/h", 30_000, 10_000, subscription_bytes,
                       assignment),)))])


def test_an_undecodable_or_custom_classic_group_is_not_upgraded():
    h = harness()
    _classic_record(h, b"\x00\x07garbage", b"")
    r = h.join(X)
    assert r.error == ErrorCode.group_id_not_found
    assert "embedded consumer protocol is malformed" in r.error_message
    h = harness()
    _classic_record(h, subscription(), encode_assignment(Assignment(
        frozenset({("foo", 0)}), user_data=b"custom", version=1)))
    r = h.join(X)
    assert r.error == ErrorCode.group_id_not_found
    assert "unsupported custom assignor" in r.error_message
    assert h.group_type("g") == "classic"
    # Two assignments naming one partition: converting would lose who really has it.
    h = harness()
    both = encode_assignment(Assignment(frozenset({("foo", 0)}), version=1))
    h.load([Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 5, "range", "m1", 0, (
        MemberMetadata("m1", None, "c", "/h", 30_000, 10_000, subscription(), both),
        MemberMetadata("m2", None, "c", "/h", 30_000, 10_000, subscription(), both))))])
    r = h.join(X)
    assert r.error == ErrorCode.group_id_not_found
    assert "assigned to two members" in r.error_message
    assert h.group_type("g") == "classic" and not h.coordinator.consumer.groups


def test_consumer_heartbeats_to_a_classic_group():
    h = harness()
    classic_group(h, 2)
    r = h.heartbeat(X, 3)
    assert r.error == ErrorCode.group_id_not_found
    assert r.error_message == "Group g is not a consumer group."
    # Invalid on its face: refused as such, before the group is looked at.
    bad = h.request(ConsumerHeartbeatRequest("g", X, 0, rebalance_timeout_ms=30_000, owned=()))
    assert bad.error == ErrorCode.invalid_request
    assert h.group_type("g") == "classic"


def test_classic_requests_refused_by_a_consumer_group():
    h = harness()
    h.join(X)
    c, _ = h.cjoin_new()
    gen = h.group().members[c].member_epoch
    # Protocol type or protocols the group's classic members cannot share.
    assert h.join_answer(h.cjoin(protocol_type="connect")).error == (
        ErrorCode.inconsistent_group_protocol)
    assert h.join_answer(h.cjoin(protocol="roundrobin")).error == (
        ErrorCode.inconsistent_group_protocol)
    assert h.join_answer(h.cjoin(c, metadata=b"\xff")).error == (
        ErrorCode.inconsistent_group_protocol)
    # SyncGroup and Heartbeat.
    assert h.sync_answer(h.csync(c, gen + 5)).error == ErrorCode.illegal_generation
    assert h.sync_answer(h.csync("nobody", gen)).error == ErrorCode.unknown_member_id
    assert h.sync_answer(h.csync(X, 1)).error == ErrorCode.unknown_member_id  # not classic
    assert h.sync_answer(h.csync(c, gen, protocol_name="roundrobin")).error == (
        ErrorCode.inconsistent_group_protocol)
    assert h.cheartbeat(c, gen + 1) == ErrorCode.illegal_generation
    assert h.cheartbeat("nobody", gen) == ErrorCode.unknown_member_id
    # A full group.
    full = harness(consumer_max=1)
    full.join(X)
    assert full.join_answer(full.cjoin()).error == ErrorCode.group_max_size_reached
    # Static members: a known member id under someone else's instance id is fenced.
    s = harness()
    s.join(X)
    first = s.join_answer(s.cjoin(instance_id="i"))
    assert first.error == ErrorCode.none
    assert s.join_answer(s.cjoin("someone-else", instance_id="i")).error == (
        ErrorCode.fenced_instance_id)
    assert s.cheartbeat("someone-else", first.generation_id, instance_id="i") == (
        ErrorCode.fenced_instance_id)
    # Invalid on its face: the classic checks come first.
    assert h.join_answer(h.cjoin(session_ms=10)).error == ErrorCode.invalid_session_timeout
    check_replay(h)


# -- classic members' timers ---------------------------------------------------------------------

def test_classic_member_session_timeout():
    h = harness()
    h.join(X)
    c, _ = h.cjoin_new(session_ms=8_000)
    assert h.timers[TimerKey(ConsumerTimer.CONSUMER_SESSION, "g", c)] == h.now + 8_000
    for _ in range(2):
        h.advance(5_000)
        settle_consumer(h, X)
    assert c not in h.group().members
    assert h.group_type("g") == "consumer"
    check_replay(h)


def test_classic_member_that_never_syncs_or_never_rejoins_is_fenced():
    h = harness()
    h.join(X)
    c, _ = h.cjoin_new(rebalance_ms=20_000, session_ms=60_000)
    assert TimerKey(ConsumerTimer.CONSUMER_SYNC, "g", c) in h.timers
    h.advance(20_000)
    assert c not in h.group().members  # never collected its assignment
    c, token = h.cjoin_new(rebalance_ms=20_000, session_ms=60_000)
    h.csync(c, h.join_answer(token).generation_id)
    h.join(Y)  # a new epoch: c must rejoin
    gen = h.group().members[c].member_epoch
    assert h.cheartbeat(c, gen) == REBALANCE
    deadline = h.timers[TimerKey(ConsumerTimer.CONSUMER_JOIN, "g", c)]
    h.advance(10_000)
    assert h.cheartbeat(c, gen) == REBALANCE
    assert h.timers[TimerKey(ConsumerTimer.CONSUMER_JOIN, "g", c)] == deadline  # not extended
    h.advance(10_000)
    assert c not in h.group().members
    check_replay(h)


# -- restart and offsets -------------------------------------------------------------------------

def test_a_restarted_coordinator_resumes_a_mixed_group():
    h = harness()
    c1, _ = _mixed(h)
    fresh = MixedHarness({"foo": 6})
    fresh.topic_ids = dict(h.topic_ids)
    fresh.set_topics({"foo": 6})
    fresh.load(list(h.records))
    group = fresh.group()
    assert group.snapshot() == h.group().snapshot()
    assert fresh.timers[TimerKey(ConsumerTimer.CONSUMER_SESSION, "g", c1)] == fresh.now + 10_000
    assert fresh.timers[TimerKey(ConsumerTimer.CONSUMER_SESSION, "g", X)] == fresh.now + 45_000
    assert fresh.cheartbeat(c1, group.members[c1].member_epoch) == ErrorCode.none


def test_offset_commit_and_fetch_validation_in_a_mixed_group():
    h = harness()
    c1, _ = _mixed(h)
    coordinator = h.coordinator
    group = h.group()
    x_epoch, c_epoch = group.members[X].member_epoch, group.members[c1].member_epoch
    assert _commit_refusal(coordinator, X, x_epoch, None) is None
    assert _commit_refusal(coordinator, c1, c_epoch, None) is None
    assert _commit_refusal(coordinator, X, x_epoch - 1, None).code == (
        ErrorCode.stale_member_epoch)
    assert _commit_refusal(coordinator, c1, c_epoch - 1, None).code == (
        ErrorCode.illegal_generation)
    assert _commit_refusal(coordinator, "nobody", 1, None).code == (
        ErrorCode.unknown_member_id)
    assert _commit_refusal(coordinator, X, x_epoch, None, version=8).code == (
        ErrorCode.unsupported_version)
    assert _commit_refusal(coordinator, c1, c_epoch, None, version=8) is None
    assert group.fetch_refusal(c1, c_epoch) is None
    assert group.fetch_refusal(X, x_epoch + 1).code == ErrorCode.stale_member_epoch
    assert group.fetch_refusal(None, -1) is None
    assert group.offsets_expire_from() is None
    assert group.subscribed_topics() == {"foo"}


def _commit_refusal(coordinator: Any, member_id: str, epoch: int, instance_id: str | None,
                    version: int = 9) -> Any:
    return commit_refusal(coordinator.consumer.groups.get("g") or coordinator.classic.groups.get(
        "g"), "g", member_id, epoch, instance_id, version)
