"""Client-side assignors through the coordinator (coterie's KIP-848 extension APIs), on the
pure core with virtual time: a member asks for "client:<name>" as its ServerAssignor; when the
group epoch moves, one member is chosen, learns it through PrepareAssignment and installs the
target; the coordinator validates it, and falls back to the server-side assignor on a timeout,
an error install or an invalid one. Members keep reconciling towards the old target meanwhile,
revoke-before-assign holds throughout, and replaying the records gives the live state."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest
from kio.schema.errors import ErrorCode

from coterie.group.consumer.client_assignment import (
    InstallAssignmentRequest,
    InstalledMember,
    PrepareAssignmentRequest,
)
from coterie.group.consumer.group import ConsumerGroupState as G
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.messages import TopicPartitions
from coterie.group.records.consumer import (
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from coterie.group.timers import TimerKey

from .consumer_harness import ConsumerHarness, mid

A, B, C = mid("A"), mid("B"), mid("C")
CLIENT = "client:odd"
TIMEOUT_MS = 10_000


def round_key(group_epoch: int) -> TimerKey:
    """The timer of group "g"'s client-side assignment round for `group_epoch`."""
    return TimerKey(ConsumerTimer.CONSUMER_CLIENT_ASSIGNMENT, "g", epoch=group_epoch)


class Members:
    """The client side of a few members: each remembers its epoch and what the coordinator
    last told it to own, and reports that in every heartbeat (as a real consumer does once
    its callbacks ran)."""

    def __init__(self, h: ConsumerHarness) -> None:
        self.h = h
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, set[str]] = {}

    def join(self, member_id: str, topics: Iterable[str] = ("foo",),
             assignor: str | None = CLIENT) -> None:
        r = self.h.join(member_id, topics=topics, assignor=assignor)
        assert r.error == ErrorCode.none, r.error_message
        self.epochs[member_id] = r.member_epoch
        self.owned[member_id] = self.h.assigned(r) or set()
        self.check_disjoint()

    def beat(self, member_id: str) -> None:
        r = self.h.heartbeat(member_id, self.epochs[member_id],
                             owned=sorted(self.owned[member_id]))
        assert r.error == ErrorCode.none, r.error_message
        self.epochs[member_id] = r.member_epoch
        if r.assignment is not None:
            self.owned[member_id] = self.h.assigned(r)
        self.check_disjoint()

    def leave(self, member_id: str) -> None:
        self.h.leave(member_id)
        del self.epochs[member_id], self.owned[member_id]

    def check_disjoint(self) -> None:
        """Revoke before assign: no partition is ever owned by two members at once."""
        seen: dict[str, str] = {}
        for member_id, parts in self.owned.items():
            for p in parts:
                assert p not in seen, f"{p} owned by {seen[p]} and {member_id}"
                seen[p] = member_id

    def converge(self, max_rounds: int = 10) -> None:
        """Heartbeat everyone until the group is stable and every member owns its target."""
        g = self.h.group()
        for _ in range(max_rounds):
            for member_id in sorted(self.epochs):
                self.beat(member_id)
            if g.state() is G.STABLE and all(
                    self.owned[m] == self.h.names(g.target_of(m)) for m in self.epochs):
                return
        raise AssertionError(f"group did not converge: {g.state()}, {self.owned}")


def prepare(h: ConsumerHarness, member_id: str, epoch: int | None = None) -> object:
    if epoch is None:
        epoch = h.group().members[member_id].member_epoch
    return h.apply(h.coordinator.prepare_assignment(
        PrepareAssignmentRequest("g", member_id, epoch), h.now))


def install(h: ConsumerHarness, member_id: str, assignment: dict[str, Iterable[str]],
            group_epoch: int | None = None, epoch: int | None = None,
            error: int = 0) -> object:
    g = h.group()
    if epoch is None:
        epoch = g.members[member_id].member_epoch
    members = tuple(InstalledMember(m, h.wire(parts)) for m, parts in assignment.items())
    return h.apply(h.coordinator.install_assignment(InstallAssignmentRequest(
        "g", member_id, epoch, g.group_epoch if group_epoch is None else group_epoch,
        error, members), h.now))


