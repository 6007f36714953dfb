"""Shared pieces of the coterie.client member tests.

* `group_broker`: the broker a member test runs against - a coterie broker without the
  initial rebalance delay, and (marked `reference`) the session's Apache Kafka broker.
* `RecordingProtocol`: an embedded protocol that records every hook call, so tests assert on
  what the member did (revoked or lost, which generation, which member id).
* `run`: run a coroutine with a hard bound, so no test can hang.
* Raw-protocol helpers (through tests/kafka_raw.py, i.e. kio codecs, not the code under
  test) to play a second party: remove a member, impersonate one, describe a group.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v3.request import LeaveGroupRequest, MemberIdentity
from kio.schema.sync_group.v3.request import SyncGroupRequest

from coterie.client.member import GroupMember
from coterie.client.protocol import EmbeddedProtocol, Generation, JoinedMember
from tests.fixtures.reference_broker import REFERENCE_GROUP_SETTINGS
from tests.kafka_raw import RawConnection

T = TypeVar("T")

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
FAST = {"session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
        "rebalance_timeout_ms": 15_000, "retry_backoff_ms": 50, "retry_backoff_max_ms": 500}

@dataclass(frozen=True)
class Target:
    kind: str
    host: str
    port: int
    handle: Any

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

@pytest.fixture(params=["coterie", pytest.param("reference_kafka", marks=pytest.mark.reference)])
def group_broker(request: pytest.FixtureRequest) -> Target:
    """A coterie broker or the reference Kafka broker, both with the same group settings
    (no initial rebalance delay; KIP-848 groups with a 6 s session and 500 ms heartbeats)."""
    if request.param == "coterie":
        factory = request.getfixturevalue("coterie_factory")
        handle = factory(config=dict(REFERENCE_GROUP_SETTINGS))
    else:
        handle = request.getfixturevalue("reference_kafka")
    return Target(request.param, handle.host, handle.port, handle)

def new_group(prefix: str = "member-test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"

def run(coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
    """asyncio.run with a hard bound on the whole test body."""
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())

async def eventually(predicate: Callable[[], bool], what: str, timeout: float = 30.0,
                     step: float = 0.05) -> float:
    """Poll until `predicate()`; return the seconds it took, fail with `what` after `timeout`."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(step)
    return time.monotonic() - start

@dataclass
class RecordingProtocol(EmbeddedProtocol):
    """Records hook calls as (event, generation id, member id) tuples."""

    label: str
    protocol_type: str = "coterie-test"
    protocols: Sequence[tuple[str, bytes]] = ()
    assign_with: Callable[[Generation, Sequence[JoinedMember]], Mapping[str, bytes]] | None = None
    decode: Callable[[bytes], Any] | None = None
    events: list[tuple[str, int, str]] = field(default_factory=list)
    assignments: list[bytes] = field(default_factory=list)
    seen_members: list[list[JoinedMember]] = field(default_factory=list)

    async def metadata(self) -> Sequence[tuple[str, bytes]]:
        return list(self.protocols) or [("v1", self.label.encode())]

    async def assign(self, generation: Generation,
                     members: Sequence[JoinedMember]) -> Mapping[str, bytes]:
        self.seen_members.append(list(members))
        if self.assign_with is not None:
            return self.assign_with(generation, members)
        return {m.member_id: b"for:" + m.metadata for m in members}

    async def on_assignment(self, generation: Generation, assignment: bytes) -> None:
        if self.decode is not None:
            self.decode(assignment)
        self.assignments.append(assignment)
        self.events.append(("assigned", generation.generation_id, generation.member_id))

    async def on_revoke(self, generation: Generation) -> None:
        self.events.append(("revoked", generation.generation_id, generation.member_id))

    async def on_lost(self, generation: Generation) -> None:
        self.events.append(("lost", generation.generation_id, generation.member_id))

    def kinds(self) -> list[str]:
        return [e[0] for e in self.events]

def member(target: Target, group: str, label: str, **options: Any) -> GroupMember:
    protocol = options.pop("protocol", None) or RecordingProtocol(label)
    return GroupMember(target.bootstrap, group, protocol, client_id=label,
                       **{**FAST, **options})

async def stable_together(members: Sequence[GroupMember], after: int = -1,
                          timeout: float = 30.0) -> int:
    """Wait until every member holds the same generation, newer than `after`; return it."""
    def same() -> bool:
        gens = {m.generation_id for m in members}
        return len(gens) == 1 and min(gens) > after and all(
            m.state.value == "stable" for m in members)
    await eventually(same, f"{len(members)} members in one stable generation", timeout)
    return members[0].generation_id

# -- a second party on the raw protocol ----------------------------------------------------------

def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)

def raw_leave(target: Target, group: str, member_id: str) -> int:
    """LeaveGroup on behalf of `member_id` (the coordinator does not check who asks)."""
    with RawConnection(target.host, target.port) as conn:
        resp = conn.request(LeaveGroupRequest(group_id=group, members=(
            MemberIdentity(member_id=member_id, group_instance_id=None),)))
        return int(resp.error_code)

def raw_impersonate(target: Target, group: str, member_id: str, protocol_type: str,
                    protocols: Sequence[tuple[str, bytes]]) -> tuple[int, int]:
    """JoinGroup + SyncGroup as `member_id` with other metadata, so the group moves to a
    new generation without that member taking part. Returns (join error, generation)."""
    with RawConnection(target.host, target.port, timeout=30.0) as conn:
        join = conn.request(JoinGroupRequest(
            group_id=group, session_timeout=_ms(SESSION_TIMEOUT_MS),
            rebalance_timeout=_ms(15_000), member_id=member_id, group_instance_id=None,
            protocol_type=protocol_type, protocols=tuple(
                JoinGroupRequestProtocol(name=n, metadata=md) for n, md in protocols)))
        if join.error_code != 0:
            return int(join.error_code), -1
        sync = conn.request(SyncGroupRequest(
            group_id=group, generation_id=join.generation_id, member_id=member_id,
            group_instance_id=None, assignments=()))
        return int(sync.error_code), int(join.generation_id)

def raw_describe(target: Target, group: str) -> Any:
    with RawConnection(target.host, target.port) as conn:
        return conn.request(DescribeGroupsRequest(
            groups=(group,), include_authorized_operations=False)).groups[0]

async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(fn, *args)

Hook = Callable[..., Awaitable[None]]
