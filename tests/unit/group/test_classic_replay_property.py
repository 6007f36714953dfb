"""Property: state rebuilt by replaying the emitted records equals the live state.

Random interleavings of joins (new, static, rejoins with changed metadata), syncs, heartbeats,
leaves and the passing of time are driven through the coordinator. Whenever the live group is
at rest in a persisted state (Empty, CompletingRebalance, Stable), a coordinator that replays
every record written so far must hold the same group. No operation may raise.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.group.classic.membership import ClassicState as S
from coterie.group.classic.messages import LeavingMember

from .classic_harness import Harness

ops = st.lists(st.one_of(
    st.tuples(st.just("join_new"), st.sampled_from(["a", "b"]), st.none()),
    st.tuples(st.just("join_static"), st.sampled_from(["i1", "i2"]), st.none()),
    st.tuples(st.just("rejoin"), st.integers(0, 5), st.sampled_from([b"m", b"m2"])),
    st.tuples(st.just("sync"), st.integers(0, 5), st.none()),
    st.tuples(st.just("heartbeat"), st.integers(0, 5), st.none()),
    st.tuples(st.just("leave"), st.integers(0, 5), st.none()),
    st.tuples(st.just("advance"), st.sampled_from([500, 3_000, 7_000, 20_000]), st.none()),
), max_size=40)


def _pick(h: Harness, i: int) -> str | None:
    group = h.coordinator.groups.get("g")
    if not group or not group.members:
        return None
    ids = list(group.members)
    return ids[i % len(ids)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_replay_equals_live(sequence):
    h = Harness()
    for op, arg, extra in sequence:
        if op == "join_new":
            h.join_new(session_ms=10_000, rebalance_ms=15_000, client_id=arg)
        elif op == "join_static":
            h.join(instance_id=arg, session_ms=10_000, rebalance_ms=15_000)
        elif op == "rejoin" and (mid := _pick(h, arg)) is not None:
            member = h.group().members[mid]
            h.join(member_id=mid, protocols=(("range", extra),), session_ms=10_000,
                   rebalance_ms=15_000, instance_id=member.group_instance_id)
        elif op == "sync" and (mid := _pick(h, arg)) is not None:
            group = h.group()
            assignments = {m: f"to-{m}".encode() for m in group.members}
            h.sync(mid, group.generation, assignments,
                   instance_id=group.members[mid].group_instance_id)
        elif op == "heartbeat" and (mid := _pick(h, arg)) is not None:
            h.heartbeat(mid, h.group().generation,
                        instance_id=h.group().members[mid].group_instance_id)
        elif op == "leave" and (mid := _pick(h, arg)) is not None:
            h.leave(LeavingMember(mid))
        elif op == "advance":
            h.advance(arg)
        live = h.coordinator.groups.get("g")
        if live is None or live.state not in (S.EMPTY, S.COMPLETING_REBALANCE, S.STABLE):
            continue
        if not h.records:
            assert live.state == S.EMPTY and not live.members
            continue
        replayed = h.replayed().groups["g"]
        assert replayed.to_record() == live.to_record()
        assert replayed.state == live.state
        assert replayed.leader == (live.leader if live.members else None)
