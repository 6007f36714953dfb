"""The `uniform` assignor's dispatch, its interface, and the shared claim and universe helpers
(the memo must never change an answer and must stay within its bound)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from coterie.assign import uniform_partitions
from coterie.assign.spec import AssignmentSpec, Assignor, GroupAssignment, MemberSpec, TopicSpec
from coterie.assign.uniform import UniformAssignor
from coterie.assign.uniform_homogeneous import assign_homogeneous
from coterie.assign.uniform_partitions import claim, universe

from .strategies import assignment_specs
from .test_uniform_homogeneous import answer, group, tps

UNIFORM = UniformAssignor()


def test_interface():
    assert isinstance(UNIFORM, Assignor)
    assert (UNIFORM.name, UNIFORM.cooperative) == ("uniform", False)
    assert UNIFORM.assign(AssignmentSpec({}, {"t": TopicSpec("t", 3)})) == GroupAssignment({})


def test_missing_topics_do_not_make_a_group_heterogeneous():
    # A also names a missing topic; effectively both subscribe to t alone, so the
    # homogeneous rules apply.
    spec = group({"t": 4}, {"A": ("t,gone", "t-0, t-1, t-2"), "B": ("t", "t-3")})
    expected = assign_homogeneous((("t", 4),), [tps("t-0, t-1, t-2"), tps("t-3")], [-1, -1])
    assert answer(spec) == {"A": expected[0], "B": expected[1]}
    assert answer(spec) == {"A": tps("t-0, t-1"), "B": tps("t-2, t-3")}


def test_empty_topics_count_as_missing():
    spec = group({"t": 2, "empty": 0}, {"A": ("t,empty", ""), "B": ("t", "")})
    assert answer(spec) == {"A": tps("t-0"), "B": tps("t-1")}


def test_claim_keeps_clean_claims_as_the_same_objects():
    everything = universe((("t", 4),)).members
    owned = [tps("t-0, t-1"), frozenset(), tps("t-3")]
    claims = claim(owned, everything, [0, 0, 0])
    assert all(k is o for k, o in zip(claims.kept, owned, strict=True))
    assert claims.unowned == tps("t-2")


def test_claim_with_overlapping_classes_resolves_double_claims():
    t = universe((("t", 2),)).members
    tu = universe((("t", 2), ("u", 1))).members
    owned = [tps("t-0, t-1"), tps("t-1, u-0"), tps("t-0, u-0")]
    claims = claim(owned, tu, [1, 2, 0], [(t, [0]), (tu, [1, 2])])
    assert claims.kept == [tps("t-0"), tps("t-1, u-0"), frozenset()]
    assert claims.unowned == frozenset()


def test_claim_drops_partitions_outside_a_members_class():
    t = universe((("t", 2),)).members
    u = universe((("u", 2),)).members
    tu = universe((("t", 2), ("u", 2))).members
    claims = claim([tps("t-0, u-1"), tps("u-0")], tu, [0, 0], [(t, [0]), (u, [1])])
    assert claims.kept == [tps("t-0"), tps("u-0")]
    assert claims.unowned == tps("t-1, u-1")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assignment_specs(owned="any", max_members=6, max_partitions=10))
def test_the_universe_memo_never_changes_an_answer(spec):
    warm = UNIFORM.assign(spec)
    saved = (uniform_partitions.CACHE_PARTITIONS, dict(uniform_partitions._universes),
             uniform_partitions._cached_partitions)
    try:
        uniform_partitions.CACHE_PARTITIONS = 5
        uniform_partitions._universes.clear()
        uniform_partitions._cached_partitions = 0
        cold = UNIFORM.assign(spec)
        assert uniform_partitions._cached_partitions <= 5
        assert sum(len(u.ordered) for u in uniform_partitions._universes.values()) == (
            uniform_partitions._cached_partitions)
    finally:
        uniform_partitions.CACHE_PARTITIONS = saved[0]
        uniform_partitions._universes.clear()
        uniform_partitions._universes.update(saved[1])
        uniform_partitions._cached_partitions = saved[2]
    assert cold == warm


def test_universe_is_in_topic_and_index_order():
    u = universe((("a", 2), ("b", 1)))
    assert u.ordered == (("a", 0), ("a", 1), ("b", 0))
    assert u.members == frozenset(u.ordered)
    assert universe((("a", 2), ("b", 1))) is u


def test_members_keep_their_partitions_when_a_member_with_other_topics_joins():
    spec = group({"t": 4, "u": 2}, {"A": ("t", "t-0, t-1"), "B": ("t", "t-2, t-3"),
                                    "C": ("u", "")})
    out = answer(spec)
    assert out == {"A": tps("t-0, t-1"), "B": tps("t-2, t-3"), "C": tps("u-0, u-1")}
    assert out["A"] is spec.members["A"].owned


def test_member_spec_fields_other_than_owned_and_generation_are_ignored():
    plain = group({"t": 5}, {"A": ("t", "t-4"), "B": ("t", "")})
    dressed = AssignmentSpec(
        {m: MemberSpec(m, s.subscribed_topics, instance_id=f"i-{m}", rack="r", owned=s.owned,
                       metadata=b"x") for m, s in plain.members.items()},
        {"t": TopicSpec("t", 5, {p: frozenset({"r"}) for p in range(5)})})
    assert UNIFORM.assign(dressed) == UNIFORM.assign(plain)
