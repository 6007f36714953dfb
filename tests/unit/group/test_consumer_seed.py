"""Seed 3's walkthroughs, step by step, with virtual time: the epochs of A, B and C, revoking
before assigning, member failure and a member leaving.

Each step asserts what the seed says: the member epoch in the answer, the partitions the
member may use, its state, and the group's epochs and state.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coterie.group.consumer.group import ConsumerGroupState as G
from coterie.group.consumer.member import MemberState as M
from coterie.group.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from coterie.group.records.record import Record

from .consumer_harness import ConsumerHarness, mid

A, B, C = mid("A"), mid("B"), mid("C")


def state(h: ConsumerHarness, member_id: str) -> tuple[int, M, set[str], set[str]]:
    m = h.group().members[member_id]
    return m.member_epoch, m.state, h.names(m.assigned), h.names(m.pending_revocation)


def targets(h: ConsumerHarness) -> dict[str, set[str]]:
    return {m: h.names(t) for m, t in h.group().targets.items()}


# -- the three epochs: A alone, B joins, the subscribed topics change --------------------------

def test_a_alone_is_given_everything_at_epoch_1():
    h = ConsumerHarness({"foo": 3})
    r = h.join(A)
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch) == (1, 1)
    assert targets(h) == {A: {"foo-0", "foo-1", "foo-2"}}
    # Nothing to revoke: straight to the target epoch with all the partitions.
    assert r.error == ErrorCode.none and r.member_epoch == 1
    assert h.assigned(r) == {"foo-0", "foo-1", "foo-2"}
    assert state(h, A) == (1, M.STABLE, {"foo-0", "foo-1", "foo-2"}, set())
    assert g.state() == G.STABLE


def _a_alone_at_1(h: ConsumerHarness) -> None:
    """A alone at epoch 1 with foo-0..2, subscribed with the regex foo|bar, loaded from
    records: a join would now take two epochs to get there (the regex is resolved after the
    join's answer, in a later epoch, as Kafka 4.2 does), the seed counts one."""
    parts = h.tps("foo-0", "foo-1", "foo-2")
    h.load([
        Record(ConsumerGroupMemberMetadataKey("g", A), ConsumerGroupMemberMetadataValue(
            None, None, "client", "/127.0.0.1", (), "foo|bar", 30_000, None)),
        Record(ConsumerGroupRegularExpressionKey("g", "foo|bar"),
               ConsumerGroupRegularExpressionValue(("foo",), h.coordinator.image.version,
                                                   h.now)),
        Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(
            1, h.coordinator.image.metadata_hash({"foo"}))),
        Record(ConsumerGroupTargetAssignmentMemberKey("g", A),
               ConsumerGroupTargetAssignmentMemberValue(parts)),
        Record(ConsumerGroupTargetAssignmentMetadataKey("g"),
               ConsumerGroupTargetAssignmentMetadataValue(1)),
        Record(ConsumerGroupCurrentMemberAssignmentKey("g", A),
               ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, parts, frozenset())),
    ])
    assert h.group().state() == G.STABLE


def _a_and_b(h: ConsumerHarness) -> None:
    _a_alone_at_1(h)
    rb = h.join(B)
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch) == (2, 2)
    assert targets(h) == {A: {"foo-0", "foo-1"}, B: {"foo-2"}}
    # B moves to epoch 2 at once but gets nothing: foo-2 is still A's.
    assert rb.member_epoch == 2 and h.assigned(rb) == set()
    assert state(h, B) == (2, M.UNRELEASED_PARTITIONS, set(), set())
    # A heartbeats: revoke foo-2 (A stays at epoch 1 while it does).
    ra = h.heartbeat(A, 1)
    assert ra.member_epoch == 1 and h.assigned(ra) == {"foo-0", "foo-1"}
    assert state(h, A) == (1, M.UNREVOKED_PARTITIONS, {"foo-0", "foo-1"}, {"foo-2"})
    # B heartbeats meanwhile: still nothing, foo-2 is not released.
    rb = h.heartbeat(B, 2)
    assert rb.member_epoch == 2 and rb.assignment is None
    assert g.state() == G.RECONCILING
    # A acknowledges: epoch 2, foo-2 released.
    ra = h.heartbeat(A, 1, owned=["foo-0", "foo-1"])
    assert ra.member_epoch == 2 and ra.assignment is None
    assert state(h, A) == (2, M.STABLE, {"foo-0", "foo-1"}, set())
    assert h.tp("foo", 2) not in g.partition_epochs
    # B heartbeats: now it gets foo-2.
    rb = h.heartbeat(B, 2)
    assert rb.member_epoch == 2 and h.assigned(rb) == {"foo-2"}
    assert state(h, B) == (2, M.STABLE, {"foo-2"}, set())
    assert g.state() == G.STABLE


