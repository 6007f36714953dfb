"""Seed 1 as executable scenarios: every failure case and example, with virtual time."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.membership import ClassicState as S
from coterie.group.classic.messages import LeavingMember
from coterie.group.timers import TimerKey

from .classic_harness import Harness


def form_group(h: Harness, n: int, **kw) -> tuple[list[str], int]:
    """n members join (v4 dance) and the join phase completes; returns ids and generation."""
    # Every member gets its id (MEMBER_ID_REQUIRED) and joins with it before the new group's
    # join phase ends on its (here 0 ms) initial-delay timer, so all n land in generation 1.
    ids = [h.answer(h.join(**kw)).member_id for _ in range(n)]
    tokens = [h.join(member_id=mid, **kw) for mid in ids]
    h.advance(0)
    gen = h.answer(tokens[-1]).generation_id
    assert all(h.answer(t).error == ErrorCode.none for t in tokens)
    return ids, gen


def stable_group(h: Harness, n: int, **kw) -> tuple[list[str], int]:
    ids, gen = form_group(h, n, **kw)
    leader = h.group().leader
    for mid in ids:
        if mid != leader:
            h.sync(mid, gen)
    h.sync(leader, gen, {mid: f"assign-{mid}".encode() for mid in ids})
    assert h.group().state == S.STABLE
    return ids, gen


# -- the two phases ------------------------------------------------------------------------

def test_join_then_sync_leader_gets_metadata_followers_get_nothing():
    h = Harness()
    a, ta = h.join_new(protocols=(("range", b"meta-a"),))
    assert h.answer(ta) is None  # parked even with no initial delay: the 0 ms timer ends it
    h.advance(0)
    assert h.answer(ta).error == ErrorCode.none  # alone in generation 1
    gen1 = h.answer(ta).generation_id
    h.sync(a, gen1, {a: b"x"})
    b, tb = h.join_new(protocols=(("range", b"meta-b"),))
    assert h.answer(tb) is None  # parked until a rejoins
    assert h.heartbeat(a, gen1) == ErrorCode.rebalance_in_progress
    ta2 = h.join(member_id=a, protocols=(("range", b"meta-a"),))
    ra, rb = h.answer(ta2), h.answer(tb)
    assert ra.generation_id == rb.generation_id == gen1 + 1
    assert ra.leader == rb.leader == a
    assert {m.member_id: m.metadata for m in ra.members} == {a: b"meta-a", b: b"meta-b"}
    assert rb.members == ()
    tsb = h.sync(b, ra.generation_id)
    assert h.answer(tsb) is None  # parked: the leader has not synced yet
    tsa = h.sync(a, ra.generation_id, {a: b"A", b: b"B"})
    assert h.answer(tsa).assignment == b"A"
    assert h.answer(tsb).assignment == b"B"
    assert h.group().state == S.STABLE


def test_generation_persisted_after_join_and_after_sync():
    h = Harness()
    ids, gen = stable_group(h, 2)
    values = [r.value for r in h.records]
    assert values[-2].generation == gen and all(m.assignment == b"" for m in values[-2].members)
    assert {m.member_id: m.assignment for m in values[-1].members} == {
        mid: f"assign-{mid}".encode() for mid in ids}


# -- protocol selection ---------------------------------------------------------------------

def test_no_common_protocol_is_inconsistent():
    h = Harness()
    stable_group(h, 1, protocols=(("range", b""),))
    tok = h.join(protocols=(("roundrobin", b""),))
    assert h.answer(tok).error == ErrorCode.inconsistent_group_protocol


def test_other_protocol_type_is_inconsistent():
    h = Harness()
    stable_group(h, 1)
    tok = h.join(protocol_type="connect")
    assert h.answer(tok).error == ErrorCode.inconsistent_group_protocol


def test_disagreeing_preference_order_is_decided_by_votes_then_leader():
    h = Harness()
    a, _ = h.join_new(protocols=(("x", b""), ("y", b"")))
    h.advance(0)
    h.sync(a, 1, {})
    b, tb = h.join_new(protocols=(("y", b""), ("x", b"")))
    h.join(member_id=a, protocols=(("x", b""), ("y", b"")))
    # One vote each: the tie goes to the leader's (a's) first choice.
    assert h.answer(tb).protocol_name == "x"
    gen = h.answer(tb).generation_id
    h.sync(a, gen, {})
    _c, tc = h.join_new(protocols=(("y", b""), ("x", b"")))
    h.join(member_id=a, protocols=(("x", b""), ("y", b"")))
    h.join(member_id=b, protocols=(("y", b""), ("x", b"")))
    # Two votes for y against one for x.
    assert h.answer(tc).protocol_name == "y"


def test_rolling_upgrade_of_assignment_strategy():
    """A, B and C move from round-robin v0 to v1 one at a time: v0 is chosen until all
    support v1 (each upgraded member lists v1 first, v0 second)."""
    h = Harness()
    old = (("roundrobin-v0", b"0"),)
    new = (("roundrobin-v1", b"1"), ("roundrobin-v0", b"0"))
    ids, _gen = stable_group(h, 3, protocols=old)
    chosen = []
    for i, upgraded in enumerate(ids):
        # The upgraded member restarts: leaves, and joins again with both versions.
        h.leave(LeavingMember(upgraded))
        new_id, tok = h.join_new(protocols=new)
        ids[i] = new_id
        for other in ids:
            if other != new_id:
                proto = new if ids.index(other) < i else old
                h.join(member_id=other, protocols=proto)
        resp = h.answer(tok)
        assert resp.error == ErrorCode.none
        chosen.append(resp.protocol_name)
        h.sync(h.group().leader, resp.generation_id, {})
    assert chosen == ["roundrobin-v0", "roundrobin-v0", "roundrobin-v1"]


# -- failure cases --------------------------------------------------------------------------

def test_leader_failure_before_sync_forces_rejoin():
    h = Harness()
    ids, gen = form_group(h, 3, session_ms=6_000, rebalance_ms=60_000)
    leader = h.group().leader
    followers = [m for m in ids if m != leader]
    parked = [h.sync(f, gen) for f in followers]
    for _ in range(4):  # followers wait (parked syncs keep them alive); the leader is silent
        h.advance(2_000)
    assert leader not in h.group().members
    assert [h.answer(t).error for t in parked] == [ErrorCode.rebalance_in_progress] * 2
    assert h.group().state == S.PREPARING_REBALANCE
    toks = [h.join(member_id=f) for f in followers]
    answers = [h.answer(t) for t in toks]
    assert answers[0].generation_id == gen + 1
    assert answers[0].leader in followers


def test_assignment_failure_is_propagated_to_every_member():
    h = Harness()
    ids, gen = form_group(h, 3)
    leader = h.group().leader
    parked = [h.sync(m, gen) for m in ids if m != leader]
    tl = h.sync(leader, gen, error=ErrorCode.inconsistent_group_protocol)
    errors = {h.answer(t).error for t in [*parked, tl]}
    assert errors == {ErrorCode.inconsistent_group_protocol}
    assert h.group().state == S.PREPARING_REBALANCE


def test_follower_missing_the_sync_barrier_gets_state_later():
    h = Harness()
    ids, gen = form_group(h, 2)
    leader = h.group().leader
    follower = next(m for m in ids if m != leader)
    h.sync(leader, gen, {leader: b"L", follower: b"F"})
    assert h.group().state == S.STABLE
    late = h.sync(follower, gen)
    assert h.answer(late).assignment == b"F"


def test_follower_that_never_syncs_is_removed_at_the_sync_timeout():
    h = Harness()
    ids, gen = form_group(h, 2, session_ms=60_000, rebalance_ms=10_000)
    leader = h.group().leader
    follower = next(m for m in ids if m != leader)
    tl = h.sync(leader, gen, {leader: b"L", follower: b"F"})
    assert h.answer(tl).assignment == b"L"
    # The leader keeps heartbeating; the follower vanished without collecting its state.
    for _ in range(10):
        h.advance(5_000)
        h.heartbeat(leader, h.group().generation)
    assert follower not in h.group().members


def test_new_member_during_sync_forces_rebalance():
    h = Harness()
    ids, gen = form_group(h, 2)
    leader = h.group().leader
    follower = next(m for m in ids if m != leader)
    parked = h.sync(follower, gen)
    _, tc = h.join_new()
    assert h.answer(parked).error == ErrorCode.rebalance_in_progress
    assert h.group().state == S.PREPARING_REBALANCE
    late_leader = h.sync(leader, gen, {})
    assert h.answer(late_leader).error == ErrorCode.rebalance_in_progress
    h.join(member_id=leader)
    h.join(member_id=follower)
    assert h.answer(tc).generation_id == gen + 1
    assert len(h.group().members) == 3


def test_subscription_change_rebalances_everyone():
    h = Harness()
    ids, gen = stable_group(h, 2, protocols=(("range", b"topics=a"),))
    changer = ids[1]
    t = h.join(member_id=changer, protocols=(("range", b"topics=a,b"),))
    assert h.answer(t) is None
    assert h.heartbeat(ids[0], gen) == ErrorCode.rebalance_in_progress
    t0 = h.join(member_id=ids[0], protocols=(("range", b"topics=a"),))
    leader_answer = h.answer(t0) if h.answer(t0).members else h.answer(t)
    assert {m.metadata for m in leader_answer.members} == {b"topics=a", b"topics=a,b"}
    assert h.answer(t0).generation_id == gen + 1


def test_topic_metadata_change_leader_rejoin_causes_resync():
    h = Harness()
    ids, gen = stable_group(h, 2)
    leader = h.group().leader
    follower = next(m for m in ids if m != leader)
    tl = h.join(member_id=leader)  # the leader saw new partitions and asks for a new round
    assert h.heartbeat(follower, gen) == ErrorCode.rebalance_in_progress
    tf = h.join(member_id=follower)
    assert h.answer(tl).generation_id == h.answer(tf).generation_id == gen + 1
    h.sync(follower, gen + 1)
    h.sync(leader, gen + 1, {leader: b"L2", follower: b"F2"})
    assert h.group().members[follower].assignment == b"F2"


def test_follower_rejoin_with_same_metadata_in_stable_is_answered_without_rebalance():
    h = Harness()
    ids, gen = stable_group(h, 2)
    follower = next(m for m in ids if m != h.group().leader)
    t = h.join(member_id=follower)
    assert h.answer(t).generation_id == gen
    assert h.group().state == S.STABLE


# -- timeouts -----------------------------------------------------------------------------

def test_session_timeout_removes_member_and_rebalances():
    h = Harness()
    ids, gen = stable_group(h, 2, session_ms=10_000)
    alive, dead = ids
    for _ in range(3):
        h.advance(4_000)
        h.heartbeat(alive, gen)
    assert dead not in h.group().members
    assert h.heartbeat(alive, gen) == ErrorCode.rebalance_in_progress
    t = h.join(member_id=alive)
    assert h.answer(t).generation_id == gen + 1
    assert [m.member_id for m in h.answer(t).members] == [alive]


def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    h = Harness()
    ids, gen = stable_group(h, 3, session_ms=60_000, rebalance_ms=20_000)
    t0 = h.join(member_id=ids[0], protocols=(("range", b"new"),), rebalance_ms=20_000)
    t1 = h.join(member_id=ids[1], rebalance_ms=20_000)
    assert h.answer(t0) is None
    h.advance(20_000)
    assert h.answer(t0).generation_id == gen + 1
    assert set(h.group().members) == {ids[0], ids[1]}
    assert h.answer(t1).error == ErrorCode.none


def test_everyone_leaves_group_becomes_empty_and_persisted():
    h = Harness()
    ids, gen = stable_group(h, 2)
    resp = h.leave(LeavingMember(ids[0]), LeavingMember(ids[1]))
    assert [e for _, e in resp.members] == [ErrorCode.none, ErrorCode.none]
    assert h.group().state == S.EMPTY
    assert h.records[-1].value.members == ()
    assert h.records[-1].value.generation == gen + 1


def test_initial_rebalance_delay_gathers_a_starting_fleet():
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=3_000))
    toks = []
    for _ in range(3):
        _, t = h.join_new()
        toks.append(t)
        h.advance(1_000)
    assert all(h.answer(t) is None for t in toks)
    h.advance(3_000)
    gens = {h.answer(t).generation_id for t in toks}
    assert gens == {1}
    assert len(h.group().members) == 3


def test_initial_delay_is_not_extended_for_a_lone_first_member():
    """The member that starts a new group's join phase waits one initial delay, not two;
    a member arriving during the delay extends it once."""
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=3_000))
    _, alone = h.join_new()
    h.advance(2_999)
    assert h.answer(alone) is None
    h.advance(1)
    assert h.answer(alone).generation_id == 1

    h2 = Harness(ClassicConfig(initial_rebalance_delay_ms=3_000))
    _, first = h2.join_new()
    h2.advance(1_000)
    _, second = h2.join_new()
    h2.advance(2_000)  # t=3000: the first delay ends, but a member arrived during it
    assert h2.answer(first) is None and h2.answer(second) is None
    h2.advance(3_000)  # t=6000: one more delay, with nobody new
    assert {h2.answer(first).generation_id, h2.answer(second).generation_id} == {1}


def test_zero_initial_delay_batches_members_that_join_at_the_same_instant():
    """group.initial.rebalance.delay.ms=0 still schedules the initial join (Kafka does): the
    JoinGroup that opens a new group's join phase is not answered inside itself, so members
    whose JoinGroups come before the 0 ms timer fires (in the broker: requests already read
    when the loop next turns) share generation 1 instead of forcing a generation 2."""
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=0))
    a, ta = h.join_new(protocols=(("range", b"ma"),))
    assert h.answer(ta) is None and h.timers[TimerKey(ClassicTimer.JOIN, "g")] == h.now
    b, tb = h.join_new(protocols=(("range", b"mb"),))
    assert h.answer(tb) is None
    # b arrived while the phase was open: the first firing extends it by 0 ms; the second,
    # with nobody new since, ends it.
    assert h.advance(0) == [TimerKey(ClassicTimer.JOIN, "g"), TimerKey(ClassicTimer.JOIN, "g")]
    ra, rb = h.answer(ta), h.answer(tb)
    assert ra.error == rb.error == ErrorCode.none
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == a
    assert {m.member_id: m.metadata for m in ra.members} == {a: b"ma", b: b"mb"}
    assert h.group().generation == 1


def test_zero_initial_delay_extensions_end_at_the_rebalance_timeout():
    """With a 0 ms delay every firing that finds a member who joined since the last one
    re-arms the timer for the same instant. Should each late loop turn find one more member,
    the rebalance timeout still ends the phase (Kafka's remaining time never shrinks with a
    0 ms delay; coterie keeps the bound it has for any delay)."""
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=0))
    _, first = h.join_new(rebalance_ms=1_000)
    tokens = [first]
    while h.answer(first) is None:
        assert h.now < 1_000 and h.timers[TimerKey(ClassicTimer.JOIN, "g")] == h.now
        h.now += 250  # the next loop turn comes late, and a member has joined meanwhile
        tokens.append(h.join_new(rebalance_ms=1_000)[1])
        del h.timers[TimerKey(ClassicTimer.JOIN, "g")]
        h.apply(h.coordinator.on_timer(TimerKey(ClassicTimer.JOIN, "g"), h.now))
    assert h.now == 1_000
    assert {h.answer(t).generation_id for t in tokens} == {1}
    assert len(h.group().members) == 5 and TimerKey(ClassicTimer.JOIN, "g") not in h.timers


def test_initial_delay_of_an_emptied_group_is_extended_too():
    """Kafka extends the initial delay for any join phase entered from Empty, not only a new
    group's: a fleet restarting into a group whose members had all gone is gathered too."""
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=3_000))
    a, ta = h.join_new()
    h.advance(3_000)
    h.sync(a, h.answer(ta).generation_id, {a: b""})
    h.leave(LeavingMember(a))
    assert h.group().state == S.EMPTY and h.group().generation == 2
    _, first = h.join_new()
    h.advance(1_000)
    _, second = h.join_new()
    h.advance(2_000)  # the first delay ends, but a member arrived during it
    assert h.answer(first) is None and h.answer(second) is None
    h.advance(3_000)
    assert {h.answer(first).generation_id, h.answer(second).generation_id} == {3}


