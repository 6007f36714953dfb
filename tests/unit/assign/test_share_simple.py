"""The simple share assignor (coterie/assign/share_simple.py): its rules as properties, and a
few fixed cases that show the shape of an assignment."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.assign.share_simple import assign

TOPICS = ["a", "b", "c", "d"]

partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), max_size=4)
member_ids = st.lists(st.text("mnopq", min_size=1, max_size=3), min_size=1, max_size=12,
                      unique=True)


@st.composite
def groups(draw, homogeneous: bool | None = None):
    """(subscriptions, partition counts, current assignment). Subscriptions may name topics
    that do not exist; the current assignment may name partitions that no longer do."""
    counts = draw(partition_counts)
    members = draw(member_ids)
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    if same:
        topics = draw(st.sets(st.sampled_from(TOPICS), min_size=1))
        subscriptions = {m: set(topics) for m in members}
    else:
        subscriptions = {m: draw(st.sets(st.sampled_from(TOPICS), min_size=1))
                         for m in members}
    current = {m: draw(st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 14)),
                               max_size=8)) for m in members}
    return subscriptions, counts, current


def _partitions(counts, subscriptions):
    wanted = {t for subs in subscriptions.values() for t in subs}
    return {(t, p) for t, n in counts.items() if t in wanted for p in range(n)}


@settings(max_examples=300, deadline=None)
@given(groups())
def test_every_subscribed_partition_is_assigned_to_subscribers_only(group) -> None:
    subscriptions, counts, current = group
    result = assign(subscriptions, counts, current)
    assert set(result) == set(subscriptions)
    held = {tp for parts in result.values() for tp in parts}
    assert held == _partitions(counts, subscriptions)
    for member, parts in result.items():
        assert {t for t, _ in parts} <= set(subscriptions[member])


@settings(max_examples=300, deadline=None)
@given(groups())
def test_sharing_and_counts_per_topic_are_even(group) -> None:
    """Per topic: each partition shared by ceil(M / P) of its M subscribers, each subscriber
    holding its count of the topic within one of the others'."""
    subscriptions, counts, current = group
    result = assign(subscriptions, counts, current)
    for topic, n in counts.items():
        subscribers = [m for m in subscriptions if topic in subscriptions[m]]
        if n == 0 or not subscribers:
            continue
        sharing = -(-len(subscribers) // n)
        holders = Counter(p for m in subscribers for t, p in result[m] if t == topic)
        assert set(holders.values()) == {sharing}
        per_member = [sum(1 for t, _ in result[m] if t == topic) for m in subscribers]
        assert max(per_member) - min(per_member) <= 1


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_members_with_the_same_subscriptions_are_balanced_within_one(group) -> None:
    subscriptions, counts, current = group
    result = assign(subscriptions, counts, current)
    sizes = [len(parts) for parts in result.values()]
    assert max(sizes) - min(sizes) <= 1
    if _partitions(counts, subscriptions):
        assert min(sizes) >= 1  # more members than partitions: they share, none idles


@settings(max_examples=200, deadline=None)
@given(groups(), st.randoms())
def test_deterministic_whatever_the_order_of_the_inputs(group, rnd) -> None:
    subscriptions, counts, current = group

    def shuffled(mapping):
        items = list(mapping.items())
        rnd.shuffle(items)
        return dict(items)

    assert assign(subscriptions, counts, current) == assign(
        shuffled({m: list(s) for m, s in subscriptions.items()}), shuffled(counts),
        shuffled({m: list(c) for m, c in current.items()}))


@settings(max_examples=200, deadline=None)
@given(groups())
def test_a_balanced_assignment_is_kept(group) -> None:
    """Given its own result as the current assignment, the assignor changes nothing."""
    subscriptions, counts, current = group
    first = assign(subscriptions, counts, current)
    assert assign(subscriptions, counts, first) == first


def test_one_member_gets_every_partition() -> None:
    assert assign({"m": {"a"}}, {"a": 3}) == {"m": frozenset({("a", 0), ("a", 1), ("a", 2)})}


def test_more_members_than_partitions_share_them() -> None:
    result = assign({m: {"a"} for m in ("m1", "m2", "m3", "m4", "m5")}, {"a": 2})
    assert all(len(parts) in (1, 2) for parts in result.values())
    holders = Counter(p for parts in result.values() for _, p in parts)
    assert holders == {0: 3, 1: 3}  # ceil(5 / 2) members on each partition


def test_a_joining_member_takes_partitions_from_the_others_and_the_rest_stay() -> None:
    before = assign({"m1": {"a"}, "m2": {"a"}}, {"a": 4})
    after = assign({"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, {"a": 4}, before)
    assert sorted(len(p) for p in after.values()) == [1, 1, 2]
    assert after["m1"] <= before["m1"] and after["m2"] <= before["m2"]


def test_missing_topics_and_topics_without_subscribers_are_not_assigned() -> None:
    assert assign({"m": {"a", "gone"}}, {"a": 1, "b": 2}) == {"m": frozenset({("a", 0)})}
