"""KIP-848 consumer groups (seed 3), driven by heartbeats, timers and topic changes, free of I/O.

Every handler takes a request and `now_ms` and returns a `Result` (`coterie.group.result`):
the answer, the records to persist before answering, and the timers to arm or cancel. State
changes only by applying records (`replay`), the same path that loads `__consumer_offsets`
after a restart, so live and replayed state cannot differ. A handler first decides
everything (and may refuse with an error, leaving the group untouched), then applies its
records, then answers.

This class is the entry point and runs the steps; the package around it holds the parts:
`heartbeat_request.py` (the checks on a request's face, epoch fencing, what a request changes
in a member), `member.py` and `group.py` (the state), `target_assignment.py`,
`reconciliation.py` (revoke before assign), `regex.py` (subscriptions by regex),
`client_assignment.py` (seed 4's client-side rounds), `changes.py` (the records a change is
written as), `deadlines.py` (session and revocation timers), `describe.py`
(ConsumerGroupDescribe).

A ConsumerGroupHeartbeat, step by step (seed 3's "Member Epoch - Reconcile the group"):
1. Validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR), then find the group
   (created by a join, GROUP_ID_NOT_FOUND otherwise) and the member (created by a join,
   UNKNOWN_MEMBER_ID otherwise). Static members (instance id) are found by instance id: a
   join takes over a member that left temporarily (epoch -2) with all its state, and is
   refused with UNRELEASED_INSTANCE_ID while the old one is still there; a heartbeat under
   another member id gets FENCED_INSTANCE_ID.
2. Check the member epoch: ahead of ours -> FENCED_MEMBER_EPOCH; behind -> accepted only if
   it is the previous epoch and the member owns a subset of its assignment (the answer that
   moved it was lost), else FENCED_MEMBER_EPOCH.
3. Update the member with the fields it sent (None means unchanged). New or changed topic
   names bump the group epoch, as does moving to a regex the group has already resolved, or
   dropping a regex, or joining a group still at epoch 0. A regex new to the group is not
   resolved here: it adds no topic yet, and a resolution is asked for (below, "Regexes").
4. If the group epoch is ahead of the target epoch, compute a new target with the group's
   assignor (the one most members ask for, else the first configured) and write the members
   whose target changed. If that assignor is a client-side one ("client:<name>", a coterie
   extension: `consumer/client_assignment.py` has the rules), open a round instead: one member is
   asked to compute the target (ConsumerGroupPrepareAssignment) and installs it
   (ConsumerGroupInstallAssignment); meanwhile members reconcile towards the old target.
5. Reconcile this member towards its target (`reconciliation.reconcile`): revoke before
   assign. Arm its revocation timer while it has partitions to give back.
6. Re-arm its session timer and answer: its epoch, the heartbeat interval and, when the
   request was a full one or its partitions changed, every partition it may use now.

Leaving: epoch -1 removes the member (tombstones) and bumps the group epoch; epoch -2 (static
members only) keeps the member and its partitions at epoch -2 until it rejoins under the same
instance id or its session expires.

Timers (`TimerKey`s, by kind; `coterie.group.timers`):
- CONSUMER_SESSION (group, member): no heartbeat within group.consumer.session.timeout.ms
  -> the member is fenced (removed) and the group epoch bumped.
- CONSUMER_REVOCATION (group, member, epoch): the member was asked to revoke partitions at
  member epoch `epoch` and has not confirmed within its rebalance timeout -> fenced likewise.
- CONSUMER_CLIENT_ASSIGNMENT (group, epoch: the group epoch): the member chosen to compute a
  client-side assignment has not installed one within
  group.consumer.client.assignment.timeout.ms -> the server-side fallback computes it.
- CONSUMER_REGEX (group): due at once, so that it runs after the heartbeat that asked for
  it has been answered -> the group's regexes are resolved (below).
Classic-protocol members of a mixed group (`mixed/classic_members.py`, which shares steps 3 to 5
through `_update_member`) use the session key with their own JoinGroup session timeout, have
no revocation timer, and have CONSUMER_JOIN and CONSUMER_SYNC (group, member) timers
instead; `_cancel_timers` cancels those too when such a member is removed.

Regexes are resolved asynchronously, as in Kafka 4.2 (GroupMetadataManager's
maybeUpdateRegularExpressions and handleRegularExpressionsResult), so that a member with a
literal topic and a regex gets the literal topic's partitions first and the matched topics in
a later epoch, the order clients (librdkafka's tests among them) expect. Every heartbeat, and
every JoinGroup of a classic member, asks for a resolution of all the group's regexes (the
CONSUMER_REGEX timer) when none is pending, the last one is more than 10 s old, and either
a regex is unresolved (a member just brought it), topics were created since the last
resolution, or it is older than group.consumer.regex.refresh.interval.ms. The timer resolves
the regexes it was asked for that are still in use against the known topics, writes a record
for each, and bumps the group epoch if a regex now matches other topics (or the subscribed
topics' hash moved); the next heartbeat computes the target.

Topic changes come in through `on_metadata_change`: they resolve no regex (a created topic
only makes the next eligible heartbeat ask for a resolution; a deleted one stays in a
resolution until the next, and is simply not assigned), and every group whose subscribed
topics changed (partition count, topic created or deleted) gets a new group epoch; its target
is recomputed at the next heartbeat.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign.registry import lookup
from coterie.assign.spec import Assignor, AssignorError
from coterie.group.consumer.changes import (
    assignment_record,
    epoch_record,
    metadata_record,
    replace_records,
)
from coterie.group.consumer.client_assignment import (
    DEFAULT_TIMEOUT_MS,
    INSTALL_OK,
    ClientRounds,
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
from coterie.group.consumer.config import MIN_REGEX_REFRESH_INTERVAL_MS, ConsumerGroupConfig
from coterie.group.consumer.deadlines import (
    cancel_timers,
    revocation_key,
    revocation_timers,
    session_timer,
)
from coterie.group.consumer.describe import describe_groups
from coterie.group.consumer.group import ConsumerGroup, ReplayError, ResolvedRegex
from coterie.group.consumer.heartbeat_request import (
    Refused,
    blank,
    check_epoch,
    owned_partitions,
    tolerate_partial_rejoin,
    updated_member,
    validate_request,
    wire_partitions,
)
from coterie.group.consumer.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMember,
    MemberState,
)
from coterie.group.consumer.messages import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
    ListedConsumerGroup,
)
from coterie.group.consumer.reconciliation import FencedMember, reconcile
from coterie.group.consumer.regex import InvalidRegex, compile_regex, resolve
from coterie.group.consumer.target_assignment import TargetAssignment, compute_target
from coterie.group.records.classic import Record
from coterie.group.records.consumer import (
    CONSUMER_RECORD_KEY_TYPES,
    NO_PARTITIONS,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    Partitions,
)
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey, TimerKind
from coterie.group.topic_image import TopicImage, TopicInfo

_KEEP: Any = object()  # "the pending client-side round stays as it is"


class ConsumerCoordinator:
    """All consumer groups of one coordinator (module docstring has the rules)."""

    def __init__(self, config: ConsumerGroupConfig, new_member_id: Callable[[], str],
                 topics: TopicImage | None = None,
                 client_assignment_timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.config = config
        self.new_member_id = new_member_id
        self.groups: dict[str, ConsumerGroup] = {}
        self.image = topics or TopicImage()
        # Resolve the configured assignors now, so a misconfiguration fails at start-up.
        self._assignors: dict[str, Assignor] = {name: lookup(name) for name in config.assignors}
        # Client-side assignors (coterie extension): pending rounds, in memory only.
        self.client_rounds = ClientRounds(client_assignment_timeout_ms)
        # The image version of the last topic change that created a topic (Kafka's
        # lastMetadataImageWithNewTopics; -1 until the first change): resolutions older than
        # it may miss a topic.
        self._new_topics_version = -1
        # The highest image version a loaded resolution names. Image versions restart with
        # the process (Kafka's are metadata offsets, which do not), so new versions are kept
        # above it: the first picture after loading is newer than every loaded resolution.
        self._version_floor = 0

    # == replay ==============================================================================
    def replay(self, record: Record) -> None:
        """Apply one consumer-group record; other records are ignored. The only way state
        changes, live or at load time."""
        key, value = record.key, record.value
        if not isinstance(key, CONSUMER_RECORD_KEY_TYPES):
            return
        group_id = key.group_id
        group = self.groups.get(group_id)
        if value is None and group is None:
            return  # a tombstone for something already gone
        if isinstance(key, ConsumerGroupMetadataKey) and value is None:
            assert group is not None
            if group.members or group.targets:
                raise ReplayError(f"group {group_id} deleted while it still has members")
            del self.groups[group_id]
            return
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
        match key:
            case ConsumerGroupMetadataKey():
                group.apply_group_metadata(value)  # type: ignore[arg-type]
            case ConsumerGroupMemberMetadataKey(member_id=member_id):
                group.apply_member_metadata(member_id, value)  # type: ignore[arg-type]
            case ConsumerGroupTargetAssignmentMetadataKey():
                group.apply_target_epoch(value)  # type: ignore[arg-type]
            case ConsumerGroupTargetAssignmentMemberKey(member_id=member_id):
                group.apply_target_member(member_id, value)  # type: ignore[arg-type]
            case ConsumerGroupCurrentMemberAssignmentKey(member_id=member_id):
                group.apply_current_assignment(member_id, value)  # type: ignore[arg-type]
            case ConsumerGroupRegularExpressionKey(regex=regex):
                group.apply_regex(regex, value)  # type: ignore[arg-type]
                if value is not None:
                    self._version_floor = max(self._version_floor, value.version)  # type: ignore[union-attr]

    def _apply(self, records: Iterable[Record]) -> None:
        for record in records:
            self.replay(record)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Deadlines to arm once loading finishes: every member must heartbeat again within
        its session, and members asked to revoke must still do so in time."""
        ops = []
        for group in self.groups.values():
            for m in group.members.values():
                ops.append(self.session_timer(group.group_id, m.member_id, now_ms, m))
                if m.state is MemberState.UNREVOKED_PARTITIONS and not m.uses_classic_protocol:
                    ops.append(TimerOp(revocation_key(group.group_id, m),
                                       now_ms + max(m.rebalance_timeout_ms, 0)))
        return ops

    # == ConsumerGroupHeartbeat ==============================================================
    def heartbeat(self, req: ConsumerHeartbeatRequest, now_ms: int,
                  validated: bool = False) -> Result:
        """One ConsumerGroupHeartbeat. `validated`: the caller already had `check` accept
        this very request (the facade does, to answer before looking for a classic group),
        so the face checks are not run twice."""
        req = tolerate_partial_rejoin(req)
        try:
            if not validated:
                validate_request(req, self._assignors, self.config.assignors)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(req, now_ms)
            return self._heartbeat(req, now_ms)
        except Refused as refused:
            return Result(ConsumerHeartbeatResponse(refused.code, refused.message))

    def settled_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                          client_id: str, client_host: str, now_ms: int) -> Result | None:
        """The answer to a settled member's heartbeat that changes nothing, or None to take
        the general path (`heartbeat`). Most heartbeats of a group are these, so they skip
        the step-by-step (validation, update, target, reconciliation). The caller has seen
        that the request sets no field (epoch > 0, every other field None or -1: the broker
        checks that on the wire request, before any core value is built); here: the member
        exists under this id (so its ids passed validation when it joined), is at the current
        target epoch and STABLE, its client id and host are the same, and the group's regexes
        are not due for a resolution (`_regex_refresh`). The general path
        would write no record, compute no target, keep the member as it is, and answer with
        its epoch and no assignment after pushing its session timer back: exactly this.
        (`tests/unit/group/test_consumer_steady_path.py` holds the two paths to the same
        answers.)"""
        group = self.groups.get(group_id)
        if group is None or group.group_epoch != group.assignment_epoch:
            return None
        member = group.members.get(member_id)
        if (member is None or member_epoch <= 0 or member.member_epoch != member_epoch
                or member.member_epoch != group.assignment_epoch
                or member.state is not MemberState.STABLE or member.classic is not None
                or member.client_id != client_id or member.client_host != client_host):
            return None
        if group.has_regexes() and self._regex_refresh(group, member, member, (),
                                                       now_ms) is not None:
            return None  # the general path asks for the resolution this heartbeat is due
        return Result(ConsumerHeartbeatResponse(
            ErrorCode.none, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
        ), timers=[self.session_timer(group.group_id, member.member_id, now_ms, member)])

    def check(self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse | None:
        """The error answer for a heartbeat that is invalid on its face (before any group is
        looked at), or None. The broker asks this before it looks for a classic group of
        the same id, as Kafka validates the request before finding the group."""
        try:
            validate_request(tolerate_partial_rejoin(req), self._assignors,
                             self.config.assignors)
        except Refused as refused:
            return ConsumerHeartbeatResponse(refused.code, refused.message)
        return None

    def _heartbeat(self, req: ConsumerHeartbeatRequest, now_ms: int) -> Result:
        joining = req.member_epoch == JOIN_EPOCH
        group = self.groups.get(req.group_id)
        if group is None:
            if not joining:
                raise Refused(ErrorCode.group_id_not_found,
                               f"Consumer group {req.group_id} not found.")
            group = ConsumerGroup(req.group_id)  # exists once its first record is applied
        if len(group.members) >= self.config.max_size and req.member_id not in group.members:
            raise Refused(ErrorCode.group_max_size_reached,
                           "The consumer group has reached its maximum capacity of "
                           f"{self.config.max_size} members.")
        member_id = req.member_id or self.new_member_id()
        owned = owned_partitions(req.owned)
        if req.instance_id is None:
            member, replaced = self._dynamic_member(group, member_id, req.member_epoch, owned), None
        else:
            member, replaced = self._static_member(group, member_id, req, owned)
        updated = updated_member(member, req)
        reconciled, records, timers = self.update_member(group, member, updated, replaced, owned,
                                                          now_ms)
        full = joining or (req.rebalance_timeout_ms != -1 and req.owned is not None and (
            req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        assignment = None
        if full or reconciled.assigned != member.assigned:
            assignment = wire_partitions(reconciled.assigned)
        return Result(ConsumerHeartbeatResponse(
            ErrorCode.none, member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms, assignment=assignment,
        ), records=records, timers=timers)

    def update_member(self, group: ConsumerGroup, member: ConsumerMember,
                       updated: ConsumerMember, replaced: ConsumerMember | None,
                       owned: Partitions | None, now_ms: int,
                       ) -> tuple[ConsumerMember, list[Record], list[TimerOp]]:
        """Steps 3 to 5 of a heartbeat, shared with classic members' JoinGroup: write the
        member as `updated` (replacing the static member `replaced`, if any), bump the group
        epoch if its subscription changed, compute a new target if the group epoch is ahead
        of it, and reconcile the member given the partitions it says it owns. Decides
        everything first (raising Refused leaves the group untouched), then applies the
        records. Returns the reconciled member, the records and the timers."""
        member_id = updated.member_id
        removed = [m for m in (group.members.get(member_id), replaced) if m is not None]
        records: list[Record] = []
        if replaced is not None:
            records += replace_records(group, replaced, updated)
        elif not member.same_metadata(updated) or member_id not in group.members:
            records.append(metadata_record(group.group_id, updated))

        # Subscriptions: drop regexes nobody uses any more; bump the epoch when the member's
        # topics are known to have changed (a regex new to the group adds none yet: its
        # resolution, asked for below, bumps the epoch when it has run). A group at epoch 0
        # is new and always moves to epoch 1, as in Kafka 4.2.
        regexes = dict(group.resolved_regexes)
        regex_records, regex_resolved = self._update_regexes(group, member, updated, removed,
                                                             regexes)
        records += regex_records
        refresh = self._regex_refresh(group, member, updated, removed, now_ms)
        group_epoch = group.group_epoch
        if (group_epoch == 0 or regex_resolved
                or updated.subscribed_topic_names != member.subscribed_topic_names):
            topics = group.subscribed_topics_after(removed, [updated], regexes)
            metadata_hash = self.image.metadata_hash(topics)
            group_epoch += 1
            records.append(epoch_record(group.group_id, group_epoch, metadata_hash))

        # Target assignment (or, with a client-side assignor, a round that asks a member).
        round_change, round_timers = _KEEP, []
        target: TargetAssignment | None = None
        if group_epoch > group.assignment_epoch:
            members = dict(group.members)
            for m in removed:
                members.pop(m.member_id, None)
            members[member_id] = updated
            old_targets = dict(group.targets)
            if replaced is not None:
                old_targets[member_id] = old_targets.pop(replaced.member_id, NO_PARTITIONS)
            name = group.preferred_assignor(self.config.assignors, removed, [updated])
            subscriptions = {mid: group.subscription_of(m, regexes) for mid, m in members.items()}
            target, round_change, round_timers = self._next_target(
                group, group_epoch, members, subscriptions, old_targets, name, now_ms)
        if target is not None:
            records += target.records
            target_epoch, my_target = group_epoch, target.targets[member_id]
        else:
            target_epoch = group.assignment_epoch
            my_target = group.target_of(replaced.member_id if replaced else member_id)

        # Reconciliation (decided before anything is applied: it may still refuse).
        try:
            reconciled = reconcile(updated, target_epoch, my_target, group.partition_epochs,
                                   owned)
        except FencedMember as exc:
            raise Refused(ErrorCode.fenced_member_epoch, str(exc)) from None
        timers = [self.session_timer(group.group_id, member_id, now_ms, reconciled)]
        if replaced is not None:
            timers += self.cancel_timers(group.group_id, replaced)
        if reconciled is not updated:
            records.append(assignment_record(group.group_id, reconciled))
            if not reconciled.uses_classic_protocol:
                # Classic members have no revocation timer: they revoke by rejoining, and
                # their join and sync timers (mixed/classic_members.py) bound how long that takes.
                timers += revocation_timers(group.group_id, updated, reconciled, now_ms)
        timers += round_timers
        if round_change is None:
            self.client_rounds.pop(group.group_id)
        elif round_change is not _KEEP:
            self.client_rounds.put(round_change)
        if refresh is not None:
            timers.append(TimerOp(TimerKey(TimerKind.CONSUMER_REGEX, group.group_id), now_ms))

        self._apply(records)
        if refresh is not None:
            # On the group the records built (a new group is created by replaying them).
            self.groups[group.group_id].regex_refresh = refresh
        return reconciled, records, timers

    def _next_target(self, group: ConsumerGroup, group_epoch: int,
                     members: Mapping[str, ConsumerMember],
                     subscriptions: Mapping[str, frozenset[str]],
                     old_targets: Mapping[str, Partitions], name: str, now_ms: int,
                     ) -> tuple[TargetAssignment | None, Any, list[TimerOp]]:
        """The new target for `group_epoch` computed by assignor `name`, or, for a client-side
        assignor, None while a round asks a member for it. Also returns what becomes of the
        group's pending round (a new one, None to end it, or _KEEP) and its timer changes.
        Decides only; the caller applies."""
        gid = group.group_id
        pending = self.client_rounds.get(gid)
        client = is_client_assignor(name)
        # A group's first target comes from the server-side fallback (bootstrap: a member
        # reconciled to target epoch 0 would be told epoch 0, which means "join").
        if client and group.assignment_epoch > 0:
            current = pending is not None and pending.group_epoch == group_epoch
            if not (current and now_ms >= pending.deadline_ms):  # (expired: fall back)
                chosen = None if pending is None else members.get(pending.member_id)
                if (current and pending.assignor == name and chosen is not None
                        and can_compute(chosen, name)):
                    return None, _KEEP, []  # still waiting for the chosen member
                choice = choose_member(members, name)
                if choice is not None:
                    new = self.client_rounds.open(gid, group_epoch, name, choice, now_ms)
                    timers = [] if pending is None else [TimerOp(pending.timer_key, None)]
                    timers.append(TimerOp(new.timer_key, new.deadline_ms))
                    return None, new, timers
        assignor = self._fallback_assignor() if client else self._assignors[name]
        try:
            target = compute_target(gid, group_epoch, members, subscriptions, old_targets,
                                    assignor, self.image)
        except AssignorError as exc:
            raise Refused(ErrorCode.unknown_server_error,
                           f"Failed to compute a new target assignment for epoch "
                           f"{group_epoch}: {exc}") from None
        if pending is None:
            return target, _KEEP, []
        return target, None, [TimerOp(pending.timer_key, None)]

    def _fallback_assignor(self) -> Assignor:
        """The server-side assignor that stands in for a client-side one: the first
        configured (group.consumer.assignors, default uniform)."""
        return self._assignors[self.config.assignors[0]]

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, epoch: int,
                        owned: Partitions | None) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is None:
            if epoch != JOIN_EPOCH:
                raise Refused(ErrorCode.unknown_member_id,
                               f"Member {member_id} is not a member of group {group.group_id}.")
            return ConsumerMember(member_id)
        check_epoch(member, epoch, owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, req: ConsumerHeartbeatRequest,
                       owned: Partitions | None) -> tuple[ConsumerMember, ConsumerMember | None]:
        """The member a static heartbeat is about, and the member it replaces (if any)."""
        instance_id = req.instance_id
        assert instance_id is not None
        existing = group.static_member(instance_id)
        if req.member_epoch == JOIN_EPOCH:
            if existing is None:
                return group.members.get(member_id) or ConsumerMember(member_id), None
            if existing.member_id == member_id:
                # The same process joining again (e.g. after FENCED_MEMBER_EPOCH): not a
                # second instance, so nothing to release.
                return existing, None
            if existing.member_epoch != STATIC_LEAVE_EPOCH and not existing.uses_classic_protocol:
                raise Refused(ErrorCode.unreleased_instance_id,
                               f"Static member {member_id} with instance id {instance_id} "
                               "cannot join the group because the instance id is owned by "
                               f"{existing.member_id} member.")
            # The new incarnation takes over everything the old one had.
            return replace(existing, member_id=member_id, member_epoch=0,
                           previous_member_epoch=0), existing
        if existing is None:
            raise Refused(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise Refused(ErrorCode.fenced_instance_id,
                           f"Static member {member_id} with instance id {instance_id} was "
                           f"fenced by member {existing.member_id}.")
        check_epoch(existing, req.member_epoch, owned)
        return existing, None

    def _update_regexes(self, group: ConsumerGroup, member: ConsumerMember,
                        updated: ConsumerMember, removed: list[ConsumerMember],
                        regexes: dict[str, ResolvedRegex]) -> tuple[list[Record], bool]:
        """The first half of Kafka's maybeUpdateRegularExpressions: tombstones for the regexes
        this change leaves without users (dropped from `regexes`, the resolutions the rest of
        the heartbeat sees), and whether the member's regex changed to one whose topics the
        group already knows: a regex the group has resolved, or no regex at all. That calls
        for a new group epoch at once; a regex new to the group is only checked here, and
        is resolved later (`_regex_refresh`)."""
        old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
        if new == old:
            return [], False  # the same regex users as before
        if new is not None:
            try:
                compile_regex(new)
            except InvalidRegex as exc:
                raise Refused(ErrorCode.invalid_regular_expression,
                               f"SubscribedTopicRegex `{new}` is not a valid regular "
                               f"expression: {exc}.") from None
        records = []
        for m in removed:
            gone = m.subscribed_topic_regex
            if gone is not None and gone in regexes and group.regex_users_after(
                    gone, removed, [updated]) <= 0:
                del regexes[gone]
                records.append(Record(ConsumerGroupRegularExpressionKey(group.group_id, gone),
                                      None))
        if new is None:
            return records, old is not None
        return records, group.regex_users(new) > 0 and new in group.resolved_regexes

    def _regex_refresh(self, group: ConsumerGroup, member: ConsumerMember,
                       updated: ConsumerMember, removed: Iterable[ConsumerMember],
                       now_ms: int) -> frozenset[str] | None:
        """The second half of Kafka's maybeUpdateRegularExpressions: the regexes whose
        resolution this change (`member` becoming `updated`, `removed` leaving) should ask
        for, or None. Only when the group (after the change) has regexes, none is pending,
        the last resolution is more than 10 s old (Kafka's fixed batching interval), and
        one of: a regex is unresolved (the member may just have brought it), a topic was
        created since the last resolution, or the last resolution is older than
        group.consumer.regex.refresh.interval.ms. Every regex of the group is resolved
        together, so that one epoch bump takes all the changes in."""
        old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
        brings_new = new is not None and new != old and group.regex_users(new) == 0
        if not brings_new and not group.has_regexes():
            return None
        if group.regex_refresh is not None:
            return None  # a resolution is pending
        last = group.last_regex_refresh_ms()
        if last is not None and now_ms <= last + MIN_REGEX_REFRESH_INTERVAL_MS:
            return None
        removed = list(removed)
        in_use = {r for r in group.regexes_in_use()
                  if group.regex_users_after(r, removed, [updated]) > 0}
        if new is not None:
            in_use.add(new)
        due = (brings_new or len(in_use) != len(group.resolved_regexes)
               or group.last_regex_version() < self._new_topics_version
               or last is None or now_ms > last + self.config.regex_refresh_interval_ms)
        return frozenset(in_use) if due and in_use else None

    def _resolve_regexes(self, group_id: str, now_ms: int) -> Result:
        """The "consumer-regex" timer: Kafka's handleRegularExpressionsResult, with the
        resolution itself done here against the topics known now. Each regex asked for that
        someone still subscribes with gets a record (a new timestamp and version even when
        its topics are the same); the group epoch moves if a regex matches other topics than
        before or the subscribed topics' hash moved."""
        group = self.groups.get(group_id)
        if group is None or group.regex_refresh is None:
            return Result()  # the group went (or was rebuilt) meanwhile
        wanted, group.regex_refresh = group.regex_refresh, None
        regexes = dict(group.resolved_regexes)
        records: list[Record] = []
        changed = False
        for regex in sorted(wanted):
            if group.regex_users(regex) <= 0:
                continue  # nobody subscribes with it any more
            value = self._resolve(regex, now_ms)
            topics = frozenset(value.topics)
            known = regexes.get(regex)
            changed |= topics != (frozenset() if known is None else known.topics)
            regexes[regex] = ResolvedRegex(topics, value.version, value.timestamp_ms)
            records.append(Record(ConsumerGroupRegularExpressionKey(group_id, regex), value))
        metadata_hash = self.image.metadata_hash(group.subscribed_topics_after((), (), regexes))
        if changed or metadata_hash != group.metadata_hash:
            records.append(epoch_record(group_id, group.group_epoch + 1, metadata_hash))
        self._apply(records)
        return Result(records=records)

    def _resolve(self, regex: str, now_ms: int) -> ConsumerGroupRegularExpressionValue:
        return ConsumerGroupRegularExpressionValue(
            topics=resolve(regex, self.image.names()), version=self.image.version,
            timestamp_ms=now_ms)

    # == leaving and fencing =================================================================
    def _leave(self, req: ConsumerHeartbeatRequest, now_ms: int) -> Result:
        group = self.groups.get(req.group_id)
        if group is None:
            raise Refused(ErrorCode.group_id_not_found, f"Group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise Refused(ErrorCode.unknown_member_id,
                               f"Member {req.member_id} is not a member of group "
                               f"{group.group_id}.")
        else:
            found = group.static_member(req.instance_id)
            if found is None:
                raise Refused(ErrorCode.unknown_member_id,
                               f"Instance id {req.instance_id} is unknown.")
            if found.member_id != req.member_id:
                raise Refused(ErrorCode.fenced_instance_id,
                               f"Static member {req.member_id} with instance id "
                               f"{req.instance_id} was fenced by member {found.member_id}.")
            member = found
            if req.member_epoch == STATIC_LEAVE_EPOCH:
                return self._static_leave(group, member)
        result = self.fence(group, member)
        result.response = ConsumerHeartbeatResponse(
            ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)
        return result

    def _static_leave(self, group: ConsumerGroup, member: ConsumerMember) -> Result:
        """The member will be back (a restart): it keeps its partitions, which nobody else
        gets, until it rejoins with its instance id or its session runs out. What it was
        revoking is free at once: it is not using anything while away."""
        away = replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation=NO_PARTITIONS)
        records = [assignment_record(group.group_id, away)]
        timers = []
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            timers.append(TimerOp(revocation_key(group.group_id, member), None))
        self._apply(records)
        return Result(ConsumerHeartbeatResponse(
            ErrorCode.none, member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH),
            records=records, timers=timers)

    def fence(self, group: ConsumerGroup, member: ConsumerMember) -> Result:
        """Remove a member (left, session expired, never revoked) and bump the group epoch;
        its partitions are free at once."""
        return self.fence_members(group, [member])

    def fence_members(self, group: ConsumerGroup, members: list[ConsumerMember]) -> Result:
        """Remove members (tombstones for each) and bump the group epoch once."""
        gid = group.group_id
        records: list[Record] = []
        timers: list[TimerOp] = []
        for member in members:
            mid = member.member_id
            records += [
                Record(ConsumerGroupCurrentMemberAssignmentKey(gid, mid), None),
                Record(ConsumerGroupTargetAssignmentMemberKey(gid, mid), None),
                Record(ConsumerGroupMemberMetadataKey(gid, mid), None),
            ]
            timers += self.cancel_timers(gid, member)
        regexes = dict(group.resolved_regexes)
        for regex in sorted({m.subscribed_topic_regex for m in members} - {None}):
            assert regex is not None
            if regex in regexes and group.regex_users_after(regex, members) <= 0:
                del regexes[regex]
                records.append(Record(ConsumerGroupRegularExpressionKey(gid, regex), None))
        topics = group.subscribed_topics_after(members, (), regexes)
        records.append(epoch_record(gid, group.group_epoch + 1, self.image.metadata_hash(topics)))
        self._apply(records)
        return Result(records=records, timers=timers)

    def cancel_timers(self, group_id: str, member: ConsumerMember) -> list[TimerOp]:
        return cancel_timers(group_id, member)

    def session_timer(self, group_id: str, member_id: str, now_ms: int,
                      member: ConsumerMember | None = None) -> TimerOp:
        """The member's session deadline (`deadlines.session_timer`)."""
        return session_timer(group_id, member_id, now_ms, self.config.session_timeout_ms,
                             member)

    # == timers ==============================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        kind = key.kind
        if kind is TimerKind.CONSUMER_CLIENT_ASSIGNMENT:
            return self._client_round_expired(key.group_id, key.epoch)
        if kind is TimerKind.CONSUMER_REGEX:
            return self._resolve_regexes(key.group_id, now_ms)
        if kind not in (TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REVOCATION):
            return Result()
        group = self.groups.get(key.group_id)
        member = None if group is None else group.members.get(key.member_id)
        if group is None or member is None:
            return Result()
        if kind is TimerKind.CONSUMER_REVOCATION and (
                member.member_epoch != key.epoch
                or member.state is not MemberState.UNREVOKED_PARTITIONS):
            return Result()  # it moved on in time
        return self.fence(group, member)

    # == client-side assignors (coterie extension; rules in consumer/client_assignment.py) ==
    def prepare_assignment(self, req: PrepareAssignmentRequest, now_ms: int) -> Result:
        """ConsumerGroupPrepareAssignment: the group state for the member chosen to compute
        the pending assignment; UNKNOWN_MEMBER_ID for anyone else (nothing to do)."""
        try:
            group = self._assignment_group(req.group_id, req.member_id, req.member_epoch)
            pending = self._pending_round(group, req.member_id)
        except Refused as refused:
            return Result(PrepareAssignmentResponse(refused.code, refused.message))
        subscriptions = {mid: group.subscription_of(m) for mid, m in group.members.items()}
        return Result(prepare_answer(pending, group.members, subscriptions, group.targets,
                                     self.image))

    def install_assignment(self, req: InstallAssignmentRequest, now_ms: int) -> Result:
        """ConsumerGroupInstallAssignment: a valid assignment from the chosen member becomes
        the target; an error or an invalid one makes the server-side fallback compute it."""
        try:
            group = self._assignment_group(req.group_id, req.member_id, req.member_epoch)
            if req.group_epoch != group.group_epoch:
                raise Refused(ErrorCode.stale_member_epoch,
                               f"The assignment is for group epoch {req.group_epoch}, but group "
                               f"{group.group_id} is at epoch {group.group_epoch}.")
            pending = self._pending_round(group, req.member_id)
        except Refused as refused:
            return Result(InstallAssignmentResponse(refused.code, refused.message))
        if req.error != INSTALL_OK:
            return self._fall_back(group, pending, InstallAssignmentResponse(ErrorCode.none))
        subscriptions = {mid: group.subscription_of(m) for mid, m in group.members.items()}
        try:
            assignment = validate(req.members, group.members, subscriptions, self.image)
        except InvalidAssignment as exc:
            return self._fall_back(group, pending, InstallAssignmentResponse(
                ErrorCode.invalid_request,
                f"Invalid assignment for group {group.group_id} at epoch {pending.group_epoch}: "
                f"{exc}. The group falls back to the server-side assignor "
                f"{self.config.assignors[0]}."))
        target = compute_target(group.group_id, pending.group_epoch, group.members,
                                subscriptions, dict(group.targets),
                                InstalledAssignor(pending.assignor, assignment), self.image)
        self.client_rounds.pop(group.group_id)
        self._apply(target.records)
        return Result(InstallAssignmentResponse(ErrorCode.none), records=target.records,
                      timers=[TimerOp(pending.timer_key, None)])

    def forget_round(self, group_id: str) -> list[TimerOp]:
        """Drop a group's pending round (the group is deleted or becomes a classic group)."""
        pending = self.client_rounds.pop(group_id)
        return [] if pending is None else [TimerOp(pending.timer_key, None)]

    def _assignment_group(self, group_id: str, member_id: str, epoch: int) -> ConsumerGroup:
        """The checks both extension APIs start with (the KIP's order)."""
        if blank(group_id):
            raise Refused(ErrorCode.invalid_request, "GroupId can't be empty.")
        group = self.groups.get(group_id)
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

    def _pending_round(self, group: ConsumerGroup, member_id: str) -> PendingRound:
        """The group's round for its current epoch, if `member_id` is the one chosen for it."""
        pending = self.client_rounds.get(group.group_id)
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

    def _fall_back(self, group: ConsumerGroup, pending: PendingRound,
                   response: Any = None) -> Result:
        """End the round: the server-side fallback computes the target for its epoch."""
        self.client_rounds.pop(group.group_id)
        timers = [TimerOp(pending.timer_key, None)]
        subscriptions = {mid: group.subscription_of(m) for mid, m in group.members.items()}
        try:
            target = compute_target(group.group_id, group.group_epoch, group.members,
                                    subscriptions, dict(group.targets),
                                    self._fallback_assignor(), self.image)
        except AssignorError as exc:
            # Nothing written: the next heartbeat finds the group behind and opens a round.
            if isinstance(response, InstallAssignmentResponse):
                response = InstallAssignmentResponse(
                    ErrorCode.unknown_server_error,
                    f"Failed to compute a new target assignment for epoch "
                    f"{group.group_epoch}: {exc}")
            return Result(response, timers=timers)
        self._apply(target.records)
        return Result(response, records=target.records, timers=timers)

    def _client_round_expired(self, group_id: str, group_epoch: int) -> Result:
        pending = self.client_rounds.get(group_id)
        if pending is None or pending.group_epoch != group_epoch:
            return Result()  # installed, fallen back or replaced in time
        group = self.groups.get(group_id)
        if group is None or group.group_epoch != group_epoch:
            # Gone, or moved on: the next heartbeat opens a round for the new epoch.
            self.client_rounds.pop(group_id)
            return Result()
        return self._fall_back(group, pending)

    # == topic metadata ======================================================================
    def next_image_version(self) -> int:
        """The version a new topic picture must have here: above the last one and above
        every version a loaded regex resolution names."""
        return max(self.image.version, self._version_floor) + 1

    def on_metadata_change(self,
                           topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo] | TopicImage,
                           now_ms: int, version: int | None = None) -> Result:
        """The broker's current topics (name -> (topic id, partition count)), or a picture
        built once for every shard. Every group whose subscribed topics changed gets a new
        epoch. Regexes are not resolved again (Kafka's onNewMetadataImage): a created topic
        is only noted, so that the next heartbeat allowed to refresh a group's regexes does;
        a deleted topic stays in resolutions until then."""
        old = self.image
        if isinstance(topics, TopicImage):
            self.image = topics
        else:
            self.image = TopicImage.of(topics, self.next_image_version() if version is None
                                       else version)
        if self._new_topics_version == -1 or not self.image.by_id.keys() <= old.by_id.keys():
            self._new_topics_version = self.image.version
        records: list[Record] = []
        for group in self.groups.values():
            metadata_hash = self.image.metadata_hash(group.subscribed_topics())
            if metadata_hash != group.metadata_hash:
                records.append(epoch_record(group.group_id, group.group_epoch + 1,
                                             metadata_hash))
        self._apply(records)
        return Result(records=records)

    # == admin ===============================================================================
    def describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        """ConsumerGroupDescribe (`describe.py`). A group this coordinator does not know is
        GROUP_ID_NOT_FOUND (the shard answers otherwise for a classic group of that name)."""
        return describe_groups(self.groups, self.image, self.config.assignors, group_ids)

    def list_groups(self) -> list[ListedConsumerGroup]:
        return [ListedConsumerGroup(g.group_id, g.state().value) for g in self.groups.values()]

    def delete_group(self, group_id: str) -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups for one group: only an empty group may go (NON_EMPTY_GROUP otherwise).
        Tombstones in an order replay accepts: leftovers, target epoch, group."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, []
        if group.members:
            return ErrorCode.non_empty_group, []
        records = [Record(ConsumerGroupTargetAssignmentMemberKey(group_id, mid), None)
                   for mid in sorted(group.targets)]
        records += [Record(ConsumerGroupRegularExpressionKey(group_id, r), None)
                    for r in sorted(group.resolved_regexes)]
        records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), None))
        records.append(Record(ConsumerGroupMetadataKey(group_id), None))
        self._apply(records)
        self.client_rounds.pop(group_id)  # (its timer, if any, finds no round)
        return ErrorCode.none, records