def test_member_id_still_pending_when_a_zero_delay_phase_ends_joins_the_next_generation():
    """Ids handed out with MEMBER_ID_REQUIRED outlive the join phase (Kafka keeps its pending
    members): b's JoinGroup with its id, read only after the 0 ms timer closed generation 1,
    starts generation 2 instead of being refused with UNKNOWN_MEMBER_ID."""
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=0))
    a = h.answer(h.join()).member_id
    b = h.answer(h.join()).member_id
    ta = h.join(member_id=a)
    h.advance(0)
    ra = h.answer(ta)
    assert ra.generation_id == 1 and [m.member_id for m in ra.members] == [a]
    assert b in h.group().pending_members
    tb = h.join(member_id=b)
    assert h.answer(tb) is None and h.group().state == S.PREPARING_REBALANCE
    ta2 = h.join(member_id=a)
    assert h.answer(ta2).generation_id == h.answer(tb).generation_id == 2
    assert {m.member_id for m in h.answer(ta2).members} == {a, b}


# -- member ids, static membership, limits ----------------------------------------------

def test_member_id_required_and_pending_ids_expire():
    h = Harness()
    t = h.join(session_ms=10_000)
    r = h.answer(t)
    assert r.error == ErrorCode.member_id_required and r.member_id
    assert r.member_id in h.group().pending_members
    h.advance(10_000)
    assert r.member_id not in h.group().pending_members
    late = h.join(member_id=r.member_id)
    assert h.answer(late).error == ErrorCode.unknown_member_id


