"""One streams member's step towards its target tasks (Kafka 4.2's CurrentAssignmentBuilder).

As for a consumer group's partitions (`consumer/reconciliation.py`), the coordinator never
hands a task to a member while someone else may still be running it ("revoke before
assign"). Per heartbeat, given the member's current assignment, its process, the target
(epoch and tasks), who holds which task (`task_owners.TaskHolders`) and the tasks the member
says it owns, each role (active, standby, warm-up) is split the same way:

    keep    = assigned ∩ target
    revoke  = assigned - keep
    add     = target - keep, minus the tasks that are not free for this member yet

- If something must be revoked and the member (as far as it said) still owns some of it:
  UNREVOKED_TASKS, assigned = keep, pending_revocation = revoke, at the epoch given (below).
- Otherwise it moves to the target epoch with assigned = keep + add and nothing pending:
  UNRELEASED_TASKS if some target tasks were held back, else STABLE.

When is a task free (Kafka 4.2.1; the rules are about processes, because one Kafka Streams
client, one process, must never run the same task twice, and an active task has exactly one
owner in the whole group):
- an active task: no member anywhere holds it as active (whatever its process, this member
  included: a task it was itself revoking waits for its record to be written), and this
  member's process holds it neither as standby nor as warm-up;
- a standby or warm-up task: this member's process holds it in no role at all; holders on
  other processes do not matter (a standby exists on several processes by design).
So a task changing role inside one member (active -> standby, standby -> active, standby <->
warm-up) goes through a revocation and a release: about three heartbeats. Later Kafka
versions do such moves in place; 4.2 does not, and neither does this.

Epochs, per current state (Kafka 4.2; `Builder.updateMemberEpoch` makes the epoch the member
was at its previous epoch, even when the epoch does not change):
- STABLE at the target epoch: nothing to do. STABLE elsewhere: step from its epoch.
- UNREVOKED_TASKS: wait while the member still reports a pending task, or reports nothing
  (None: "unchanged"). Once it reports none of them, step from its epoch *plus one*: if the
  newest target makes it revoke again, it does so at a fresh epoch (the consumer group stays
  at its epoch instead). Otherwise it lands on the target epoch as usual.
- UNRELEASED_TASKS: step again; held-back tasks come as soon as they are free.
- UNKNOWN: only a member reporting no tasks at all may continue (it starts over at the target
  epoch); anything else is fenced.

Each active task also carries the epoch it was assigned at (Kafka 4.2's TasksTupleWithEpochs;
the coordinator accepts an offset commit for a task from a member epoch no older than it):
kept and revoked tasks keep theirs, tasks added now get the target epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from coterie.group.records.tasks import NO_TASKS, Tasks, TaskSet, tasks
from coterie.group.streams.member_state import MemberState
from coterie.group.streams.task_owners import TaskHolders

TaskEpochs = Mapping[str, Mapping[int, int]]
"""subtopology id -> partition -> the member epoch an active task was assigned at."""

JOIN_EPOCH = 0


class FencedMemberEpoch(Exception):
    """The member must drop every task and rejoin (FENCED_MEMBER_EPOCH)."""


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """Where a streams member's assignment stands: the fields of Kafka's
    StreamsGroupCurrentMemberAssignmentValue. Immutable; reconciliation makes a new one.
    Defaults are a member that has just joined (Kafka's StreamsGroupMember.Builder)."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TaskSet = NO_TASKS
    pending_revocation: TaskSet = NO_TASKS
    active_epochs: TaskEpochs = field(default_factory=dict)
    """For every active task assigned or pending revocation: the epoch it was assigned at."""

    def holds(self) -> TaskSet:
        """Every task the member may still be running: assigned ones and the ones it was asked
        to give back but has not yet (what `TaskOwners.update` takes)."""
        if self.pending_revocation.is_empty():
            return self.assigned
        return self.assigned.union(self.pending_revocation)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def assignment_epoch(self, subtopology: str, partition: int) -> int | None:
        """The epoch the member got this active task at, None if it holds no such task."""
        return self.active_epochs.get(subtopology, {}).get(partition)


def reconcile(current: CurrentAssignment, process_id: str, target_epoch: int, target: TaskSet,
              holders: TaskHolders, owned: TaskSet | None) -> CurrentAssignment:
    """The member's next assignment. `process_id` is the member's process; `holders` answers for
    the group as it is before this step (the member's own record included, as Kafka's maps
    do); `owned` is what the member reported in this heartbeat, None when it did not send all
    three of its owned active, standby and warm-up task lists (Kafka then treats the tasks as
    unchanged). Returns `current` itself when nothing changes, so that a caller writes no
    record for it. Raises FencedMemberEpoch for a member in the UNKNOWN state unless it
    reports that it owns no task at all."""
    state = current.state
    if state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _step(current, current.member_epoch, process_id, target_epoch, target, holders,
                     owned)
    if state is MemberState.UNREVOKED_TASKS:
        if owned is None or owned.overlaps(current.pending_revocation):
            return current
        return _step(current, current.member_epoch + 1, process_id, target_epoch, target,
                     holders, owned)
    if state is MemberState.UNRELEASED_TASKS:
        return _step(current, current.member_epoch, process_id, target_epoch, target, holders,
                     owned)
    if owned is None or not owned.is_empty():
        raise FencedMemberEpoch("The streams group member is in a unknown state. "
                                "The member must abandon all its tasks and rejoin.")
    return _step(current, target_epoch, process_id, target_epoch, target, holders, owned)


def check_member_epoch(current: CurrentAssignment, epoch: int, owned: TaskSet | None) -> None:
    """Fences a heartbeat whose epoch the member cannot be at (Kafka 4.2's
    throwIfStreamsGroupMemberEpochIsInvalid), before any reconciliation. A joining heartbeat
    (epoch 0) is not checked here. An epoch ahead of the coordinator's is fenced. The epoch
    before the current one is accepted only when the member reports all its tasks and they
    are all assigned to it in the same roles: its last answer was lost, and it runs nothing
    it should not. Any other older epoch, or tasks it does not have, are fenced."""
    if epoch == JOIN_EPOCH:
        return
    if epoch > current.member_epoch:
        raise FencedMemberEpoch(
            f"The streams group member has a greater member epoch ({epoch}) than the one "
            f"known by the group coordinator ({current.member_epoch}). The member must abandon "
            "all its partitions and rejoin.")
    if epoch < current.member_epoch and (
            epoch != current.previous_member_epoch or owned is None
            or not owned.issubset(current.assigned)):
        raise FencedMemberEpoch(
            f"The streams group member has a smaller member epoch ({epoch}) than the one "
            f"known by the group coordinator ({current.member_epoch}). The member must abandon "
            "all its partitions and rejoin.")


# -- the step -----------------------------------------------------------------------------------

Blocked = Callable[[str, int], bool]


def _step(current: CurrentAssignment, epoch: int, process_id: str, target_epoch: int,
          target: TaskSet, holders: TaskHolders, owned: TaskSet | None) -> CurrentAssignment:
    """Kafka's computeNextAssignment + buildNewMember: `epoch` is where the member stays if it
    must revoke."""
    assigned = current.assigned
    keep = assigned.intersect(target)
    revoke = assigned.minus(keep)
    wanted = target.minus(keep)

    def active_blocked(s: str, p: int) -> bool:
        return bool(holders.active_processes(s, p)
                    or process_id in holders.standby_processes(s, p)
                    or process_id in holders.warmup_processes(s, p))

    def replica_blocked(s: str, p: int) -> bool:
        return (process_id in holders.active_processes(s, p)
                or process_id in holders.standby_processes(s, p)
                or process_id in holders.warmup_processes(s, p))

    add_active, held_active = _free(wanted.active, active_blocked)
    add_standby, held_standby = _free(wanted.standby, replica_blocked)
    add_warmup, held_warmup = _free(wanted.warmup, replica_blocked)

    if not revoke.is_empty() and (owned is None or owned.overlaps(revoke)):
        epochs = _epochs(current, keep.active, revoke.active, {}, target_epoch)
        return _moved(current, epoch, MemberState.UNREVOKED_TASKS, keep, revoke, epochs)
    held_back = held_active or held_standby or held_warmup
    state = MemberState.UNRELEASED_TASKS if held_back else MemberState.STABLE
    add = TaskSet(add_active, add_standby, add_warmup)
    new_assigned = keep if add.is_empty() else keep.union(add)
    if new_assigned == target:
        new_assigned = target  # share the target's mappings: one copy per member, not two
    epochs = _epochs(current, keep.active, {}, add_active, target_epoch)
    return _moved(current, target_epoch, state, new_assigned, NO_TASKS, epochs)


def _free(wanted: Tasks, blocked: Blocked) -> tuple[Tasks, bool]:
    """The wanted tasks that are free now, and whether any was held back."""
    if not wanted:
        return wanted, False
    free = {s: frozenset(p for p in ps if not blocked(s, p)) for s, ps in wanted.items()}
    held_back = any(len(free[s]) != len(ps) for s, ps in wanted.items())
    return (tasks(free) if held_back else wanted), held_back


def _epochs(current: CurrentAssignment, kept: Tasks, revoked: Tasks, added: Tasks,
            target_epoch: int) -> TaskEpochs:
    """The assignment epochs of the new record's active tasks: kept and revoked ones keep the
    epoch they had (the member's epoch for a record that had none), added ones get the target
    epoch. A task the member was revoking and now gets again counts as added (Kafka reads
    epochs from the assigned tasks only)."""
    old = current.active_epochs
    out: dict[str, dict[int, int]] = {}
    for part in (kept, revoked):
        for s, ps in part.items():
            had = old.get(s, {})
            row = out.setdefault(s, {})
            for p in ps:
                row[p] = had.get(p, current.member_epoch)
    for s, ps in added.items():
        row = out.setdefault(s, {})
        for p in ps:
            row[p] = target_epoch
    return out


def _moved(current: CurrentAssignment, epoch: int, state: MemberState, assigned: TaskSet,
           pending: TaskSet, epochs: TaskEpochs) -> CurrentAssignment:
    new = CurrentAssignment(member_epoch=epoch, previous_member_epoch=current.member_epoch,
                            state=state, assigned=assigned, pending_revocation=pending,
                            active_epochs=epochs)
    return current if new == current else new