def foo(*partitions: int) -> list[str]:
    return [f"foo-{p}" for p in partitions]


def two_members(topics: dict[str, int] | None = None) -> tuple[ConsumerHarness, Members]:
    """A joined alone (the bootstrap target gives it everything), then B joined: a round
    for group epoch 2 is open and A (first by member id) is chosen."""
    h = ConsumerHarness(topics or {"foo": 6})
    ms = Members(h)
    ms.join(A)
    assert ms.owned[A] == set(h.names(h.tp("foo", p) for p in range(h.partition_counts["foo"])))
    assert h.group().assignment_epoch == 1
    ms.join(B)
    return h, ms


def assert_replay_equals_live(h: ConsumerHarness) -> None:
    assert h.replayed().groups["g"].snapshot() == h.group().snapshot()


# -- asking for a client-side assignor ---------------------------------------------------------

def test_a_client_assignor_name_is_accepted_and_an_unknown_server_assignor_is_not():
    h = ConsumerHarness({"foo": 2})
    assert h.join(A, assignor=CLIENT).error == ErrorCode.none
    assert h.group().members[A].server_assignor == CLIENT
    for bad in ("sticky", "client:"):
        r = h.join(B, assignor=bad)
        assert r.error == ErrorCode.unsupported_assignor
        assert f"ServerAssignor {bad} is not supported" in (r.error_message or "")


def test_the_first_target_comes_from_the_fallback_so_no_member_is_left_at_epoch_0():
    h = ConsumerHarness({"foo": 3})
    r = h.join(A, assignor=CLIENT)
    assert r.member_epoch == 1 and h.assigned(r) == set(foo(0, 1, 2))
    assert len(h.coordinator.client_rounds) == 0
    assert prepare(h, A).error == ErrorCode.unknown_member_id  # nothing pending


def test_a_new_epoch_opens_a_round_and_members_keep_the_old_target_meanwhile():
    h, ms = two_members()
    g = h.group()
    assert g.group_epoch == 2 and g.assignment_epoch == 1 and g.state() is G.ASSIGNING
    pending = h.coordinator.client_rounds.get("g")
    assert pending is not None and pending.member_id == A and pending.group_epoch == 2
    assert h.timers[round_key(2)] == h.now + TIMEOUT_MS
    # B was reconciled to the old target epoch with nothing; A keeps everything.
    assert ms.epochs[B] == 1 and ms.owned[B] == set()
    for _ in range(3):
        ms.beat(A)
        ms.beat(B)
    assert ms.owned[A] == set(foo(0, 1, 2, 3, 4, 5)) and ms.owned[B] == set()
    assert g.state() is G.ASSIGNING and h.coordinator.client_rounds.get("g") == pending


def test_the_chosen_member_gets_the_prepare_and_nobody_else_does():
    h, _ = two_members({"foo": 6, "bar": 2})
    r = prepare(h, B)
    assert r.error == ErrorCode.unknown_member_id
    assert "not the member chosen" in r.error_message
    r = prepare(h, A)
    assert r.error == ErrorCode.none
    assert r.group_epoch == 2 and r.assignor_name == "odd"
    foo_id = h.topic_ids["foo"]
    assert [(t.topic_id, t.name, t.partitions) for t in r.topics] == [(foo_id, "foo", 6)]
    by_id = {m.member_id: m for m in r.members}
    assert set(by_id) == {A, B}
    assert by_id[A].subscribed_topic_ids == (foo_id,) and by_id[A].member_epoch == 1
    assert by_id[A].target == (TopicPartitions(foo_id, (0, 1, 2, 3, 4, 5)),)
    assert by_id[B].target == ()
    # Wrong epoch, unknown member, unknown group: the KIP's checks, in its order.
    assert prepare(h, A, epoch=7).error == ErrorCode.stale_member_epoch
    assert prepare(h, C, epoch=1).error == ErrorCode.unknown_member_id
    res = h.coordinator.prepare_assignment(PrepareAssignmentRequest("nope", A, 1), h.now)
    assert res.response.error == ErrorCode.group_id_not_found