def test_retries_without_member_id_do_not_pile_up_beyond_max_size():
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=0, max_size=3))
    codes = [h.answer(h.join()).error for _ in range(5)]
    assert codes[:3] == [ErrorCode.member_id_required] * 3
    assert codes[3:] == [ErrorCode.group_max_size_reached] * 2


def test_old_join_version_gets_member_at_once():
    h = Harness()
    t = h.join(require_known=False)
    h.advance(0)
    assert h.answer(t).error == ErrorCode.none
    assert h.answer(t).member_id in h.group().members


def test_static_member_restart_keeps_assignment_without_rebalance():
    h = Harness()
    a, _ta = h.join_new(instance_id="i-a")
    h.advance(0)  # a alone in generation 1
    b, tb = h.join_new(instance_id="i-b")
    assert h.answer(tb) is None
    h.join(member_id=a, instance_id="i-a")
    gen = h.answer(tb).generation_id
    h.sync(b, gen, instance_id="i-b")
    h.sync(a, gen, {a: b"A", b: b"B"}, instance_id="i-a")
    assert h.group().state == S.STABLE
    # b restarts: it lost its member id but has the same group.instance.id.
    t = h.join(instance_id="i-b")
    r = h.answer(t)
    assert r.error == ErrorCode.none and r.generation_id == gen and r.member_id != b
    assert h.group().state == S.STABLE
    ts = h.sync(r.member_id, gen, instance_id="i-b")
    assert h.answer(ts).assignment == b"B"
    # The old incarnation is fenced.
    assert h.heartbeat(b, gen, instance_id="i-b") == ErrorCode.fenced_instance_id
    assert h.answer(h.join(member_id=b, instance_id="i-b")).error == (
        ErrorCode.fenced_instance_id)


