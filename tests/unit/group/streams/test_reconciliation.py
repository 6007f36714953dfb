"""Streams member reconciliation (KIP-1071, Kafka 4.2's streams CurrentAssignmentBuilder) and the
group's task ownership index.

The directed scenarios follow the cases of Kafka's CurrentAssignmentBuilderTest in meaning
(stable -> stable / unrevoked / unreleased, unrevoked -> ..., unreleased -> ..., unknown),
with the expected members worked out from the rules in `coterie.group.streams.reconciliation`.
The properties run a simulated group whose members reconcile concurrently, one heartbeat at a
time, against targets that change under them.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.group.records.tasks import NO_TASKS, TaskSet, each
from coterie.group.streams.member_state import MemberState
from coterie.group.streams.reconciliation import (
    CurrentAssignment,
    FencedMemberEpoch,
    check_member_epoch,
    reconcile,
)
from coterie.group.streams.task_owners import TaskOwners

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_TASKS
UNRELEASED = MemberState.UNRELEASED_TASKS
ROLES = ("active", "standby", "warmup")
ME, MY_PROCESS = "me", "p1"


def role(name: str, **subtopologies: list[int]) -> TaskSet:
    """A TaskSet with the given tasks in one role: role("standby", s1=[1, 2])."""
    return TaskSet.of(**{name: subtopologies})


def owners(*holders: tuple[str, str, TaskSet]) -> TaskOwners:
    index = TaskOwners()
    for member_id, process_id, holds in holders:
        index.update(member_id, process_id, holds)
    return index


def member(state: MemberState, epoch: int, assigned: TaskSet, pending: TaskSet = NO_TASKS,
           previous: int | None = None) -> CurrentAssignment:
    """A member whose active tasks were all assigned at `epoch - 1` (so kept and added tasks
    are told apart by their assignment epochs)."""
    holds = assigned.union(pending)
    epochs = {s: dict.fromkeys(ps, epoch - 1) for s, ps in holds.active.items()}
    return CurrentAssignment(epoch, epoch if previous is None else previous, state, assigned,
                             pending, epochs)


def step(current: CurrentAssignment, target_epoch: int, target: TaskSet,
         index: TaskOwners | None = None, owned: TaskSet | None = None) -> CurrentAssignment:
    """One heartbeat of ME; the index holds ME's own record unless given."""
    if index is None:
        index = owners((ME, MY_PROCESS, current.holds()))
    return reconcile(current, MY_PROCESS, target_epoch, target, index, owned)


# -- STABLE ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("r", ROLES)
def test_stable_at_the_target_epoch_is_left_alone(r: str) -> None:
    m = member(STABLE, 10, role(r, s1=[1, 2], s2=[3, 4]))
    assert step(m, 10, role(r, s1=[1, 2, 9])) is m


@pytest.mark.parametrize("r", ROLES)
def test_stable_moves_to_a_new_epoch_with_the_same_tasks(r: str) -> None:
    tasks = role(r, s1=[1, 2], s2=[3, 4])
    m = member(STABLE, 10, tasks)
    new = step(m, 11, tasks)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (STABLE, 11, 10)
    assert new.assigned == tasks and new.pending_revocation == NO_TASKS
    assert new.active_epochs == m.active_epochs  # kept tasks keep their assignment epoch


@pytest.mark.parametrize("r", ROLES)
def test_stable_gets_free_new_tasks_at_once(r: str) -> None:
    m = member(STABLE, 10, role(r, s1=[1, 2], s2=[3, 4]))
    target = role(r, s1=[1, 2, 4], s2=[3, 4, 7])
    new = step(m, 11, target)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (STABLE, 11, 10)
    assert new.assigned == target
    if r == "active":
        assert new.active_epochs == {"s1": {1: 9, 2: 9, 4: 11}, "s2": {3: 9, 4: 9, 7: 11}}
    else:
        assert new.active_epochs == {}


