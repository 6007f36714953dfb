"""Leader election for a single writer, on top of the group membership protocol.

Seed 1 names the use: "multiple producers acting as a group, where only one producer is
active and writing at any given point of time. If that producer fails, some other producer in
the group becomes the single writer." Every candidate joins one group with protocol type
`coterie-election`; whoever the coordinator makes group leader writes an assignment that names
itself the leader (the coordinator keeps the previous leader when it rejoins, so leadership is
sticky); each member learns from its own assignment whether it leads, and who does
(`leader`: member id, group.instance.id and the `info` string the leader advertised, e.g. the
address where it accepts writes).

    async def write_forever(leadership: Leadership) -> None:
        while True:                     # cancelled (and awaited) when leadership ends
            await write_batch(fencing_token=leadership.epoch)

    async with LeaderElection("127.0.0.1:9092", "writers", lead=write_forever) as election:
        await election.wait_closed()    # runs until closed, or raises a fatal error

Why at most one member acts as leader at any instant
-----------------------------------------------------
A member acts as leader (`is_leader` true, `lead` running, `on_elected` called) only

  (1) in a generation G whose SyncGroup gave it an assignment saying "leader"; the JoinGroup
      leader writes exactly one such assignment per generation;
  (2) after a heartbeat of G sent at time s was answered NONE (`GroupMember.wait_confirmed`),
  (3) and only until its lease runs out: s' + min(session, rebalance timeout) - margin, with s'
      the send time of its latest successful heartbeat (`GroupMember.lease_deadline`).

It stops before it sends JoinGroup again: `on_revoke` / `on_lost` cancel `lead` and wait for
it before the member rejoins; and a guard task demotes it when the lease runs out even if it
cannot reach the coordinator. `is_leader` also compares the lease with the clock, so a member
whose event loop was stalled (or whose process was stopped) never reports a stale leadership.

Take A leading in generation G and B in a later generation H at the same instant t. For H to
exist, a rebalance must have started after G, at some time r. A's last successful heartbeat
(sent at s', answered NONE) was processed before r, since heartbeats of G answer
REBALANCE_IN_PROGRESS once G is rebalancing. Either A joined H itself, and then it had
demoted itself before sending that JoinGroup; or H was formed without A, which the
coordinator does only after A's session expired (no earlier than s' + session timeout) or the
join phase timed out (no earlier than r + rebalance timeout, r > s'). Both are after A's lease
end (s' + min(session, rebalance) - margin), and B acts only after H's SyncGroup, later still.
So t cannot be inside both leaderships. Same generation: (1) names one member.

Assumptions: the member's and the coordinator's clocks advance at the same rate to within the
margin (10% of the lease by default, `lease_margin_ms`); the group's members all use this
protocol; no two live processes share one group.instance.id (Kafka fences the older one, but
only on its next request). Actions a leader started before losing the lease may still land
afterwards: pass `Leadership.epoch` (the generation id, which only grows while the group
exists) as a fencing token to whatever the leader writes to, if that can check it.

Liveness: a dead leader is noticed by the coordinator after its session timeout; the others
hear REBALANCE_IN_PROGRESS on their next heartbeat, rejoin, and one of them leads after
SyncGroup and one heartbeat: about session timeout + heartbeat interval + two round trips.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coterie.client.cluster import Cluster
from coterie.client.errors import ClientError
from coterie.client.member import GroupMember
from coterie.client.member_api import MemberBackedApi, call_back
from coterie.client.protocol import EmbeddedProtocol, Generation, JoinedMember

log = logging.getLogger("coterie.client.election")

PROTOCOL_TYPE = "coterie-election"
PROTOCOL_NAME = "single-leader-v1"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Leadership:
    """This member's leadership: one per generation it leads."""

    epoch: int  # the generation id: a fencing token that only grows while the group exists
    member_id: str
    elected_at: float  # event loop clock


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    """Who leads the current generation, as every member's assignment says."""

    generation_id: int
    member_id: str
    group_instance_id: str | None
    info: str


