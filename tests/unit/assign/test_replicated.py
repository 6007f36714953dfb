"""Replicated: R distinct holders per partition, balance, stickiness."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coterie.assign.replicated import ReplicatedAssignor
from coterie.assign.spec import AssignmentSpec, AssignorError, MemberSpec, TopicSpec, subscribers

from .checks import assert_valid, assert_within_one, loads, lost
from .strategies import (
    assignment_specs,
    member_ids,
    with_member,
    with_owned,
    without_member,
)
from .test_range import parse

replicas = st.integers(1, 3)


def enough_subscribers(spec: AssignmentSpec, r: int) -> bool:
    return all(len(mids) >= r for mids in subscribers(spec).values())


def test_example_three_members_two_copies():
    sub = frozenset({"t"})
    spec = AssignmentSpec({m: MemberSpec(m, sub) for m in ("a", "b", "c")},
                          {"t": TopicSpec("t", 3)})
    got = ReplicatedAssignor(2).assign(spec)
    assert {m: a.partitions for m, a in got.members.items()} == {
        "a": parse("t-0, t-1"), "b": parse("t-0, t-2"), "c": parse("t-1, t-2")}
    # Owned copies are kept even when member order would have placed them elsewhere.
    owned = {"a": parse("t-1, t-2"), "b": parse("t-0, t-1"), "c": parse("t-0, t-2")}
    spec = AssignmentSpec({m: MemberSpec(m, sub, owned=owned[m], generation=4) for m in owned},
                          spec.topics)
    got = ReplicatedAssignor(2).assign(spec)
    assert {m: a.partitions for m, a in got.members.items()} == owned
    # Three claims on a partition with two copies: the two newest generations keep it.
    spec = AssignmentSpec({m: MemberSpec(m, sub, owned=parse("t-0"), generation=g)
                           for m, g in (("a", 1), ("b", 3), ("c", 2))}, {"t": TopicSpec("t", 1)})
    got = ReplicatedAssignor(2).assign(spec)
    assert got.owner_of() == {("t", 0): ["b", "c"]}


def test_fewer_subscribers_than_copies():
    spec = AssignmentSpec({"a": MemberSpec("a", frozenset({"t", "u"})),
                           "b": MemberSpec("b", frozenset({"u"}))},
                          {"t": TopicSpec("t", 2), "u": TopicSpec("u", 1)})
    with pytest.raises(AssignorError, match="'t' has 1 subscriber"):
        ReplicatedAssignor(2).assign(spec)
    got = ReplicatedAssignor(2, allow_fewer=True).assign(spec)
    assert {m: a.partitions for m, a in got.members.items()} == {
        "a": parse("t-0, t-1, u-0"), "b": parse("u-0")}
    with pytest.raises(ValueError):
        ReplicatedAssignor(0)


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=7, owned="any"), replicas)
def test_r_distinct_subscribers_or_error(spec, r):
    if not enough_subscribers(spec, r):
        with pytest.raises(AssignorError):
            ReplicatedAssignor(r).assign(spec)
        return
    got = ReplicatedAssignor(r).assign(spec)
    assert_valid(spec, got, copies=r)
    assert ReplicatedAssignor(r).assign(
        AssignmentSpec(dict(reversed(spec.members.items())), spec.topics)) == got


@settings(max_examples=200, deadline=None)
@given(assignment_specs(max_members=7, owned="any"), replicas)
def test_allow_fewer_gives_min_of_r_and_subscribers(spec, r):
    got = ReplicatedAssignor(r, allow_fewer=True).assign(spec)
    subs = subscribers(spec)
    for tp, owners in got.owner_of().items():
        assert len(owners) == min(r, len(subs[tp[0]]))


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=7, owned="any"), replicas)
def test_no_improving_move_left(spec, r):
    """What step 3 promises for any subscriptions: no member two above another holds a copy
    the other could take."""
    assume(enough_subscribers(spec, r))
    got = ReplicatedAssignor(r).assign(spec)
    load = loads(got)
    for a, ga in got.members.items():
        for b, gb in got.members.items():
            if load[a] - load[b] >= 2:
                movable = {tp for tp in ga.partitions - gb.partitions
                           if tp[0] in spec.members[b].subscribed_topics}
                assert not movable, (a, b, movable)


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=7, homogeneous=True, owned="any"), replicas)
def test_identical_subscriptions_balance_within_one(spec, r):
    assume(len(spec.members) >= r)
    got = ReplicatedAssignor(r).assign(spec)
    assert_within_one(loads(got))


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=7, owned="any"), replicas)
def test_nothing_changed_nothing_moves(spec, r):
    assume(enough_subscribers(spec, r))
    assignor = ReplicatedAssignor(r)
    first = assignor.assign(spec)
    assert assignor.assign(with_owned(spec, first)) == first


@settings(max_examples=300, deadline=None)
@given(assignment_specs(min_members=2, max_members=7, homogeneous=True, ghosts=False),
       replicas, st.data())
def test_one_leave_moves_little(spec, r, data):
    """After a leave, survivors keep their copies, except that each orphaned copy may push
    at most one other copy across to restore balance."""
    assume(len(spec.members) - 1 >= r)
    assignor = ReplicatedAssignor(r)
    before = assignor.assign(spec)
    leaver = data.draw(st.sampled_from(sorted(spec.members)))
    after = assignor.assign(without_member(with_owned(spec, before), leaver))
    assert_within_one(loads(after))
    orphans = len(before.members[leaver].partitions)
    moved = sum(len(tps) for tps in lost(before, after).values())
    assert moved <= orphans
    if r == 1:
        assert moved == 0


@settings(max_examples=300, deadline=None)
@given(assignment_specs(max_members=6, homogeneous=True, ghosts=False), replicas, member_ids)
def test_one_join_moves_only_to_the_newcomer(spec, r, newcomer):
    assume(newcomer not in spec.members and len(spec.members) >= r)
    assignor = ReplicatedAssignor(r)
    before = assignor.assign(spec)
    subscribed = next(iter(spec.members.values())).subscribed_topics
    after = assignor.assign(with_member(with_owned(spec, before), MemberSpec(newcomer, subscribed)))
    assert_within_one(loads(after))
    for mid in spec.members:  # old members only give, never take
        assert after.members[mid].partitions <= before.members[mid].partitions
    assert sum(len(tps) for tps in lost(before, after).values()) == loads(after)[newcomer]