@pytest.mark.parametrize("r", ROLES)
def test_stable_revokes_first_and_keeps_its_epoch(r: str) -> None:
    m = member(STABLE, 10, role(r, s1=[1, 2], s2=[3, 4]))
    target = role(r, s1=[2, 3], s2=[4, 5])
    new = step(m, 11, target)  # nothing reported: the member is taken to still own everything
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (UNREVOKED, 10, 10)
    assert new.assigned == role(r, s1=[2], s2=[4])  # the new tasks wait for the revocation
    assert new.pending_revocation == role(r, s1=[1], s2=[3])
    if r == "active":  # revoked tasks keep their epoch: the member may still commit for them
        assert new.active_epochs == {"s1": {1: 9, 2: 9}, "s2": {3: 9, 4: 9}}


@pytest.mark.parametrize("r", ROLES)
def test_stable_to_an_empty_target_revokes_everything(r: str) -> None:
    tasks = role(r, s1=[1, 2], s2=[3, 4])
    new = step(member(STABLE, 10, tasks), 11, NO_TASKS, owned=tasks)
    assert (new.state, new.member_epoch) == (UNREVOKED, 10)
    assert new.assigned == NO_TASKS and new.pending_revocation == tasks


@pytest.mark.parametrize("r", ROLES)
def test_revoked_tasks_the_member_no_longer_reports_are_simply_dropped(r: str) -> None:
    """The member already gave them up (it reports owning none of them): no UNREVOKED
    detour; the other missing task is still run elsewhere, so UNRELEASED at the target."""
    m = member(STABLE, 10, role(r, s1=[1, 2], s2=[3, 4]))
    elsewhere = owners((ME, MY_PROCESS, m.holds()),
                       ("other", MY_PROCESS, TaskSet.of(active={"s2": [5]})))
    new = step(m, 11, role(r, s1=[1, 2], s2=[3, 5]), elsewhere, owned=NO_TASKS)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (UNRELEASED, 11, 10)
    assert new.assigned == role(r, s1=[1, 2], s2=[3])
    assert new.pending_revocation == NO_TASKS


# -- who blocks whom ------------------------------------------------------------------------------


def test_an_active_task_waits_for_its_owner_whatever_its_process() -> None:
    """Kafka 4.2: an active task has one owner in the group; another member on the same
    process blocks it as much as one elsewhere does."""
    m = member(STABLE, 10, TaskSet.of(active={"s1": [1]}))
    target = TaskSet.of(active={"s1": [1, 2]})
    for process in ("p2", MY_PROCESS):
        index = owners((ME, MY_PROCESS, m.holds()),
                       ("other", process, TaskSet.of(active={"s1": [2]})))
        new = step(m, 11, target, index, owned=m.assigned)
        assert (new.state, new.member_epoch) == (UNRELEASED, 11)
        assert new.assigned == m.assigned


@pytest.mark.parametrize("replica", ["standby", "warmup"])
def test_an_active_task_waits_while_its_process_holds_a_replica_of_it(replica: str) -> None:
    m = member(STABLE, 10, NO_TASKS)
    target = TaskSet.of(active={"s1": [2]})
    same = owners(("other", MY_PROCESS, role(replica, s1=[2])))
    assert step(m, 11, target, same, NO_TASKS).state is UNRELEASED
    # A replica on another process is no obstacle: that process keeps its standby.
    other = owners(("other", "p2", role(replica, s1=[2])))
    new = step(m, 11, target, other, NO_TASKS)
    assert new.state is STABLE and new.assigned == target


@pytest.mark.parametrize("r", ["standby", "warmup"])
@pytest.mark.parametrize("held_as", ROLES)
def test_a_replica_waits_only_for_its_own_process(r: str, held_as: str) -> None:
    m = member(STABLE, 10, NO_TASKS)
    target = role(r, s1=[2])
    same = owners(("other", MY_PROCESS, role(held_as, s1=[2])))
    new = step(m, 11, target, same, NO_TASKS)
    assert (new.state, new.assigned) == (UNRELEASED, NO_TASKS)
    other = owners(("other", "p2", role(held_as, s1=[2])))
    assert step(m, 11, target, other, NO_TASKS).assigned == target


