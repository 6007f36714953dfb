"""What the console's pages show, as plain values, and the one interface that fetches them.

Why a seam of its own: the pages are rendered from these values only, so the renderer is
tested on made-up groups (a 10,000-member group, hostile names) without a cluster, and the
place the values come from (the admin client over the Kafka protocol, `admin_source.py`) is
one adapter behind `ConsoleSource`. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class ConsoleError(Exception):
    """Base of what a data source raises for the pages to show as an error page."""


class NotFound(ConsoleError):
    """The group or topic does not exist (or the principal may not describe it): a 404."""


class Unreachable(ConsoleError):
    """The cluster did not answer (no broker reachable, timed out): a 503 page."""


class AuthenticationFailed(ConsoleError):
    """The cluster refused the credentials the console logged in with: ask again (401)."""


class Denied(ConsoleError):
    """The cluster answered an authorization error for a whole page: a 403 page."""


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One line of the groups page."""

    group_id: str
    group_type: str  # classic, consumer, streams, share
    state: str
    members: int | None = None
    epoch: int | None = None  # generation (classic) or group epoch (consumer, streams, share)
    protocol: str | None = None  # classic: the protocol type / assignor; others: assignor


@dataclass(frozen=True, slots=True)
class TopicPartitionRef:
    topic: str
    partition: int

    def label(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    client_id: str = ""
    host: str = ""
    instance_id: str | None = None
    member_epoch: int | None = None
    assignment: tuple[TopicPartitionRef, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: no committed offset
    end: int | None  # None: the end offset could not be read
    owner: str | None = None  # member id holding the partition now

    @property
    def lag(self) -> int | None:
        if self.end is None:
            return None
        if self.committed is None or self.committed < 0:
            return None
        return max(0, self.end - self.committed)


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One rebalance of the timeline: when it began and ended (ms since the epoch) and why."""

    start_ms: int
    end_ms: int | None  # None: not stable yet
    cause: str
    epoch: int | None = None

    @property
    def duration_ms(self) -> int | None:
        return None if self.end_ms is None else self.end_ms - self.start_ms


@dataclass(frozen=True, slots=True)
class Ownership:
    """A member held a partition (`topic-N`; a task id in a streams group) from `start_ms` to
    `end_ms` (None: still holds it)."""

    member_id: str
    partition: str
    start_ms: int
    end_ms: int | None


@dataclass(frozen=True, slots=True)
class Timeline:
    rebalances: tuple[Rebalance, ...] = ()
    ownership: tuple[Ownership, ...] = ()
    note: str | None = None  # why the timeline is empty or partial, shown under the picture


@dataclass(frozen=True, slots=True)
class GroupDetail:
    group_id: str
    group_type: str
    state: str
    epoch: int | None = None
    protocol: str | None = None
    coordinator: str | None = None  # "node-id host:port"
    members: tuple[MemberView, ...] = ()
    lag: tuple[PartitionLag, ...] = ()
    timeline: Timeline = field(default_factory=Timeline)


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    partitions: int
    internal: bool = False


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition: int
    leader: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    earliest: int | None = None
    latest: int | None = None


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str = ""
    sensitive: bool = False


@dataclass(frozen=True, slots=True)
class TopicDetail:
    name: str
    topic_id: str | None = None
    internal: bool = False
    partitions: tuple[PartitionView, ...] = ()
    configs: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerView:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    controller: bool = False


@dataclass(frozen=True, slots=True)
class Lease:
    """A cluster lease on PostgreSQL storage: who holds what, at which epoch, for how long.

    `resource` is `topic-N` for a partition (the lease's own name when its topic is gone);
    `coordinator` says which coordinator's shard the partition is (`group` for
    `__consumer_offsets`, `transaction` for `__transaction_state`), None for data; `holder`
    is None once released; `expires_in_ms` is negative once expired (nobody renews it)."""

    resource: str
    holder: int | None
    epoch: int
    expires_in_ms: int
    coordinator: str | None = None
    topic: str | None = None  # a partition's topic: the page shows what the user may describe

    @property
    def live(self) -> bool:
        return self.holder is not None and self.expires_in_ms > 0


@dataclass(frozen=True, slots=True)
class BrokersDetail:
    cluster_id: str | None
    brokers: tuple[BrokerView, ...] = ()
    # None: leases are not shown (the console does not run in a broker of a cluster on
    # PostgreSQL; the Kafka protocol has no request that lists them).
    leases: tuple[Lease, ...] | None = None
    leases_error: str | None = None  # why the lease table could not be read this time


# Reads every lease of the cluster (`coterie serve` hands one to its console when its storage
# is PostgreSQL: coterie.console.lease_source).
LeaseReader = Callable[[], Awaitable[tuple[Lease, ...]]]


class ConsoleSource(Protocol):
    """Where the pages' values come from; one per logged-in principal (or one, unsecured)."""

    async def list_groups(self) -> Sequence[GroupRow]:
        """Every group (ListGroups: id, type, state; no members or epoch yet)."""
        ...

    async def summarize(self, rows: Sequence[GroupRow]) -> Sequence[GroupRow]:
        """`rows` with their members and epochs filled in (one page of them: each needs a
        describe of its own)."""
        ...

    async def describe_group(self, group_id: str) -> GroupDetail: ...

    async def list_topics(self) -> Sequence[TopicRow]: ...

    async def describe_topic(self, name: str) -> TopicDetail: ...

    async def brokers(self) -> BrokersDetail: ...

    async def close(self) -> None: ...
