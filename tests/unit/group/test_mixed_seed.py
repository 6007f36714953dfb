"""Seed 3's upgrade walkthrough, step by step: a classic group at generation 22 (A, B and C on
the classic protocol) is upgraded online while C stays a classic member.

A is a static member (instance "a"): its restart on the consumer protocol converts the group
and takes over A's classic member without a rebalance, so A is "upgraded" at epoch 22. B
leaves (epoch 23): C, still classic, is told REBALANCE_IN_PROGRESS, rejoins, is moved to
epoch 23 with foo-4 added (its JoinGroup answer carries generation 23: seed 3's point) and
collects [foo-2, foo-4, foo-5] with SyncGroup. B comes back on the consumer protocol (epoch
24) and gets its partitions only once A and C have given them back.

The seed ends with B = [foo-3, foo-4] and C = [foo-2, foo-5]; coterie's uniform assignor is
as sticky but keeps C's foo-4 and moves foo-5 instead (which of C's three partitions goes
back is the assignor's choice), so B ends with [foo-3, foo-5]. Every epoch, state and
revoke-before-assign step is the seed's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coterie.group.classic.messages import LeavingMember
from coterie.group.consumer.group import ConsumerGroupState as G
from coterie.group.consumer.member import MemberState as M
from coterie.group.records.classic import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from coterie.group.records.record import Record
from coterie.wire.consumer_protocol import Assignment, encode_assignment

from .consumer_harness import mid
from .mixed_harness import MixedHarness, subscription

A, B, C = mid("A"), mid("B"), mid("C")
A2, B2 = mid("A2"), mid("B2")  # the upgraded incarnations of A and B
REBALANCE = ErrorCode.rebalance_in_progress


def assignment(*names: str) -> bytes:
    return encode_assignment(Assignment(frozenset(
        (n.rpartition("-")[0], int(n.rpartition("-")[2])) for n in names), version=1))


def classic_group_at_22(h: MixedHarness) -> None:
    """The classic group as it has been persisted: generation 22, protocol range."""
    def member(member_id: str, instance: str | None, *partitions: str) -> MemberMetadata:
        return MemberMetadata(member_id, instance, "classic", "/127.0.0.2", 30_000, 10_000,
                              subscription(["foo"]), assignment(*partitions))
    h.load([Record(GroupMetadataKey("g"), GroupMetadataValue(
        "consumer", 22, "range", A, 0, (member(A, "a", "foo-0", "foo-1"),
                                        member(B, None, "foo-3", "foo-4"),
                                        member(C, None, "foo-2", "foo-5"))))])


def state(h: MixedHarness, member_id: str) -> tuple[int, M, set[str], set[str]]:
    m = h.group().members[member_id]
    return m.member_epoch, m.state, h.names(m.assigned), h.names(m.pending_revocation)


def targets(h: MixedHarness) -> dict[str, set[str]]:
    return {m: h.names(t) for m, t in h.group().targets.items()}


def check_replay(h: MixedHarness) -> None:
    fresh = h.replayed()
    assert set(fresh.consumer.groups) == set(h.coordinator.consumer.groups)
    assert set(fresh.classic.groups) == set(h.coordinator.classic.groups)
    for gid, group in h.coordinator.consumer.groups.items():
        assert fresh.consumer.groups[gid].snapshot() == group.snapshot()


def test_upgrade_walkthrough_with_classic_member_c():
    h = MixedHarness({"foo": 6})
    classic_group_at_22(h)
    assert h.group_type("g") == "classic"

    # A restarts on the consumer protocol: the group is converted (epoch 22 = generation 22,
    # every member at epoch 22 with its last assignment) and A takes over its old member.
    ra = h.join(A2, instance_id="a")
    assert ra.error == ErrorCode.none and ra.member_epoch == 22
    assert h.assigned(ra) == {"foo-0", "foo-1"}
    g = h.group()
    assert h.group_type("g") == "consumer"
    assert (g.group_epoch, g.assignment_epoch) == (22, 22)
    assert set(g.members) == {A2, B, C}
    assert g.num_classic_members() == 2 and not g.members[A2].uses_classic_protocol
    assert state(h, B) == (22, M.STABLE, {"foo-3", "foo-4"}, set())
    assert state(h, C) == (22, M.STABLE, {"foo-2", "foo-5"}, set())
    assert g.state() == G.STABLE
    # The classic members carry on at generation 22 without noticing.
    assert h.cheartbeat(B, 22) == ErrorCode.none
    assert h.cheartbeat(C, 22) == ErrorCode.none
    check_replay(h)

    # B is stopped to be upgraded: it leaves, the group epoch goes to 23.
    left = h.cleave(LeavingMember(B))
    assert left.members[0][1] == ErrorCode.none
    assert (g.group_epoch, g.assignment_epoch) == (23, 22) and g.state() == G.ASSIGNING
    assert h.tps("foo-3", "foo-4").isdisjoint(g.partition_epochs)

    # C heartbeats: it must rejoin to catch up with epoch 23.
    assert h.cheartbeat(C, 22) == REBALANCE
    # C (an eager consumer: it revoked everything before rejoining) sends JoinGroup. The
    # target for epoch 23 is computed; C owns nothing it must give back, so it moves to
    # epoch 23 at once, and foo-4 is free: the JoinGroup answer carries generation 23.
    join = h.join_answer(h.cjoin(C))
    assert join.error == ErrorCode.none and join.generation_id == 23
    assert join.member_id == C and join.protocol_name == "range" and join.members == ()
    assert targets(h) == {A2: {"foo-0", "foo-1", "foo-3"}, C: {"foo-2", "foo-4", "foo-5"}}
    assert state(h, C) == (23, M.STABLE, {"foo-2", "foo-4", "foo-5"}, set())
    assert state(h, A2) == (22, M.STABLE, {"foo-0", "foo-1"}, set())
    assert h.coordinator.classic_members.awaiting_sync("g", C)  # "CompletingRebalance"
    # C collects its new assignment; everything is free. C is "Stable".
    sync = h.sync_answer(h.csync(C, 23))
    assert sync.error == ErrorCode.none
    assert h.partitions(sync) == {"foo-2", "foo-4", "foo-5"}
    assert not h.coordinator.classic_members.awaiting_sync("g", C)
    assert h.cheartbeat(C, 23) == ErrorCode.none
    # A heartbeats: nothing to revoke, epoch 23 with foo-3.
    ra = h.heartbeat(A2, 22)
    assert ra.member_epoch == 23 and h.assigned(ra) == {"foo-0", "foo-1", "foo-3"}
    assert g.state() == G.STABLE
    check_replay(h)

    # B comes back on the consumer protocol: epoch 24. Its partitions are still A's and C's.
    rb = h.join(B2)
    assert rb.member_epoch == 24 and h.assigned(rb) == set()
    assert targets(h) == {A2: {"foo-0", "foo-1"}, B2: {"foo-3", "foo-5"},
                          C: {"foo-2", "foo-4"}}
    assert state(h, B2) == (24, M.UNRELEASED_PARTITIONS, set(), set())
    # C must rejoin to give foo-5 back.
    assert h.cheartbeat(C, 23) == REBALANCE
    join = h.join_answer(h.cjoin(C))
    assert join.generation_id == 24
    assert state(h, C) == (24, M.STABLE, {"foo-2", "foo-4"}, set())
    assert h.partitions(h.sync_answer(h.csync(C, 24))) == {"foo-2", "foo-4"}
    # B gets foo-5 (released by C) but not foo-3, which A has not given back yet.
    rb = h.heartbeat(B2, 24)
    assert h.assigned(rb) == {"foo-5"}
    # A is asked to revoke foo-3 and stays at epoch 23 while it does.
    ra = h.heartbeat(A2, 23)
    assert ra.member_epoch == 23 and h.assigned(ra) == {"foo-0", "foo-1"}
    assert state(h, A2) == (23, M.UNREVOKED_PARTITIONS, {"foo-0", "foo-1"}, {"foo-3"})
    rb = h.heartbeat(B2, 24)
    assert rb.assignment is None and g.state() == G.RECONCILING
    # A acknowledges: epoch 24, foo-3 released; B heartbeats and gets its assignment.
    ra = h.heartbeat(A2, 23, owned=["foo-0", "foo-1"])
    assert ra.member_epoch == 24
    rb = h.heartbeat(B2, 24)
    assert h.assigned(rb) == {"foo-3", "foo-5"}
    assert state(h, B2) == (24, M.STABLE, {"foo-3", "foo-5"}, set())
    assert g.state() == G.STABLE and (g.group_epoch, g.assignment_epoch) == (24, 24)
    assert h.cheartbeat(C, 24) == ErrorCode.none
    check_replay(h)


def test_a_cooperative_classic_member_revokes_before_anyone_gets_its_partition():
    """The same group, but C is a cooperative (KIP-429) consumer: it keeps its partitions
    while rejoining and lists them in its subscription. The coordinator then holds C at
    epoch 23 (UNREVOKED_PARTITIONS) with foo-5 pending, and B does not get foo-5 until C
    rejoins without it."""
    h = MixedHarness({"foo": 6})
    classic_group_at_22(h)
    h.join(A2, instance_id="a")
    h.cleave(LeavingMember(B))
    assert h.cheartbeat(C, 22) == REBALANCE
    # C rejoins owning foo-2 and foo-5, both still in its target: epoch 23 at once.
    join = h.join_answer(h.cjoin(C, owned=["foo-2", "foo-5"]))
    assert join.generation_id == 23
    assert h.partitions(h.sync_answer(h.csync(C, 23))) == {"foo-2", "foo-4", "foo-5"}
    h.heartbeat(A2, 22)
    h.join(B2)
    g = h.group()
    assert targets(h)[C] == {"foo-2", "foo-4"} and targets(h)[B2] == {"foo-3", "foo-5"}
    assert h.cheartbeat(C, 23) == REBALANCE
    # C rejoins still owning foo-5: it must revoke first, at epoch 23.
    join = h.join_answer(h.cjoin(C, owned=["foo-2", "foo-4", "foo-5"]))
    assert join.generation_id == 23
    assert state(h, C) == (23, M.UNREVOKED_PARTITIONS, {"foo-2", "foo-4"}, {"foo-5"})
    # SyncGroup gives C what it may keep; foo-5 is missing, so C revokes it.
    assert h.partitions(h.sync_answer(h.csync(C, 23))) == {"foo-2", "foo-4"}
    # Meanwhile B is not given foo-5: C still holds it.
    h.heartbeat(B2, 24)
    assert h.tps("foo-5") <= g.members[C].holds()
    assert h.tps("foo-5").isdisjoint(g.members[B2].assigned)
    # C's heartbeat tells it to rejoin (it has something to revoke); it does, without foo-5.
    assert h.cheartbeat(C, 23) == REBALANCE
    join = h.join_answer(h.cjoin(C, owned=["foo-2", "foo-4"]))
    assert join.generation_id == 24
    assert state(h, C) == (24, M.STABLE, {"foo-2", "foo-4"}, set())
    rb = h.heartbeat(B2, 24)
    assert h.assigned(rb) == {"foo-5"}
    check_replay(h)
