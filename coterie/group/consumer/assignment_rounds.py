"""A group's next target (step 4 of a heartbeat) and the coordinator's side of client-side
assignment rounds (a coterie extension; the rules are in `client_assignment.py`).

When the group epoch is ahead of the target epoch, a new target is computed with the group's
assignor: the one most members ask for, else the first configured. A server-side assignor
computes it in the heartbeat (`target_assignment.compute_target`). A client-side one
("client:<name>") opens a round instead (`next_target`): one member is asked to compute the
target (ConsumerGroupPrepareAssignment, `prepare`) and installs it
(ConsumerGroupInstallAssignment, `install`); meanwhile members reconcile towards the old
target. A group's first target, a failed or invalid install, a round that times out
(`expired`) and a round nobody can compute all fall back to the first configured server
assignor (`fall_back`).

The functions decide: a target or a `Result` whose records the coordinator applies. The only
state they change is the pending rounds (`ClientRounds`: each group's round is in its
volatile table, `ConsumerGroup.client_round`), and only where the coordinator's handler used
to: `install`, `fall_back` and `expired` end a round;
`next_target` does not touch the rounds, it says what becomes of them (`KEEP`, None to end
the round, or a new one) for the caller to do once nothing can refuse any more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign.spec import Assignor, AssignorError
from coterie.group.consumer.client_assignment import (
    DEFAULT_TIMEOUT_MS,
    INSTALL_OK,
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    InstalledAssignor,
    InvalidAssignment,
    PendingRound,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    can_compute,
    choose_member,
    is_client_assignor,
    prepare_answer,
    validate,
)
from coterie.group.consumer.group import ConsumerGroup
from coterie.group.consumer.heartbeat_request import Refused, blank
from coterie.group.consumer.member import ConsumerMember
from coterie.group.consumer.target_assignment import TargetAssignment, compute_target
from coterie.group.records.consumer import Partitions
from coterie.group.result import Result, TimerOp
from coterie.group.topic_image import TopicImage

KEEP: Any = object()  # "the pending client-side round stays as it is"


class ClientRounds:
    """The pending rounds of one shard's consumer groups, each in its group's volatile table
    (`ConsumerGroup.client_round`: lost with the group when it is rebuilt), and how long a
    chosen member has to install."""

    def __init__(self, groups: Mapping[str, ConsumerGroup],
                 timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        if timeout_ms < 1:
            raise ValueError("group.consumer.client.assignment.timeout.ms must be greater "
                             "than or equal to 1")
        self.timeout_ms = timeout_ms
        self._groups = groups

    def get(self, group_id: str) -> PendingRound | None:
        group = self._groups.get(group_id)
        return None if group is None else group.client_round

    def open(self, group_id: str, group_epoch: int, assignor: str, member_id: str,
             now_ms: int) -> PendingRound:
        """A round as it would be opened now (not stored until `put`)."""
        return PendingRound(group_id, group_epoch, assignor, member_id,
                            now_ms + self.timeout_ms)

    def put(self, pending: PendingRound) -> None:
        self._groups[pending.group_id].client_round = pending

    def pop(self, group_id: str) -> PendingRound | None:
        group = self._groups.get(group_id)
        if group is None:
            return None
        pending, group.client_round = group.client_round, None
        return pending

    def __len__(self) -> int:
        return sum(1 for g in self._groups.values() if g.client_round is not None)


def fallback_assignor(assignors: Mapping[str, Assignor], configured: tuple[str, ...]) -> Assignor:
    """The server-side assignor that stands in for a client-side one: the first
    configured (group.consumer.assignors, default uniform)."""
    return assignors[configured[0]]


def next_target(group: ConsumerGroup, group_epoch: int, members: Mapping[str, ConsumerMember],
                subscriptions: Mapping[str, frozenset[str]],
                old_targets: Mapping[str, Partitions], name: str, now_ms: int, *,
                rounds: ClientRounds, assignors: Mapping[str, Assignor],
                configured: tuple[str, ...], image: TopicImage,
                ) -> tuple[TargetAssignment | None, Any, list[TimerOp]]:
    """The new target for `group_epoch` computed by assignor `name`, or, for a client-side
    assignor, None while a round asks a member for it. Also returns what becomes of the
    group's pending round (a new one, None to end it, or KEEP) and its timer changes.
    Decides only; the caller applies. Raises Refused (UNKNOWN_SERVER_ERROR) if the
    server-side assignor fails."""
    gid = group.group_id
    pending = rounds.get(gid)
    client = is_client_assignor(name)
    # A group's first target comes from the server-side fallback (bootstrap: a member
    # reconciled to target epoch 0 would be told epoch 0, which means "join").
    if client and group.assignment_epoch > 0:
        current = pending is not None and pending.group_epoch == group_epoch
        if not (current and now_ms >= pending.deadline_ms):  # (expired: fall back)
            chosen = None if pending is None else members.get(pending.member_id)
            if (current and pending.assignor == name and chosen is not None
                    and can_compute(chosen, name)):
                return None, KEEP, []  # still waiting for the chosen member
            choice = choose_member(members, name)
            if choice is not None:
                new = rounds.open(gid, group_epoch, name, choice, now_ms)
                timers = [] if pending is None else [TimerOp(pending.timer_key, None)]
                timers.append(TimerOp(new.timer_key, new.deadline_ms))
                return None, new, timers
    assignor = fallback_assignor(assignors, configured) if client else assignors[name]
    try:
        target = compute_target(gid, group_epoch, members, subscriptions, old_targets,
                                assignor, image)
    except AssignorError as exc:
        raise Refused(ErrorCode.unknown_server_error,
                       f"Failed to compute a new target assignment for epoch "
                       f"{group_epoch}: {exc}") from None
    if pending is None:
        return target, KEEP, []
    return target, None, [TimerOp(pending.timer_key, None)]


def prepare(req: PrepareAssignmentRequest, groups: Mapping[str, ConsumerGroup],
            rounds: ClientRounds, image: TopicImage) -> Result:
    """ConsumerGroupPrepareAssignment: the group state for the member chosen to compute
    the pending assignment; UNKNOWN_MEMBER_ID for anyone else (nothing to do)."""
    try:
        group = _assignment_group(groups, req.group_id, req.member_id, req.member_epoch)
        pending = _pending_round(rounds, group, req.member_id)
    except Refused as refused:
        return Result(PrepareAssignmentResponse(refused.code, refused.message))
    subscriptions = {mid: group.subscription_of(m) for mid, m in group.members.items()}
    return Result(prepare_answer(pending, group.members, subscriptions, group.targets, image))


def install(req: InstallAssignmentRequest, groups: Mapping[str, ConsumerGroup],
            rounds: ClientRounds, assignors: Mapping[str, Assignor],
            configured: tuple[str, ...], image: TopicImage) -> Result:
    """ConsumerGroupInstallAssignment: a valid assignment from the chosen member becomes
    the target; an error or an invalid one makes the server-side fallback compute it."""
    try:
        group = _assignment_group(groups, req.group_id, req.member_id, req.member_epoch)
        if req.group_epoch != group.group_epoch:
            raise Refused(ErrorCode.stale_member_epoch,
                           f"The assignment is for group epoch {req.group_epoch}, but group "
                           f"{group.group_id} is at epoch {group.group_epoch}.")
        pending = _pending_round(rounds, group, req.member_id)
    except Refused as refused:
        return Result(InstallAssignmentResponse(refused.code, refused.message))
    if req.error != INSTALL_OK:
        return fall_back(group, pending, rounds, fallback_assignor(assignors, configured),
                         image, InstallAssignmentResponse(ErrorCode.none))
    subscriptions = {mid: group.subscription_of(m) for mid, m in group.members.items()}
    try:
        assignment = validate(req.members, group.members, subscriptions, image)
    except InvalidAssignment as exc:
        refused = InstallAssignmentResponse(
            ErrorCode.invalid_request,
            f"Invalid assignment for group {group.group_id} at epoch {pending.group_epoch}: "
            f"{exc}. The group falls back to the server-side assignor {configured[0]}.")
        return fall_back(group, pending, rounds, fallback_assignor(assignors, configured),
                         image, refused)
    target = compute_target(group.group_id, pending.group_epoch, group.members,
                            subscriptions, dict(group.targets),
                            InstalledAssignor(pending.assignor, assignment), image)
    rounds.pop(group.group_id)
    return Result(InstallAssignmentResponse(ErrorCode.none), records=target.records,
                  timers=[TimerOp(pending.timer_key, None)])


def fall_back(group: ConsumerGroup, pending: PendingRound, rounds: ClientRounds,
              fallback: Assignor, image: TopicImage, response: Any = None) -> Result:
    """End the round: the server-side `fallback` computes the target for its epoch."""
    rounds.pop(group.group_id)
    timers = [TimerOp(pending.timer_key, None)]
    subscriptions = {mid: group.subscription_of(m) for mid, m in group.members.items()}
    try:
        target = compute_target(group.group_id, group.group_epoch, group.members,
                                subscriptions, dict(group.targets), fallback, image)
    except AssignorError as exc:
        # Nothing written: the next heartbeat finds the group behind and opens a round.
        if isinstance(response, InstallAssignmentResponse):
            response = InstallAssignmentResponse(
                ErrorCode.unknown_server_error,
                f"Failed to compute a new target assignment for epoch "
                f"{group.group_epoch}: {exc}")
        return Result(response, timers=timers)
    return Result(response, records=target.records, timers=timers)


def expired(group_id: str, group_epoch: int, groups: Mapping[str, ConsumerGroup],
            rounds: ClientRounds, fallback: Assignor, image: TopicImage) -> Result:
    """The CONSUMER_CLIENT_ASSIGNMENT timer of `group_epoch`: the chosen member has not
    installed in time, so the fallback computes the target (if the round is still open)."""
    pending = rounds.get(group_id)
    if pending is None or pending.group_epoch != group_epoch:
        return Result()  # installed, fallen back or replaced in time
    group = groups.get(group_id)
    if group is None or group.group_epoch != group_epoch:
        # Gone, or moved on: the next heartbeat opens a round for the new epoch.
        rounds.pop(group_id)
        return Result()
    return fall_back(group, pending, rounds, fallback, image)


def _assignment_group(groups: Mapping[str, ConsumerGroup], group_id: str, member_id: str,
                      epoch: int) -> ConsumerGroup:
    """The checks both extension APIs start with (the KIP's order)."""
    if blank(group_id):
        raise Refused(ErrorCode.invalid_request, "GroupId can't be empty.")
    group = groups.get(group_id)
    if group is None:
        raise Refused(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    member = group.members.get(member_id)
    if member is None:
        raise Refused(ErrorCode.unknown_member_id,
                       f"Member {member_id} is not a member of group {group_id}.")
    if epoch != member.member_epoch:
        raise Refused(ErrorCode.stale_member_epoch,
                       f"The received member epoch {epoch} does not match the expected "
                       f"member epoch {member.member_epoch}.")
    return group


def _pending_round(rounds: ClientRounds, group: ConsumerGroup, member_id: str) -> PendingRound:
    """The group's round for its current epoch, if `member_id` is the one chosen for it."""
    pending = rounds.get(group.group_id)
    if (pending is None or pending.group_epoch != group.group_epoch
            or group.assignment_epoch >= group.group_epoch):
        raise Refused(ErrorCode.unknown_member_id,
                       f"No client-side assignment of group {group.group_id} is pending "
                       f"at group epoch {group.group_epoch}.")
    if pending.member_id != member_id:
        raise Refused(ErrorCode.unknown_member_id,
                       f"Member {member_id} is not the member chosen to compute the "
                       f"assignment of group {group.group_id} at epoch "
                       f"{pending.group_epoch}.")
    return pending
