"""`ConsumerGroupMember`: a `Consumer`'s membership of a KIP-848 consumer group
(`group_protocol="consumer"`), the counterpart of `GroupMember` + `ConsumerRebalanceProtocol`
for the classic protocol.

Theory of operation. Two tasks:

- the heartbeat task owns the coordinator connection (a `CoordinatorLink`) and sends one
  ConsumerGroupHeartbeat at a time: at once while joining or acknowledging, else every
  interval the coordinator names in its answers (group.consumer.heartbeat.interval.ms; the
  session and rebalance timeouts are the coordinator's business). Fields follow
  `coterie.client.heartbeat_fields` (full on a join and after any error, else only what
  changed); answers drive `coterie.client.consumer_membership.Membership`. v1 when the
  broker has it (client-generated member id, SubscribedTopicRegex), else v0 (no regex).
- a reconciliation task, started when an answer brings a target that differs from what the
  member holds. It resolves topic ids to names (Metadata, names first, then all topics),
  then under the consumer's rebalance lock moves to the target through the consumer's
  `PartitionOwner.take_assignment`: revokes owned - target (no more fetching or delivery,
  commit with auto commit, `on_partitions_revoked` with just those), adds target - owned
  (`on_partitions_assigned` with just those; fetching starts), and marks the result for
  acknowledgement, which the heartbeat task sends at once.
  Heartbeats go on meanwhile, so slow callbacks do not cost the membership (the coordinator
  bounds them with the rebalance timeout).

With a client-side assignor (`client_assignor`, a coterie extension), a third task may run
after a successful heartbeat: it asks the coordinator whether this member was chosen to
compute the group's assignment, and if so computes and installs it
(`coterie.client.consumer_client_assignor`). ServerAssignor then says "client:<name>".

Fencing (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): the heartbeat task waits for a running
reconciliation to finish (the lock), drops everything owned as lost (`on_partitions_lost`,
no commit: others may own it already) and joins again with epoch 0 and the same member id.
Fatal errors end the task; `error` holds the typed exception, which the consumer raises
from poll() after dropping the partitions as lost.

Closing: stop heartbeating, let a running reconciliation finish, revoke what is owned
(commit, `on_partitions_revoked`) while the epoch is still valid, then send the leave
heartbeat (epoch -1; a static member -2, which keeps its assignment for a restart within the
session timeout), so the group reassigns at once rather than after the session timeout.

Commits: `commit_identity()` is (member epoch, member id, instance id) while the member is
in the group; `renewed_identity()` waits for the next heartbeat after OffsetCommit answered
STALE_MEMBER_EPOCH (the coordinator moved the member to a new epoch whose answer the member
had not seen yet), as Kafka's client retries with the latest epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign.spec import Assignor
from coterie.client.cluster import ClusterMetadata
from coterie.client.consumer_client_assignor import (
    ClientAssignorRunner,
    Outcome,
    server_assignor_name,
)
from coterie.client.consumer_membership import (
    HeartbeatAction,
    Membership,
    MembershipState,
    heartbeat_action,
    plan_reconciliation,
)
from coterie.client.coordinator_link import CoordinatorLink
from coterie.client.errors import (
    BrokerConnectionError,
    ClientError,
    UnsupportedVersionError,
    fatal_group_error,
)
from coterie.client.heartbeat_fields import (
    HeartbeatFields,
    MemberSubscription,
    leave_fields,
    new_member_id,
)
from coterie.client.partition_owner import PartitionOwner
from coterie.client.versions import ApiKey

log = logging.getLogger("coterie.client.consumer")

S = MembershipState
LEAVE_TIMEOUT_MS = 5_000
NOT_SUPPORTED = ("the broker does not support the consumer group protocol "
                 "(ConsumerGroupHeartbeat); use group_protocol='classic'")


def _ms(value: Any) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds() * 1000
    return float(value)


class ConsumerGroupMember:
    """The KIP-848 membership of one `Consumer` (see the module docstring)."""

    is_leader = False  # no member leads a consumer group: the coordinator assigns

    def __init__(self, consumer: PartitionOwner, lock: asyncio.Lock, *,
                 group_instance_id: str | None, rebalance_timeout_ms: int,
                 server_assignor: str | None, request_timeout_ms: int,
                 unavailable_timeout_ms: int | None, rng: random.Random | None = None,
                 client_assignor: Assignor | None = None) -> None:
        if rebalance_timeout_ms <= 0:
            raise ValueError("rebalance_timeout_ms must be positive")
        if client_assignor is not None and server_assignor is not None:
            raise ValueError("a server assignor and a client-side assignor exclude each other")
        self.consumer = consumer
        self.group_id = consumer.group_id
        self.lock = lock
        self.group_instance_id = group_instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = (server_assignor if client_assignor is None
                                else server_assignor_name(client_assignor))
        self.request_timeout_ms = request_timeout_ms
        self.cluster = consumer.cluster
        self.membership = Membership(new_member_id(rng))
        self.fields = HeartbeatFields()
        self.topic_names: dict[uuid.UUID, str] = {}
        self.heartbeat_interval_ms: float | None = None  # as the coordinator last said
        self.heartbeats = 0
        self._link = CoordinatorLink(self.cluster, self.group_id, unavailable_timeout_ms)
        self.assigner = (None if client_assignor is None else ClientAssignorRunner(
            client_assignor, self._link, self.group_id, request_timeout_ms))
        self._assign_task: asyncio.Task[None] | None = None
        self._backoff = self.cluster.backoff()
        self._version: int | None = None
        self._last_sent: float | None = None
        self._not_before = 0.0
        self._urgent = False
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()  # replaced after every notification
        self._done = asyncio.Event()
        self._error: BaseException | None = None
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._reconcile_task: asyncio.Task[None] | None = None

    # == public view =============================================================================
    @property
    def state(self) -> MembershipState:
        return self.membership.state

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def member_epoch(self) -> int:
        return self.membership.epoch

    @property
    def generation_id(self) -> int:
        """The member epoch while in the group, else -1 (the classic member's meaning)."""
        return self.membership.epoch if self.membership.in_group else -1

    @property
    def error(self) -> BaseException | None:
        return self._error

    @property
    def coordinator_connects(self) -> int:
        return self._link.reconnects

    def commit_identity(self) -> tuple[int, str, str | None] | None:
        """(member epoch, member id, instance id) for OffsetCommit, or None outside the
        group."""
        m = self.membership
        return (m.epoch, m.member_id, self.group_instance_id) if m.in_group else None

    async def renewed_identity(self, stale_epoch: int, deadline: float,
                               ) -> tuple[int, str] | None:
        """After STALE_MEMBER_EPOCH: wait (until `deadline`, loop clock) for an epoch other
        than `stale_epoch`; None if the member is no longer in the group by then."""
        self.heartbeat_soon()
        loop = asyncio.get_running_loop()
        while True:
            m = self.membership
            if not m.in_group or self._stopped:
                return None  # (closing: no heartbeat will bring a new epoch any more)
            if m.epoch != stale_epoch:
                return m.epoch, m.member_id
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    # == life cycle ==============================================================================
    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("ConsumerGroupMember.start() called twice")
        self._task = asyncio.create_task(self._run(), name=f"coterie-heartbeat-{self.group_id}")

    async def wait_stable(self, timeout: float | None = None) -> int:
        """Wait until the member holds its target assignment and acknowledged it; return the
        member epoch. Raises the fatal error, ClientError if closed, TimeoutError."""
        async with asyncio.timeout(timeout):
            while True:
                if self._error is not None:
                    raise self._error
                if self._done.is_set() or self._closing:
                    raise ClientError(f"group member of {self.group_id!r} is closed")
                if self.membership.state is S.STABLE:
                    return self.membership.epoch
                await self._changed.wait()

    async def wait_closed(self) -> None:
        await self._done.wait()
        if self._error is not None:
            raise self._error

    def request_rejoin(self, reason: str = "requested by the application") -> None:
        """The subscription changed: tell the coordinator in a heartbeat now. (A consumer
        group never needs a rejoin for that; the coordinator reassigns.)"""
        log.debug("group %s: heartbeat soon: %s", self.group_id, reason)
        self.heartbeat_soon()

    def heartbeat_soon(self) -> None:
        self._urgent = True
        self._wake.set()

    async def close(self, *, timeout_ms: float = 15_000) -> None:
        """Revoke (commit, on_partitions_revoked), leave the group, stop. Idempotent."""
        if self._closing:
            await self._done.wait()
            return
        self._closing = True
        self._wake.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        try:
            await self._stop_task(self._task)
            await self._stop_task(self._assign_task)
            reconciling = self._reconcile_task
            if reconciling is not None and not reconciling.done():
                with contextlib.suppress(TimeoutError, Exception):
                    await asyncio.wait_for(asyncio.shield(reconciling),
                                           max(0.0, deadline - loop.time()))
                await self._stop_task(reconciling)
            m = self.membership
            if self._error is None and m.state is not S.CREATED:
                in_group = m.in_group
                async with self.lock:
                    owned = self.consumer.owned()
                    if owned:
                        await self.consumer.revoke(owned, commit=in_group, lost=not in_group)
                if m.active:
                    m.leave()
                    self._notify()
                    await self._send_leave(min(LEAVE_TIMEOUT_MS, self.request_timeout_ms,
                                               max(0.0, deadline - loop.time()) * 1000))
        finally:
            with contextlib.suppress(Exception):
                self.membership.left()
            await self._link.close()
            self._done.set()
            self._notify()

    async def _stop_task(self, task: asyncio.Task[None] | None) -> None:
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _send_leave(self, timeout_ms: float) -> None:
        m = self.membership
        if not m.member_id or self._version is None:
            return
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                response = await self._link.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, leave_fields(
                    group_id=self.group_id, member_id=m.member_id,
                    instance_id=self.group_instance_id))
            log.info("group %s: member %s left (%s)", self.group_id, m.member_id,
                     response.error_code.name)
        except (ClientError, TimeoutError) as e:
            log.info("group %s: leave heartbeat not sent (%s)", self.group_id, e)

    # == notifications ===========================================================================
    @property
    def _stopped(self) -> bool:
        return self._closing or self._error is not None

    def _notify(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def _fail(self, error: BaseException) -> None:
        log.error("group %s: member %s stops: %s", self.group_id, self.member_id, error)
        self._error = error
        with contextlib.suppress(Exception):
            self.membership.fail()
        self._done.set()
        self._notify()

    # == the heartbeat task ======================================================================
    async def _run(self) -> None:
        try:
            self.membership.join()
            self._notify()
            while not self._stopped:
                await self._wait_due()
                if self._stopped:
                    break
                if self.membership.state is S.FENCED:
                    await self._release_lost()
                    continue
                await self._heartbeat()
        except asyncio.CancelledError:
            raise
        except ClientError as e:
            self._fail(e)
        except Exception as e:
            log.exception("group %s: heartbeat task failed", self.group_id)
            self._fail(e)

    def _due(self, now: float) -> float:
        m = self.membership
        at = now
        interval = self.heartbeat_interval_ms
        if not (m.wants_heartbeat_now or m.state is S.FENCED or self._urgent
                or self._last_sent is None or interval is None):
            at = self._last_sent + interval / 1000
        return max(at, self._not_before)

    async def _wait_due(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopped:
            now = loop.time()
            wait = self._due(now) - now
            if wait <= 0:
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _subscription(self) -> MemberSubscription:
        c = self.consumer
        sub = c.subscription
        return MemberSubscription(
            topic_names=frozenset() if sub.is_pattern else sub.topics,
            regex=sub.pattern, server_assignor=self.server_assignor, rack_id=c.rack,
            rebalance_timeout_ms=self.rebalance_timeout_ms, instance_id=self.group_instance_id)

    async def _negotiate(self) -> int:
        conn = await self._link.connection()
        try:
            version = conn.version(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        except UnsupportedVersionError as e:
            raise UnsupportedVersionError(f"{NOT_SUPPORTED}: {e}") from e
        if version < 1 and self.consumer.subscription.is_pattern:
            raise UnsupportedVersionError(
                "a pattern subscription needs ConsumerGroupHeartbeat v1 (SubscribedTopicRegex); "
                f"{conn.address} offers only v0")
        if version < 1 and self._version is None:
            self.membership.member_id = ""  # v0: the coordinator hands out the member id
        self._version = version
        return version

    async def _heartbeat(self) -> None:
        m = self.membership
        loop = asyncio.get_running_loop()
        try:
            await self._negotiate()
        except BrokerConnectionError as e:
            log.info("group %s: no coordinator connection (%s)", self.group_id, e)
            self._after_failure(loop.time() + self._backoff.next_s())
            return
        fields = self.fields.build(
            group_id=self.group_id, member_id=m.member_id, member_epoch=m.epoch,
            subscription=self._subscription(), owned=m.current,
            joining=m.state is S.JOINING)
        joins = m.joins
        self._urgent = False
        self._last_sent = loop.time()
        m.on_sent()  # an acknowledgement is on its way; a newer target may be next
        self._maybe_reconcile()
        self.heartbeats += 1
        try:
            response = await self._link.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, fields,
                                              timeout_ms=self.request_timeout_ms)
        except BrokerConnectionError as e:
            log.info("group %s: heartbeat failed (%s)", self.group_id, e)
            self._after_failure(loop.time() + self._backoff.next_s())
            return
        if joins != m.joins or self._stopped:
            return  # an answer for a membership that ended meanwhile
        code = response.error_code
        if code == ErrorCode.none:
            self._link.succeeded()
            self._backoff.reset()
            self.heartbeat_interval_ms = _ms(response.heartbeat_interval)
            assignment = response.assignment
            before = m.epoch
            m.on_success(int(response.member_epoch), None if assignment is None else {
                tp.topic_id: tp.partitions for tp in assignment.topic_partitions},
                member_id=response.member_id if self._version == 0 else None)
            if m.epoch != before:
                log.info("group %s: member %s epoch %d -> %d (%s)", self.group_id,
                         m.member_id, before, m.epoch, m.state.value)
            self._notify()
            self._maybe_reconcile()
            self._maybe_assign()
            return
        self._on_error(code, getattr(response, "error_message", None) or "", loop.time())

    def _after_failure(self, retry_at: float) -> None:
        """A request failed or an error came back: resend every field, no interval wait."""
        self.fields.reset()
        self._last_sent = None
        self._not_before = retry_at

    def _on_error(self, code: ErrorCode, message: str, now: float) -> None:
        action = heartbeat_action(code)
        m = self.membership
        log.info("group %s: member %s epoch %d: heartbeat answered %s (%s)%s", self.group_id,
                 m.member_id, m.epoch, code.name.upper(), action.name,
                 f": {message}" if message else "")
        if action is HeartbeatAction.FATAL:
            detail = f"group {self.group_id!r}" + (f": {message}" if message else "")
            if code == ErrorCode.unsupported_version:
                raise UnsupportedVersionError(f"{NOT_SUPPORTED} ({message})")
            raise fatal_group_error(code, "ConsumerGroupHeartbeat", detail)
        if action is HeartbeatAction.REDISCOVER:
            # FindCoordinator may name the same broker until the coordinator has moved (or
            # __consumer_offsets exists): back off rather than spin.
            self._link.drop(reason=f"coordinator moved ({code.name})")
            self._after_failure(now + self._backoff.next_s())
        elif action is HeartbeatAction.BACKOFF:
            self._after_failure(now + self._backoff.next_s())
        else:
            m.fence()
            self._after_failure(now)
            self._notify()

    async def _release_lost(self) -> None:
        """Fenced: drop every owned partition as lost, then join again (same member id)."""
        async with self.lock:
            owned = self.consumer.owned()
            if owned:
                await self.consumer.revoke(owned, commit=False, lost=True)
        if self._closing or self.membership.state is not S.FENCED:
            return
        self.membership.join()
        self.fields.reset()
        log.info("group %s: member %s rejoins with epoch 0", self.group_id, self.member_id)
        self._notify()

    # == client-side assignment ==================================================================
    def _maybe_assign(self) -> None:
        """After a successful heartbeat: one round of "was I chosen to assign?" at a time."""
        m = self.membership
        if (self.assigner is None or not m.in_group or self._stopped
                or (self._assign_task is not None and not self._assign_task.done())):
            return
        self._assign_task = asyncio.create_task(
            self._assign(m.member_id, m.epoch), name=f"coterie-assign-{self.group_id}")

    async def _assign(self, member_id: str, epoch: int) -> None:
        assert self.assigner is not None
        try:
            outcome = await self.assigner.run_round(member_id, epoch)
        except asyncio.CancelledError:
            raise
        except ClientError as e:
            log.info("group %s: client-side assignment round failed (%s)", self.group_id, e)
            return
        except Exception:  # a bug: the coordinator's timeout covers the round
            log.exception("group %s: client-side assignment round failed", self.group_id)
            return
        if outcome is Outcome.NOT_SUPPORTED:
            log.warning("group %s: the coordinator does not offer client-side assignment "
                        "(ConsumerGroupPrepareAssignment); it falls back to its own assignor",
                        self.group_id)
            self.assigner = None
        elif outcome is not Outcome.NOTHING:
            self.heartbeat_soon()  # learn this member's part of the new target now

    # == reconciliation ==========================================================================
    def _maybe_reconcile(self) -> None:
        m = self.membership
        if (m.state is not S.RECONCILING or self._stopped
                or (self._reconcile_task is not None and not self._reconcile_task.done())):
            return
        self._reconcile_task = asyncio.create_task(
            self._reconcile(), name=f"coterie-reconcile-{self.group_id}")

    async def _reconcile(self) -> None:
        try:
            await self._reconcile_once()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug: report it rather than stall the member
            log.exception("group %s: reconciliation failed", self.group_id)
            self._fail(e)
            self._wake.set()

    async def _reconcile_once(self) -> None:
        m = self.membership
        joins, target = m.joins, m.target
        await self._resolve_names(target.topic_ids())
        if joins != m.joins or m.state is not S.RECONCILING or self._stopped:
            return
        c = self.consumer
        async with self.lock:
            plan = plan_reconciliation(target, self.topic_names, c.owned())
            if plan.unresolved:
                log.info("group %s: topic ids %s of the target are unknown yet", self.group_id,
                         sorted(map(str, plan.unresolved)))
            if plan.resolved == m.current:
                return  # nothing new to acknowledge (the rest waits for metadata)
            taken = await c.take_assignment(
                plan.revoked, plan.added, plan.assigned,
                # fenced, failed or closing while revoking: add nothing
                still_wanted=lambda: (joins == m.joins and m.state is S.RECONCILING
                                      and not self._stopped))
            if not taken:
                return
            log.info("group %s: member %s epoch %d: %d partition(s) kept, %d added, %d revoked",
                     self.group_id, m.member_id, m.epoch,
                     len(plan.assigned) - len(plan.added), len(plan.added), len(plan.revoked))
        if m.reconciled_to(plan.resolved, joins):
            self._notify()
            self._wake.set()  # the acknowledgement goes out now

    async def _resolve_names(self, topic_ids: frozenset[uuid.UUID]) -> None:
        """Learn the names of `topic_ids` from Metadata: subscribed names first, then all."""
        if topic_ids <= self.topic_names.keys():
            return
        sub = self.consumer.subscription
        attempts: list[list[str] | None] = [] if sub.is_pattern else [sorted(sub.topics)]
        attempts.append(None)
        for topics in attempts:
            try:
                md = await self.consumer.metadata_for(topics)
            except ClientError as e:
                log.info("group %s: metadata for topic ids failed (%s)", self.group_id, e)
                return
            self._learn(md)
            if topic_ids <= self.topic_names.keys():
                return

    def _learn(self, md: ClusterMetadata) -> None:
        for name, t in md.topics.items():
            if t.topic_id is not None and t.error == ErrorCode.none:
                self.topic_names[t.topic_id] = name
