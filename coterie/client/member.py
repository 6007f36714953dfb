"""`GroupMember`: a generic member of a classic group, running an embedded protocol.

Theory of operation. One task (`_run`) owns the member's life and calls every protocol hook;
while the member holds a generation a second task (`_heartbeat`) keeps it alive. They talk
through one slot, `_signal`, that the heartbeat task, `request_rejoin()` and `close()` fill
and the main task empties:

    main task:  [find coordinator] -> JoinGroup -> (leader: assign) -> SyncGroup
                -> on_assignment -> STABLE: wait for a signal -> on_revoke | on_lost -> again
    heartbeat:  every heartbeat_interval_ms while STABLE; the first one right after SyncGroup

States (`MemberState`): CREATED -> JOINING -> SYNCING -> STABLE -> JOINING ... and finally
CLOSED (after `close()`) or FAILED (a fatal error; `error` says which). What each error code
of JoinGroup / SyncGroup / Heartbeat leads to is in `coterie.client.outcomes`.

Session lease. The coordinator drops a member whose session timer runs out; it resets that
timer when it processes a heartbeat, and a new generation can only start without this member
after a rebalance began, which is after the last heartbeat it answered with NONE. So from the
moment a heartbeat was *sent* (the coordinator processed it later) the member is certainly
still in its generation for min(session timeout, rebalance timeout). `lease_deadline` is that
instant minus a safety margin, renewed by every successful heartbeat (based on its send time,
never on when the answer came). When the lease runs out without renewal the member gives up
its generation (`on_lost`) and rejoins, even if it cannot reach anyone to be told so; this is
what lets `LeaderElection` promise a single leader. Between SyncGroup and the first heartbeat
the lease is based on the SyncGroup's send time; `wait_confirmed()` lets a protocol wait for
the heartbeat-anchored lease.

Static membership (group.instance.id, KIP-345): the member sends its instance id in
JoinGroup (v5+), SyncGroup and Heartbeat, and by default does not send LeaveGroup on close:
a restart within the session timeout takes its old place without a rebalance.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from coterie.client.cluster import Cluster
from coterie.client.coordinator_link import CoordinatorLink
from coterie.client.errors import (
    AssignmentError,
    AssignorError,
    BrokerConnectionError,
    ClientError,
    InconsistentGroupProtocolError,
    MemberCallbackError,
    MetadataError,
    UnsupportedVersionError,
    fatal_group_error,
)
from coterie.client.outcomes import HEARTBEAT, JOIN_GROUP, SYNC_GROUP, Outcome, outcome
from coterie.client.protocol import EmbeddedProtocol, Generation, JoinedMember
from coterie.client.security import SecuritySettings
from coterie.client.versions import ApiKey, VersionRange

log = logging.getLogger("coterie.client.member")

JOIN_TIMEOUT_LAPSE_MS = 5_000  # a JoinGroup may park a whole rebalance timeout; allow more
IMMEDIATE_RETRIES = 3  # REBALANCE_IN_PROGRESS etc. are retried at once this often, then slower


class MemberState(enum.Enum):
    CREATED = "created"
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"
    CLOSED = "closed"
    FAILED = "failed"


class _Wake(enum.IntEnum):
    """Why the main task should leave STABLE; a higher value overrides a lower one."""

    REJOIN = 0
    LOST = 1
    REJOIN_AS_NEW = 2
    CLOSE = 3
    FATAL = 4


@dataclass(frozen=True, slots=True)
class _Signal:
    wake: _Wake
    reason: str
    error: BaseException | None = None


_FROM_OUTCOME = {Outcome.REJOIN: _Wake.REJOIN, Outcome.LOST: _Wake.LOST,
                 Outcome.REJOIN_AS_NEW: _Wake.REJOIN_AS_NEW}


class GroupMember:
    """A member of a classic group: join, sync, heartbeat, rejoin, leave.

    `bootstrap` is "host:port[,host:port...]", a list of them, or a `Cluster` to share (the
    member then leaves closing it to its owner). Timeouts are in milliseconds.
    `unavailable_timeout_ms`: fail with BrokerUnavailableError after that long without any
    coordinator (None: keep retrying). `lease_margin_ms`: how much earlier than the coordinator
    could drop it the member considers its generation lost (default 10% of the lease).
    `security`: TLS and SASL, as a map of Kafka's client properties (`{"security.protocol":
    "SASL_SSL", "sasl.mechanism": "PLAIN", ...}`, see `coterie.client.security`) or
    `SecuritySettings`; ignored when `bootstrap` is a `Cluster`, which has its own.
    `rebalances` counts the generations the member has taken part in.
    """

    def __init__(self, bootstrap: str | Sequence[str] | Cluster, group_id: str,
                 protocol: EmbeddedProtocol, *, group_instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 3_000,
                 rebalance_timeout_ms: int = 60_000, client_id: str = "coterie-member",
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1_000, unavailable_timeout_ms: int | None = None,
                 lease_margin_ms: int | None = None, rng: random.Random | None = None,
                 security: SecuritySettings | Mapping[str, object] | None = None) -> None:
        if not group_id:
            raise ValueError("group_id must not be empty")
        if not protocol.protocol_type:
            raise ValueError("the protocol must name its protocol_type")
        if not 0 < heartbeat_interval_ms < session_timeout_ms:
            raise ValueError("need 0 < heartbeat_interval_ms < session_timeout_ms")
        if rebalance_timeout_ms <= 0:
            raise ValueError("rebalance_timeout_ms must be positive")
        lease_ms = min(session_timeout_ms, rebalance_timeout_ms)
        margin = lease_margin_ms if lease_margin_ms is not None else lease_ms // 10
        if not 0 <= margin < lease_ms - heartbeat_interval_ms:
            raise ValueError("lease_margin_ms leaves no room for a heartbeat within the lease")
        self.group_id = group_id
        self.protocol = protocol
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.lease_ms = lease_ms - margin
        if isinstance(bootstrap, Cluster):
            self.cluster, self._owns_cluster = bootstrap, False
        else:
            self.cluster = Cluster(bootstrap, client_id=client_id,
                                   request_timeout_ms=request_timeout_ms,
                                   retry_backoff_ms=retry_backoff_ms,
                                   retry_backoff_max_ms=retry_backoff_max_ms, rng=rng,
                                   security=security)
            self._owns_cluster = True
        self._link = CoordinatorLink(self.cluster, group_id, unavailable_timeout_ms)
        self._state = MemberState.CREATED
        self._member_id = ""
        self._generation: Generation | None = None
        self._lease_deadline: float | None = None
        self._confirmation: asyncio.Future[bool] | None = None
        self._error: BaseException | None = None
        self._error_reported = False
        self._signal: _Signal | None = None
        self._wake = asyncio.Event()
        self._stable = asyncio.Event()
        self._done = asyncio.Event()
        self._closing = False
        self._leave_on_close: bool | None = None
        self._task: asyncio.Task[None] | None = None
        self._round: asyncio.Task[tuple[Generation, bytes, float]] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self.rebalances = 0

    # == public view =============================================================================
    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def member_id(self) -> str:
        """The id the coordinator gave this member ("" before the first JoinGroup)."""
        return self._member_id

    @property
    def generation(self) -> Generation | None:
        """The generation whose assignment the member holds (None while it holds none).
        Still set while `on_revoke` / `on_lost` run, so they can use it (offset commits)."""
        return self._generation

    @property
    def generation_id(self) -> int:
        return self._generation.generation_id if self._generation is not None else -1

    @property
    def is_leader(self) -> bool:
        """Did the coordinator make this member the leader of the current generation?"""
        return self._generation is not None and self._generation.is_leader

    @property
    def lease_deadline(self) -> float | None:
        """Until when (event loop clock) the member is certainly still in `generation`."""
        return self._lease_deadline if self._generation is not None else None

    def lease_valid(self) -> bool:
        deadline = self.lease_deadline
        return deadline is not None and asyncio.get_running_loop().time() < deadline

    @property
    def error(self) -> BaseException | None:
        """The fatal error that stopped the member (state FAILED), else None."""
        return self._error

    @property
    def coordinator_connects(self) -> int:
        """How many coordinator connections the member has opened (1 without outages)."""
        return self._link.reconnects

    # == life cycle ==============================================================================
    async def start(self) -> None:
        """Start joining in the background; returns at once (see `wait_stable`)."""
        if self._task is not None:
            raise RuntimeError("GroupMember.start() called twice")
        self._task = asyncio.create_task(self._run(), name=f"coterie-member-{self.group_id}")

    async def __aenter__(self) -> GroupMember:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()
        if exc_type is None and self._error is not None and not self._error_reported:
            self._error_reported = True
            raise self._error

    async def close(self, *, leave: bool | None = None, timeout_ms: float = 15_000) -> None:
        """Give up the assignment (`on_revoke` / `on_lost`), send LeaveGroup (by default only
        for dynamic members, as Kafka does; `leave` overrides) and stop. Idempotent. Must not
        be awaited from inside a protocol hook (it would wait for itself): from there, it
        only asks the member to close."""
        self._leave_on_close = leave
        self._closing = True
        if self._task is None:
            self._state = MemberState.CLOSED
            self._done.set()
            await self._close_resources()
            return
        self._post(_Wake.CLOSE, "closing")
        if self._round is not None:
            self._round.cancel()
        if asyncio.current_task() is self._task:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_ms / 1000)
        except TimeoutError:
            log.warning("group %s: member did not close within %.0f ms; stopping it",
                        self.group_id, timeout_ms)
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def wait_stable(self, timeout: float | None = None) -> Generation:
        """Wait until the member holds an assignment; return its generation. Raises the
        member's fatal error, ClientError if it closed, TimeoutError after `timeout` s."""
        async with asyncio.timeout(timeout):
            while True:
                self._raise_if_done()
                if self._stable.is_set() and self._generation is not None:
                    return self._generation
                stable = asyncio.ensure_future(self._stable.wait())
                done = asyncio.ensure_future(self._done.wait())
                try:
                    await asyncio.wait({stable, done}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stable.cancel()
                    done.cancel()

    async def wait_closed(self) -> None:
        """Wait until the member stopped; raise its fatal error if it failed."""
        await self._done.wait()
        if self._error is not None:
            self._error_reported = True
            raise self._error

    def _raise_if_done(self) -> None:
        if self._error is not None:
            self._error_reported = True
            raise self._error
        if self._done.is_set() or self._closing:
            raise ClientError(f"group member of {self.group_id!r} is closed")

    def request_rejoin(self, reason: str = "requested by the application") -> None:
        """Revoke the current assignment and join again (new metadata() is sent). While a
        join is already under way, another one follows it."""
        self._post(_Wake.REJOIN, reason)

    async def wait_confirmed(self, generation: Generation) -> bool:
        """Wait for the first successful heartbeat of `generation` after its SyncGroup: True
        once the lease is anchored on a heartbeat, False if the generation ended first."""
        fut = self._confirmation
        if self._generation != generation or fut is None:
            return False
        return await asyncio.shield(fut)

    async def coordinator_request(self, api_key: int, fields: Mapping[str, Any], *,
                                  versions: VersionRange | None = None,
                                  timeout_ms: float | None = None) -> Any:
        """Send a request on the coordinator connection (e.g. OffsetCommit) and return the
        kio response. It queues behind a parked JoinGroup, as on any Kafka connection. A
        broken connection raises BrokerConnectionError (the member reconnects by itself)."""
        return await self._link.call(api_key, fields, versions=versions,
                                     timeout_ms=timeout_ms)

    # == signals =================================================================================
    def _post(self, wake: _Wake, reason: str, error: BaseException | None = None) -> None:
        current = self._signal
        if current is None or wake >= current.wake:
            self._signal = _Signal(wake, reason, error)
        if wake >= _Wake.LOST:
            self._settle_confirmation(False)
        self._wake.set()

    async def _next_signal(self) -> _Signal:
        while self._signal is None:
            self._wake.clear()
            await self._wake.wait()
        signal, self._signal = self._signal, None
        return signal

    def _settle_confirmation(self, value: bool) -> None:
        if self._confirmation is not None and not self._confirmation.done():
            self._confirmation.set_result(value)

    # == the main task ===========================================================================
    async def _run(self) -> None:
        try:
            while not self._closing:
                self._round = asyncio.create_task(self._join_and_sync())
                try:
                    generation, assignment, sync_sent = await self._round
                except asyncio.CancelledError:
                    if self._closing and self._round.cancelled():
                        self._link.drop(reason="closed during a rebalance")
                        break
                    raise
                finally:
                    self._round = None
                await self._adopt(generation, assignment, sync_sent)
                signal = await self._next_signal()
                await self._release(signal)
                if signal.wake is _Wake.FATAL:
                    assert signal.error is not None
                    raise signal.error
        except ClientError as e:
            self._fail(e)
        except asyncio.CancelledError:
            self._closing = True
            raise
        except Exception as e:
            log.exception("group %s: member failed unexpectedly", self.group_id)
            self._fail(e)
        finally:
            await self._stop_heartbeat()
            await self._maybe_leave()
            await self._close_resources()
            if self._state is not MemberState.FAILED:
                self._state = MemberState.CLOSED
            self._done.set()

    def _fail(self, error: BaseException) -> None:
        log.error("group %s: member %s stops: %s", self.group_id, self._member_id or "-", error)
        self._error = error
        self._state = MemberState.FAILED

    async def _adopt(self, generation: Generation, assignment: bytes, sync_sent: float) -> None:
        """SyncGroup succeeded: start heartbeating, hand the assignment to the protocol."""
        self._generation = generation
        self._lease_deadline = sync_sent + self.lease_ms / 1000
        self._confirmation = asyncio.get_running_loop().create_future()
        self._state = MemberState.STABLE
        self.rebalances += 1
        self._heartbeat_task = asyncio.create_task(self._heartbeat(generation),
                                                   name=f"coterie-heartbeat-{self.group_id}")
        try:
            await self.protocol.on_assignment(generation, assignment)
        except Exception as e:
            self._generation = None
            raise AssignmentError(
                f"group {self.group_id!r} generation {generation.generation_id}: the "
                f"assignment ({len(assignment)} bytes) could not be used: {e!r}",
                generation) from e
        self._stable.set()
        log.info("group %s: member %s stable in generation %d (leader %s, protocol %s)",
                 self.group_id, generation.member_id, generation.generation_id,
                 generation.leader_id, generation.protocol_name)

    async def _release(self, signal: _Signal) -> None:
        """Leave STABLE: stop heartbeats, revoke or lose the assignment."""
        self._stable.clear()
        await self._stop_heartbeat()
        generation = self._generation
        if generation is not None:
            lost = signal.wake in (_Wake.LOST, _Wake.REJOIN_AS_NEW, _Wake.FATAL) or (
                not self.lease_valid())
            hook = self.protocol.on_lost if lost else self.protocol.on_revoke
            log.info("group %s: generation %d %s (%s)", self.group_id,
                     generation.generation_id, "lost" if lost else "revoked", signal.reason)
            try:
                await hook(generation)
            except Exception:
                log.exception("group %s: %s raised; carrying on", self.group_id,
                              hook.__name__)
            self._generation = None
        self._lease_deadline = None
        if signal.wake is _Wake.REJOIN_AS_NEW:
            self._member_id = ""
        if self._state is MemberState.STABLE:
            self._state = MemberState.JOINING

    # == joining =================================================================================
    async def _join_and_sync(self) -> tuple[Generation, bytes, float]:
        loop = asyncio.get_running_loop()
        immediate = 0
        while True:
            self._state = MemberState.JOINING
            conn = await self._link.connection()
            try:
                protocols = [(str(name), bytes(md)) for name, md in await self.protocol.metadata()]
            except Exception as e:
                raise MetadataError(f"group {self.group_id!r}: metadata() failed: {e!r}") from e
            if not protocols:
                raise MetadataError(f"group {self.group_id!r}: metadata() offered no protocol")
            if self._signal is not None and self._signal.wake is _Wake.REJOIN:
                self._signal = None  # this JoinGroup carries the metadata the rejoin asked for
            version = conn.version(ApiKey.JOIN_GROUP)
            if self.group_instance_id is not None and version < 5:
                raise UnsupportedVersionError(
                    f"static membership needs JoinGroup v5+, {conn.address} speaks v{version}")
            timeout = max(self.request_timeout_ms,
                          self.rebalance_timeout_ms + JOIN_TIMEOUT_LAPSE_MS)
            try:
                join = await self._link.call(ApiKey.JOIN_GROUP, {
                    "group_id": self.group_id, "session_timeout": self.session_timeout_ms,
                    "rebalance_timeout": self.rebalance_timeout_ms, "member_id": self._member_id,
                    "group_instance_id": self.group_instance_id,
                    "protocol_type": self.protocol.protocol_type,
                    "protocols": [{"name": n, "metadata": md} for n, md in protocols],
                    "reason": "joining" if not self._member_id else "rejoining",
                }, timeout_ms=timeout)
            except BrokerConnectionError as e:
                log.info("group %s: JoinGroup failed (%s); reconnecting", self.group_id, e)
                await self._link.backoff()
                continue
            step = outcome(JOIN_GROUP, join.error_code)
            if step is not Outcome.OK:
                immediate = await self._after_error(step, join.error_code, "JoinGroup",
                                                    immediate, member_id=join.member_id)
                continue
            protocol_type = getattr(join, "protocol_type", None)
            if protocol_type is not None and protocol_type != self.protocol.protocol_type:
                raise InconsistentGroupProtocolError(
                    join.error_code, "JoinGroup",
                    f"the group's protocol type is {protocol_type!r}, ours "
                    f"{self.protocol.protocol_type!r}")
            self._member_id = join.member_id
            generation = Generation(
                generation_id=int(join.generation_id), member_id=join.member_id,
                leader_id=join.leader, protocol_type=self.protocol.protocol_type,
                protocol_name=join.protocol_name or "",
                group_instance_id=self.group_instance_id)
            assignments = await self._assign(generation, join)
            self._state = MemberState.SYNCING
            sync_sent = loop.time()
            try:
                sync = await self._link.call(ApiKey.SYNC_GROUP, {
                    "group_id": self.group_id, "generation_id": generation.generation_id,
                    "member_id": generation.member_id,
                    "group_instance_id": self.group_instance_id,
                    "protocol_type": generation.protocol_type,
                    "protocol_name": generation.protocol_name,
                    "assignments": [{"member_id": m, "assignment": a}
                                    for m, a in assignments.items()],
                }, timeout_ms=timeout)
            except BrokerConnectionError as e:
                log.info("group %s: SyncGroup failed (%s); rejoining", self.group_id, e)
                await self._link.backoff()
                continue
            step = outcome(SYNC_GROUP, sync.error_code)
            if step is not Outcome.OK:
                immediate = await self._after_error(step, sync.error_code, "SyncGroup",
                                                    immediate)
                continue
            name = getattr(sync, "protocol_name", None)
            if name is not None and name != generation.protocol_name:
                raise InconsistentGroupProtocolError(
                    sync.error_code, "SyncGroup",
                    f"SyncGroup names protocol {name!r}, JoinGroup {generation.protocol_name!r}")
            self._link.succeeded()
            return generation, bytes(sync.assignment), sync_sent

    async def _assign(self, generation: Generation, join: Any) -> dict[str, bytes]:
        """The leader's assignment for SyncGroup ({} for followers). A leader that gets no
        member list (a static leader that rejoined a stable group, or `skip_assignment`)
        keeps the group's current assignment and sends none."""
        if not generation.is_leader or not join.members or getattr(
                join, "skip_assignment", False):
            return {}
        members = [JoinedMember(m.member_id, getattr(m, "group_instance_id", None),
                                bytes(m.metadata)) for m in join.members]
        try:
            plan = await self.protocol.assign(generation, members)
            return {str(member_id): bytes(data) for member_id, data in plan.items()}
        except Exception as e:
            raise AssignorError(
                f"group {self.group_id!r} generation {generation.generation_id}: assign() "
                f"failed: {e!r}", generation) from e

    async def _after_error(self, step: Outcome, code: Any, api: str, immediate: int,
                           member_id: str | None = None) -> int:
        """Act on a JoinGroup / SyncGroup error; return the new count of immediate retries."""
        log.info("group %s: %s answered %s (%s)", self.group_id, api, code.name, step.value)
        if step is Outcome.FATAL:
            raise fatal_group_error(code, api, f"group {self.group_id!r}")
        if step is Outcome.ADOPT_MEMBER_ID and member_id:
            self._member_id = member_id
            return immediate
        if step is Outcome.REJOIN_AS_NEW:
            self._member_id = ""
        if step is Outcome.REDISCOVER:
            self._link.drop(reason=f"coordinator moved ({code.name})")
        if step in (Outcome.REDISCOVER, Outcome.BACKOFF) or immediate >= IMMEDIATE_RETRIES:
            await self._link.backoff()
            return 0
        return immediate + 1

    # == heartbeats ==============================================================================
    async def _heartbeat(self, generation: Generation) -> None:
        try:
            await self._heartbeat_loop(generation)
        except asyncio.CancelledError:
            raise
        except ClientError as e:
            self._post(_Wake.FATAL, "heartbeat failed", e)
        except Exception as e:
            log.exception("group %s: heartbeat task failed", self.group_id)
            self._post(_Wake.FATAL, "heartbeat task failed", e)
        finally:
            self._settle_confirmation(False)

    async def _heartbeat_loop(self, generation: Generation) -> None:
        loop = asyncio.get_running_loop()
        interval = self.heartbeat_interval_ms / 1000
        request_timeout = min(self.request_timeout_ms, self.session_timeout_ms / 2)
        next_at = loop.time()
        while True:
            assert self._lease_deadline is not None
            await asyncio.sleep(max(0.0, min(next_at, self._lease_deadline) - loop.time()))
            if loop.time() >= self._lease_deadline:
                self._post(_Wake.LOST, "no successful heartbeat within the session lease")
                return
            sent = loop.time()
            try:
                async with asyncio.timeout_at(self._lease_deadline):
                    response = await self._link.call(ApiKey.HEARTBEAT, {
                        "group_id": self.group_id,
                        "generation_id": generation.generation_id,
                        "member_id": generation.member_id,
                        "group_instance_id": self.group_instance_id,
                    }, timeout_ms=request_timeout)
            except TimeoutError:
                self._link.drop(reason="no heartbeat answer within the session lease")
                continue
            except BrokerConnectionError as e:
                log.info("group %s: heartbeat failed (%s)", self.group_id, e)
                next_at = loop.time() + self._link.retry_delay_s()
                continue
            step = outcome(HEARTBEAT, response.error_code)
            if step is Outcome.OK:
                self._lease_deadline = max(self._lease_deadline, sent + self.lease_ms / 1000)
                self._settle_confirmation(True)
                self._link.succeeded()
                next_at = sent + interval
                continue
            log.info("group %s: heartbeat answered %s (%s)", self.group_id,
                     response.error_code.name, step.value)
            if step in _FROM_OUTCOME:
                self._post(_FROM_OUTCOME[step], f"heartbeat: {response.error_code.name}")
                return
            if step is Outcome.FATAL:
                self._post(_Wake.FATAL, "heartbeat", fatal_group_error(
                    response.error_code, "Heartbeat", f"group {self.group_id!r}"))
                return
            if step is Outcome.REDISCOVER:
                self._link.drop(reason=f"coordinator moved ({response.error_code.name})")
            next_at = loop.time() + self._link.retry_delay_s()

    async def _stop_heartbeat(self) -> None:
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._settle_confirmation(False)

    # == leaving =================================================================================
    async def _maybe_leave(self) -> None:
        """LeaveGroup on the way out: dynamic members by default, static ones only when asked;
        not after errors that mean the coordinator does not know us as this member."""
        if self._generation is not None:
            # Closing or failing while holding an assignment (failure paths skip _release).
            await self._release(_Signal(_Wake.FATAL if self._error else _Wake.CLOSE, "stop"))
        leave = self._leave_on_close
        if leave is None:
            leave = self.group_instance_id is None
        if not leave or not self._member_id:
            return
        if self._error is not None and not isinstance(self._error, MemberCallbackError):
            return
        member = {"member_id": self._member_id, "group_instance_id": self.group_instance_id,
                  "reason": "the member is closing"}
        try:
            async with asyncio.timeout(min(self.request_timeout_ms, 5_000) / 1000):
                response = await self._link.call(ApiKey.LEAVE_GROUP, {
                    "group_id": self.group_id, "member_id": self._member_id,
                    "members": [member]})
            log.info("group %s: member %s left (%s)", self.group_id, self._member_id,
                     response.error_code.name)
        except (ClientError, TimeoutError) as e:
            log.info("group %s: LeaveGroup not sent (%s)", self.group_id, e)

    async def _close_resources(self) -> None:
        await self._link.close()
        if self._owns_cluster:
            await self.cluster.close()
