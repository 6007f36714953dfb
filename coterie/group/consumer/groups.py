"""KIP-848 consumer groups (seed 3), driven by heartbeats, timers and topic changes, free of I/O.

Every handler takes a request and `now_ms` and returns a `Result` (`coterie.group.result`):
the answer, the records to persist before answering, and the timers to arm or cancel. State
changes only by applying records (`replay`), the same path that loads `__consumer_offsets`
after a restart, so live and replayed state cannot differ. A handler first decides
everything (and may refuse with an error, leaving the group untouched), then applies its
records, then answers.

This class is the entry point: it holds the state (the groups, the topic picture, the pending
client-side rounds), runs the steps and applies what they decide. The steps and the parts
live beside it, each a plain module whose functions receive what they need and return
records (or a `Result` whose records this class applies):
- `heartbeat_request.py`: a heartbeat's checks on its face, epoch fencing, what a request
  changes in a member (`Refused` carries an error answer);
- `membership.py`: the group and the member a heartbeat or a leave is about (joins, static
  members taking over from their previous incarnation);
- `subscriptions.py`: what a subscription change does to the group epoch, and regexes
  resolved asynchronously (`regex.py`: RE2 matching);
- `assignment_rounds.py`: the next target (`target_assignment.py` runs a server-side
  assignor), or a client-side round (`client_assignment.py` has the rules);
- `reconciliation.py`: one member's step towards its target, revoke before assign;
- `leaving.py`: leaving, leaving for a while (static members), fencing;
- `deadlines.py`: session and revocation timers; `topic_changes.py`: topic pictures and
  the groups a topic change concerns; `changes.py`: the records a change is written as;
- `member.py`, `group.py`: the state, built only by records; `describe.py`:
  ConsumerGroupDescribe.

A ConsumerGroupHeartbeat, step by step (seed 3's "Member Epoch - Reconcile the group"):
1. Validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR), then find the group and
   the member (`membership.py`: created by a join, GROUP_ID_NOT_FOUND / UNKNOWN_MEMBER_ID
   otherwise; static members by instance id).
2. Check the member epoch (`heartbeat_request.check_epoch`): ahead of ours ->
   FENCED_MEMBER_EPOCH; behind -> accepted only if it is the previous epoch and the member
   owns a subset of its assignment (the answer that moved it was lost), else
   FENCED_MEMBER_EPOCH.
3. Update the member with the fields it sent (None means unchanged). New or changed topic
   names bump the group epoch; a regex new to the group adds no topic yet, a resolution is
   asked for (`subscriptions.py`).
4. If the group epoch is ahead of the target epoch, compute a new target with the group's
   assignor (the one most members ask for, else the first configured) and write the members
   whose target changed, or, for a client-side assignor, open a round that asks a member for
   it (`assignment_rounds.py`); meanwhile members reconcile towards the old target.
5. Reconcile this member towards its target (`reconciliation.reconcile`): revoke before
   assign. Arm its revocation timer while it has partitions to give back.
6. Re-arm its session timer and answer: its epoch, the heartbeat interval and, when the
   request was a full one or its partitions changed, every partition it may use now.
Steps 3 to 5 are `update_member`, which classic members' JoinGroup runs too
(`mixed/classic_members.py`). A leave (epoch -1, or -2 for a static member that will be back)
is `leaving.py`'s.

Timers (`TimerKey`s, by kind; `coterie.group.timers`):
- CONSUMER_SESSION (group, member): no heartbeat within group.consumer.session.timeout.ms
  -> the member is fenced (removed) and the group epoch bumped.
- CONSUMER_REVOCATION (group, member, epoch): the member was asked to revoke partitions at
  member epoch `epoch` and has not confirmed within its rebalance timeout -> fenced likewise.
- CONSUMER_CLIENT_ASSIGNMENT (group, epoch: the group epoch): the member chosen to compute a
  client-side assignment has not installed one within
  group.consumer.client.assignment.timeout.ms -> the server-side fallback computes it.
- CONSUMER_REGEX (group): due at once, so that it runs after the heartbeat that asked for
  it has been answered -> the group's regexes are resolved (`subscriptions.py`).
Classic members of a mixed group have CONSUMER_JOIN and CONSUMER_SYNC timers instead of a
revocation timer (`deadlines.py`).

Topic changes come in through `on_metadata_change` (`topic_changes.py`): they resolve no
regex, and every group whose subscribed topics changed gets a new group epoch; its target is
recomputed at the next heartbeat.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign.registry import lookup
from coterie.assign.spec import Assignor
from coterie.group.consumer.assignment_rounds import (
    KEEP,
    ClientRounds,
    expired,
    fallback_assignor,
    install,
    next_target,
    prepare,
)
from coterie.group.consumer.changes import (
    assignment_record,
    metadata_record,
    replace_records,
)
from coterie.group.consumer.client_assignment import (
    DEFAULT_TIMEOUT_MS,
    InstallAssignmentRequest,
    PrepareAssignmentRequest,
)
from coterie.group.consumer.config import ConsumerGroupConfig, TopicAccess
from coterie.group.consumer.deadlines import (
    cancel_timers,
    revocation_timers,
    session_timer,
    timers_after_load,
)
from coterie.group.consumer.describe import describe_groups
from coterie.group.consumer.group import ConsumerGroup, ReplayError
from coterie.group.consumer.heartbeat_request import (
    Refused,
    owned_partitions,
    tolerate_partial_rejoin,
    updated_member,
    validate_request,
    wire_partitions,
)
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.leaving import removal, static_leave
from coterie.group.consumer.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMember,
    MemberState,
)
from coterie.group.consumer.membership import heartbeat_group, heartbeat_member, leaving_member
from coterie.group.consumer.messages import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
    Requester,
    SettledHeartbeat,
)
from coterie.group.consumer.reconciliation import FencedMember, reconcile
from coterie.group.consumer.subscriptions import (
    regex_refresh,
    resolution_records,
    subscription_change,
)
from coterie.group.consumer.target_assignment import TargetAssignment
from coterie.group.consumer.topic_changes import (
    creates_topics,
    epoch_bumps,
)
from coterie.group.records.consumer import (
    CONSUMER_RECORD_KEY_TYPES,
    NO_PARTITIONS,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    Partitions,
)
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey
from coterie.group.topic_image import TopicImage, Topics
from coterie.group.typed_groups import GroupsOf


class ConsumerGroups:
    """All consumer groups of one shard (module docstring has the rules). `registry` is the
    shard's one dict of groups of every type (this class sees its consumer groups) and
    `topics` the shard's topic picture; both default to private ones, for tests that drive
    consumer groups alone."""

    def __init__(self, config: ConsumerGroupConfig, new_member_id: Callable[[], str],
                 registry: dict[str, Any] | None = None, topics: Topics | None = None,
                 client_assignment_timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 topic_access: TopicAccess | None = None) -> None:
        self.config = config
        # The broker's authorizer, when one is configured: a regex resolution keeps the
        # topics the member who asked for it may describe (Kafka 4.2).
        self.topic_access = topic_access
        self.new_member_id = new_member_id
        self._registry: dict[str, Any] = {} if registry is None else registry
        self.groups: GroupsOf[ConsumerGroup] = GroupsOf(self._registry, ConsumerGroup)
        # Per-group session timeout and heartbeat interval (None: the broker's), set by
        # `set_group_config`; kept for groups that do not exist yet too, as Kafka keeps them.
        self.group_configs: dict[str, tuple[int | None, int | None]] = {}
        self.topics = topics if topics is not None else Topics()
        # Resolve the configured assignors now, so a misconfiguration fails at start-up.
        self._assignors: dict[str, Assignor] = {name: lookup(name) for name in config.assignors}
        # Client-side assignors (coterie extension): pending rounds, in the groups' volatile
        # tables.
        self.client_rounds = ClientRounds(self.groups, client_assignment_timeout_ms)
        # The image version of the last topic change that created a topic (Kafka's
        # lastMetadataImageWithNewTopics; -1 until the first change): resolutions older than
        # it may miss a topic.
        self._new_topics_version = -1

    @property
    def image(self) -> TopicImage:
        """The shard's current topic picture."""
        return self.topics.image

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
                    self.topics.raise_floor(value.version)  # type: ignore[union-attr]

    def _apply(self, records: Iterable[Record]) -> None:
        for record in records:
            self.replay(record)

    def _applied(self, result: Result) -> Result:
        """`result`, decided by one of the step modules, once its records are applied."""
        self._apply(result.records)
        return result

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Deadlines to arm once loading finishes (`deadlines.timers_after_load`)."""
        return timers_after_load(self.groups.values(), self.session_timeout_of, now_ms)

    def after_rebuild(self, group_id: str, now_ms: int) -> Result:
        """`group_id` was rebuilt from its durable records after a failed write: its
        deadlines are armed as after a load, and its next heartbeat compares its metadata
        hash with the current topics (a topic change whose epoch bump was the write that
        failed is otherwise never seen again)."""
        group = self.groups.get(group_id)
        if group is None:
            return Result()
        group.recheck_metadata = True
        return Result(timers=timers_after_load([group], self.session_timeout_of, now_ms))

    # == per-group configs (KIP-848: consumer.session.timeout.ms, consumer.heartbeat.interval.ms)
    def set_group_config(self, group_id: str, session_timeout_ms: int | None,
                         heartbeat_interval_ms: int | None) -> None:
        """The group's own session timeout and heartbeat interval (None: the broker's), as
        an operator set them (the broker validates and persists them). They apply from the
        next heartbeat: its answer's interval and the session deadline it arms."""
        if session_timeout_ms is None and heartbeat_interval_ms is None:
            self.group_configs.pop(group_id, None)
        else:
            self.group_configs[group_id] = (session_timeout_ms, heartbeat_interval_ms)

    def session_timeout_of(self, group_id: str) -> int:
        own = self.group_configs.get(group_id)
        if own is None or own[0] is None:
            return self.config.session_timeout_ms
        return own[0]

    def heartbeat_interval_of(self, group_id: str) -> int:
        own = self.group_configs.get(group_id)
        if own is None or own[1] is None:
            return self.config.heartbeat_interval_ms
        return own[1]

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
                return self._leave(req)
            return self._heartbeat(req, now_ms)
        except Refused as refused:
            return Result(ConsumerHeartbeatResponse(refused.code, refused.message))

    def settled_heartbeat(self, req: SettledHeartbeat, now_ms: int) -> Result | None:
        """The answer to a settled member's heartbeat that changes nothing, or None to take
        the general path (`heartbeat`). Most heartbeats of a group are these, so they skip
        the step-by-step (validation, update, target, reconciliation). The caller has seen
        that the request sets no field (epoch > 0, every other field None or -1: the broker
        checks that on the wire request, before any core value is built); here: the member
        exists under this id (so its ids passed validation when it joined), is at the current
        target epoch and STABLE, its client id and host are the same, and the group's regexes
        are not due for a resolution (`subscriptions.regex_refresh`). The general path would
        write no record, compute no target, keep the member as it is, and answer with its
        epoch and no assignment after pushing its session timer back: exactly this.
        (`tests/unit/group/test_consumer_steady_path.py` holds the two paths to the same
        answers.) The shard's door hands it any group's settled heartbeat: the id of a group
        of another type goes down the general path too. The hottest path of the broker, so
        the registry is read without the typed view."""
        group_id, member_id, member_epoch, client_id, client_host = req
        group = self._registry.get(group_id)
        if group.__class__ is not ConsumerGroup or group.group_epoch != group.assignment_epoch:
            return None
        member = group.members.get(member_id)
        if (member is None or member_epoch <= 0 or member.member_epoch != member_epoch
                or member.member_epoch != group.assignment_epoch
                or member.state is not MemberState.STABLE or member.classic is not None
                or member.client_id != client_id or member.client_host != client_host):
            return None
        if group.has_regexes() and regex_refresh(
                group, member, member, (), now_ms,
                refresh_interval_ms=self.config.regex_refresh_interval_ms,
                new_topics_version=self._new_topics_version) is not None:
            return None  # the general path asks for the resolution this heartbeat is due
        # `heartbeat_interval_of` and `session_timer` (the member speaks the consumer
        # protocol: the group's session timeout), inlined: this path is the hottest.
        own = self.group_configs.get(group_id)
        config = self.config
        if own is None:
            interval, timeout = config.heartbeat_interval_ms, config.session_timeout_ms
        else:
            interval = config.heartbeat_interval_ms if own[1] is None else own[1]
            timeout = config.session_timeout_ms if own[0] is None else own[0]
        return Result(ConsumerHeartbeatResponse(
            ErrorCode.none, member_id=member_id, member_epoch=member_epoch,
            heartbeat_interval_ms=interval,
        ), timers=[TimerOp(TimerKey(ConsumerTimer.CONSUMER_SESSION, group_id, member_id),
                           now_ms + timeout)])

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
        """Steps 1 to 6 of a heartbeat that does not leave."""
        group = heartbeat_group(self.groups, req, self.config.max_size)
        member_id = req.member_id or self.new_member_id()
        owned = owned_partitions(req.owned)
        member, replaced = heartbeat_member(group, member_id, req, owned)
        updated = updated_member(member, req)
        reconciled, records, timers = self.update_member(group, member, updated, replaced, owned,
                                                          now_ms, requester=req.requester)
        full = req.member_epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1 and req.owned is not None and (
                req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        assignment = None
        if full or (reconciled.assigned is not member.assigned
                    and reconciled.assigned != member.assigned):
            assignment = wire_partitions(reconciled.assigned)
        return Result(ConsumerHeartbeatResponse(
            ErrorCode.none, member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_of(group.group_id),
            assignment=assignment,
        ), records=records, timers=timers)

    def update_member(self, group: ConsumerGroup, member: ConsumerMember,
                       updated: ConsumerMember, replaced: ConsumerMember | None,
                       owned: Partitions | None, now_ms: int,
                       requester: Requester | None = None,
                       ) -> tuple[ConsumerMember, list[Record], list[TimerOp]]:
        """Steps 3 to 5 of a heartbeat, shared with classic members' JoinGroup: write the
        member as `updated` (replacing the static member `replaced`, if any), bump the group
        epoch if its subscription changed, compute a new target if the group epoch is ahead
        of it, and reconcile the member given the partitions it says it owns. Decides
        everything first (raising Refused leaves the group untouched), then applies the
        records. Returns the reconciled member, the records and the timers. `requester`:
        who sent the heartbeat (when the broker authorizes); a resolution it asks for keeps
        the topics they may describe (a classic member's JoinGroup gives none: the last
        requester's stands)."""
        member_id = updated.member_id
        removed = [m for m in (group.members.get(member_id), replaced) if m is not None]
        records: list[Record] = []
        if replaced is not None:
            records += replace_records(group, replaced, updated)
        elif not member.same_metadata(updated) or member_id not in group.members:
            records.append(metadata_record(group.group_id, updated))

        # Subscriptions (`subscriptions.py`): drop regexes nobody uses any more, bump the
        # group epoch when the member's topics are known to have changed, and ask for a
        # resolution of the group's regexes when one is due.
        change = subscription_change(group, member, updated, removed, self.image, now_ms,
                                     refresh_interval_ms=self.config.regex_refresh_interval_ms,
                                     new_topics_version=self._new_topics_version,
                                     recheck_metadata=group.recheck_metadata)
        group.recheck_metadata = False
        records += change.records
        group_epoch, refresh = change.group_epoch, change.refresh

        # Target assignment (or, with a client-side assignor, a round that asks a member).
        round_change, round_timers = KEEP, []
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
            subscriptions = {mid: group.subscription_of(m, change.regexes)
                             for mid, m in members.items()}
            target, round_change, round_timers = next_target(
                group, group_epoch, members, subscriptions, old_targets, name, now_ms,
                rounds=self.client_rounds, assignors=self._assignors,
                configured=self.config.assignors, image=self.image)
        if target is not None:
            records += target.records
            target_epoch, my_target = group_epoch, target.targets[member_id]
        else:
            target_epoch = group.assignment_epoch
            my_target = group.target_of(replaced.member_id if replaced else member_id)

        # Reconciliation (decided before anything is applied: it may still refuse), held to
        # the member's subscription as it stands after this heartbeat.
        names = group.subscription_of(updated, change.regexes)
        name_of = self.image.name_of
        try:
            reconciled = reconcile(updated, target_epoch, my_target, group.partition_epochs,
                                   owned, lambda topic_id: name_of(topic_id) in names,
                                   not updated.same_subscription(member))
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
        if refresh is not None:
            timers.append(TimerOp(TimerKey(ConsumerTimer.CONSUMER_REGEX, group.group_id), now_ms))

        self._apply(records)
        # The volatile table of the group the records built (a new group is created by
        # replaying them).
        if round_change is None:
            self.client_rounds.pop(group.group_id)
        elif round_change is not KEEP:
            self.client_rounds.put(round_change)
        if refresh is not None:
            rebuilt = self.groups[group.group_id]
            rebuilt.regex_refresh = refresh
            if requester is not None:
                rebuilt.regex_requester = requester
        return reconciled, records, timers

    # == leaving and fencing (`leaving.py`) ===================================================
    def _leave(self, req: ConsumerHeartbeatRequest) -> Result:
        group, member = leaving_member(self.groups, req)
        if req.instance_id is not None and req.member_epoch == STATIC_LEAVE_EPOCH:
            return self._applied(static_leave(group, member))
        result = self.fence(group, member)
        result.response = ConsumerHeartbeatResponse(
            ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)
        return result

    def fence(self, group: ConsumerGroup, member: ConsumerMember) -> Result:
        """Remove a member (left, session expired, never revoked) and bump the group epoch;
        its partitions are free at once."""
        return self.fence_members(group, [member])

    def fence_members(self, group: ConsumerGroup, members: list[ConsumerMember]) -> Result:
        """Remove members (tombstones for each) and bump the group epoch once."""
        return self._applied(removal(group, members, self.image))

    def cancel_timers(self, group_id: str, member: ConsumerMember) -> list[TimerOp]:
        """Every deadline the member may have armed, cancelled (`deadlines.cancel_timers`)."""
        return cancel_timers(group_id, member)

    def session_timer(self, group_id: str, member_id: str, now_ms: int,
                      member: ConsumerMember | None = None) -> TimerOp:
        """The member's session deadline (`deadlines.session_timer`)."""
        return session_timer(group_id, member_id, now_ms, self.session_timeout_of(group_id),
                             member)

    # == timers ==============================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        kind = key.kind
        if kind is ConsumerTimer.CONSUMER_CLIENT_ASSIGNMENT:
            return self._applied(expired(key.group_id, key.epoch, self.groups,
                                         self.client_rounds, self._fallback_assignor(),
                                         self.image))
        if kind is ConsumerTimer.CONSUMER_REGEX:
            return self._resolve_regexes(key.group_id, now_ms)
        if kind not in (ConsumerTimer.CONSUMER_SESSION, ConsumerTimer.CONSUMER_REVOCATION):
            return Result()
        group = self.groups.get(key.group_id)
        member = None if group is None else group.members.get(key.member_id)
        if group is None or member is None:
            return Result()
        if kind is ConsumerTimer.CONSUMER_REVOCATION and (
                member.member_epoch != key.epoch
                or member.state is not MemberState.UNREVOKED_PARTITIONS):
            return Result()  # it moved on in time
        return self.fence(group, member)

    def _resolve_regexes(self, group_id: str, now_ms: int) -> Result:
        """The CONSUMER_REGEX timer: the regexes asked for are resolved
        (`subscriptions.resolution_records`)."""
        group = self.groups.get(group_id)
        if group is None or group.regex_refresh is None:
            return Result()  # the group went (or was rebuilt) meanwhile
        wanted, group.regex_refresh = group.regex_refresh, None
        access, requester = self.topic_access, group.regex_requester
        allowed = None if access is None or requester is None else functools.partial(
            access.describable, requester.principal, requester.host)
        return self._applied(Result(records=resolution_records(group, wanted, self.image,
                                                                 now_ms, allowed)))

    # == client-side assignors (coterie extension; `assignment_rounds.py`) ==================
    def prepare_assignment(self, req: PrepareAssignmentRequest, now_ms: int) -> Result:
        """ConsumerGroupPrepareAssignment (`assignment_rounds.prepare`)."""
        return prepare(req, self.groups, self.client_rounds, self.image)

    def install_assignment(self, req: InstallAssignmentRequest, now_ms: int) -> Result:
        """ConsumerGroupInstallAssignment (`assignment_rounds.install`)."""
        return self._applied(install(req, self.groups, self.client_rounds, self._assignors,
                                     self.config.assignors, self.image))

    def forget_round(self, group_id: str) -> list[TimerOp]:
        """Drop a group's pending round (the group is deleted or becomes a classic group)."""
        pending = self.client_rounds.pop(group_id)
        return [] if pending is None else [TimerOp(pending.timer_key, None)]

    def _fallback_assignor(self) -> Assignor:
        return fallback_assignor(self._assignors, self.config.assignors)

    # == topic metadata (`topic_changes.py`) =================================================
    def on_topics(self, previous: TopicImage, now_ms: int) -> Result:
        """The shard's topic picture changed (`previous` was the last one). Every group
        whose subscribed topics changed gets a new epoch. Regexes are not resolved again
        (Kafka's onNewMetadataImage): a created topic is only noted, so that the next
        heartbeat allowed to refresh a group's regexes does; a deleted topic stays in
        resolutions until then."""
        if self._new_topics_version == -1 or creates_topics(previous, self.image):
            self._new_topics_version = self.image.version
        return self._applied(Result(records=epoch_bumps(self.groups.values(), self.image)))

    # == admin ===============================================================================
    def describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        """ConsumerGroupDescribe (`describe.py`). A group this coordinator does not know is
        GROUP_ID_NOT_FOUND (the shard answers otherwise for a classic group of that name)."""
        return describe_groups(self.groups, self.image, self.config.assignors, group_ids)
