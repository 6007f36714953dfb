"""The console's pages from a cluster, through the admin client (`coterie.admin`).

Why through the Kafka protocol and not the broker's memory: the console then shows any
Kafka-compatible cluster, and sees what its user may see, no more: the cluster authorizes
every request it makes as the principal it logged in as (ListGroups and Metadata leave out
what that principal may not describe; a describe of a group it may not see is refused).

The admin client's errors become the pages' errors (`views.py`): an unreachable cluster is
`Unreachable`, refused credentials `AuthenticationFailed`, an unknown group or topic
`NotFound`, an authorization error `Denied`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from coterie.admin import groups as admin_groups
from coterie.admin import offsets as admin_offsets
from coterie.admin import topics as admin_topics
from coterie.admin.client import AdminClient, AdminError
from coterie.admin.groups import GroupNotFoundError, TopicPartition
from coterie.client.errors import (
    AuthenticationError,
    BrokerConnectionError,
    BrokerError,
    BrokerUnavailableError,
    FatalGroupError,
)
from coterie.console.timeline_source import TimelineReader
from coterie.console.views import (
    AuthenticationFailed,
    BrokersDetail,
    BrokerView,
    ConfigEntry,
    ConsoleError,
    Denied,
    GroupDetail,
    GroupRow,
    Lease,
    LeaseReader,
    MemberView,
    NotFound,
    PartitionLag,
    PartitionView,
    TopicDetail,
    TopicPartitionRef,
    TopicRow,
    Unreachable,
)

T = TypeVar("T")
SUMMARY_CONCURRENCY = 8  # describes of one groups page in flight at once


def _translate(e: Exception) -> ConsoleError:
    text = str(e)
    if isinstance(e, GroupNotFoundError):
        return NotFound(text)
    if isinstance(e, AuthenticationError):
        return AuthenticationFailed(text)
    if isinstance(e, BrokerUnavailableError | BrokerConnectionError):
        return Unreachable(text)
    if "AUTHORIZATION_FAILED" in text.upper():
        return Denied(text)
    if isinstance(e, AdminError) and ("does not exist" in text
                                      or "INVALID_TOPIC_EXCEPTION" in text.upper()):
        return NotFound(text)
    return ConsoleError(text)


async def _guarded(call: Awaitable[T]) -> T:
    try:
        return await call
    except (AdminError, AuthenticationError, BrokerUnavailableError, BrokerConnectionError,
            FatalGroupError, BrokerError) as e:
        raise _translate(e) from e


class AdminSource:
    """A `ConsoleSource` over one AdminClient (one principal's connections)."""

    def __init__(self, bootstrap: str, security: Mapping[str, object] | None = None, *,
                 timeout_s: float = 10.0, timeline: TimelineReader | None = None,
                 leases: LeaseReader | None = None) -> None:
        self.admin = AdminClient(bootstrap, security=security, timeout_s=timeout_s)
        self.timeline = timeline or TimelineReader(bootstrap, security, timeout_s=timeout_s)
        self.leases = leases  # None: the leases are not shown (no protocol lists them)

    async def close(self) -> None:
        await self.admin.close()

    # -- groups -------------------------------------------------------------------------------
    async def list_groups(self) -> Sequence[GroupRow]:
        listed = await _guarded(admin_groups.list_groups(self.admin))
        return [GroupRow(g.group_id, g.type, g.state, protocol=g.protocol_type or None)
                for g in listed]

    async def summarize(self, rows: Sequence[GroupRow]) -> Sequence[GroupRow]:
        gate = asyncio.Semaphore(SUMMARY_CONCURRENCY)

        async def one(row: GroupRow) -> GroupRow:
            async with gate:
                try:
                    g = await _guarded(admin_groups.describe_group(self.admin, row.group_id))
                except (NotFound, Denied, ConsoleError):
                    return row  # gone meanwhile, or not describable: the listing's line
            return GroupRow(row.group_id, g.type, g.state, len(g.members), g.epoch,
                            g.assignor or g.protocol_type or None)

        return await asyncio.gather(*(one(r) for r in rows))

    async def describe_group(self, group_id: str) -> GroupDetail:
        described = await _guarded(admin_offsets.group_offsets(self.admin, group_id))
        g = described.group
        members = tuple(MemberView(
            m.member_id, m.client_id, m.host, m.instance_id, m.epoch,
            tuple(TopicPartitionRef(tp.topic, tp.partition) for tp in m.assignment))
            for m in g.members)
        lag = tuple(PartitionLag(p.topic, p.partition, p.committed, p.log_end, p.member_id)
                    for p in described.partitions)
        timeline = await self.timeline.read(group_id)
        return GroupDetail(g.group_id, g.type, g.state, g.epoch,
                           g.assignor or g.protocol_type or None,
                           f"{g.coordinator.node_id} {g.coordinator.address}", members, lag,
                           timeline)

    # -- topics -------------------------------------------------------------------------------
    async def list_topics(self) -> Sequence[TopicRow]:
        listed = await _guarded(admin_topics.list_topics(self.admin))
        return [TopicRow(t.name, len(t.partitions), t.internal) for t in listed]

    async def describe_topic(self, name: str) -> TopicDetail:
        if not name or len(name) > 249:
            raise NotFound(f"topic {name[:80]!r} does not exist")
        found = await _guarded(admin_topics.describe_topics(self.admin, [name],
                                                            with_sizes=False))
        if not found:
            raise NotFound(f"topic {name!r} does not exist")
        t = found[0]
        tps = [TopicPartition(t.name, p.partition) for p in t.partitions]
        earliest, latest = await asyncio.gather(
            _guarded(admin_offsets.log_offsets(self.admin, tps, admin_offsets.EARLIEST)),
            _guarded(admin_offsets.log_offsets(self.admin, tps, admin_offsets.LATEST)))
        return TopicDetail(
            t.name, None if t.topic_id is None else str(t.topic_id), t.internal,
            tuple(PartitionView(p.partition, p.leader, p.replicas, p.isr,
                                earliest.get(TopicPartition(t.name, p.partition)),
                                latest.get(TopicPartition(t.name, p.partition)))
                  for p in t.partitions),
            tuple(ConfigEntry(c.name, c.value, c.source, c.sensitive) for c in t.configs))

    # -- brokers ------------------------------------------------------------------------------
    async def brokers(self) -> BrokersDetail:
        self.admin.start_operation()
        leases = None if self.leases is None else asyncio.ensure_future(self._leases())
        try:
            # With leases, every topic this principal may describe: a lease is shown only
            # when its topic is (the cluster's ACLs decide, as on every other page).
            meta = await _guarded(self.admin.cluster.metadata(
                [] if leases is None else None, deadline=self.admin.deadline()))
        except BaseException:
            if leases is not None:
                leases.cancel()
            raise
        held, error = (None, None) if leases is None else await leases
        if held is not None:
            visible = {name for name, t in meta.topics.items() if not t.error}
            held = tuple(lease for lease in held
                         if lease.topic is None or lease.topic in visible)
        return BrokersDetail(meta.cluster_id, tuple(
            BrokerView(n.node_id, n.host, n.port, n.rack, n.node_id == meta.controller_id)
            for n in sorted(meta.brokers.values(), key=lambda n: n.node_id)),
            leases=held, leases_error=error)

    async def _leases(self) -> tuple[tuple[Lease, ...] | None, str | None]:
        """The cluster's leases, or why they could not be read (the brokers are shown
        either way: the database being down is what an operator may be looking into)."""
        assert self.leases is not None
        try:
            return await self.leases(), None
        except asyncio.CancelledError:
            raise
        except Exception as e:
            return None, f"{type(e).__name__}: {str(e).strip() or 'no answer'}"


def source_factory(bootstrap: str, security: Mapping[str, object] | None = None,
                   *, timeout_s: float = 10.0,
                   leases: LeaseReader | None = None) -> Callable[..., AdminSource]:
    """Makes a source per user: with credentials, `security` plus that user's name and
    password (the mechanism and TLS settings stay the configured ones)."""
    base = dict(security or {})

    def make(who: object | None) -> AdminSource:
        props = dict(base)
        if who is not None:
            props.pop("sasl.jaas.config", None)
            props["sasl.username"] = who.username  # type: ignore[attr-defined]
            props["sasl.password"] = who.password  # type: ignore[attr-defined]
        return AdminSource(bootstrap, props, timeout_s=timeout_s, leases=leases)

    return make


def needs_login(security: Mapping[str, object] | None) -> bool:
    """Does the cluster, reached with these settings, want a SASL login?"""
    protocol = str((security or {}).get("security.protocol", "PLAINTEXT")).upper()
    return protocol.startswith("SASL_")