def test_only_blocked_tasks_are_held_back() -> None:
    m = member(STABLE, 10, NO_TASKS)
    target = TaskSet.of(active={"s1": [1, 2]}, standby={"s2": [1]}, warmup={"s2": [2]})
    index = owners(("a", "p2", TaskSet.of(active={"s1": [2]})),
                   ("b", MY_PROCESS, TaskSet.of(active={"s2": [1]})))
    new = step(m, 11, target, index, NO_TASKS)
    assert new.state is UNRELEASED
    assert new.assigned == TaskSet.of(active={"s1": [1]}, warmup={"s2": [2]})
    assert new.active_epochs == {"s1": {1: 11}}


# -- UNREVOKED_TASKS ------------------------------------------------------------------------------


@pytest.mark.parametrize("r", ROLES)
def test_unrevoked_waits_while_the_member_may_still_run_a_revoked_task(r: str) -> None:
    m = member(UNREVOKED, 10, role(r, s1=[2, 3], s2=[5, 6]), role(r, s1=[1], s2=[4]))
    target = role(r, s1=[3], s2=[6])
    assert step(m, 12, target, owned=None) is m  # not reported: unchanged
    assert step(m, 12, target, owned=role(r, s1=[1, 2, 3], s2=[5, 6])) is m
    assert step(m, 12, target, owned=role(r, s1=[2, 3], s2=[4, 5, 6])) is m


def test_a_revoked_task_reported_in_another_role_counts_as_revoked() -> None:
    """Kafka compares the owned tasks with the pending ones role by role (containsAny)."""
    m = member(UNREVOKED, 10, NO_TASKS, TaskSet.of(active={"s1": [1]}))
    new = step(m, 11, NO_TASKS, owners(), owned=TaskSet.of(standby={"s1": [1]}))
    assert (new.state, new.member_epoch) == (STABLE, 11)


@pytest.mark.parametrize("r", ROLES)
def test_unrevoked_moves_to_the_target_once_revoked(r: str) -> None:
    m = member(UNREVOKED, 10, role(r, s1=[2, 3], s2=[5, 6]), role(r, s1=[1], s2=[4]))
    target = role(r, s1=[2, 3], s2=[5, 6])
    new = step(m, 11, target, owned=target)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (STABLE, 11, 10)
    assert new.assigned == target and new.pending_revocation == NO_TASKS
    if r == "active":  # the revoked tasks' epochs go with them
        assert new.active_epochs == {"s1": {2: 9, 3: 9}, "s2": {5: 9, 6: 9}}


@pytest.mark.parametrize("r", ROLES)
def test_unrevoked_revokes_again_at_the_next_epoch(r: str) -> None:
    """The target moved on during the revocation and takes more away: Kafka 4.2 asks for the
    new revocation at the member's epoch + 1 (the consumer group stays at its epoch)."""
    m = member(UNREVOKED, 10, role(r, s1=[2, 3], s2=[5, 6]), role(r, s1=[1], s2=[4]))
    new = step(m, 12, role(r, s1=[3], s2=[6]), owned=role(r, s1=[2, 3], s2=[5, 6]))
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (UNREVOKED, 11, 10)
    assert new.assigned == role(r, s1=[3], s2=[6])
    assert new.pending_revocation == role(r, s1=[2], s2=[5])