def test_b_joins_and_foo_2_is_revoked_from_a_before_b_gets_it():
    h = ConsumerHarness({"foo": 3})
    _a_and_b(h)


def test_epoch_3_b_moves_first_and_a_revokes_foo_1():
    h = ConsumerHarness({"foo": 3})
    _a_and_b(h)
    g = h.group()
    # Topic bar is created; A subscribes to it through its regex: epoch 3, once the regex
    # is resolved again (asked for by the first heartbeat 10 s after the last resolution).
    h.set_topics({"foo": 3, "bar": 1})
    assert (g.group_epoch, g.assignment_epoch) == (2, 2)
    h.advance(10_001)
    rb = h.heartbeat(B, 2)
    assert rb.member_epoch == 2 and rb.assignment is None
    h.advance(0)
    assert g.resolved_regexes["foo|bar"].topics == {"foo", "bar"}
    assert (g.group_epoch, g.assignment_epoch) == (3, 2)
    assert g.state() == G.ASSIGNING
    # B heartbeats: the target is computed; B has nothing to revoke, so it moves to epoch 3
    # (waiting for foo-1, which A still has).
    rb = h.heartbeat(B, 2)
    assert g.assignment_epoch == 3
    assert targets(h) == {A: {"foo-0", "bar-0"}, B: {"foo-1", "foo-2"}}
    assert rb.member_epoch == 3 and rb.assignment is None
    assert state(h, B) == (3, M.UNRELEASED_PARTITIONS, {"foo-2"}, set())
    # A heartbeats: revoke foo-1, still at epoch 2 (bar-0 comes after the revocation).
    ra = h.heartbeat(A, 2)
    assert ra.member_epoch == 2 and h.assigned(ra) == {"foo-0"}
    assert state(h, A) == (2, M.UNREVOKED_PARTITIONS, {"foo-0"}, {"foo-1"})
    # A acknowledges: epoch 3, foo-1 released, bar-0 given.
    ra = h.heartbeat(A, 2, owned=["foo-0"])
    assert ra.member_epoch == 3 and h.assigned(ra) == {"foo-0", "bar-0"}
    assert state(h, A) == (3, M.STABLE, {"foo-0", "bar-0"}, set())
    rb = h.heartbeat(B, 3)
    assert h.assigned(rb) == {"foo-1", "foo-2"}
    assert g.state() == G.STABLE


# -- C joins a group at epoch 21 ------------------------------------------------------------------

def _stable_at_21(h: ConsumerHarness) -> None:
    """A and B stable at epoch 21 (A foo-0..2, B foo-3..5), loaded from records."""
    parts = {A: h.tps("foo-0", "foo-1", "foo-2"), B: h.tps("foo-3", "foo-4", "foo-5")}
    records = []
    for member_id in (A, B):
        records.append(Record(ConsumerGroupMemberMetadataKey("g", member_id),
                              ConsumerGroupMemberMetadataValue(
                                  None, None, "client", "/127.0.0.1", ("foo",), "", 30_000,
                                  None)))
    records.append(Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(
        21, h.coordinator.image.metadata_hash({"foo"}))))
    for member_id in (A, B):
        records.append(Record(ConsumerGroupTargetAssignmentMemberKey("g", member_id),
                              ConsumerGroupTargetAssignmentMemberValue(parts[member_id])))
    records.append(Record(ConsumerGroupTargetAssignmentMetadataKey("g"),
                          ConsumerGroupTargetAssignmentMetadataValue(21)))
    for member_id in (A, B):
        records.append(Record(ConsumerGroupCurrentMemberAssignmentKey("g", member_id),
                              ConsumerGroupCurrentMemberAssignmentValue(
                                  21, 20, 0, parts[member_id], frozenset())))
    h.load(records)
    assert h.group().state() == G.STABLE