# -- a valid install ---------------------------------------------------------------------------

def test_a_valid_install_becomes_the_target_and_members_reconcile_to_it():
    h, ms = two_members()
    odd = {A: foo(0), B: foo(1, 2, 3, 4, 5)}  # not what uniform or range would do
    r = install(h, A, odd)
    assert r.error == ErrorCode.none and r.error_message is None
    g = h.group()
    assert g.assignment_epoch == 2
    assert {m: h.names(g.target_of(m)) for m in (A, B)} == {m: set(p) for m, p in odd.items()}
    assert round_key(2) not in h.timers
    assert h.coordinator.client_rounds.get("g") is None
    # B cannot get foo-1..5 before A gave them back.
    ms.beat(B)
    assert ms.owned[B] == set()
    ms.converge()
    assert ms.owned == {m: set(p) for m, p in odd.items()}
    assert_replay_equals_live(h)


def test_a_valid_install_writes_the_records_the_server_side_path_writes():
    h, _ = two_members()
    before = len(h.records)
    install(h, A, {A: foo(0, 1, 2), B: foo(3, 4, 5)})
    written = h.records[before:]
    # One target record per member whose target changed, then the target epoch.
    assert [type(r.key) for r in written] == [ConsumerGroupTargetAssignmentMemberKey] * 2 + [
        ConsumerGroupTargetAssignmentMetadataKey]
    assert written[-1].value.assignment_epoch == 2


def test_members_left_out_of_an_install_get_nothing():
    h, ms = two_members({"foo": 2})
    assert install(h, A, {B: foo(0, 1)}).error == ErrorCode.none
    ms.converge()
    assert ms.owned == {A: set(), B: set(foo(0, 1))}


# -- invalid installs: refused with a reason, the fallback computes the target -----------------

def _uniform_view(h: ConsumerHarness) -> dict[str, int]:
    """How many partitions each member's target holds (uniform spreads them evenly)."""
    g = h.group()
    return {m: len(g.target_of(m)) for m in g.members}


BAR = ["bar-0", "bar-1"]
INVALID = {
    "partition twice": ({A: [*foo(0, 1, 2, 3), *BAR], B: foo(3, 4, 5)},
                        "partition foo-3 is assigned twice: to member"),
    "partition missing": ({A: [*foo(0, 1, 2), *BAR], B: foo(3, 4)},
                          "1 partition(s) are not assigned: foo-5"),
    "unknown member": ({A: [*foo(0, 1, 2), *BAR], B: foo(3, 4), C: foo(5)},
                       f"member {C!r} is not a member of the group"),
    "partition out of range": ({A: [*foo(0, 1, 2), *BAR], B: foo(3, 4, 5, 6)},
                               "partition foo-6 (given to member"),
    "to a non-subscriber": ({A: [*foo(0, 1, 2), *BAR], B: [*foo(3, 4, 5), "bar-0"]},
                            "which it does not subscribe to"),
}


def _fell_back(h: ConsumerHarness, ms: Members, r: object, reason: str) -> None:
    """The install was refused naming `reason`, the fallback computed a complete target for
    the pending epoch at once, and the group converges on it."""
    assert r.error == ErrorCode.invalid_request
    assert reason in r.error_message
    assert "falls back to the server-side assignor uniform" in r.error_message
    g = h.group()
    assert g.assignment_epoch == 2 and h.coordinator.client_rounds.get("g") is None
    assert round_key(2) not in h.timers
    given = [tp for m in g.members for tp in g.target_of(m)]
    assert len(given) == len(set(given)) == sum(h.partition_counts.values())
    assert h.names(g.target_of(B)) <= set(foo(0, 1, 2, 3, 4, 5))  # B reads foo only
    ms.converge()
    assert_replay_equals_live(h)


