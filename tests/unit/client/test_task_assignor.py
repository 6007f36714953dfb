"""The default task assignor: every task exactly once, shares proportional to capacity
(within one task), previous owners kept, and a result independent of member order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.client.task_assignor import (
    Worker,
    balanced_assignment,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    quotas,
)

task_ids = st.lists(st.text("abcdefgh", min_size=1, max_size=3), max_size=40)


@st.composite
def groups(draw: st.DrawFn) -> tuple[list[str], list[Worker]]:
    tasks = draw(task_ids)
    count = draw(st.integers(1, 8))
    workers = []
    for i in range(count):
        owned = draw(st.lists(st.sampled_from(tasks), max_size=6)) if tasks else []
        workers.append(Worker(
            member_id=f"m-{i}", group_instance_id=draw(st.sampled_from([None, f"i{i}"])),
            capacity=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])), owned=tuple(owned)))
    return tasks, workers


@given(groups())
def test_every_task_goes_to_exactly_one_worker(group: tuple[list[str], list[Worker]]) -> None:
    tasks, workers = group
    result = balanced_assignment(tasks, workers)
    assert set(result) == {w.member_id for w in workers}
    handed = [t for ts in result.values() for t in ts]
    assert sorted(handed) == sorted(set(tasks))


@given(groups())
def test_shares_follow_capacity_within_one_task(group: tuple[list[str], list[Worker]]) -> None:
    tasks, workers = group
    n = len(set(tasks))
    result = balanced_assignment(tasks, workers)
    total = sum(w.capacity for w in workers)
    for w in workers:
        exact = n * w.capacity / total if total > 0 else n / len(workers)
        assert abs(len(result[w.member_id]) - exact) < 1


@given(groups())
def test_result_does_not_depend_on_member_order(group: tuple[list[str], list[Worker]]) -> None:
    tasks, workers = group
    assert balanced_assignment(tasks, workers) == balanced_assignment(tasks, workers[::-1])


@given(groups())
def test_owned_tasks_stay_put_up_to_the_workers_share(
        group: tuple[list[str], list[Worker]]) -> None:
    tasks, workers = group
    result = balanced_assignment(tasks, workers)
    share = quotas(len(set(tasks)), workers)
    claimed: set[str] = set()
    for w in sorted(workers, key=lambda w: (w.group_instance_id or "", w.member_id)):
        keepable = [t for t in dict.fromkeys(w.owned) if t in set(tasks) and t not in claimed]
        kept = keepable[:share[w.member_id]]
        assert set(kept) <= set(result[w.member_id])
        claimed.update(kept)


def test_a_departed_worker_moves_only_its_own_tasks() -> None:
    tasks = [f"t{i}" for i in range(9)]
    before = balanced_assignment(tasks, [Worker("a"), Worker("b"), Worker("c")])
    after = balanced_assignment(tasks, [Worker("a", owned=tuple(before["a"])),
                                        Worker("b", owned=tuple(before["b"]))])
    assert set(before["a"]) <= set(after["a"]) and set(before["b"]) <= set(after["b"])
    assert set(after["a"]) | set(after["b"]) == set(tasks)


def test_capacity_weights_the_shares() -> None:
    result = balanced_assignment([f"t{i}" for i in range(12)],
                                 [Worker("a", capacity=1), Worker("b", capacity=2),
                                  Worker("c", capacity=3)])
    assert {m: len(ts) for m, ts in result.items()} == {"a": 2, "b": 4, "c": 6}


def test_zero_capacity_workers_idle_unless_all_are_zero() -> None:
    assert balanced_assignment(["x", "y"], [Worker("a", capacity=0), Worker("b")]) == {
        "a": [], "b": ["x", "y"]}
    shared = balanced_assignment(["x", "y"], [Worker("a", capacity=0), Worker("b", capacity=0)])
    assert sorted(len(v) for v in shared.values()) == [1, 1]


def test_metadata_and_assignment_round_trip() -> None:
    w = decode_metadata("m1", "i1", encode_metadata(2.5, {"rack": "r1"}, ["t1"]))
    assert w == Worker("m1", "i1", 2.5, {"rack": "r1"}, ("t1",))
    assert decode_assignment(encode_assignment(3, "m1", ["a", "b"])) == ("a", "b")


@pytest.mark.parametrize("data", [b"", b"\xff\x00", b"[]", b'{"version": 2, "tasks": []}',
                                  b'{"version": 1, "tasks": [1, 2]}'])
def test_unreadable_assignments_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_assignment(data)


@pytest.mark.parametrize("data", [b"nope", b'{"version": 1, "capacity": -1}',
                                  b'{"version": 1, "capacity": "inf"}', b'{"capacity": 1}'])
def test_unreadable_metadata_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_metadata("m", None, data)


def test_an_assignment_carrying_the_leaders_refusal_raises() -> None:
    with pytest.raises(ValueError, match="refused"):
        decode_assignment(encode_assignment(3, "m1", [], error="unreadable worker metadata"))
