"""`Consumer`: a group consumer on the classic protocol, eager or cooperative (KIP-429), or
on the consumer group protocol of KIP-848 (`group_protocol="consumer"`).

    async with Consumer("127.0.0.1:9092", "billing", topics=["orders"],
                        assignors=["cooperative-sticky"], auto_offset_reset="earliest",
                        auto_commit=False) as consumer:
        async for record in consumer:
            handle(record)
            await consumer.commit()

Pieces, each in its own module:

    GroupMember                   join / sync / heartbeat / rejoin (coterie.client.member)
    ConsumerRebalanceProtocol     subscriptions, the leader's assignment, eager or cooperative
                                  revocation (coterie.client.consumer_rebalance)
    ConsumerGroupMember           group_protocol="consumer": ConsumerGroupHeartbeat, the
                                  coordinator's target reconciled incrementally, revocations
                                  acknowledged (coterie.client.consumer_heartbeat)
    Assignment / PartitionState   positions and buffered records (coterie.client.partition_state)
    Fetcher                       positions, Fetch, ListOffsets (coterie.client.fetcher)
    OffsetClient                  OffsetCommit / OffsetFetch (coterie.client.commits)
    decode_batches                record batches -> records (coterie.client.records)

Protocols. group_protocol="classic" (the default) runs the embedded "consumer" protocol:
JoinGroup/SyncGroup, client-side `assignors`, `session_timeout_ms` and
`heartbeat_interval_ms`. group_protocol="consumer" (KIP-848, as the Java client's
group.protocol) leaves assignment to the coordinator: `group_remote_assignor` names a server
assignor ("uniform", "range"; None lets the coordinator choose), the heartbeat interval and
session timeout are the broker's, and `assignors`, `session_timeout_ms` and
`heartbeat_interval_ms` may not be given (as the Java client refuses them). Rebalances are
always incremental there: callbacks name only the partitions revoked or added.
`group_client_assignor` (an Assignor, or a registry name; instead of
`group_remote_assignor`) asks a coterie broker for client-side assignment, a coterie
extension (docs/extensions.md): the coordinator has one member run that assignor and
install its result (`coterie.client.consumer_client_assignor`).

Tasks: the member's own (hooks run there: listener callbacks and pre-revocation commits too),
the fetch loop, a metadata refresher (every `metadata_max_age_ms`, and on demand) and an
auto-commit timer. `poll()` runs in the caller's task and only takes records that are already
buffered, so it never blocks a rebalance; heartbeats run on their own, so a slow consumer is
not thrown out of the group (there is no max.poll.interval here; `rebalance_timeout_ms` bounds
how long the group waits for this member to rejoin).

Delivery. A record is delivered once `poll()` (or the async iterator) returned it; the
position then moves past it, and commits store positions. So with `auto_commit` (every
`auto_commit_interval_ms`, before partitions are revoked and on close) the consumer is
at-least-once for records whose processing ends before the next poll; with
`auto_commit=False`, `commit()` stores the positions (or given offsets) when you say so.
A partition's records are never delivered after its `on_partitions_revoked` returned.

Errors. An assignment this member cannot decode, a fatal group error, a failed listener
callback, records that do not decode, a missing offset under auto_offset_reset="none": each
is raised from `poll()` (and `__anext__`); the member does not retry an assignment it cannot
read. `commit()` raises CommitFailedError when the group has moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign.registry import lookup
from coterie.assign.spec import Assignor
from coterie.client.cluster import Cluster, ClusterMetadata
from coterie.client.commits import OffsetClient
from coterie.client.consumer_heartbeat import ConsumerGroupMember
from coterie.client.consumer_rebalance import ConsumerRebalanceProtocol, partition_counts
from coterie.client.errors import (
    ClientError,
    CommitFailedError,
    RebalanceListenerError,
)
from coterie.client.fetcher import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Fetcher,
    FetchSettings,
)
from coterie.client.member import GroupMember, MemberState
from coterie.client.partition_state import EARLIEST, LATEST, RESET_POLICIES, Assignment
from coterie.client.records import ConsumerRecord
from coterie.client.security import SecuritySettings
from coterie.client.subscription import TopicPartition, TopicSubscription
from coterie.client.versions import MEMBER_API_RANGES, ApiKey, VersionRange

log = logging.getLogger("coterie.client.consumer")

# The member's APIs plus what a consumer sends. Fetch stops at v12, the last version that
# names topics (v13+ uses topic ids); OffsetFetch at v7, the last single-group layout.
CONSUMER_API_RANGES: Mapping[int, VersionRange] = {
    **MEMBER_API_RANGES,
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 7),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
}

CLASSIC = "classic"
CONSUMER = "consumer"
GROUP_PROTOCOLS = (CLASSIC, CONSUMER)

_LISTENER_METHODS = {"assigned": "on_partitions_assigned", "revoked": "on_partitions_revoked",
                     "lost": "on_partitions_lost"}


class ConsumerRebalanceListener:
    """Rebalance callbacks; subclass and override what you need. Methods may be plain
    functions or coroutines; they run in the member's task, so keep them short.

    on_partitions_revoked(partitions)  before partitions go away cleanly (after the
                                       auto-commit, so a manual `commit()` still works here)
    on_partitions_assigned(partitions) after a rebalance: the partitions just added (all of
                                       them under eager rebalancing; possibly none)
    on_partitions_lost(partitions)     the partitions are gone already (the generation was
                                       lost); defaults to on_partitions_revoked, as in Kafka
    """

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> Any:
        return None

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> Any:
        return None

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> Any:
        return self.on_partitions_revoked(partitions)


def _resolve_assignors(assignors: Sequence[str | Assignor] | str) -> list[Assignor]:
    items = [assignors] if isinstance(assignors, str) else list(assignors)
    if not items:
        raise ValueError("at least one assignor is needed")
    out = [lookup(a) if isinstance(a, str) else a for a in items]
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ValueError(f"assignor names must be distinct: {names}")
    return out


def _check_protocol_settings(group_protocol: str, group_remote_assignor: str | None, *,
                             assignors: object, session_timeout_ms: int | None,
                             heartbeat_interval_ms: int | None,
                             group_client_assignor: object = None) -> None:
    """Refuse settings the chosen group protocol does not use, as Kafka's client does."""
    if group_protocol not in GROUP_PROTOCOLS:
        raise ValueError(f"group_protocol must be one of {GROUP_PROTOCOLS}, "
                         f"not {group_protocol!r}")
    if group_protocol == CLASSIC and group_remote_assignor is not None:
        raise ValueError("group_remote_assignor needs group_protocol='consumer'")
    if group_client_assignor is not None:
        if group_protocol != CONSUMER:
            raise ValueError("group_client_assignor needs group_protocol='consumer'")
        if group_remote_assignor is not None:
            raise ValueError("group_client_assignor and group_remote_assignor exclude each "
                             "other: the group is assigned either by a member or by the "
                             "coordinator")
    if group_protocol == CONSUMER:
        given = [name for name, value in (("assignors", assignors),
                                          ("session_timeout_ms", session_timeout_ms),
                                          ("heartbeat_interval_ms", heartbeat_interval_ms))
                 if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} cannot be set with group_protocol="
                             "'consumer' (the coordinator assigns partitions and sets the "
                             "heartbeat interval and session timeout)")
        if group_remote_assignor is not None and not group_remote_assignor:
            raise ValueError("group_remote_assignor must not be empty")


