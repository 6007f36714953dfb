"""One consumer's membership in a KIP-848 consumer group: states, epochs, target and current
assignment, and what each heartbeat answer means. The I/O around it (heartbeats on the wire,
listener callbacks, commits) is `coterie.client.consumer_heartbeat`.

Theory of operation. The coordinator, not a leader, computes every member's target
assignment; a member only heartbeats, learns its target and reconciles towards it:

    CREATED --join--> JOINING --answer--> RECONCILING --callbacks done--> ACKNOWLEDGING
       --heartbeat sent--> STABLE (or RECONCILING again if a newer target arrived meanwhile)

- JOINING: epoch 0, every field sent. The answer carries the member epoch and an
  assignment; a target equal to what the member holds goes straight to STABLE.
- RECONCILING: the target (topic ids -> partitions) differs from the reconciled assignment.
  Reconciliation resolves topic ids to names (`plan_reconciliation`), revokes owned - target
  (stop fetching, commit, on_partitions_revoked), then adds target - owned
  (on_partitions_assigned). The coordinator only ever sends partitions nobody else holds, so
  adding at once is safe; what it waits for is the revocation, which the member reports...
- ACKNOWLEDGING: ...by sending the reconciled assignment (TopicPartitions) in a heartbeat at
  once, not at the next interval.
- STABLE: heartbeats every interval (the coordinator's HeartbeatIntervalMs).
- FENCED (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): the coordinator dropped the member. Its
  partitions are lost (on_partitions_lost, no commit), then it joins again with epoch 0 and
  the *same* member id (Kafka's client keeps its id for the whole process).
- LEAVING -> LEFT: close gives up the assignment (commit, on_partitions_revoked), then sends
  epoch -1 (static members: -2).
- FATAL: an error no retry fixes (`HeartbeatAction.FATAL`); the consumer raises it from poll.

Transitions are listed in `TRANSITIONS`; any other move raises IllegalTransition. Which
heartbeat error leads where is `HEARTBEAT_ERRORS` (everything not listed is fatal, as in
Kafka's client: GROUP_AUTHORIZATION_FAILED, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR,
INVALID_REQUEST, INVALID_REGULAR_EXPRESSION, FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID,
UNSUPPORTED_VERSION, GROUP_ID_NOT_FOUND, ...).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coterie.client.heartbeat_fields import (
    JOIN_EPOCH,
    NO_ASSIGNMENT,
    LocalAssignment,
    TopicIdPartition,
)
from coterie.client.subscription import TopicPartition


class MembershipState(enum.Enum):
    CREATED = "created"
    JOINING = "joining"
    RECONCILING = "reconciling"
    ACKNOWLEDGING = "acknowledging"
    STABLE = "stable"
    FENCED = "fenced"
    LEAVING = "leaving"
    LEFT = "left"
    FATAL = "fatal"


S = MembershipState
_ACTIVE = frozenset({S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE})
TRANSITIONS: Mapping[MembershipState, frozenset[MembershipState]] = {
    S.CREATED: frozenset({S.JOINING, S.LEFT, S.FATAL}),
    S.JOINING: frozenset({S.RECONCILING, S.STABLE, S.FENCED, S.LEAVING, S.FATAL}),
    S.RECONCILING: frozenset({S.ACKNOWLEDGING, S.STABLE, S.FENCED, S.LEAVING, S.FATAL}),
    S.ACKNOWLEDGING: frozenset({S.STABLE, S.RECONCILING, S.FENCED, S.LEAVING, S.FATAL}),
    S.STABLE: frozenset({S.RECONCILING, S.FENCED, S.LEAVING, S.FATAL}),
    S.FENCED: frozenset({S.JOINING, S.LEAVING, S.LEFT, S.FATAL}),
    S.LEAVING: frozenset({S.LEFT}),
    S.LEFT: frozenset(),
    S.FATAL: frozenset({S.LEFT}),
}


class IllegalTransition(RuntimeError):
    """A move the membership state machine does not allow (a bug in the caller)."""


class HeartbeatAction(enum.Enum):
    """What the member does after a heartbeat error."""

    REDISCOVER = "find the coordinator again, then heartbeat (after a backoff)"
    BACKOFF = "heartbeat again after a backoff"
    FENCED = "drop the partitions as lost, join again with epoch 0"
    FATAL = "stop; poll() raises"


E = ErrorCode
HEARTBEAT_ERRORS: Mapping[ErrorCode, HeartbeatAction] = {
    E.not_coordinator: HeartbeatAction.REDISCOVER,
    E.coordinator_not_available: HeartbeatAction.REDISCOVER,
    E.coordinator_load_in_progress: HeartbeatAction.BACKOFF,
    E.fenced_member_epoch: HeartbeatAction.FENCED,
    E.unknown_member_id: HeartbeatAction.FENCED,
}


def heartbeat_action(code: ErrorCode) -> HeartbeatAction:
    return HEARTBEAT_ERRORS.get(code, HeartbeatAction.FATAL)


@dataclass(frozen=True, slots=True)
class ReconcilePlan:
    """One reconciliation step: what to revoke and add, and what to acknowledge after."""

    resolved: LocalAssignment  # the part of the target whose topic names are known
    assigned: frozenset[TopicPartition]  # `resolved` by name: owned once the step is done
    revoked: frozenset[TopicPartition]  # owned - assigned
    added: frozenset[TopicPartition]  # assigned - owned
    unresolved: frozenset[uuid.UUID]  # topic ids of the target with no known name yet


def plan_reconciliation(target: LocalAssignment, names: Mapping[uuid.UUID, str],
                        owned: Iterable[tuple[str, int]]) -> ReconcilePlan:
    """Compare the target (by topic id) with what the consumer owns (by name)."""
    known: set[TopicIdPartition] = set()
    assigned: set[TopicPartition] = set()
    unresolved: set[uuid.UUID] = set()
    for topic_id, partition in target.partitions:
        name = names.get(topic_id)
        if name is None:
            unresolved.add(topic_id)
            continue
        known.add((topic_id, partition))
        assigned.add(TopicPartition(name, partition))
    held = frozenset(TopicPartition(*tp) for tp in owned)
    new = frozenset(assigned)
    return ReconcilePlan(resolved=LocalAssignment(target.local_epoch, frozenset(known)),
                         assigned=new, revoked=held - new, added=new - held,
                         unresolved=frozenset(unresolved))


class Membership:
    """The state of one member (see the module docstring). `member_id` is fixed for v1;
    on v0 the coordinator may hand one out, which `on_success` adopts."""

    def __init__(self, member_id: str) -> None:
        self.state = S.CREATED
        self.member_id = member_id
        self.epoch = JOIN_EPOCH
        self.target = NO_ASSIGNMENT
        self.current = NO_ASSIGNMENT
        self.joins = 0  # bumped on every (re)join: a reconciliation of an older one is void

    # -- transitions --------------------------------------------------------------------------
    def move(self, to: MembershipState) -> None:
        if to is self.state:
            return
        if to not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"membership cannot go from {self.state.name} to "
                                    f"{to.name}")
        self.state = to

    @property
    def in_group(self) -> bool:
        """Does the coordinator know this member with a valid epoch (commits allowed)?"""
        return self.state in _ACTIVE and self.epoch > 0

    @property
    def active(self) -> bool:
        return self.state in _ACTIVE

    @property
    def reconciled(self) -> bool:
        return self.current == self.target

    @property
    def wants_heartbeat_now(self) -> bool:
        """States that heartbeat at once rather than at the interval."""
        return self.state in (S.JOINING, S.ACKNOWLEDGING)

    def join(self) -> None:
        """Start (or restart after fencing) with epoch 0 and nothing owned."""
        self.move(S.JOINING)
        self.epoch = JOIN_EPOCH
        self.target = NO_ASSIGNMENT
        self.current = NO_ASSIGNMENT
        self.joins += 1

    def fence(self) -> None:
        """The coordinator no longer knows this member (or its epoch)."""
        self.move(S.FENCED)
        self.epoch = JOIN_EPOCH

    def fail(self) -> None:
        self.move(S.FATAL)

    def leave(self) -> None:
        self.move(S.LEAVING)
        self.current = NO_ASSIGNMENT

    def left(self) -> None:
        self.move(S.LEFT)

    # -- heartbeats ---------------------------------------------------------------------------
    def on_sent(self) -> None:
        """A heartbeat went out: an acknowledgement is now on its way."""
        if self.state is S.ACKNOWLEDGING:
            self.move(S.STABLE if self.reconciled else S.RECONCILING)

    def on_success(self, epoch: int, assignment: Mapping[uuid.UUID, Iterable[int]] | None,
                   member_id: str | None = None) -> None:
        """A heartbeat answered NONE: adopt the epoch and, if given, the new target."""
        if not self.active:
            return  # leaving, fenced or failed meanwhile: the answer is stale
        self.epoch = int(epoch)
        if member_id:
            self.member_id = member_id
        if assignment is not None:
            partitions = LocalAssignment.of(0, assignment).partitions
            self.target = self.target.updated_with(partitions)
        if not self.reconciled:
            if self.state is not S.ACKNOWLEDGING:
                self.move(S.RECONCILING)
        elif self.state in (S.JOINING, S.RECONCILING):
            self.move(S.STABLE)

    def reconciled_to(self, resolved: LocalAssignment, joins: int) -> bool:
        """A reconciliation of `resolved` finished; acknowledge it. False (nothing changes)
        if the member rejoined or left the reconciling state meanwhile."""
        if joins != self.joins or self.state is not S.RECONCILING:
            return False
        self.current = resolved
        self.move(S.ACKNOWLEDGING)
        return True