@pytest.mark.parametrize("v9", [False, True])
def test_static_leader_restart_learns_it_leads_only_with_skip_assignment(v9: bool) -> None:
    """KIP-814: a static leader rejoining a stable group gets no rebalance either way; a v9+
    client is also told it leads, with every member's metadata and skip_assignment, so it
    keeps watching metadata. An older client gets the plain answer (no members)."""
    h = Harness()
    a, _ = h.join_new(instance_id="i-a", protocols=(("range", b"ma"),))
    h.advance(0)  # a alone in generation 1
    b, tb = h.join_new(instance_id="i-b", protocols=(("range", b"mb"),))
    h.join(member_id=a, instance_id="i-a", protocols=(("range", b"ma"),))
    gen = h.answer(tb).generation_id
    h.sync(b, gen, instance_id="i-b")
    h.sync(a, gen, {a: b"A", b: b"B"}, instance_id="i-a")
    assert h.group().leader == a and h.group().state == S.STABLE
    t = h.join(instance_id="i-a", protocols=(("range", b"ma"),), skip_assignment=v9)
    r = h.answer(t)
    assert r.error == ErrorCode.none and r.generation_id == gen
    assert r.leader == r.member_id != a
    assert h.group().state == S.STABLE and h.group().generation == gen
    assert r.skip_assignment is v9
    if v9:
        assert {(m.member_id, m.metadata) for m in r.members} == {
            (r.member_id, b"ma"), (b, b"mb")}
    else:
        assert r.members == ()
    ts = h.sync(r.member_id, gen, instance_id="i-a")
    assert h.answer(ts).assignment == b"A"