def _c_joins(h: ConsumerHarness) -> None:
    g = h.group()
    rc = h.join(C)
    # C joins: the group epoch is bumped and the target computed.
    assert (g.group_epoch, g.assignment_epoch) == (22, 22)
    assert targets(h) == {A: {"foo-0", "foo-1"}, B: {"foo-3", "foo-4"}, C: {"foo-2", "foo-5"}}
    # C is at epoch 22 but gets nothing yet: foo-2 and foo-5 are not revoked.
    assert rc.member_epoch == 22 and h.assigned(rc) == set()
    assert state(h, C) == (22, M.UNRELEASED_PARTITIONS, set(), set())
    ra = h.heartbeat(A, 21)
    assert ra.member_epoch == 21 and h.assigned(ra) == {"foo-0", "foo-1"}
    assert state(h, A) == (21, M.UNREVOKED_PARTITIONS, {"foo-0", "foo-1"}, {"foo-2"})
    rb = h.heartbeat(B, 21)
    assert rb.member_epoch == 21 and h.assigned(rb) == {"foo-3", "foo-4"}
    assert state(h, B) == (21, M.UNREVOKED_PARTITIONS, {"foo-3", "foo-4"}, {"foo-5"})
    rc = h.heartbeat(C, 22)
    assert rc.member_epoch == 22 and rc.assignment is None  # no change for C
    # A acknowledges: epoch 22, foo-2 released.
    ra = h.heartbeat(A, 21, owned=["foo-0", "foo-1"])
    assert ra.member_epoch == 22
    assert state(h, A) == (22, M.STABLE, {"foo-0", "foo-1"}, set())
    # C gets foo-2, still waits for foo-5.
    rc = h.heartbeat(C, 22)
    assert h.assigned(rc) == {"foo-2"}
    assert state(h, C) == (22, M.UNRELEASED_PARTITIONS, {"foo-2"}, set())
    # B acknowledges: epoch 22, foo-5 released.
    rb = h.heartbeat(B, 21, owned=["foo-3", "foo-4"])
    assert rb.member_epoch == 22
    assert state(h, B) == (22, M.STABLE, {"foo-3", "foo-4"}, set())
    # C gets foo-2 and foo-5.
    rc = h.heartbeat(C, 22)
    assert h.assigned(rc) == {"foo-2", "foo-5"}
    assert state(h, C) == (22, M.STABLE, {"foo-2", "foo-5"}, set())
    assert g.state() == G.STABLE


def test_c_joins_and_gets_foo_2_and_foo_5_once_a_and_b_revoked_them():
    h = ConsumerHarness({"foo": 6})
    _stable_at_21(h)
    _c_joins(h)


def test_member_failure_session_timeout_removes_a_and_bumps_the_epoch():
    h = ConsumerHarness({"foo": 6})
    _stable_at_21(h)
    _c_joins(h)
    g = h.group()
    # B and C keep heartbeating; A goes silent.
    silent_since = h.now
    for _ in range(12):
        h.advance(5_000)
        if A not in g.members:
            break
        h.heartbeat(B, g.members[B].member_epoch)
        h.heartbeat(C, g.members[C].member_epoch)
    assert A not in g.members
    assert h.now - silent_since == 45_000  # group.consumer.session.timeout.ms
    assert g.group_epoch == 23
    # A's partitions are free at once: its tombstones were written.
    assert h.tp("foo", 0) not in g.partition_epochs and h.tp("foo", 1) not in g.partition_epochs
    rb = h.heartbeat(B, 22)
    rc = h.heartbeat(C, 22)
    assert g.assignment_epoch == 23
    assert set().union(*targets(h).values()) == {f"foo-{p}" for p in range(6)}
    assert rb.member_epoch == 23 and rc.member_epoch == 23
    assert {len(targets(h)[B]), len(targets(h)[C])} == {3}
    # B and C keep what they had and split A's partitions.
    assert {"foo-3", "foo-4"} <= h.assigned(rb) and {"foo-2", "foo-5"} <= h.assigned(rc)
    assert g.state() == G.STABLE


def test_b_leaves_and_the_group_epoch_is_bumped():
    h = ConsumerHarness({"foo": 6})
    _stable_at_21(h)
    _c_joins(h)
    g = h.group()
    r = h.leave(B)
    assert r.error == ErrorCode.none and r.member_epoch == -1
    assert B not in g.members and B not in g.targets
    assert g.group_epoch == 23
    assert all(h.tp("foo", p) not in g.partition_epochs for p in (3, 4))
    ra = h.heartbeat(A, 22)
    rc = h.heartbeat(C, 22)
    # The target of seed 3's next example (epoch 23).
    assert targets(h) == {A: {"foo-0", "foo-1", "foo-3"}, C: {"foo-2", "foo-5", "foo-4"}}
    assert ra.member_epoch == 23 and rc.member_epoch == 23
    assert h.assigned(ra) | h.assigned(rc) == {f"foo-{p}" for p in range(6)}
    assert g.state() == G.STABLE
    # Replaying everything written gives the same group.
    assert h.replayed().groups["g"].snapshot() == g.snapshot()