def _client_assignor(value: str | Assignor | None) -> Assignor | None:
    if value is None:
        return None
    assignor = lookup(value) if isinstance(value, str) else value
    if not isinstance(assignor, Assignor) or not assignor.name:
        raise ValueError("group_client_assignor must be an Assignor with a name (or the name "
                         "of a registered one)")
    return assignor


def _tps(partitions: Iterable[tuple[str, int]]) -> list[TopicPartition]:
    return [TopicPartition(*tp) for tp in partitions]


class Consumer:
    """A consumer in group `group_id` (see the module docstring).

    Subscription: `topics` (names) or `pattern` (RE2, whole topic name), exactly one.
    `assignors`: registry names ("range", "roundrobin", "sticky", "cooperative-sticky", ...)
    or Assignor objects, most preferred first; the group uses one every member offers.
    `listener`: a ConsumerRebalanceListener (or any object with some of its methods).
    `auto_offset_reset`: where a partition without a committed offset starts ("earliest",
    "latest", or "none" to raise NoOffsetForPartitionError).
    Group settings (`group_instance_id`, `session_timeout_ms` (default 45000),
    `heartbeat_interval_ms` (default 3000), `rebalance_timeout_ms`, `unavailable_timeout_ms`)
    go to the `GroupMember`.
    `group_protocol`: "classic" (default) or "consumer" (KIP-848; see the module docstring),
    with `group_remote_assignor` the server-side assignor to ask for (None: the broker's
    default), or `group_client_assignor` a client-side one (coterie brokers only).
    `security`: TLS and SASL for every connection, as a map of Kafka's client properties
    (`security.protocol`, `ssl.*`, `sasl.*`; see `coterie.client.security`) or
    `SecuritySettings`.
    """

    def __init__(self, bootstrap: str | Sequence[str], group_id: str, *,
                 topics: Iterable[str] | None = None, pattern: str | None = None,
                 assignors: Sequence[str | Assignor] | str | None = None,
                 listener: Any = None, auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5_000, auto_offset_reset: str = LATEST,
                 group_instance_id: str | None = None, session_timeout_ms: int | None = None,
                 heartbeat_interval_ms: int | None = None, rebalance_timeout_ms: int = 300_000,
                 group_protocol: str = CLASSIC, group_remote_assignor: str | None = None,
                 group_client_assignor: str | Assignor | None = None,
                 client_id: str = "coterie-consumer", rack: str | None = None,
                 max_poll_records: int = 500, fetch_max_wait_ms: int = 500,
                 fetch_min_bytes: int = 1, fetch_max_bytes: int = 50 * 1024 * 1024,
                 max_partition_fetch_bytes: int = 1024 * 1024,
                 metadata_max_age_ms: int = 300_000, check_crcs: bool = True,
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1_000, unavailable_timeout_ms: int | None = None,
                 rng: random.Random | None = None,
                 security: SecuritySettings | Mapping[str, object] | None = None) -> None:
        if auto_offset_reset not in RESET_POLICIES:
            raise ValueError(f"auto_offset_reset must be one of {RESET_POLICIES}")
        if max_poll_records < 1 or auto_commit_interval_ms <= 0 or metadata_max_age_ms <= 0:
            raise ValueError("max_poll_records, auto_commit_interval_ms and "
                             "metadata_max_age_ms must be positive")
        _check_protocol_settings(group_protocol, group_remote_assignor, assignors=assignors,
                                 session_timeout_ms=session_timeout_ms,
                                 heartbeat_interval_ms=heartbeat_interval_ms,
                                 group_client_assignor=group_client_assignor)
        if not group_id:
            raise ValueError("group_id must not be empty")
        self.group_id = group_id
        self.group_protocol = group_protocol
        self._subscription = TopicSubscription(topics, pattern)
        self.assignors = _resolve_assignors(assignors if assignors is not None else ("range",))
        self.listener = listener
        self.auto_commit = auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.auto_offset_reset = auto_offset_reset
        self.rack = rack
        self.max_poll_records = max_poll_records
        self.metadata_max_age_ms = metadata_max_age_ms
        self.request_timeout_ms = request_timeout_ms
        self.cluster = Cluster(bootstrap, client_id=client_id,
                               request_timeout_ms=request_timeout_ms,
                               retry_backoff_ms=retry_backoff_ms,
                               retry_backoff_max_ms=retry_backoff_max_ms,
                               api_ranges=CONSUMER_API_RANGES, rng=rng,
                               security=security)
        self._assignment = Assignment()
        self._offsets = OffsetClient(self.cluster, group_id,
                                     unavailable_timeout_ms=unavailable_timeout_ms,
                                     request_timeout_ms=request_timeout_ms)
        self._fetcher = Fetcher(
            self.cluster, self._assignment, self._offsets, FetchSettings(
                auto_offset_reset=auto_offset_reset, fetch_max_wait_ms=fetch_max_wait_ms,
                fetch_min_bytes=fetch_min_bytes, fetch_max_bytes=fetch_max_bytes,
                max_partition_fetch_bytes=max_partition_fetch_bytes, check_crcs=check_crcs,
                request_timeout_ms=request_timeout_ms, rack=rack),
            on_data=self._wake_poll, on_error=self._raise_later,
            request_metadata=self._request_metadata)
        owner = _Owner(self)
        self._protocol = ConsumerRebalanceProtocol(owner, self.assignors)
        self._lock = self._protocol.lock  # one rebalance at a time, whichever protocol
        self.member: GroupMember | ConsumerGroupMember
        self._kip848: ConsumerGroupMember | None = None
        if group_protocol == CONSUMER:
            self.member = self._kip848 = ConsumerGroupMember(
                owner, self._lock, group_instance_id=group_instance_id,
                rebalance_timeout_ms=rebalance_timeout_ms,
                server_assignor=group_remote_assignor, request_timeout_ms=request_timeout_ms,
                unavailable_timeout_ms=unavailable_timeout_ms, rng=rng,
                client_assignor=_client_assignor(group_client_assignor))
        else:
            self.member = GroupMember(
                self.cluster, group_id, self._protocol, group_instance_id=group_instance_id,
                session_timeout_ms=45_000 if session_timeout_ms is None else session_timeout_ms,
                heartbeat_interval_ms=(3_000 if heartbeat_interval_ms is None
                                       else heartbeat_interval_ms),
                rebalance_timeout_ms=rebalance_timeout_ms, client_id=client_id,
                request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=retry_backoff_max_ms,
                unavailable_timeout_ms=unavailable_timeout_ms, rng=rng)
        self._data = asyncio.Event()
        self._metadata_wanted = asyncio.Event()
        self._errors: list[BaseException] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._started = False
        self._closing = False
        self._closed = False

    # == public view =============================================================================
    @property
    def cooperative(self) -> bool:
        """Does this consumer rebalance incrementally (every assignor is cooperative, or the
        consumer group protocol)?"""
        return self._kip848 is not None or self._protocol.cooperative

    @property
    def member_id(self) -> str:
        return self.member.member_id

    @property
    def generation_id(self) -> int:
        """The generation whose partitions the consumer holds (-1: none); under the consumer
        group protocol, the member epoch (-1 outside the group)."""
        if self._kip848 is not None:
            return self._kip848.generation_id
        g = self._protocol.generation
        return g.generation_id if g is not None else -1

    @property
    def error(self) -> BaseException | None:
        """The fatal error that stopped the group member, if any."""
        return self.member.error

    def subscription(self) -> frozenset[str]:
        """The subscribed topic names (for a pattern: the topics it matches now)."""
        return self._subscription.topics

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this consumer owns now."""
        return self._assignment.owned()

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp in self._assignment.owned()
                         if self._assignment.parts[tp].paused)

    # == life cycle ==============================================================================
    async def start(self) -> None:
        """Start joining the group and fetching in the background; returns at once."""
        if self._started:
            raise RuntimeError("Consumer.start() called twice")
        self._started = True
        self._tasks = [
            asyncio.create_task(self._fetcher.run(), name=f"coterie-fetcher-{self.group_id}"),
            asyncio.create_task(self._metadata_loop(), name=f"coterie-metadata-{self.group_id}"),
            asyncio.create_task(self._watch_member(), name=f"coterie-watch-{self.group_id}"),
        ]
        if self.auto_commit:
            self._auto_commit_task = asyncio.create_task(
                self._auto_commit_loop(), name=f"coterie-autocommit-{self.group_id}")
            self._tasks.append(self._auto_commit_task)
        await self.member.start()

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self, *, timeout_ms: float = 15_000) -> None:
        """Commit (with auto commit), revoke (listener called), leave the group (dynamic
        members), stop. Idempotent. Not from inside a listener callback."""
        if self._closed or self._closing:
            return
        self._closing = True
        if self._auto_commit_task is not None:
            self._auto_commit_task.cancel()
        # Mid-rebalance a cooperative consumer still owns partitions, and no hook will run
        # before the member leaves: commit them while the generation is still valid. (The
        # consumer group member revokes, with its commit, before leaving by itself.)
        if (self._kip848 is None and self.auto_commit
                and self.member.state is not MemberState.STABLE
                and self.member.error is None and self._assignment.owned()):
            await self._commit_quietly(self._assignment.owned(), "closing")
        try:
            await self.member.close(timeout_ms=timeout_ms)
        finally:
            async with self._lock:
                owned = self._assignment.owned()
                if owned:
                    await self._revoke(owned, commit=False,
                                       lost=self.member.error is not None)
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(BaseException):
                    await task
            await self._fetcher.close()
            await self._offsets.close()
            await self.cluster.close()
            self._closed = True
            self._data.set()

    async def wait_assigned(self, timeout: float | None = None) -> frozenset[TopicPartition]:
        """Wait until the member is stable in a generation; return the owned partitions."""
        await self.member.wait_stable(timeout)
        return self.assignment()

    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None) -> None:
        """Replace the subscription and rebalance (partitions of topics no longer subscribed
        are revoked: all of them under eager rebalancing)."""
        self._subscription = TopicSubscription(topics, pattern)
        self._request_metadata()
        if self._started:
            self.member.request_rejoin("the subscription changed")

    # == records =================================================================================
    async def poll(self, timeout_ms: float = 1_000,
                   max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched for the owned partitions (at most `max_records`, default
        `max_poll_records`), waiting up to `timeout_ms` for some. Raises what went wrong
        (see the module docstring)."""
        if not self._started:
            raise ClientError("Consumer.poll() before start()")
        limit = max_records or self.max_poll_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_ms) / 1000
        while True:
            self._check()
            records, drained = self._assignment.take(limit)
            if drained:
                self._fetcher.wake()
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            self._data.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._data.wait(), remaining)

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while True:
            if self._closed or self._closing:
                raise StopAsyncIteration
            try:
                records = await self.poll(timeout_ms=1_000, max_records=1)
            except ClientError:
                if self._closed or self._closing:
                    raise StopAsyncIteration from None
                raise
            if records:
                return records[0]

    def _check(self) -> None:
        if self._errors:
            raise self._errors.pop(0)
        if self.member.error is not None:
            raise self.member.error
        if self._closed or self._closing:
            raise ClientError(f"consumer of group {self.group_id!r} is closed")

    def _wake_poll(self) -> None:
        self._data.set()

    def _raise_later(self, error: BaseException) -> None:
        self._errors.append(error)
        self._data.set()

    # == positions ===============================================================================
    def _state(self, tp: tuple[str, int]) -> Any:
        ps = self._assignment.get(tp)
        if ps is None:
            raise ClientError(f"{tp[0]}-{tp[1]} is not assigned to this consumer")
        return ps

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """Read `partition` from `offset` on (buffered records are dropped)."""
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self._state(partition).seek(offset)
        self._fetcher.wake()

    def _seek_to(self, how: str, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions or self._assignment.owned():
            ps = self._state(tp)
            ps.seek(0)
            ps.position, ps.reset = None, how
        self._fetcher.wake()

    def seek_to_beginning(self, *partitions: tuple[str, int]) -> None:
        """Read from the log start of `partitions` (default: every owned partition)."""
        self._seek_to(EARLIEST, partitions)

    def seek_to_end(self, *partitions: tuple[str, int]) -> None:
        """Read only records written after now to `partitions` (default: every owned one)."""
        self._seek_to(LATEST, partitions)

    async def position(self, partition: tuple[str, int], timeout: float = 30.0) -> int:
        """The offset of the next record `poll()` returns for `partition` (waits until the
        position is known: committed offset or reset policy)."""
        async with asyncio.timeout(timeout):
            while True:
                self._check()
                ps = self._state(partition)
                if ps.position is not None:
                    return int(ps.position)
                await asyncio.sleep(0.02)

    def pause(self, *partitions: tuple[str, int]) -> None:
        """Stop fetching and delivering `partitions` until `resume()` (kept across
        rebalances only while the partition stays assigned)."""
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: tuple[str, int]) -> None:
        for tp in partitions:
            self._state(tp).paused = False
        self._fetcher.wake()

    # == offsets =================================================================================
    async def commit(self, offsets: Mapping[tuple[str, int], int] | None = None) -> None:
        """Commit `offsets` (partition -> next offset to read), by default the current
        positions of every owned partition. Raises CommitFailedError when the group has
        rebalanced away from the generation these partitions belong to."""
        if offsets is None:
            targets = self._assignment.positions(self._assignment.owned())
        else:
            targets = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        await self._commit(targets)

    async def committed(self, partitions: Iterable[tuple[str, int]],
                        ) -> dict[TopicPartition, int | None]:
        """The group's committed offset per partition (None: nothing committed)."""
        return await self._offsets.fetch(_tps(partitions))

    async def beginning_offsets(self, partitions: Iterable[tuple[str, int]],
                                ) -> dict[TopicPartition, int]:
        return await self._list_offsets(partitions, EARLIEST_TIMESTAMP)

    async def end_offsets(self, partitions: Iterable[tuple[str, int]],
                          ) -> dict[TopicPartition, int]:
        """The offset the next record written to each partition will get."""
        return await self._list_offsets(partitions, LATEST_TIMESTAMP)

    async def _list_offsets(self, partitions: Iterable[tuple[str, int]],
                            timestamp: int) -> dict[TopicPartition, int]:
        tps = _tps(partitions)
        unknown = sorted({tp.topic for tp in tps if tp not in self._fetcher.leaders})
        if unknown:
            await self._metadata_for(unknown)
        return await self._fetcher.list_offsets({tp: timestamp for tp in tps})

    def _commit_identity(self) -> tuple[int, str, str | None] | None:
        """(generation id or member epoch, member id, instance id) to commit as, or None
        while the consumer holds no generation."""
        if self._kip848 is not None:
            return self._kip848.commit_identity()
        g = self._protocol.generation
        return None if g is None else (g.generation_id, g.member_id, g.group_instance_id)

    async def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        identity = self._commit_identity()
        if identity is None:
            raise CommitFailedError(ErrorCode.rebalance_in_progress, "OffsetCommit", (
                f"group {self.group_id!r}: the consumer holds no generation (it is joining, "
                "was fenced, or is rebalancing eagerly)"))
        generation_id, member_id, instance_id = identity
        await self._offsets.commit(
            offsets, generation_id=generation_id, member_id=member_id,
            group_instance_id=instance_id,
            renew=self._kip848.renewed_identity if self._kip848 is not None else None)
        for tp, offset in offsets.items():
            ps = self._assignment.parts.get(tp)
            if ps is not None:
                ps.committed = offset

    async def _commit_quietly(self, partitions: Iterable[tuple[str, int]], why: str) -> None:
        """Auto commit of `partitions`' positions that moved since their last commit;
        failures are logged (the next owner then reads some records again)."""
        offsets = {tp: pos for tp, pos in self._assignment.positions(partitions).items()
                   if self._assignment.parts[tp].committed != pos}
        if not offsets:
            return
        try:
            await self._commit(offsets)
        except ClientError as e:
            log.warning("group %s: auto commit (%s) of %d partition(s) failed: %s",
                        self.group_id, why, len(offsets), e)

    async def _auto_commit_loop(self) -> None:
        interval = self.auto_commit_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self._commit_identity() is not None:
                await self._commit_quietly(self._assignment.owned(), "interval")

    # == rebalance plumbing (through `_Owner`, the membership helpers' PartitionOwner) ==========
    async def _revoke(self, partitions: Iterable[tuple[str, int]], *, commit: bool,
                      lost: bool) -> None:
        tps = frozenset(_tps(partitions))
        self._assignment.start_revoking(tps)  # from here on: not fetched, not delivered
        if commit and self.auto_commit and not lost:
            await self._commit_quietly(tps, "revocation")
        await self._listener_call("lost" if lost else "revoked", tps)
        self._assignment.remove(tps)
        self._fetcher.wake()

    def _assignment_changed(self, assigned: frozenset[TopicPartition]) -> None:
        if any(tp not in self._fetcher.leaders for tp in assigned):
            self._request_metadata()
        self._fetcher.wake()

    async def _listener_call(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        if self.listener is None or (kind != "assigned" and not partitions):
            return
        method = getattr(self.listener, _LISTENER_METHODS[kind], None)
        if method is None and kind == "lost":
            method = getattr(self.listener, "on_partitions_revoked", None)
        if method is None:
            return
        try:
            result = method(partitions)
            if inspect.isawaitable(result):
                await result
        except Exception as e:
            log.exception("group %s: rebalance listener %s raised", self.group_id,
                          _LISTENER_METHODS[kind])
            error = RebalanceListenerError(f"{_LISTENER_METHODS[kind]} raised {e!r}")
            error.__cause__ = e
            self._raise_later(error)

    # == metadata ================================================================================
    def _request_metadata(self) -> None:
        self._metadata_wanted.set()

    async def _metadata_for(self, topics: Sequence[str] | None) -> ClusterMetadata:
        deadline = asyncio.get_running_loop().time() + self.request_timeout_ms / 1000
        md = await self.cluster.metadata(topics, deadline=deadline)
        self._fetcher.update_metadata(md)
        return md

    async def _resolve_pattern(self) -> None:
        """Before JoinGroup: match a pattern subscription against the cluster's topics."""
        if self._subscription.is_pattern:
            try:
                await self._refresh_metadata()
            except ClientError as e:
                log.info("group %s: metadata for the pattern failed (%s); using the last "
                         "match %s", self.group_id, e, sorted(self._subscription.topics))

    async def _refresh_metadata(self) -> None:
        sub = self._subscription
        snapshot = self._protocol.snapshot if self.member.is_leader else None
        if sub.is_pattern:
            topics = None
        else:
            wanted = set(sub.topics) | {tp.topic for tp in self._assignment.parts}
            topics = sorted(wanted | set(snapshot or ()))
        md = await self._metadata_for(topics)
        if sub.is_pattern and sub.resolve(name for name, t in md.topics.items()
                                          if t.error == ErrorCode.none):
            log.info("group %s: pattern %r now matches %s", self.group_id, sub.pattern,
                     sorted(sub.topics))
            self.member.request_rejoin("the topics matching the pattern changed")
        if snapshot is not None and self._protocol.snapshot is snapshot:
            now = partition_counts(md, sorted(snapshot))
            if now != snapshot:
                log.info("group %s: partition counts changed %s -> %s; rebalancing",
                         self.group_id, snapshot, now)
                self._protocol.snapshot = None
                self.member.request_rejoin("the partitions of subscribed topics changed")

    async def _metadata_loop(self) -> None:
        backoff = self.cluster.backoff()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._metadata_wanted.wait(),
                                       self.metadata_max_age_ms / 1000)
            self._metadata_wanted.clear()
            try:
                await self._refresh_metadata()
                backoff.reset()
            except Exception as e:  # ClientError, or a bug: either way keep refreshing
                delay = backoff.next_s()
                log.log(logging.INFO if isinstance(e, ClientError) else logging.ERROR,
                        "group %s: metadata refresh failed (%r); retrying in %.0f ms",
                        self.group_id, e, delay * 1000)
                await asyncio.sleep(delay)
                self._metadata_wanted.set()

    async def _watch_member(self) -> None:
        """When the member stops on its own (a fatal error), its partitions are lost: drop
        them (listener `on_partitions_lost`) and wake a waiting poll(), which then raises the
        member's error."""
        with contextlib.suppress(BaseException):
            await self.member.wait_closed()
        if self.member.error is not None and not self._closing:
            async with self._lock:
                owned = self._assignment.owned()
                if owned:
                    await self._revoke(owned, commit=False, lost=True)
                self._protocol.generation = None
        self._data.set()