@pytest.mark.parametrize("r", ROLES)
def test_unrevoked_to_unreleased(r: str) -> None:
    m = member(UNREVOKED, 11, role(r, s1=[2, 3], s2=[5, 6]), role(r, s1=[1], s2=[4]),
               previous=10)
    # Everything new is held, as active, by another member of this process.
    index = owners((ME, MY_PROCESS, m.assigned),
                   ("other", MY_PROCESS, TaskSet.of(active={"s1": [4], "s2": [7]})))
    new = step(m, 11, role(r, s1=[2, 3, 4], s2=[5, 6, 7]), index,
               owned=role(r, s1=[2, 3], s2=[5, 6]))
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (UNRELEASED, 11, 11)
    assert new.assigned == m.assigned and new.pending_revocation == NO_TASKS


def test_a_role_change_goes_through_revocation_and_release() -> None:
    """Kafka 4.2 has no in-place role change: a standby promoted to active is revoked first,
    and the active task waits until the member's own record no longer holds the standby."""
    index = TaskOwners()
    m = member(STABLE, 10, TaskSet.of(standby={"s1": [1]}))
    index.update(ME, MY_PROCESS, m.holds())
    target = TaskSet.of(active={"s1": [1]})
    seen = []
    owned: TaskSet | None = m.assigned
    for _ in range(3):
        m = reconcile(m, MY_PROCESS, 11, target, index, owned)
        index.update(ME, MY_PROCESS, m.holds())
        owned = m.assigned
        seen.append((m.state, m.member_epoch))
    assert seen == [(UNREVOKED, 10), (UNRELEASED, 11), (STABLE, 11)]
    assert m.assigned == target and m.active_epochs == {"s1": {1: 11}}


# -- UNRELEASED_TASKS -----------------------------------------------------------------------------


@pytest.mark.parametrize("r", ROLES)
def test_unreleased_gets_its_tasks_once_they_are_free(r: str) -> None:
    m = member(UNRELEASED, 11, role(r, s1=[2, 3], s2=[5, 6]))
    target = role(r, s1=[2, 3, 4], s2=[5, 6, 7])
    new = step(m, 11, target, owned=None)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (STABLE, 11, 11)
    assert new.assigned == target


@pytest.mark.parametrize("r", ROLES)
def test_unreleased_stays_while_its_tasks_are_held(r: str) -> None:
    m = member(UNRELEASED, 11, role(r, s1=[2, 3], s2=[5, 6]))
    held = TaskSet.of(active={"s1": [4], "s2": [7]})
    index = owners((ME, MY_PROCESS, m.holds()), ("other", MY_PROCESS, held))
    assert step(m, 11, role(r, s1=[2, 3, 4], s2=[5, 6, 7]), index) is m
    # At an older previous epoch the record does change: Kafka's updateMemberEpoch.
    older = member(UNRELEASED, 11, m.assigned, previous=10)
    again = step(older, 11, role(r, s1=[2, 3, 4], s2=[5, 6, 7]), index)
    assert again == m


def test_unreleased_follows_a_newer_target() -> None:
    m = member(UNRELEASED, 11, TaskSet.of(active={"s1": [2, 3]}))
    new = step(m, 12, TaskSet.of(active={"s1": [3]}), owned=m.assigned)
    assert (new.state, new.member_epoch) == (UNREVOKED, 11)
    assert new.pending_revocation == TaskSet.of(active={"s1": [2]})


# -- UNKNOWN and fencing --------------------------------------------------------------------------


def test_unknown_fences_unless_the_member_reports_no_tasks() -> None:
    m = member(MemberState.UNKNOWN, 11, TaskSet.of(active={"s1": [1]}))
    target = TaskSet.of(active={"s1": [1, 2]})
    with pytest.raises(FencedMemberEpoch):
        step(m, 12, target, owned=None)
    with pytest.raises(FencedMemberEpoch):
        step(m, 12, target, owned=TaskSet.of(warmup={"s9": [0]}))
    new = step(m, 12, target, owners(), owned=NO_TASKS)
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (STABLE, 12, 11)
    assert new.assigned == target


def test_state_bytes_are_kafkas() -> None:
    assert [s.value for s in MemberState] == [1, 2, 3, 127]
    assert MemberState.from_value(2) is UNREVOKED
    for byte in (0, 4, 99, -1):  # 0 is the consumer group's STABLE, not the streams one
        assert MemberState.from_value(byte) is MemberState.UNKNOWN