def test_leave_by_instance_id_with_wrong_member_is_fenced():
    h = Harness()
    _a, _ = h.join_new(instance_id="i-a")
    resp = h.leave(LeavingMember("someone-else", "i-a"), LeavingMember("", "i-zzz"))
    assert [e for _, e in resp.members] == [ErrorCode.fenced_instance_id,
                                            ErrorCode.unknown_member_id]
    resp = h.leave(LeavingMember("", "i-a"))
    assert [e for _, e in resp.members] == [ErrorCode.none]
    assert not h.group().members


def test_bad_requests():
    h = Harness(ClassicConfig(initial_rebalance_delay_ms=0, max_metadata_bytes=100))
    assert h.answer(h.join(group_id="")).error == ErrorCode.invalid_group_id
    assert h.answer(h.join(session_ms=10)).error == ErrorCode.invalid_session_timeout
    assert h.answer(h.join(session_ms=10**9)).error == ErrorCode.invalid_session_timeout
    assert h.answer(h.join(protocols=(("range", b"x" * 101),))).error == (
        ErrorCode.invalid_request)
    assert h.answer(h.join(member_id="ghost")).error == ErrorCode.unknown_member_id
    assert h.answer(h.sync("ghost", 1)).error == ErrorCode.unknown_member_id
    assert h.heartbeat("ghost", 1) == ErrorCode.unknown_member_id
    assert h.answer(h.join(protocols=())).error == ErrorCode.inconsistent_group_protocol