@pytest.mark.parametrize("case", sorted(INVALID))
def test_an_invalid_install_is_refused_with_a_reason_and_the_group_falls_back(case):
    h = ConsumerHarness({"foo": 6, "bar": 2})
    ms = Members(h)
    ms.join(A, topics=("foo", "bar"))
    ms.join(B)
    assignment, reason = INVALID[case]
    _fell_back(h, ms, install(h, A, assignment), reason)


def test_a_partition_twice_in_one_members_entry_is_refused():
    h = ConsumerHarness({"foo": 6, "bar": 2})
    ms = Members(h)
    ms.join(A, topics=("foo", "bar"))
    ms.join(B)
    foo_id, bar_id = h.topic_ids["foo"], h.topic_ids["bar"]
    r = h.apply(h.coordinator.install_assignment(InstallAssignmentRequest(
        "g", A, ms.epochs[A], 2, 0, (
            InstalledMember(A, (TopicPartitions(foo_id, (0, 1, 2)),
                                TopicPartitions(bar_id, (0, 1)))),
            InstalledMember(B, (TopicPartitions(foo_id, (3, 3, 4, 5)),)))), h.now))
    _fell_back(h, ms, r, f"partition foo-3 is assigned twice to member {B!r}")


def test_a_member_listed_twice_is_refused():
    h = ConsumerHarness({"foo": 6, "bar": 2})
    ms = Members(h)
    ms.join(A, topics=("foo", "bar"))
    ms.join(B)
    foo_id, bar_id = h.topic_ids["foo"], h.topic_ids["bar"]
    r = h.apply(h.coordinator.install_assignment(InstallAssignmentRequest(
        "g", A, ms.epochs[A], 2, 0, (
            InstalledMember(A, (TopicPartitions(foo_id, (0, 1, 2)),
                                TopicPartitions(bar_id, (0, 1)))),
            InstalledMember(B, (TopicPartitions(foo_id, (3,)),)),
            InstalledMember(B, (TopicPartitions(foo_id, (4, 5)),)))), h.now))
    _fell_back(h, ms, r, f"member {B!r} is listed twice")


def test_an_install_from_the_wrong_member_or_for_a_stale_epoch_is_refused_and_the_round_goes_on():
    h, ms = two_members()
    pending = h.coordinator.client_rounds.get("g")
    good = {A: foo(0, 1), B: foo(2, 3, 4, 5)}
    r = install(h, B, good)
    assert r.error == ErrorCode.unknown_member_id and "not the member chosen" in r.error_message
    r = install(h, A, good, group_epoch=1)
    assert r.error == ErrorCode.stale_member_epoch and "group epoch 1" in r.error_message
    r = install(h, A, good, epoch=0)
    assert r.error == ErrorCode.stale_member_epoch
    assert h.coordinator.client_rounds.get("g") == pending and h.group().assignment_epoch == 1
    # The chosen member still installs, and the group converges on its assignment.
    assert install(h, A, good).error == ErrorCode.none
    ms.converge()
    assert ms.owned == {m: set(p) for m, p in good.items()}


def test_a_stale_install_after_a_newer_epoch_is_refused_and_the_new_round_times_out():
    h, ms = two_members()
    ms.join(C)  # group epoch 3: the round for epoch 2 is replaced
    g = h.group()
    pending = h.coordinator.client_rounds.get("g")
    assert pending.group_epoch == 3 and pending.member_id == A
    assert round_key(2) not in h.timers and round_key(3) in h.timers
    r = install(h, A, {A: foo(0, 1, 2), B: foo(3, 4, 5)}, group_epoch=2)
    assert r.error == ErrorCode.stale_member_epoch
    assert g.assignment_epoch == 1
    fired = h.advance(TIMEOUT_MS)
    assert round_key(3) in fired
    assert g.assignment_epoch == 3 and _uniform_view(h) == {A: 2, B: 2, C: 2}
    ms.converge()
    assert_replay_equals_live(h)


# -- timeouts and error installs ---------------------------------------------------------------