def test_the_current_epoch_is_always_accepted() -> None:
    m = member(STABLE, 10, TaskSet.of(active={"s1": [1]}), previous=9)
    check_member_epoch(m, 10, None)
    check_member_epoch(m, 10, TaskSet.of(active={"s1": [7]}))  # the step will sort it out
    check_member_epoch(m, 0, None)  # a join is checked elsewhere


def test_an_epoch_ahead_of_the_coordinator_is_fenced() -> None:
    with pytest.raises(FencedMemberEpoch, match="greater member epoch"):
        check_member_epoch(member(STABLE, 10, NO_TASKS), 11, NO_TASKS)


def test_the_previous_epoch_needs_the_tasks_it_was_given() -> None:
    """A lost answer: the member heartbeats at its previous epoch. Accepted only if it reports
    all its tasks and runs nothing it was not given, role by role."""
    m = member(STABLE, 10, TaskSet.of(active={"s1": [1, 2]}, standby={"s2": [0]}), previous=9)
    check_member_epoch(m, 9, TaskSet.of(active={"s1": [1]}))
    check_member_epoch(m, 9, NO_TASKS)
    for owned in (None,  # not reported
                  TaskSet.of(active={"s1": [3]}),  # a task it does not have
                  TaskSet.of(active={"s2": [0]}),  # a task it has, in another role
                  TaskSet.of(warmup={"s1": [1]})):
        with pytest.raises(FencedMemberEpoch, match="smaller member epoch"):
            check_member_epoch(m, 9, owned)
    with pytest.raises(FencedMemberEpoch):  # older than the previous epoch
        check_member_epoch(m, 8, TaskSet.of(active={"s1": [1]}))


def test_pending_tasks_do_not_count_at_the_previous_epoch() -> None:
    """Kafka checks the owned tasks against the assigned ones only."""
    m = member(UNREVOKED, 11, TaskSet.of(active={"s1": [1]}), TaskSet.of(active={"s1": [2]}),
               previous=10)
    with pytest.raises(FencedMemberEpoch):
        check_member_epoch(m, 10, TaskSet.of(active={"s1": [1, 2]}))


# -- the ownership index --------------------------------------------------------------------------


def test_owners_answer_by_role_and_process() -> None:
    index = owners(("m1", "p1", TaskSet.of(active={"s1": [1]}, standby={"s1": [2]})),
                   ("m2", "p1", TaskSet.of(standby={"s1": [2]})),
                   ("m3", "p2", TaskSet.of(warmup={"s1": [1]})))
    assert index.active_processes("s1", 1) == {"p1"}
    assert dict(index.active_holders("s1", 1)) == {"m1": "p1"}
    assert index.active_processes("s1", 2) == frozenset()
    assert index.standby_processes("s1", 2) == {"p1"}
    assert index.warmup_processes("s1", 1) == {"p2"}
    # m2 leaving does not forget that m1, on the same process, still holds standby s1-2.
    index.remove("m2")
    assert index.standby_processes("s1", 2) == {"p1"}
    index.update("m1", "p3", TaskSet.of(active={"s1": [1]}))  # moved process, dropped s1-2
    assert index.active_processes("s1", 1) == {"p3"}
    assert index.standby_processes("s1", 2) == frozenset()
    index.update("m1", "p3", NO_TASKS)
    assert index.holds("m1") == NO_TASKS and index.active_processes("s1", 1) == frozenset()
    index.remove("nobody")  # unknown members are no error
    assert index.snapshot() == {"active": {}, "standby": {}, "warmup": {("s1", 1): {"m3": "p2"}}}


def test_two_active_owners_block_the_task_whatever_the_order() -> None:
    a = ("m1", "p1", TaskSet.of(active={"s1": [1]}))
    b = ("m2", "p2", TaskSet.of(active={"s1": [1]}))
    for first, second in ((a, b), (b, a)):
        index = owners(first, second)
        assert index.active_processes("s1", 1) == {"p1", "p2"}