def test_illegal_generation():
    h = Harness()
    ids, gen = stable_group(h, 1)
    assert h.heartbeat(ids[0], gen + 5) == ErrorCode.illegal_generation
    assert h.answer(h.sync(ids[0], gen - 1)).error == ErrorCode.illegal_generation


# -- coordinator failover (state replayed from records) ----------------------------------

def failover(h: Harness) -> Harness:
    """A new coordinator that loads what the old one persisted."""
    return Harness(h.config, records=list(h.records), now_ms=h.now)


def test_failover_before_join_phase_completes_members_simply_rejoin():
    h = Harness()
    ids, gen = stable_group(h, 2)
    h.join(member_id=ids[0], protocols=(("range", b"changed"),))  # rebalance under way
    h2 = failover(h)
    assert h2.group().state == S.STABLE and h2.group().generation == gen
    t0 = h2.join(member_id=ids[0], protocols=(("range", b"changed"),))
    t1 = h2.join(member_id=ids[1])
    assert h2.answer(t0).generation_id == h2.answer(t1).generation_id == gen + 1


def test_failover_after_generation_persisted_before_all_join_answers():
    h = Harness()
    ids, gen = form_group(h, 2)
    h2 = failover(h)
    assert h2.group().state == S.COMPLETING_REBALANCE and h2.group().generation == gen
    leader = h2.group().leader
    follower = next(m for m in ids if m != leader)
    tl = h2.sync(leader, gen, {leader: b"L", follower: b"F"})
    assert h2.answer(tl).assignment == b"L"
    # The follower never saw its JoinGroup answer and sends it again, unchanged: it is told
    # the persisted generation and collects its state; nobody is forced to rejoin.
    tf = h2.join(member_id=follower)
    assert h2.answer(tf).generation_id == gen
    assert h2.answer(h2.sync(follower, gen)).assignment == b"F"
    # Had it rejoined with different metadata, the pending synchronization would be aborted.
    h3 = failover(h)
    parked = h3.sync(follower, gen)
    h3.join(member_id=leader, protocols=(("range", b"other"),))
    assert h3.answer(parked).error == ErrorCode.rebalance_in_progress


def test_failover_before_sync_persisted_members_sync_again():
    h = Harness()
    ids, gen = form_group(h, 2)
    leader = h.group().leader
    follower = next(m for m in ids if m != leader)
    h.sync(follower, gen)  # parked; the coordinator dies before the leader's sync lands
    h2 = failover(h)
    tf = h2.sync(follower, gen)
    tl = h2.sync(leader, gen, {leader: b"L", follower: b"F"})
    assert h2.answer(tf).assignment == b"F" and h2.answer(tl).assignment == b"L"


def test_failover_after_sync_persisted_members_get_state_without_resync():
    h = Harness()
    ids, gen = stable_group(h, 3)
    h2 = failover(h)
    assert h2.group().state == S.STABLE
    for mid in ids:
        assert h2.answer(h2.sync(mid, gen)).assignment == f"assign-{mid}".encode()
    assert h2.group().generation == gen


def test_members_that_never_return_after_failover_expire():
    h = Harness()
    ids, gen = stable_group(h, 2, session_ms=10_000)
    h2 = failover(h)
    h2.advance(5_000)
    h2.heartbeat(ids[0], gen)
    h2.advance(6_000)
    assert set(h2.group().members) == {ids[0]}