Callback = Callable[..., Any]


def encode_metadata(info: str) -> bytes:
    return json.dumps({"version": FORMAT_VERSION, "info": info}).encode()


def decode_metadata(data: bytes) -> str:
    """The candidate's advertised info ("" when the metadata cannot be read)."""
    try:
        doc = json.loads(data)
        return str(doc.get("info", "")) if isinstance(doc, dict) else ""
    except ValueError:
        return ""


def encode_assignment(generation_id: int, leader: JoinedMember, is_leader: bool) -> bytes:
    return json.dumps({
        "version": FORMAT_VERSION, "generation": generation_id, "leader": is_leader,
        "leader_member_id": leader.member_id,
        "leader_instance_id": leader.group_instance_id,
        "leader_info": decode_metadata(leader.metadata),
    }).encode()


def decode_assignment(data: bytes) -> tuple[bool, LeaderInfo]:
    """(this member leads?, who leads). Raises ValueError on bytes it cannot read."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a {PROTOCOL_NAME} assignment: {data[:80]!r}")
    try:
        leads = doc["leader"]
        info = LeaderInfo(int(doc["generation"]), str(doc["leader_member_id"]),
                          doc.get("leader_instance_id"), str(doc.get("leader_info", "")))
    except (KeyError, TypeError) as e:
        raise ValueError(f"incomplete {PROTOCOL_NAME} assignment: {data[:80]!r}") from e
    if not isinstance(leads, bool):
        raise ValueError(f"'leader' must be a boolean, got {leads!r}")
    return leads, info


class _ElectionProtocol(EmbeddedProtocol):
    protocol_type = PROTOCOL_TYPE

    def __init__(self, election: LeaderElection) -> None:
        self.election = election

    async def metadata(self) -> Sequence[tuple[str, bytes]]:
        return [(PROTOCOL_NAME, encode_metadata(self.election.info))]

    async def assign(self, generation: Generation,
                     members: Sequence[JoinedMember]) -> Mapping[str, bytes]:
        leader = next(m for m in members if m.member_id == generation.member_id)
        return {m.member_id: encode_assignment(generation.generation_id, leader,
                                               m.member_id == leader.member_id)
                for m in members}

    async def on_assignment(self, generation: Generation, assignment: bytes) -> None:
        leads, leader = decode_assignment(assignment)
        await self.election._adopt(generation, leads, leader)

    async def on_revoke(self, generation: Generation) -> None:
        await self.election._demote("the group is rebalancing")

    async def on_lost(self, generation: Generation) -> None:
        await self.election._demote("the generation was lost")


class LeaderElection(MemberBackedApi):
    """Elect one leader among the members of `group_id` (see the module docstring).

    Callbacks (plain functions or coroutine functions, all optional):
      on_elected(leadership)          this member just became leader
      on_demoted(leadership, reason)  it no longer is (called after `lead` has stopped)
      lead(leadership)                a coroutine run as a task for as long as it leads;
                                      cancelled and awaited before the member rejoins
    `info` is advertised to every member as `leader.info` when this member leads.
    Other keyword arguments go to `GroupMember` (session_timeout_ms, heartbeat_interval_ms,
    group_instance_id, client_id, ...); the rebalance timeout defaults to the session timeout.
    """

    def __init__(self, bootstrap: str | Sequence[str] | Cluster, group_id: str, *,
                 on_elected: Callback | None = None, on_demoted: Callback | None = None,
                 lead: Callable[[Leadership], Awaitable[None]] | None = None, info: str = "",
                 session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 1_000,
                 rebalance_timeout_ms: int | None = None, **member_options: Any) -> None:
        self.info = info
        self.on_elected = on_elected
        self.on_demoted = on_demoted
        self.lead = lead
        self.member = GroupMember(
            bootstrap, group_id, _ElectionProtocol(self), session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            rebalance_timeout_ms=rebalance_timeout_ms or session_timeout_ms, **member_options)
        self._leadership: Leadership | None = None
        self._leader: LeaderInfo | None = None
        self._lead_task: asyncio.Task[None] | None = None
        self._guard_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._elected = asyncio.Event()
        self.terms: list[Leadership] = []

    # -- public view --------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        """True only while this member leads and its lease has not run out."""
        leadership = self._leadership
        return (leadership is not None and self.member.generation_id == leadership.epoch
                and self.member.lease_valid())

    @property
    def leadership(self) -> Leadership | None:
        return self._leadership if self.is_leader else None

    @property
    def leader(self) -> LeaderInfo | None:
        """Who leads the member's current generation (None between generations)."""
        leader = self._leader
        if leader is None or leader.generation_id != self.member.generation_id:
            return None
        return leader

    # -- life cycle ---------------------------------------------------------------------------
    async def _release(self, reason: str) -> None:
        await self._demote(reason)

    async def wait_elected(self, timeout: float | None = None) -> Leadership:
        """Wait until this member leads. Raises the member's fatal error if it fails,
        ClientError if it closes, TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while True:
                leadership = self.leadership
                if leadership is not None:
                    return leadership
                elected = asyncio.ensure_future(self._elected.wait())
                closed = asyncio.ensure_future(self.member.wait_closed())
                try:
                    done, _ = await asyncio.wait({elected, closed}, timeout=0.5,
                                                 return_when=asyncio.FIRST_COMPLETED)
                finally:
                    elected.cancel()
                    closed.cancel()
                if closed in done:
                    closed.result()  # raises the member's error, if any
                    raise ClientError(f"election in {self.member.group_id!r} is closed")

    # -- transitions (called from the member's task, and from the lease guard) ----------------
    async def _adopt(self, generation: Generation, leads: bool, leader: LeaderInfo) -> None:
        self._leader = leader
        if not leads:
            return
        if not await self.member.wait_confirmed(generation):
            return  # the generation ended before a heartbeat anchored the lease
        async with self._lock:
            if self.member.generation != generation or not self.member.lease_valid():
                return
            leadership = Leadership(generation.generation_id, generation.member_id,
                                    asyncio.get_running_loop().time())
            self._leadership = leadership
            self.terms.append(leadership)
            self._elected.set()
            log.info("group %s: member %s leads (epoch %d)", self.member.group_id,
                     leadership.member_id, leadership.epoch)
            self._guard_task = asyncio.create_task(self._guard(leadership))
            if self.lead is not None:
                self._lead_task = asyncio.create_task(self._run_lead(leadership))
        await call_back(self.on_elected, leadership)

    async def _run_lead(self, leadership: Leadership) -> None:
        assert self.lead is not None
        try:
            await self.lead(leadership)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("group %s: lead() raised", self.member.group_id)

    async def _guard(self, leadership: Leadership) -> None:
        """Demote as soon as the lease runs out, whatever the member's task is doing."""
        loop = asyncio.get_running_loop()
        while self._leadership is leadership:
            deadline = self.member.lease_deadline
            if deadline is None or loop.time() >= deadline:
                await self._demote("the session lease ran out")
                return
            await asyncio.sleep(deadline - loop.time())

    async def _demote(self, reason: str) -> None:
        async with self._lock:
            leadership, self._leadership = self._leadership, None
            if leadership is None:
                return
            self._elected.clear()
            guard, self._guard_task = self._guard_task, None
            if guard is not None and guard is not asyncio.current_task():
                guard.cancel()
            task, self._lead_task = self._lead_task, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            log.info("group %s: member %s no longer leads epoch %d (%s)",
                     self.member.group_id, leadership.member_id, leadership.epoch, reason)
        await call_back(self.on_demoted, leadership, reason)