# -- properties -----------------------------------------------------------------------------------

PROPS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TASKS = [("a", p) for p in range(4)] + [("b", p) for p in range(3)]
ROLE_OR_NONE = (None, "active", "standby", "warmup")


def task_set(roles: dict[tuple[str, int], str | None]) -> TaskSet:
    """A TaskSet from task -> role (None: not there). One role per task, as any target of a
    sane assignor gives one member."""
    by_role: dict[str, dict[str, set[int]]] = {r: {} for r in ROLES}
    for (s, p), r in roles.items():
        if r is not None:
            by_role[r].setdefault(s, set()).add(p)
    return TaskSet.of(**by_role)


def _in_roles(roles: list[str | None]) -> TaskSet:
    return task_set(dict(zip(TASKS, roles, strict=True)))


one_member_tasks = st.lists(st.sampled_from(ROLE_OR_NONE), min_size=len(TASKS),
                            max_size=len(TASKS)).map(_in_roles)


@st.composite
def one_member_start(draw: st.DrawFn) -> tuple[CurrentAssignment, TaskSet]:
    """A member in any state but UNKNOWN (one role per task across what it holds, a pending
    revocation only when UNREVOKED), and what its client runs: the assigned tasks, plus the
    pending ones if it has not let them go yet."""
    state = draw(st.sampled_from([STABLE, UNREVOKED, UNRELEASED]))
    roles = draw(st.lists(st.sampled_from(ROLE_OR_NONE), min_size=len(TASKS),
                          max_size=len(TASKS)))
    pending_flags = draw(st.lists(st.booleans(), min_size=len(TASKS), max_size=len(TASKS)))
    if state is not UNREVOKED:
        pending_flags = [False] * len(TASKS)
    rows = list(zip(TASKS, roles, pending_flags, strict=True))
    assigned = task_set({t: r for t, r, pending in rows if not pending})
    pending = task_set({t: r for t, r, pending in rows if pending})
    current = member(state, draw(st.integers(1, 20)), assigned, pending)
    runs = current.holds() if draw(st.booleans()) else assigned
    return current, runs


@PROPS
@given(one_member_start(), one_member_tasks, st.integers(1, 5))
def test_a_member_that_follows_its_answers_reaches_its_target(
        start: tuple[CurrentAssignment, TaskSet], target: TaskSet, ahead: int) -> None:
    """Alone in the group (no one else holds anything), a member that always reports what it
    was last told to keep reaches STABLE at the target epoch with exactly its target tasks:
    within 3 heartbeats from STABLE or UNRELEASED (revoke, release its own old roles, done),
    4 from UNREVOKED (finish the old revocation first)."""
    current, runs = start
    target_epoch = current.member_epoch + ahead
    index = owners((ME, MY_PROCESS, current.holds()))
    bound = 4 if current.state is UNREVOKED else 3
    for _ in range(bound):
        current = reconcile(current, MY_PROCESS, target_epoch, target, index, runs)
        index.update(ME, MY_PROCESS, current.holds())
        runs = current.assigned
        if current.is_reconciled_to(target_epoch):
            break
    assert current.is_reconciled_to(target_epoch)
    assert current.assigned == target and current.pending_revocation == NO_TASKS
    assert set(current.active_epochs) == set(target.active)


PROCESSES = ("p0", "p1", "p2")


@st.composite
def groups(draw: st.DrawFn) -> dict[str, str]:
    """member id -> process id: 2 to 5 members on up to 3 processes."""
    n = draw(st.integers(2, 5))
    return {f"m{i}": draw(st.sampled_from(PROCESSES)) for i in range(n)}


