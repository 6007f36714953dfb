"""The rebalance timeline (coterie.admin.timeline), driven by events of the real derivers.

Every event list here comes from coterie's own EventDeriver: either watching the classic and
consumer coordinators of the unit harnesses (tests/unit/group/test_events.py's scenarios) or
fed with classic snapshots that hypothesis draws (eager rebalances of a changing
membership), so the timeline is tested on the shapes the broker writes to __group_events.
"""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.admin.timeline import build_timeline, partition_owners, timeline_json
from coterie.group.classic.events import ClassicMemberView, ClassicSnapshot
from coterie.group.events import EventDeriver
from coterie.wire.consumer_protocol import Assignment, encode_assignment
from tests.unit.group.test_events import classic_scenario, consumer_scenario


def test_classic_eager_scenario_rebalances_causes_and_moves() -> None:
    h, events, a, b = classic_scenario("range")
    h.advance(20_000)  # A's session expires: fenced, the group empties
    t = build_timeline("g", events)
    assert [(r.from_generation, r.generation, r.state) for r in t.rebalances] == [
        (0, 1, "Stable"), (1, 2, "Stable"), (2, 3, "Stable"), (3, 4, "Empty")]
    first, second, third, fourth = t.rebalances
    assert [c.member for c in first.joined] == [a] and first.cause == "ca joined"
    assert [(m.member, m.gained, m.lost) for m in first.moved] == [(a, ("t-0", "t-1"), ())]
    assert [c.member for c in second.joined] == [b]
    # Eager: A gave both partitions back and got t-0 again; only t-1 moved.
    assert second.revoked == 2
    assert {m.member: (m.gained, m.lost) for m in second.moved} == {
        a: ((), ("t-1",)), b: (("t-1",), ())}
    assert [(c.member, c.kind, c.reason) for c in third.departed] == [
        (b, "left", "left the group")]
    assert third.cause == "cb left"
    assert [(c.member, c.kind, c.reason) for c in fourth.departed] == [
        (a, "fenced", "session timeout")]
    assert fourth.cause == "ca fenced (session timeout)"
    assert fourth.started_ms == 12_000 and fourth.duration_ms == 0
    assert t.state == "Empty" and t.generation == 4 and t.members == {a: "ca", b: "cb"}
    assert [(o.member, o.partitions, o.from_ms, o.to_ms) for o in t.ownership] == [
        (a, ("t-0", "t-1"), 0, 1_000), (a, ("t-0",), 1_000, 2_000),
        (b, ("t-1",), 1_000, 2_000), (a, ("t-0", "t-1"), 2_000, 12_000)]


def test_classic_cooperative_revokes_only_what_moves() -> None:
    _h, events, a, b = classic_scenario("cooperative-sticky")
    second = build_timeline("g", events).rebalances[1]
    assert second.revoked == 1
    assert {m.member: (m.gained, m.lost) for m in second.moved} == {
        a: ((), ("t-1",)), b: (("t-1",), ())}


def test_consumer_group_epochs_reconciliation_time_and_fence() -> None:
    h, events, a, b = consumer_scenario()
    h.advance(60_000)
    t = build_timeline("g", events)
    assert t.protocol == "consumer"
    assert [(r.from_generation, r.generation, r.started_ms, r.stable_ms)
            for r in t.rebalances] == [(0, 1, 0, 0), (1, 2, 100, 200), (2, 3, 300, 300),
                                        (3, 4, 45_300, 45_300)]
    joins = t.rebalances[1]
    # B's join: Reconciling until A gave up foo-2 and foo-3 at 200 ms.
    assert joins.duration_ms == 100
    assert {m.member: (m.gained, m.lost) for m in joins.moved} == {
        a: ((), ("foo-2", "foo-3")), b: (("foo-2", "foo-3"), ())}
    assert joins.member_ms == {a: 100, b: 100}
    assert t.rebalances[2].departed[0].member == b
    assert t.rebalances[3].departed[0].kind == "fenced"
    owners = partition_owners(t)
    assert [(o.member, o.from_ms, o.to_ms) for o in owners["foo-3"]] == [
        (a, 0, 200), (b, 200, 300), (a, 300, 45_300)]


