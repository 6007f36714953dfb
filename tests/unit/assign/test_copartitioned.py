"""Co-partitioned: same partition numbers together, balance in partition numbers, stickiness."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coterie.assign.copartitioned import CopartitionedAssignor
from coterie.assign.spec import AssignmentSpec, GroupAssignment, MemberSpec, TopicSpec, subscribers

from .checks import assert_valid, assert_within_one, lost
from .strategies import (
    assignment_specs,
    member_ids,
    with_member,
    with_owned,
    without_member,
)
from .test_range import parse

CO = CopartitionedAssignor()


def run(members: list[MemberSpec], **partitions: int) -> dict[str, frozenset]:
    topics = {t: TopicSpec(t, n) for t, n in partitions.items()}
    got = CO.assign(AssignmentSpec({m.member_id: m for m in members}, topics))
    return {mid: a.partitions for mid, a in got.members.items()}


def numbers(assignment: GroupAssignment) -> dict[str, set[int]]:
    """Member -> partition numbers it holds (its units when everyone subscribes alike)."""
    return {mid: {p for _, p in a.partitions} for mid, a in assignment.members.items()}


def test_examples():
    both = frozenset({"t1", "t2"})
    assert run([MemberSpec("a", both), MemberSpec("b", both)], t1=3, t2=3) == {
        "a": parse("t1-0, t1-2, t2-0, t2-2"), "b": parse("t1-1, t2-1")}
    # Unequal counts: numbers 4 and 5 exist in t2 only and are units of their own.
    assert run([MemberSpec("a", both), MemberSpec("b", both)], t1=4, t2=6) == {
        "a": parse("t1-0, t1-2, t2-0, t2-2, t2-4"), "b": parse("t1-1, t1-3, t2-1, t2-3, t2-5")}
    # t3 has other subscribers, so it is not joined with t1 and t2; loads count across groups.
    assert run([MemberSpec("a", both), MemberSpec("b", both | {"t3"})], t1=2, t2=2, t3=2) == {
        "a": parse("t1-0, t2-0, t1-1, t2-1"), "b": parse("t3-0, t3-1")}


def test_owned_units_are_kept():
    both = frozenset({"t1", "t2"})
    owned = {"a": parse("t1-1, t2-1"), "b": parse("t1-0, t2-0, t1-2")}  # b lacks t2-2
    got = run([MemberSpec(m, both, owned=owned[m]) for m in owned], t1=3, t2=3)
    assert got == {"a": parse("t1-1, t2-1"), "b": parse("t1-0, t2-0, t1-2, t2-2")}


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=7, owned="any"))
def test_guarantees(spec):
    got = CO.assign(spec)
    assert_valid(spec, got)
    owner = {tp: owners[0] for tp, owners in got.owner_of().items()}
    subs = subscribers(spec)
    for t in subs:
        for u in subs:
            if set(subs[t]) == set(subs[u]):
                for k in range(min(spec.topics[t].partitions, spec.topics[u].partitions)):
                    assert owner[(t, k)] == owner[(u, k)]
    assert CO.assign(AssignmentSpec(dict(reversed(spec.members.items())), spec.topics)) == got


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=7, homogeneous=True, owned="any"))
def test_identical_subscriptions_balance_numbers_within_one(spec):
    assert_within_one({mid: len(ns) for mid, ns in numbers(CO.assign(spec)).items()})


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=7, owned="any"))
def test_nothing_changed_nothing_moves(spec):
    first = CO.assign(spec)
    assert CO.assign(with_owned(spec, first)) == first


@settings(max_examples=300, deadline=None)
@given(assignment_specs(min_members=2, max_members=7, homogeneous=True, ghosts=False), st.data())
def test_one_leave_moves_nothing_else(spec, data):
    before = CO.assign(spec)
    leaver = data.draw(st.sampled_from(sorted(spec.members)))
    after = CO.assign(without_member(with_owned(spec, before), leaver))
    assert all(not tps for tps in lost(before, after).values())
    assert_within_one({mid: len(ns) for mid, ns in numbers(after).items()})


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=6, homogeneous=True, ghosts=False), member_ids)
def test_one_join_moves_only_to_the_newcomer(spec, newcomer):
    assume(newcomer not in spec.members)
    before = CO.assign(spec)
    subscribed = next(iter(spec.members.values())).subscribed_topics
    after = CO.assign(with_member(with_owned(spec, before), MemberSpec(newcomer, subscribed)))
    for mid in spec.members:
        assert after.members[mid].partitions <= before.members[mid].partitions
    assert_within_one({mid: len(ns) for mid, ns in numbers(after).items()})