def any_targets(members: list[str]) -> st.SearchStrategy[dict[str, TaskSet]]:
    """Targets a sane assignor would never compute (two members given the same active task,
    two members of one process the same standby...): safety must not rest on the target."""
    return st.fixed_dictionaries({m: one_member_tasks for m in members})


@st.composite
def valid_targets(draw: st.DrawFn, process_of: dict[str, str]) -> dict[str, TaskSet]:
    """What Kafka's assignors guarantee: an active task has at most one member, and a process
    holds a task in at most one role, through one member."""
    roles: dict[str, dict[tuple[str, int], str | None]] = {m: {} for m in process_of}
    members = sorted(process_of)
    for task in TASKS:
        taken: set[str] = set()
        active = draw(st.sampled_from([None, *members]))
        if active is not None:
            roles[active][task] = "active"
            taken.add(process_of[active])
        for m in members:
            if process_of[m] in taken or m == active:
                continue
            r = draw(st.sampled_from((None, None, "standby", "warmup")))
            if r is not None:
                roles[m][task] = r
                taken.add(process_of[m])
    return {m: task_set(rs) for m, rs in roles.items()}


class Group:
    """A simulated streams group: the coordinator's records and ownership index, and what each
    member's client runs. Clients always get their answers and report truthfully; a client
    starts its new tasks at once but may be slow to stop the ones it is told to give up."""

    def __init__(self, process_of: dict[str, str]) -> None:
        self.process_of = process_of
        self.records = {m: CurrentAssignment() for m in process_of}
        self.runs = dict.fromkeys(process_of, NO_TASKS)
        self.index = TaskOwners()
        self.epoch = 0
        self.targets = dict.fromkeys(process_of, NO_TASKS)

    def new_target(self, targets: dict[str, TaskSet]) -> None:
        self.epoch += 1
        self.targets = targets

    def heartbeat(self, m: str, report: bool, prompt: bool) -> None:
        """`report`: the heartbeat carries the tasks the client runs. `prompt`: on the answer,
        the client stops at once what it is no longer given (else it keeps running those until
        `finish_revoking`)."""
        old = self.records[m]
        new = reconcile(old, self.process_of[m], self.epoch, self.targets[m], self.index,
                        self.runs[m] if report else None)
        if new is not old:
            self.records[m] = new
            self.index.update(m, self.process_of[m], new.holds())
        # Until the answer arrives the client still runs what it ran: the record just written
        # must still cover it, or its tasks could already be granted to someone else.
        assert self.runs[m].issubset(new.holds()), "a task was freed while its client ran it"
        self.runs[m] = new.assigned if prompt else new.assigned.union(self.runs[m])

    def finish_revoking(self, m: str) -> None:
        self.runs[m] = self.runs[m].intersect(self.records[m].assigned)

    def leave_and_rejoin(self, m: str) -> None:
        """Fenced or left: the record goes, the client stops everything, then joins anew."""
        self.records[m] = CurrentAssignment()
        self.index.remove(m)
        self.runs[m] = NO_TASKS

    def settled(self) -> bool:
        return all(rec.is_reconciled_to(self.epoch) and rec.assigned == self.targets[m]
                   for m, rec in self.records.items())

    def check(self) -> None:
        fresh = TaskOwners()
        for m, rec in self.records.items():
            holds = rec.holds()
            fresh.update(m, self.process_of[m], holds)
            assert self.runs[m].issubset(holds), "a client runs a task its record lacks"
            assert rec.member_epoch <= self.epoch
            assert rec.previous_member_epoch <= rec.member_epoch
            assert {(s, p) for s, ps in rec.active_epochs.items() for p in ps} == set(
                each(holds.active))
            assert all(e <= rec.member_epoch for row in rec.active_epochs.values()
                       for e in row.values())
        assert fresh == self.index and fresh.snapshot() == self.index.snapshot()
        for what in ({m: r.holds() for m, r in self.records.items()}, self.runs):
            active: Counter[tuple[str, int]] = Counter()
            per_process: Counter[tuple[str, tuple[str, int]]] = Counter()
            for m, held in what.items():
                for r in ROLES:
                    for task in each(getattr(held, r)):
                        per_process[self.process_of[m], task] += 1
                        if r == "active":
                            active[task] += 1
            assert all(n == 1 for n in active.values()), f"two owners of an active task: {active}"
            assert all(n == 1 for n in per_process.values()), "a process holds a task twice"


