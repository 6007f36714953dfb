"""`tenure.spread`: every live broker leads its even share of every topic (the counts differ
by one at most), and every broker computes the same answer."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.storage.api import Resource, TopicIdPartition
from coterie.storage.tenure import spread


def partitions(topic: uuid.UUID, n: int) -> list[Resource]:
    return [Resource.partition(TopicIdPartition(topic, p)) for p in range(n)]


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=6),
       live=st.sets(st.integers(0, 20), min_size=1, max_size=6),
       seed=st.integers(0, 2**32))
def test_each_topic_is_shared_evenly_by_the_live_brokers(sizes, live, seed):
    topics = [uuid.UUID(int=(seed * 7919 + i) % 2**128) for i in range(len(sizes))]
    resources = [r for t, n in zip(topics, sizes, strict=True) for r in partitions(t, n)]
    owners = spread(resources, live)
    assert set(owners) == set(resources)
    assert set(owners.values()) <= live
    for t, n in zip(topics, sizes, strict=True):
        counts = Counter(owners[r] for r in partitions(t, n))
        base = n // len(live)
        assert {counts.get(node, 0) for node in live} <= {base, base + 1}
        assert sum(1 for node in live if counts.get(node, 0) > base) == n % len(live)
    # Order and repetition of the inputs do not matter: every broker agrees.
    assert spread(list(reversed(resources)), sorted(live, reverse=True) * 2) == owners


def test_a_broker_coming_back_gets_its_share_again():
    topic = uuid.uuid4()
    resources = partitions(topic, 12)
    before = spread(resources, [1, 2, 3])
    without = spread(resources, [1, 2])
    assert set(without.values()) == {1, 2}
    assert spread(resources, [1, 2, 3]) == before
    assert Counter(before.values()) == {1: 4, 2: 4, 3: 4}
