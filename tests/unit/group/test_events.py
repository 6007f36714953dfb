"""Group events derived from the classic and consumer cores, driven in virtual time.

Each test watches a harness: after every result the harness takes in (a request's or a
timer's), the group's snapshot goes through one EventDeriver, as the broker does after each
operation, and the events are collected in order.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.classic.events import decode_partitions, is_eager
from coterie.group.classic.messages import LeavingMember
from coterie.group.events import EventDeriver
from coterie.group.result import Result
from coterie.group.timers import TimerKey
from coterie.wire.consumer_protocol import Assignment, encode_assignment

from .classic_harness import Harness
from .consumer_harness import ConsumerHarness, mid


def snapshot(group: Any) -> Any:
    """The group's events snapshot (the `Group` protocol's)."""
    return group.event_snapshot()


def watch(h: Any, snap: Any, name_of: Any = None) -> list[dict]:
    """Collect the events of group "g" after every result `h` applies."""
    deriver, out, cause = EventDeriver(), [], [None]
    apply, on_timer = h.apply, h.coordinator.on_timer

    def observed_apply(result: Any) -> Any:
        response = apply(result)
        group = h.coordinator.groups.get("g")
        out.extend(deriver.observe("g", None if group is None else snap(group), h.now,
                                   cause[0], name_of))
        cause[0] = None
        return response

    def timer(key: TimerKey, now_ms: int) -> Any:
        cause[0] = key.kind
        return on_timer(key, now_ms)

    h.apply, h.coordinator.on_timer = observed_apply, timer
    return out


def asg(*partitions: int) -> bytes:
    return encode_assignment(Assignment(frozenset(("t", p) for p in partitions)))


def kinds(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def classic_scenario(protocol: str = "range") -> tuple[Harness, list[dict], str, str]:
    """A joins and gets t-0, t-1; B joins (gen 2: A t-0, B t-1); B leaves (gen 3: A both)."""
    h = Harness()
    events = watch(h, snapshot)
    protocols = ((protocol, b"m"),)
    a, _ = h.join_new(client_id="ca", protocols=protocols)
    h.advance(0)  # the new group's (0 ms) initial-delay timer closes generation 1
    h.sync(a, 1, {a: asg(0, 1)})
    h.advance(1_000)
    b, _ = h.join_new(client_id="cb", protocols=protocols)
    h.join(member_id=a, client_id="ca", protocols=protocols)
    h.sync(a, 2, {a: asg(0), b: asg(1)})
    h.sync(b, 2)
    h.advance(1_000)
    h.leave(LeavingMember(b, None))
    h.join(member_id=a, client_id="ca", protocols=protocols)
    h.sync(a, 3, {a: asg(0, 1)})
    return h, events, a, b


def test_classic_join_rebalance_and_leave_in_order():
    _h, events, a, b = classic_scenario()
    assert all(e["group"] == "g" and e["protocol"] == "classic" for e in events)
    first = [e for e in events if e["ts"] == 0]
    # The JoinGroup opens the join phase (A leads from the start); the 0 ms initial-delay
    # timer closes it; the SyncGroup makes the group Stable.
    assert kinds(first) == [
        "member_joined", "rebalance_started", "leader_elected", "state_changed",
        "generation_bumped", "protocol_selected", "state_changed",
        "assignment_computed", "partitions_assigned", "state_changed"]
    assert first[0]["member"] == a and first[0]["details"]["client_id"] == "ca"
    assert [e["details"]["state"] for e in of(first, "state_changed")] == [
        "PreparingRebalance", "CompletingRebalance", "Stable"]
    assert of(first, "partitions_assigned")[0]["details"]["partitions"] == ["t-0", "t-1"]
    second = [e for e in events if e["ts"] == 1_000]
    assert kinds(second) == [
        "member_joined", "rebalance_started", "partitions_revoked", "state_changed",
        "generation_bumped", "state_changed", "assignment_computed", "partitions_assigned",
        "partitions_assigned", "state_changed"]
    assert second[0]["member"] == b
    # range is eager: A gives everything back when the rebalance starts.
    revoked = of(second, "partitions_revoked")[0]
    assert revoked["member"] == a and revoked["details"]["reason"] == "eager rebalance"
    assert of(second, "generation_bumped")[0]["generation"] == 2
    assert of(second, "assignment_computed")[0]["details"]["partitions"] == {a: 1, b: 1}
    third = [e for e in events if e["ts"] == 2_000]
    assert kinds(third)[:4] == ["member_left", "partitions_revoked", "rebalance_started",
                                "partitions_revoked"]
    assert third[0]["member"] == b and third[0]["details"]["reason"] == "left the group"
    assert of(third, "partitions_assigned")[0]["details"]["partitions"] == ["t-0", "t-1"]
    assert of(events, "generation_bumped")[-1]["generation"] == 3
    assert of(events, "state_changed")[-1]["details"]["state"] == "Stable"


def test_classic_cooperative_keeps_what_stays():
    _h, events, a, b = classic_scenario("cooperative-sticky")
    second = [e for e in events if e["ts"] == 1_000]
    # A keeps t-0; only t-1 is revoked, when the assignment that moves it arrives.
    revoked = of(second, "partitions_revoked")
    assert [(e["member"], e["details"]["partitions"]) for e in revoked] == [(a, ["t-1"])]
    assert revoked[0]["details"]["reason"] == "reassigned"
    assigned = of(second, "partitions_assigned")
    assert [(e["member"], e["details"]["partitions"]) for e in assigned] == [(b, ["t-1"])]


def test_classic_session_timeout_fences_and_empties():
    h, events, a, _ = classic_scenario()
    before = len(events)
    h.advance(20_000)
    late = events[before:]
    assert kinds(late) == ["member_fenced", "partitions_revoked", "rebalance_started",
                           "generation_bumped", "state_changed"]
    assert late[0]["member"] == a and late[0]["details"]["reason"] == "session timeout"
    assert late[-1]["details"] == {"previous": "Stable", "state": "Empty"}
    assert len({e["ts"] for e in late}) == 1 and late[0]["ts"] == 12_000


def test_classic_group_deleted():
    h = Harness()
    events = watch(h, snapshot)
    a, _ = h.join_new()
    h.advance(0)
    h.sync(a, 1, {a: asg(0)})
    h.leave(LeavingMember(a, None))
    code, records = h.delete_group("g")
    assert code == ErrorCode.none
    h.apply(Result(records=records))
    assert kinds(events)[-2:] == ["state_changed", "group_deleted"]
    assert events[-2]["details"] == {"previous": "Empty", "state": "Dead"}


def test_no_change_no_events():
    h = Harness()
    events = watch(h, snapshot)
    a, _ = h.join_new()
    h.advance(0)
    h.sync(a, 1, {a: asg(0)})
    count = len(events)
    for _ in range(3):
        h.advance(1_000)
        h.heartbeat(a, 1)
    assert len(events) == count


def test_prime_makes_loaded_groups_quiet():
    h = Harness()
    a, _ = h.join_new()
    h.advance(0)
    h.sync(a, 1, {a: asg(0)})
    deriver = EventDeriver()
    deriver.prime("g", h.group().event_snapshot())
    assert deriver.observe("g", h.group().event_snapshot(), 5) == []
    h.leave(LeavingMember(a, None))
    events = deriver.observe("g", h.group().event_snapshot(), 6)
    assert kinds(events)[:2] == ["member_left", "partitions_revoked"]
    assert events[1]["details"]["partitions"] == ["t-0"]


def test_helpers():
    assert is_eager("range") and is_eager("roundrobin") and not is_eager("cooperative-sticky")
    assert not is_eager(None)
    assert decode_partitions("consumer", asg(2, 0)) == {"t-0", "t-2"}
    assert decode_partitions("connect", asg(2)) == frozenset()
    assert decode_partitions("consumer", b"\x00garbage") == frozenset()


def consumer_scenario() -> tuple[ConsumerHarness, list[dict], str, str]:
    h = ConsumerHarness({"foo": 4})
    events = watch(h, snapshot, h.coordinator.image.name_of)
    a, b = mid("A"), mid("B")
    h.join(a)
    h.advance(100)
    h.join(b)
    h.advance(100)
    r = h.heartbeat(a, 1)
    h.heartbeat(a, 1, owned=sorted(h.assigned(r) or ()))
    h.heartbeat(b, 2)
    h.advance(100)
    h.leave(b)
    h.heartbeat(a, 2)
    return h, events, a, b


def test_consumer_epochs_assignments_and_reconciliation():
    _h, events, a, b = consumer_scenario()
    assert all(e["protocol"] == "consumer" for e in events)
    first = [e for e in events if e["ts"] == 0]
    assert kinds(first) == ["member_joined", "rebalance_started", "epoch_bumped",
                            "assignment_computed", "partitions_assigned", "state_changed"]
    assert of(first, "assignment_computed")[0]["details"] == {"epoch": 1, "partitions": {a: 4}}
    second = [e for e in events if e["ts"] == 100]
    assert kinds(second) == ["member_joined", "rebalance_started", "epoch_bumped",
                             "assignment_computed", "state_changed"]
    assert of(second, "state_changed")[0]["details"]["state"] == "Reconciling"
    third = [e for e in events if e["ts"] == 200]
    assert [(e["type"], e["member"]) for e in third] == [
        ("partitions_revoked", a), ("member_epoch_changed", a), ("partitions_assigned", b),
        ("state_changed", None)]
    assert third[0]["details"]["partitions"] == third[2]["details"]["partitions"]
    assert third[1]["details"]["epoch"] == 2
    assert third[-1]["details"] == {"previous": "Reconciling", "state": "Stable"}
    fourth = [e for e in events if e["ts"] == 300]
    assert kinds(fourth)[:4] == ["member_left", "partitions_revoked", "rebalance_started",
                                 "epoch_bumped"]
    assert of(fourth, "epoch_bumped")[0]["generation"] == 3
    assert of(fourth, "partitions_assigned")[0]["member"] == a


def test_consumer_session_timeout_is_a_fence():
    h, events, a, _ = consumer_scenario()
    before = len(events)
    h.advance(60_000)
    late = events[before:]
    assert late[0]["type"] == "member_fenced" and late[0]["member"] == a
    assert late[0]["details"]["reason"] == "session timeout"
    assert late[1]["details"]["count"] == 4
    assert late[-1]["details"]["state"] == "Empty"