SETTLE_ROUNDS = 4


@PROPS
@given(st.data())
def test_members_reconciling_concurrently_never_share_a_task(data: st.DataObject) -> None:
    """Members heartbeat in any order, sometimes without reporting their tasks, slow or quick to
    stop revoked ones, sometimes leaving and rejoining, while targets (even insane ones) change
    under them. At every point an active task is held (assigned or pending revocation) by at
    most one member in the whole group, and run by at most one client; a process holds and
    runs a task in at most one role through one member; what each client runs is in its
    record; and the index is the one the records give. Then, with a valid target and every
    member heartbeating in turn (quick clients from now on), the group settles within
    SETTLE_ROUNDS rounds: (1) a member whose slow client still ran revoked tasks hears that it
    must stop; (2) it acknowledges, and is told what the new target takes away; (3) it
    acknowledges that too, which frees every task no target keeps; (4) the tasks held back in
    round 3 (freed after their new owner's turn, or a role change waiting for the member's own
    old record) are handed over. A valid target never lets a task one member keeps block
    another member, so nothing is held back after round 4."""
    process_of = data.draw(groups(), "members")
    members = sorted(process_of)
    group = Group(process_of)
    group.new_target(data.draw(any_targets(members), "target"))
    actions = data.draw(st.lists(st.one_of(
        st.tuples(st.just("hb"), st.sampled_from(members), st.booleans(), st.booleans()),
        st.tuples(st.just("finish"), st.sampled_from(members), st.none(), st.none()),
        st.tuples(st.just("target"), any_targets(members), st.none(), st.none()),
        st.tuples(st.just("leave"), st.sampled_from(members), st.none(), st.none()),
    ), max_size=40), "actions")
    for kind, arg, report, prompt in actions:
        if kind == "hb":
            group.heartbeat(arg, report, prompt)
        elif kind == "finish":
            group.finish_revoking(arg)
        elif kind == "target":
            group.new_target(arg)
        else:
            group.leave_and_rejoin(arg)
        group.check()

    group.new_target(data.draw(valid_targets(process_of), "final target"))
    order = data.draw(st.permutations(members), "order")
    for _ in range(SETTLE_ROUNDS):
        if group.settled():
            break
        for m in order:
            group.heartbeat(m, True, True)
            group.check()
    assert group.settled(), group.records


@PROPS
@given(st.lists(st.tuples(st.sampled_from(["m0", "m1", "m2", "m3"]),
                          st.sampled_from(PROCESSES), one_member_tasks), max_size=12),
       st.randoms(use_true_random=False))
def test_the_index_does_not_depend_on_the_replay_order(
        updates: list[tuple[str, str, TaskSet]], rnd) -> None:
    """Records of different members replayed in any interleaving (each member's own in log
    order) give the same index, and the same as feeding only each member's last record."""
    in_order = owners(*updates)
    by_member: dict[str, list[tuple[str, str, TaskSet]]] = {}
    for u in updates:
        by_member.setdefault(u[0], []).append(u)
    queues = [list(us) for us in by_member.values()]
    shuffled = TaskOwners()
    while any(queues):
        q = rnd.choice([q for q in queues if q])
        shuffled.update(*q.pop(0))
    last = owners(*{u[0]: u for u in updates}.values())
    assert in_order == shuffled == last
    assert in_order.snapshot() == shuffled.snapshot() == last.snapshot()
    # ... and replaying a record twice changes nothing.
    twice = owners(*itertools.chain.from_iterable((u, u) for u in updates))
    assert twice.snapshot() == in_order.snapshot()
