"""The compact forms the consumer core keeps per member answer as the plain ones would:
`PartitionSet` as a frozenset, `PartitionEpochs` as a dict, `shared_str` with an equal string."""

from __future__ import annotations

import copy
import pickle
import uuid

from hypothesis import given
from hypothesis import strategies as st

from coterie.common.shared_table import SHARED_MAX_CHARS, shared_opt, shared_str
from coterie.group.consumer.partition_epochs import MAX_ARRAY_PARTITION, PartitionEpochs
from coterie.group.records.partition_set import EMPTY, PartitionSet, compact

TOPICS = [uuid.UUID(int=i) for i in (7, 3, 11)]
pairs = st.tuples(st.sampled_from(TOPICS), st.integers(0, 12))
sets = st.frozensets(pairs, max_size=14)


@given(sets, sets)
def test_a_partition_set_behaves_as_the_frozenset_it_holds(a: frozenset, b: frozenset) -> None:
    pa, pb = PartitionSet(a), PartitionSet(b)
    assert list(pa) == sorted(a) and len(pa) == len(a) and bool(pa) == bool(a)
    assert pa == a and a == pa and hash(pa) == hash(a) and {pa: 1}[a] == 1
    for x, y in ((pa, pb), (pa, b), (a, pb)):
        assert (x == y) == (a == b) and (x != y) == (a != b)
        assert (x <= y) == (a <= b) and (x < y) == (a < b)
        assert (x >= y) == (a >= b) and (x > y) == (a > b)
        assert (x & y) == (a & b) and (x | y) == (a | b)
        assert (x - y) == (a - b) and (x ^ y) == (a ^ b)
        assert type(x - y) is frozenset and type(x & y) is frozenset
        assert x.isdisjoint(y) == a.isdisjoint(b)
    assert pa.issubset(b) == a.issubset(b) and pa.issuperset(b) == a.issuperset(b)
    assert pa.union(b) == a | b and pa.intersection(b) == a & b and pa.difference(b) == a - b
    for tp in (*sorted(b), (TOPICS[0], 99), "not a partition", None):
        assert (tp in pa) == (tp in a)


def test_a_partition_set_is_no_tuple_and_survives_copies() -> None:
    tp = (TOPICS[0], 1)
    ps = PartitionSet([tp, tp])
    assert len(ps) == 1 and ps != (tp,) and (tp,) != ps and ps != [tp]
    for copied in (pickle.loads(pickle.dumps(ps)), copy.deepcopy(ps)):
        assert type(copied) is PartitionSet and copied == ps
    assert compact(ps) is ps and compact([]) is EMPTY and compact(frozenset([tp])) == ps


ops = st.lists(st.tuples(
    st.sampled_from(["set", "pop", "get"]),
    st.tuples(st.sampled_from(TOPICS),
              st.sampled_from([0, 1, 2, 5, 40, -1, MAX_ARRAY_PARTITION,
                               MAX_ARRAY_PARTITION + 2])),
    st.integers(0, 50)), max_size=60)


@given(ops)
def test_partition_epochs_answer_as_a_dict(steps: list) -> None:
    plain: dict = {}
    compact_epochs = PartitionEpochs()
    for op, tp, epoch in steps:
        if op == "set":
            plain[tp] = compact_epochs[tp] = epoch
        elif op == "pop":
            assert compact_epochs.pop(tp, None) == plain.pop(tp, None)
        else:
            assert compact_epochs.get(tp) == plain.get(tp)
            assert (tp in compact_epochs) == (tp in plain)
        assert len(compact_epochs) == len(plain) and dict(compact_epochs) == plain
    assert dict(compact_epochs.copy()) == plain
    assert frozenset(plain).isdisjoint(compact_epochs) == (not plain)


def test_shared_strings_are_one_object_and_long_ones_are_not_kept() -> None:
    a, b = "".join(["client-", "host"]), "".join(["client", "-host"])
    assert a is not b and shared_str(a) is shared_str(b) and shared_opt(None) is None
    long1 = "x" * (SHARED_MAX_CHARS + 1)
    long2 = "".join(["x"] * (SHARED_MAX_CHARS + 1))
    assert shared_str(long1) is long1 and shared_str(long2) is long2


def test_a_shared_table_returns_the_first_equal_value_and_stays_bounded():
    from coterie.common.shared_table import SharedTable

    table: SharedTable[frozenset[str]] = SharedTable(2)
    first = frozenset(["a", "b"])
    assert table.share(first) is first
    again = frozenset(["b", "a"])
    assert table.share(again) is first
    table.share(frozenset(["c"]))
    extra = frozenset(["d"])
    assert table.share(extra) is extra and len(table) == 2
    assert table.share(frozenset(["d"])) is not extra  # not kept: the table was full
