"""Uniform, homogeneous subscriptions: Kafka's UniformHomogeneousAssignmentBuilder cases with
expected answers re-derived for coterie's order (member ids, then topic names) and Kafka 4.2's
rules, directed cases for the choices (who gets the extra partitions, what an over-share
member keeps, what is dealt first), and the
properties: valid, balanced within one, deterministic, still when nothing changed, and
moving exactly as few partitions as balance forces."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.assign.spec import AssignmentSpec, MemberSpec, TopicPartition, TopicSpec
from coterie.assign.uniform import UniformAssignor

from .checks import assert_valid, assert_within_one, loads
from .strategies import assignment_specs, member_ids, with_member, with_owned, without_member

UNIFORM = UniformAssignor()
PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tps(text: str) -> frozenset[TopicPartition]:
    """'t1-0, t2-3' -> {('t1', 0), ('t2', 3)}."""
    return frozenset((s.rsplit("-", 1)[0], int(s.rsplit("-", 1)[1]))
                     for s in text.split(", ") if s)


def group(topics: dict[str, int], members: dict[str, tuple[str, str]]) -> AssignmentSpec:
    """members: id -> (comma-separated subscriptions, owned in tps() notation)."""
    return AssignmentSpec(
        {m: MemberSpec(m, frozenset(s for s in subs.split(",") if s), owned=tps(owned))
         for m, (subs, owned) in members.items()},
        {t: TopicSpec(t, n) for t, n in topics.items()})


def answer(spec: AssignmentSpec) -> dict[str, frozenset[TopicPartition]]:
    return {m: a.partitions for m, a in UNIFORM.assign(spec).members.items()}


# ---------------------------------------------------------------- Kafka's cases, re-derived


def test_member_without_subscriptions_gets_nothing():
    # Kafka: an empty group assignment; coterie answers one (empty) entry per member.
    assert answer(group({"t1": 3}, {"A": ("", "")})) == {"A": frozenset()}


def test_subscription_to_a_missing_topic_contributes_nothing():
    # Kafka's builder throws, but its coordinator only passes existing topics; coterie's specs
    # may name missing topics, which count as not subscribed.
    assert answer(group({"t1": 3}, {"A": ("t2", "")})) == {"A": frozenset()}


def test_first_assignment_two_members_two_topics():
    # 5 partitions over 2: A holds nothing and passes the extra partition on to B, the
    # last member, which cannot. Partitions are dealt in (topic, index) order. (Kafka's test
    # predates KAFKA-18688 and its hash order dealt t3 first.)
    out = answer(group({"t1": 3, "t3": 2}, {"A": ("t1,t3", ""), "B": ("t1,t3", "")}))
    assert out == {"A": tps("t1-0, t1-1"), "B": tps("t1-2, t3-0, t3-1")}


def test_more_members_than_partitions():
    # The two extra partitions end with the last two members.
    out = answer(group({"t3": 2}, {m: ("t3", "") for m in "ABC"}))
    assert out == {"A": frozenset(), "B": tps("t3-0"), "C": tps("t3-1")}


def test_large_sample_is_valid_and_balanced():
    topics = {f"topic-{i}": 3 for i in range(1, 100)}
    subs = ",".join(topics)
    spec = group(topics, {f"member{i}": (subs, "") for i in range(1, 50)})
    out = UNIFORM.assign(spec)
    assert_valid(spec, out)
    assert sorted(set(loads(out).values())) == [6, 7]


def test_unbalanced_previous_assignment():
    # Same as Kafka: A keeps its three lowest partitions, B takes the fourth.
    out = answer(group({"t1": 3, "t2": 3}, {"A": ("t1,t2", "t1-0, t1-1, t2-0, t2-1"),
                                            "B": ("t1,t2", "t1-2, t2-2")}))
    assert out == {"A": tps("t1-0, t1-1, t2-0"), "B": tps("t1-2, t2-1, t2-2")}


def test_partitions_added():
    # 11 partitions: nobody holds more than 5, so the extra one ends with B, the last;
    # the new partitions are dealt in order, 2 to A, then 3 to B.
    out = answer(group({"t1": 6, "t2": 5}, {"A": ("t1,t2", "t1-0, t1-2, t2-0"),
                                            "B": ("t1,t2", "t1-1, t2-1, t2-2")}))
    assert out == {"A": tps("t1-0, t1-2, t1-3, t1-4, t2-0"),
                   "B": tps("t1-1, t1-5, t2-1, t2-2, t2-3, t2-4")}


def test_member_added():
    # Same as Kafka: each old member releases its highest partition to C.
    out = answer(group({"t1": 3, "t2": 3}, {"A": ("t1,t2", "t1-0, t1-2, t2-0"),
                                            "B": ("t1,t2", "t1-1, t2-1, t2-2"),
                                            "C": ("t1,t2", "")}))
    assert out == {"A": tps("t1-0, t1-2"), "B": tps("t1-1, t2-1"), "C": tps("t2-0, t2-2")}


def test_member_removed():
    out = answer(group({"t1": 3, "t2": 3}, {"A": ("t1,t2", "t1-0, t2-0"),
                                            "B": ("t1,t2", "t1-1, t2-1")}))
    assert out == {"A": tps("t1-0, t1-2, t2-0"), "B": tps("t1-1, t2-1, t2-2")}


def test_subscription_removed():
    out = answer(group({"t1": 2, "t2": 2}, {"A": ("t2", "t1-0, t2-0"),
                                            "B": ("t2", "t1-1, t2-1")}))
    assert out == {"A": tps("t2-0"), "B": tps("t2-1")}


# ---------------------------------------------------------------- coterie's own choices


def test_extra_partition_goes_to_the_member_that_holds_it():
    # 7 over 3: the extra partition goes to B, which already has 3, not to A, the first
    # (Kafka before 4.1 gave it to the first member, moving one partition from B to A).
    spec = group({"t": 7}, {"A": ("t", "t-0, t-1"), "B": ("t", "t-2, t-3, t-4"),
                            "C": ("t", "t-5, t-6")})
    assert answer(spec) == {m: spec.members[m].owned for m in "ABC"}


def test_over_share_member_keeps_its_lowest_partitions():
    out = answer(group({"t": 6, "u": 2}, {"A": ("t,u", "u-1, t-5, t-0, t-3, t-1, u-0"),
                                          "B": ("t,u", "")}))
    assert out == {"A": tps("t-0, t-1, t-3, t-5"), "B": tps("t-2, t-4, u-0, u-1")}


def test_unowned_partitions_are_dealt_before_released_ones():
    # A releases t-2, t-3, t-4; t-5 is unowned. The pool is t-5, t-2, t-3, t-4.
    out = answer(group({"t": 6}, {"A": ("t", "t-0, t-1, t-2, t-3, t-4"),
                                  "B": ("t", ""), "C": ("t", "")}))
    assert out == {"A": tps("t-0, t-1"), "B": tps("t-2, t-5"), "C": tps("t-3, t-4")}


def test_claims_outside_the_topics_are_dropped():
    out = answer(group({"t": 2, "u": 1}, {"A": ("t", "t-0, t-7, u-0, gone-0"),
                                          "B": ("t", "t-1")}))
    assert out == {"A": tps("t-0"), "B": tps("t-1")}


def test_double_claim_goes_to_the_highest_generation_then_member_order():
    spec = group({"t": 2}, {"A": ("t", "t-0"), "B": ("t", "t-0")})
    spec = AssignmentSpec({"A": replace(spec.members["A"], generation=3),
                           "B": replace(spec.members["B"], generation=5)}, spec.topics)
    assert answer(spec) == {"A": tps("t-1"), "B": tps("t-0")}
    tied = AssignmentSpec({m: replace(s, generation=5) for m, s in spec.members.items()},
                          spec.topics)
    assert answer(tied) == {"A": tps("t-0"), "B": tps("t-1")}


def test_nothing_changed_returns_the_same_objects():
    spec = group({"t": 10, "u": 7}, {m: ("t,u", "") for m in "ABCD"})
    first = UNIFORM.assign(spec)
    again = UNIFORM.assign(with_owned(spec, first))
    for m in "ABCD":
        assert again.members[m].partitions is first.members[m].partitions


# ---------------------------------------------------------------- properties


def expected_kept(spec: AssignmentSpec) -> dict[str, frozenset[TopicPartition]]:
    """What each member may keep: owned partitions of existing subscribed topics; a partition
    claimed twice stays with the highest generation, then the lowest member id."""
    taken: set[TopicPartition] = set()
    kept = {}
    for mid in sorted(spec.members, key=lambda m: (-spec.members[m].generation, m)):
        m = spec.members[mid]
        mine = {(t, p) for t, p in m.owned if t in m.subscribed_topics and t in spec.topics
                and p < spec.topics[t].partitions} - taken
        taken |= mine
        kept[mid] = frozenset(mine)
    return kept


def forced_moves(counts: list[int], total: int) -> int:
    """The fewest kept partitions any balanced assignment takes from their owners."""
    share, extra = divmod(total, len(counts))
    return (sum(max(0, c - share) for c in counts)
            - min(extra, sum(1 for c in counts if c > share)))


def assert_minimal_movement(spec: AssignmentSpec, out: dict[str, frozenset[TopicPartition]]):
    kept = expected_kept(spec)
    moved = sum(len(kept[m] - out[m]) for m in spec.members)
    total = sum(len(a) for a in out.values())
    assert moved == forced_moves([len(kept[m]) for m in spec.members], total)


@PROPS
@given(assignment_specs(homogeneous=True, owned="any", max_members=7, max_partitions=10))
def test_valid_balanced_and_minimal_movement(spec):
    out = UNIFORM.assign(spec)
    assert_valid(spec, out)
    assert_within_one(loads(out))
    assert_minimal_movement(spec, {m: a.partitions for m, a in out.members.items()})


@PROPS
@given(assignment_specs(homogeneous=True, owned="any"), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_member_order(spec, rnd):
    ids = list(spec.members)
    rnd.shuffle(ids)
    shuffled = AssignmentSpec({m: spec.members[m] for m in ids}, dict(spec.topics))
    assert UNIFORM.assign(shuffled) == UNIFORM.assign(spec)


@PROPS
@given(assignment_specs(homogeneous=True, owned="any"))
def test_still_when_nothing_changed(spec):
    first = UNIFORM.assign(spec)
    assert UNIFORM.assign(with_owned(spec, first)) == first


@PROPS
@given(assignment_specs(homogeneous=True, max_partitions=12), st.data())
def test_join_and_leave_move_only_what_balance_forces(spec, data):
    settled = with_owned(spec, UNIFORM.assign(spec))
    joiner = data.draw(member_ids.filter(lambda m: m not in spec.members), label="joiner")
    subscribed = next(iter(spec.members.values())).subscribed_topics
    for changed in (with_member(settled, MemberSpec(joiner, subscribed)),
                    without_member(settled, data.draw(st.sampled_from(sorted(spec.members))))):
        if not changed.members:
            continue
        out = UNIFORM.assign(changed)
        assert_valid(changed, out)
        assert_within_one(loads(out))
        assert_minimal_movement(changed, {m: a.partitions for m, a in out.members.items()})


@PROPS
@given(assignment_specs(homogeneous=True, max_members=4, max_partitions=12),
       st.lists(st.tuples(st.booleans(), member_ids), min_size=1, max_size=8))
def test_a_sequence_of_rounds_stays_balanced_and_minimal(spec, steps):
    """KIP-848's loop: every round's target is the next round's `owned`."""
    subscribed = next(iter(spec.members.values())).subscribed_topics
    current = with_owned(spec, UNIFORM.assign(spec))
    for join, mid in steps:
        if join and mid not in current.members:
            current = with_member(current, MemberSpec(mid, subscribed))
        elif not join and mid in current.members and len(current.members) > 1:
            current = without_member(current, mid)
        out = UNIFORM.assign(current)
        assert_valid(current, out)
        assert_within_one(loads(out))
        assert_minimal_movement(current, {m: a.partitions for m, a in out.members.items()})
        current = with_owned(current, out)