def test_no_install_within_the_timeout_falls_back_to_the_server_assignor():
    h, ms = two_members()
    assert h.advance(TIMEOUT_MS - 1) == []
    assert h.group().assignment_epoch == 1
    fired = h.advance(1)
    assert fired == [round_key(2)]
    g = h.group()
    assert g.assignment_epoch == 2 and _uniform_view(h) == {A: 3, B: 3}
    assert prepare(h, A).error == ErrorCode.unknown_member_id  # too late now
    r = install(h, A, {A: foo(0), B: foo(1, 2, 3, 4, 5)})
    assert r.error == ErrorCode.unknown_member_id and "No client-side assignment" in \
        r.error_message
    ms.converge()
    assert_replay_equals_live(h)


def test_an_expired_round_falls_back_in_a_heartbeat_even_without_its_timer():
    h, ms = two_members()
    h.timers.pop(round_key(2))  # e.g. lost with a storage error
    h.now += TIMEOUT_MS
    ms.beat(B)
    assert h.group().assignment_epoch == 2 and _uniform_view(h) == {A: 3, B: 3}
    ms.converge()


def test_an_error_install_falls_back_at_once():
    h, ms = two_members()
    r = install(h, A, {}, error=1)
    assert r.error == ErrorCode.none
    assert h.group().assignment_epoch == 2 and _uniform_view(h) == {A: 3, B: 3}
    assert round_key(2) not in h.timers
    ms.converge()
    assert_replay_equals_live(h)


# -- who is chosen -----------------------------------------------------------------------------

def test_when_the_chosen_member_leaves_the_next_round_chooses_another():
    h, ms = two_members()
    ms.join(C)
    assert h.coordinator.client_rounds.get("g").member_id == A
    ms.leave(A)
    ms.beat(B)  # the heartbeat that sees epoch 4 opens its round
    pending = h.coordinator.client_rounds.get("g")
    assert pending.group_epoch == 4 and pending.member_id == B
    assert prepare(h, B).error == ErrorCode.none
    assert install(h, B, {B: foo(0, 1, 2, 3, 4, 5)}).error == ErrorCode.none
    ms.converge()
    assert ms.owned == {B: set(foo(0, 1, 2, 3, 4, 5)), C: set()}


def test_members_using_a_server_assignor_are_never_chosen():
    h = ConsumerHarness({"foo": 4})
    ms = Members(h)
    ms.join(A, assignor=None)  # e.g. librdkafka: no assignor named
    ms.join(B)
    ms.join(C)
    g = h.group()
    assert g.preferred_assignor(h.config.assignors) == CLIENT
    assert h.coordinator.client_rounds.get("g").member_id == B
    assert install(h, B, {A: foo(0), B: foo(1), C: foo(2, 3)}).error == ErrorCode.none
    ms.converge()
    assert ms.owned == {A: {"foo-0"}, B: {"foo-1"}, C: {"foo-2", "foo-3"}}


def test_a_restarted_coordinator_opens_a_new_round_at_the_next_heartbeat():
    h, ms = two_members()
    fresh = ConsumerHarness(records=list(h.records))
    fresh.topic_ids = dict(h.topic_ids)  # the same topics as before the restart
    fresh.set_topics({"foo": 6})
    assert fresh.group().group_epoch == 2
    assert len(fresh.coordinator.client_rounds) == 0
    r = fresh.heartbeat(B, ms.epochs[B], owned=[])
    assert r.error == ErrorCode.none
    pending = fresh.coordinator.client_rounds.get("g")
    assert pending is not None and pending.group_epoch == fresh.group().group_epoch


def test_topic_ids_the_group_does_not_know_are_refused():
    h, _ = two_members()
    ghost = uuid.uuid4()
    r = h.apply(h.coordinator.install_assignment(InstallAssignmentRequest(
        "g", A, 1, 2, 0, (InstalledMember(A, (TopicPartitions(ghost, (0,)),)),)), h.now))
    assert r.error == ErrorCode.invalid_request and f"topic id {ghost}" in r.error_message