def test_an_unfinished_rebalance_is_in_progress_and_json_is_plain() -> None:
    _h, events, _a, _b = classic_scenario("range")
    # Cut the stream inside the second rebalance: B joined, the group is preparing.
    cut = [e for e in events if e["ts"] < 1_000] + [
        e for e in events if e["ts"] == 1_000][:4]
    t = build_timeline("g", cut)
    last = t.rebalances[-1]
    assert last.in_progress and last.stable_ms is None and last.duration_ms is None
    assert last.state == "PreparingRebalance"
    doc = timeline_json(t)
    assert json.loads(json.dumps(doc)) == doc
    assert doc["rebalances"][-1]["in_progress"] is True
    # A still held nothing after the eager revocation: no open interval for it.
    assert [o.to_ms for o in t.ownership] == [1_000]


def test_other_groups_and_malformed_events_are_ignored() -> None:
    _h, events, _a, _b = classic_scenario("range")
    noise = [{"group": "other", "ts": 5, "type": "member_joined", "member": "x"},
             "not an event", {"group": "g", "type": "member_joined"},
             {"group": "g", "ts": "later", "type": "member_left"}]
    assert build_timeline("g", noise + events) == build_timeline("g", events)
    empty = build_timeline("nobody", events)
    assert empty.rebalances == () and empty.ownership == () and empty.first_ms is None


def test_streams_tasks_are_shown_as_names() -> None:
    events = [
        {"ts": 1, "group": "s", "protocol": "streams", "type": "member_joined",
         "generation": 1, "member": "m", "details": {"client_id": "app"}},
        {"ts": 1, "group": "s", "protocol": "streams", "type": "partitions_assigned",
         "generation": 1, "member": "m", "details": {"tasks": [["0", 1], "1_0"]}},
        {"ts": 1, "group": "s", "protocol": "streams", "type": "state_changed",
         "generation": 1, "member": None, "details": {"previous": "Empty",
                                                      "state": "Stable"}},
    ]
    t = build_timeline("s", events)
    assert t.rebalances[0].moved[0].gained == ("0-1", "1_0")


# -- eager classic groups drawn by hypothesis, through the real deriver -------------------------

PARTS = 5


def _snapshot(state: str, gen: int, members: list[str],
              owned: dict[str, tuple[int, ...]]) -> ClassicSnapshot:
    def given(m: str) -> bytes:
        if m not in owned:
            return b""
        return encode_assignment(Assignment(frozenset(("t", p) for p in owned[m])))

    views = {m: ClassicMemberView(f"c-{m}", None, given(m)) for m in members}
    return ClassicSnapshot(state, gen, "consumer", "range", members[0] if members else None,
                           views)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 50), st.integers(0, 50)),
                min_size=1, max_size=12))
def test_eager_intervals_of_a_partition_never_overlap(changes) -> None:
    deriver, events = EventDeriver(), []
    members: list[str] = []
    gen, now, made = 0, 0, 0
    durations = []
    for join, gap, took in changes:
        if join or not members:
            made += 1
            members = [*members, f"m{made}"]
        else:
            members = members[1:]
        now += gap
        started = now
        events += deriver.observe("g", _snapshot("PreparingRebalance", gen, members, {}), now)
        gen += 1
        if not members:
            events += deriver.observe("g", _snapshot("Empty", gen, [], {}), now)
            durations.append(0)
            continue
        now += took
        events += deriver.observe("g", _snapshot("CompletingRebalance", gen, members, {}),
                                  now)
        owned = {m: tuple(p for p in range(PARTS) if p % len(members) == i)
                 for i, m in enumerate(members)}
        events += deriver.observe("g", _snapshot("Stable", gen, members, owned), now)
        durations.append(now - started)
    t = build_timeline("g", events)
    assert [r.duration_ms for r in t.rebalances] == durations
    assert t.rebalances[-1].generation == gen
    for p, spans in partition_owners(t).items():
        for earlier, later in itertools.pairwise(spans):
            assert earlier.to_ms is not None and earlier.to_ms <= later.from_ms, (p, spans)
    still = {p for o in t.ownership if o.to_ms is None for p in o.partitions}
    assert still == ({f"t-{p}" for p in range(PARTS)} if members else set())