class _Owner:
    """The `PartitionOwner` a consumer hands its membership helper
    (`coterie.client.partition_owner`): the consumer's rebalance steps, and nothing else."""

    def __init__(self, consumer: Consumer) -> None:
        self._c = consumer
        self.group_id = consumer.group_id
        self.rack = consumer.rack
        self.cluster = consumer.cluster

    @property
    def subscription(self) -> TopicSubscription:
        return self._c._subscription

    @property
    def closing(self) -> bool:
        return self._c._closing

    def owned(self) -> frozenset[TopicPartition]:
        return frozenset(self._c._assignment.owned())

    async def revoke(self, partitions: Iterable[tuple[str, int]], *, commit: bool,
                     lost: bool) -> None:
        await self._c._revoke(partitions, commit=commit, lost=lost)

    async def take_assignment(self, revoked: frozenset[TopicPartition],
                              added: frozenset[TopicPartition],
                              assigned: frozenset[TopicPartition],
                              still_wanted: Callable[[], bool] | None = None) -> bool:
        c = self._c
        if revoked:
            await c._revoke(revoked, commit=True, lost=False)
        if still_wanted is not None and not still_wanted():
            return False
        c._assignment.add(added)
        c._assignment_changed(assigned)
        await c._listener_call("assigned", added)
        return True

    async def metadata_for(self, topics: Sequence[str] | None) -> ClusterMetadata:
        return await self._c._metadata_for(topics)

    async def resolve_pattern(self) -> None:
        await self._c._resolve_pattern()

    def request_rejoin(self, reason: str) -> None:
        self._c.member.request_rejoin(reason)
