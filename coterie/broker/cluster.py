"""A broker of a cluster over PostgreSQL (issue 24): what it leads, and how its writes become
durable.

Several coterie brokers share one PostgreSQL database (`storage=postgresql://...`). Each
partition, internal ones included, is led by one live broker at a time, through a lease in
the database (coterie.storage.membership spreads them over the live brokers); the lease's
epoch is the partition's leader epoch. Whoever leads `__consumer_offsets` partition N is the
coordinator of the groups of shard N, as on Kafka.

**A copy in local files, written through.** A broker that takes a partition reads its recent
batches (the last `cluster.copy.bytes`; the coordinators' and compacted topics' whole) from
the database, with the producer state the older ones left (read from the rows' header
columns), and lays them out as a local log (`LogManager.replace_partition`); reads below the
copy go to the database (`read_below_copy`), and the copy is trimmed to its bound as it
grows (`_trim`). It then
serves it with the same code a single broker runs: producer state, sequence checks, the last
stable offset and the aborted-transaction index all come from the local log, and fetches go
out of its segment files by sendfile. Every local append is handed on at once
(`PartitionLog.on_append`) to the database, numbered from the same offset
(`Append.expected_offset`) and conditional on the lease (coterie.storage.postgres_log), in
group commits (coterie.storage.group_commit). Nothing is visible before it is in the
database: the partition's high watermark is what the database holds (`durable_end`), a
Produce is answered once its batches are there, and a coordinator's answers wait for the
coordinator's own records (`coordinator_barrier`).

**A failed write drops the copy.** If a write is refused (the lease was lost, the stored log
ends elsewhere) or the database fails, the local copy may hold what the database does not:
the broker stops serving that partition at once (waiting answers get an error), forgets its
lease (the next round gives it back to the database and takes it again at a new epoch if it
is still this broker's), and a new copy is read before it serves again. The local files are
a cache: a broker starts with an empty data directory and needs nothing from its last life.

What a client sees is Kafka's: NOT_LEADER_OR_FOLLOWER from a broker that does not lead a
partition (it refreshes its metadata, which names the leader), NOT_COORDINATOR for a group
whose shard another broker serves (it asks FindCoordinator again).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from coterie.broker.internal_topics import TopicSpec
from coterie.broker.scram import ScramCredential
from coterie.broker.waiters import FetchWaiters
from coterie.log.cleaner import CleanResult, rebuilt_batches
from coterie.log.errors import StorageError as LogStorageError
from coterie.log.errors import TopicExistsError, UnknownTopicError
from coterie.log.manager import LogManager, TopicInfo
from coterie.log.names import is_internal_topic
from coterie.log.partition import PartitionLog
from coterie.storage import acl_rows, group_config_rows, leases, scram_rows
from coterie.storage import topics as topic_rows
from coterie.storage.api import Append, Lease, Resource, Retention, TopicIdPartition
from coterie.storage.brokers import BrokerRow
from coterie.storage.cluster_id import cluster_id
from coterie.storage.database import Database
from coterie.storage.errors import NodeIdInUse, SchemaTooNew, StorageError, UnknownTopic
from coterie.storage.group_commit import GroupCommit
from coterie.storage.membership import Membership
from coterie.storage.migrations import migrate
from coterie.storage.postgres_log import PostgresLog
from coterie.storage.producer_ids import ProducerIdBlock, allocate_block
from coterie.storage.stalled import application_name, end_stalled_sessions
from coterie.wire.record_batch import batch_headers

__all__ = ["ClusterNode", "ClusterStartError"]

log = logging.getLogger("coterie.cluster")

# The channel brokers NOTIFY each other on (the payload: the sender's node.id).
CHANNEL = "coterie_cluster"
# The least time between two rounds: a burst of news makes one round, not one each.
WAKE_GAP_S = 0.05
# How much of a partition one query reads while a broker copies it.
READ_CHUNK = 8 * 1024 * 1024
# How many bytes of rebuilt batches one statement of a compaction carries.
COMPACT_CHUNK = 8 * 1024 * 1024
# `cluster.copy.bytes`' default: the most recent bytes of a partition a copy holds.
DEFAULT_COPY_BYTES = 256 * 1024 * 1024
# A copy is trimmed by whole segments: they are kept to this share of the bound (at least
# SEGMENT_FLOOR bytes), so that a copy holds at most about 1.25 times the bound.
COPY_SEGMENTS = 4
SEGMENT_FLOOR = 16 * 1024
Key = tuple[str, int]


class ClusterStartError(Exception):
    """Why a cluster broker cannot start (the database unreachable, its schema newer than
    this coterie, the node.id in use): said once, and the process exits non-zero."""


def redacted(dsn: str) -> str:
    """A DSN as it may appear in a log line: without its password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(an unreadable storage URI)"
    host, port, db = info.get("host", "localhost"), info.get("port", "5432"), info.get("dbname")
    return f"postgresql://{host}:{port}/{db or ''}"


def _end_of(data: bytes) -> int:
    """The offset after the last batch of `data` (whole batches, offsets assigned; framing
    only: a compacted batch's records no longer fill its offsets, so the producer's rule
    that they do is not asked)."""
    return batch_headers(data, strict=True)[-1].next_offset


@dataclass(eq=False, slots=True)
class _Led:
    """A partition this broker leads and has a copy of: its lease, its local log, and the
    answers waiting for offsets to reach the database."""

    name: str
    index: int
    tp: TopicIdPartition
    lease: Lease
    part: PartitionLog
    bounded: bool = False  # its copy holds recent batches only (`ClusterNode._bounded`)
    waiting: list[tuple[int, asyncio.Future[bool]]] = field(default_factory=list)


class ClusterNode:
    """One broker's part in the cluster (module docstring). The broker `connect`s it before
    building its parts, `attach`es its log, `register`s once it listens, then `run`s it."""

    def __init__(self, dsn: str, node_id: int, ttl: float, rack: str | None = None,
                 write_connections: int = 1, copy_bytes: int = DEFAULT_COPY_BYTES) -> None:
        self.dsn = dsn
        self.node_id = node_id
        self.ttl = ttl
        self.rack = rack
        self.write_connections = max(1, write_connections)
        # How many recent bytes of a partition its copy holds (`_bounded` partitions):
        # `cluster.copy.bytes`.
        self.copy_bytes = max(1, copy_bytes)
        self.copied_bytes = 0  # bytes read from the database by takes, ever (for tests)
        self.cluster_id = ""
        self.db: Database | None = None  # rounds, topics, producer ids
        self.writes: Database | None = None  # group commits
        self.reads: Database | None = None  # copies of partitions taken over
        self.shares: Database | None = None  # share partitions' state (KIP-932)
        self.store: PostgresLog | None = None
        # The write lanes: one connection and its group commits each; a partition's appends
        # always go through the same lane (`_lane`), so they stay in order, and lanes hold
        # disjoint partitions' locks, so they never wait for each other.
        self._lanes: list[Database] = []
        self._commits: list[GroupCommit] = []
        self.membership: Membership | None = None
        self.logs: LogManager | None = None
        self.waiters = FetchWaiters()
        self.clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000
        # Told when this broker starts or stops leading a partition (the group runtime loads
        # or drops a shard), and when the topics changed (topic listeners).
        self.on_gained: Callable[[str, int], Awaitable[None] | None] = lambda n, i: None
        self.on_lost: Callable[[str, int], None] = lambda n, i: None
        self.on_topics_changed: Callable[[], None] = lambda: None
        # The broker's GroupConfigs (coterie.broker.group_configs): given the database's
        # group configs at every round.
        self.group_configs: Any = None
        # The broker's DynamicBrokerConfigs: given the cluster-wide layer at every round.
        self.broker_configs: Any = None
        # The broker's ScramCredentials (coterie.broker.scram_credentials): given the
        # database's credentials at every round.
        self.scram_credentials: Any = None
        # The broker's BrokerAuthorizer (coterie.broker.acls), when an authorizer is
        # configured: given the database's ACLs at every round.
        self.acls: Any = None
        self._acls_digest = ""  # the digest of the ACLs adopted last
        self.picture: dict[Resource, Lease] = {}  # every live lease, as of the last round
        self.version = 0  # grows whenever who leads what, or who is live, may have changed
        self._live_ids: frozenset[int] = frozenset()
        self._led: dict[Key, _Led] = {}
        self._pending_internal: set[_Led] = set()
        self._resources: dict[Resource, Key] = {}
        self._topic_rows: list[topic_rows.TopicRow] = []
        self._tasks: set[asyncio.Task] = set()
        self._wake = asyncio.Event()
        self._round_failures = 0
        self._may_end_stalled: bool | None = None  # None: not tried yet
        self._blocks: list[ProducerIdBlock] = []
        self._next_pid = 0
        self._pid_end = 0
        self._refilling: asyncio.Task | None = None

    # -- start-up ----------------------------------------------------------------------------
    async def connect(self, proposed_cluster_id: str, internal: Sequence[TopicSpec]) -> None:
        """Reach the database, bring its schema up to date, learn the cluster id and the
        topics (creating the internal ones the first broker finds missing), and take a first
        block of producer ids. ClusterStartError says why not."""
        # A broker stopped (SIGSTOP) or cut off inside a write transaction holds its
        # partitions' and leases' row locks: the server ends such a transaction once it has
        # been idle a lease time (nothing of it is written), and a round waits for a lock at
        # most a sixth of a lease time (it tries again at the next round) rather than stall
        # this broker's own renewals behind another broker's stopped transaction.
        ttl_ms = max(1, round(self.ttl * 1000))
        idle = {"idle_in_transaction_session_timeout": f"{ttl_ms}ms"}
        rounds = {**idle, "lock_timeout": f"{max(50, ttl_ms // 6)}ms"}
        # Every session is named for its node: a session stalled inside a statement (which
        # the idle timeout does not end) is ended by the others' rounds (storage.stalled).
        named = {"connect_timeout": 5, "application_name": application_name(self.node_id)}
        try:
            self.db = await Database.connect(self.dsn, settings=rounds, **named)
            self.writes = await Database.connect(self.dsn, settings=idle, **named)
            self._lanes = [self.writes]
            self.reads = await Database.connect(self.dsn, settings=idle, **named)
            self.shares = await Database.connect(self.dsn, settings=idle, **named)
            for _ in range(self.write_connections - 1):
                self._lanes.append(await Database.connect(self.dsn, settings=idle, **named))
        except psycopg.Error as e:
            await self.close()
            raise ClusterStartError(f"cannot reach the database at {redacted(self.dsn)}: "
                                    f"{str(e).strip()}") from e
        try:
            # Brokers starting together migrate one after the other (an advisory lock):
            # waiting for that is not a stalled round's wait.
            await self.db.connection.execute("SET lock_timeout = 0")
            await migrate(self.db.connection)
            await self.db.connection.execute(f"SET lock_timeout = '{rounds['lock_timeout']}'")
            self.cluster_id = await cluster_id(self.db, proposed_cluster_id)
            for spec in internal:
                with contextlib.suppress(psycopg.errors.UniqueViolation):
                    await topic_rows.create_topic(self.db, spec.name, spec.partitions,
                                                  spec.configs)
            self._topic_rows = await topic_rows.topics(self.db)
            self._blocks.append(await allocate_block(self.db, self.node_id))
        except SchemaTooNew as e:
            await self.close()
            raise ClusterStartError(f"the database at {redacted(self.dsn)}: {e}") from e
        except psycopg.Error as e:
            await self.close()
            raise ClusterStartError(f"the database at {redacted(self.dsn)} failed while "
                                    f"starting: {str(e).strip()}") from e
        self.store = PostgresLog(self.writes)
        self._commits = [GroupCommit(self.store)] + [
            GroupCommit(PostgresLog(lane)) for lane in self._lanes[1:]]

    def attach(self, logs: LogManager, waiters: FetchWaiters,
               clock_ms: Callable[[], int]) -> None:
        """Use `logs` (an empty local log: the cache of copies) and make it know every topic
        of the database under the database's ids."""
        self.logs = logs
        self.waiters = waiters
        self.clock_ms = clock_ms
        logs.segment_bytes_cap = max(self.copy_bytes // COPY_SEGMENTS, SEGMENT_FLOOR)
        self._adopt_topics(self._topic_rows)

    async def register(self, host: str, port: int,
                       listeners: dict[str, tuple[str, int]] | None = None) -> None:
        """Register this broker at its advertised address, and each of its listeners'
        (ClusterStartError while another live broker has the node.id), then serve."""
        assert self.db is not None
        self.membership = Membership(self.db, self.node_id, host, port, self._all_resources,
                                     ttl=self.ttl, rack=self.rack, listeners=listeners)
        # A broker restarted at once after a crash finds its former run's registration
        # still live: it waits for that to run out (a lease time) before it concludes that
        # another broker has its node.id.
        give_up = time.monotonic() + self.ttl * 1.5
        while True:
            try:
                await self.membership.start()
                break
            except NodeIdInUse as e:
                if time.monotonic() > give_up:
                    raise ClusterStartError(str(e)) from e
                log.info("node %d: %s; waiting for it to run out (a crashed former run of "
                         "this broker?)", self.node_id, e)
                await asyncio.sleep(self.ttl / 4)
            except psycopg.Error as e:
                raise ClusterStartError(f"cannot register node {self.node_id}: "
                                        f"{str(e).strip()}") from e
        if await self._round():
            await self._tell_others()

    # -- the rounds --------------------------------------------------------------------------
    async def run(self) -> None:
        """A round every third of the lease time, or at once when woken (a topic created
        here, or another broker's news: `_listen`): keep the registration and leases, take
        this broker's share, drop what it lost; a copy that failed is taken again at a new
        epoch."""
        listener = asyncio.ensure_future(self._listen())
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.ttl / 3)
                self._wake.clear()
                changed = await self._round()
                if changed:
                    await self._tell_others()
                await asyncio.sleep(WAKE_GAP_S)  # many wake-ups in a row are one round
        finally:
            listener.cancel()

    def wake(self) -> None:
        """Run the next round now (new partitions to lead)."""
        self._wake.set()

    async def settled(self, timeout: float) -> None:
        """Wait (at most `timeout` seconds) until the partitions taken so far are copied and
        served (their coordinator shards loaded)."""
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def _listen(self) -> None:
        """Wake on every other broker's news (NOTIFY on `CHANNEL`: a topic created, a lease
        taken or given up), so leadership moves in milliseconds, not at the next periodic
        round. A connection of its own, opened again whenever it fails."""
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, connect_timeout=5,
                    application_name=application_name(self.node_id))
                try:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.wake()  # whatever happened while not listening
                    async for note in conn.notifies():
                        if note.payload != str(self.node_id):
                            self.wake()
                finally:
                    with contextlib.suppress(Exception):
                        await conn.close()
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(self.ttl / 3)

    async def _tell_others(self) -> None:
        """NOTIFY the other brokers that who leads what (or which topics exist) changed."""
        if self.db is None:
            return
        with contextlib.suppress(Exception):
            async with self.db.session() as conn:
                await conn.execute(f"NOTIFY {CHANNEL}, '{self.node_id}'")

    async def _end_stalled_sessions(self) -> None:
        """End the sessions of brokers stalled inside a statement for a lease time (paused
        or cut off mid-write, holding row locks no timeout ends: storage.stalled)."""
        if self._may_end_stalled is False:
            return
        assert self.db is not None
        try:
            stalled = await end_stalled_sessions(self.db, self.ttl)
        except psycopg.errors.InsufficientPrivilege as e:
            self._may_end_stalled = False
            log.warning("node %d may not end other brokers' stalled database sessions (%s): "
                        "a broker stopped in the middle of a write keeps its rows locked "
                        "until it wakes; give the brokers one role, or pg_signal_backend",
                        self.node_id, str(e).strip())
            return
        self._may_end_stalled = True
        for s in stalled:
            log.warning("node %d: ended the database session of %s (pid %d), stalled inside a "
                        "statement for %.1f s with its locks held%s", self.node_id,
                        s.application_name, s.pid, s.stalled_s,
                        "" if s.ended else " (the server did not end it)")

    async def _round(self) -> bool:
        """One round; True if this broker took or gave up a lease, or learned new topics
        (news for the others)."""
        assert self.membership is not None and self.db is not None
        news = False
        try:
            for db in (self.db, self.reads, self.shares, *self._lanes):
                if db is not None and db.broken:
                    await db.reconnect()
            await self._end_stalled_sessions()
            await self._sync_topics()
            await self._sync_group_configs()
            await self._sync_scram_credentials()
            await self._sync_acls()
            changes = await self.membership.round()
            news = bool(changes.gained or changes.lost)
            for resource in changes.lost:
                self._drop(resource, "its lease went to another broker", forget=False)
            for lease in changes.gained:
                self._spawn(self._take(lease))
            picture = await leases.live_leases(self.db)
            live = frozenset(b.node_id for b in self.membership.live)
            if picture != self.picture or live != self._live_ids:
                self.picture = picture
                self._live_ids = live
                self.version += 1
            if self._round_failures:
                log.info("node %d: the database answers again", self.node_id)
            self._round_failures = 0
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._round_failures += 1
            if self._round_failures in (1, 10) or self._round_failures % 100 == 0:
                log.warning("node %d: cluster round failed (%d in a row): %s", self.node_id,
                            self._round_failures, str(e).strip() or type(e).__name__)
        self._drop_expired()
        return news

    def _drop_expired(self) -> None:
        """Stop serving what this broker can no longer count on (no renewal reached the
        database in time: it may be cut off), before the database gives it to another."""
        assert self.membership is not None
        for led in list(self._led.values()):
            if self.membership.lease(led.lease.resource) != led.lease:
                self._drop(led.lease.resource, "its lease ran out", forget=False)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- topics ------------------------------------------------------------------------------
    def _all_resources(self) -> list[Resource]:
        return list(self._resources)

    def _adopt_topics(self, rows: list[topic_rows.TopicRow]) -> bool:
        """Make the local log's topics the database's; True if anything changed."""
        assert self.logs is not None
        logs = self.logs
        now = self.clock_ms()
        changed = False
        wanted = {r.name: r for r in rows}
        for name, info in list(logs.topics.items()):
            row = wanted.get(name)
            if row is None or row.topic_id != info.topic_id:
                for index in range(info.partitions):
                    self._drop_key((name, index), "its topic was deleted")
                logs.delete_topic(name)
                changed = True
        for row in rows:
            info = logs.topics.get(row.name)
            if info is None:
                logs.create_topic(row.name, row.partition_count, row.configs, now,
                                  topic_id=row.topic_id)
                changed = True
            else:
                if info.partitions < row.partition_count:
                    logs.create_partitions(row.name, row.partition_count, now)
                    changed = True
                if info.configs != row.configs:  # AlterConfigs on some broker
                    logs.alter_topic_configs(row.name, row.configs)
        self._resources = {
            Resource.partition(TopicIdPartition(info.topic_id, p)): (info.name, p)
            for info in logs.topics.values() for p in range(info.partitions)}
        if changed:
            self.version += 1
        return changed

    async def refresh_topics(self) -> None:
        """Read the database's topics now (coterie.broker.handlers.known_topics: an admin
        request naming a topic another broker just created)."""
        with contextlib.suppress(psycopg.Error, OSError):
            await self._sync_topics()

    async def _sync_topics(self) -> None:
        assert self.db is not None
        if self._adopt_topics(await topic_rows.topics(self.db)):
            self.on_topics_changed()

    async def create_topic(self, name: str, partitions: int,
                           configs: dict[str, str]) -> TopicInfo:
        """CreateTopics in the database, then here; the new partitions are taken by their
        brokers at their next round (this one at once)."""
        assert self.db is not None and self.logs is not None
        try:
            row = await topic_rows.create_topic(self.db, name, partitions, configs)
        except psycopg.errors.UniqueViolation:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        except psycopg.Error as e:
            raise LogStorageError(f"cannot create topic '{name}' in the database: "
                                  f"{str(e).strip()}") from e
        return await self._announce(row.name, range(partitions))

    async def _announce(self, name: str, new: range) -> TopicInfo:
        """After a topic was created or grown in the database: know it here, tell the other
        brokers, take this broker's share now, and wait until the `new` partitions have
        leaders (`_await_leaders`)."""
        assert self.logs is not None
        await self._sync_topics()
        await self._tell_others()
        self.wake()
        info = self.logs.topics[name]
        await self._await_leaders(info, new)
        return info

    async def _await_leaders(self, info: TopicInfo, indexes: range) -> None:
        """Until every one of `indexes` has a live leader (and the ones this broker leads are
        copied and served), within a few seconds: as Kafka's CreateTopics returns once the
        new partitions have leaders, a client may produce at once. The other brokers take
        their share at their next round (woken by NOTIFY, or at the latest a third of a lease
        later; a dead one's share moves once its registration ran out, a lease later), and
        this broker learns of it at its own: three lease times cover all of that, and at
        least 15 s on a loaded machine (5 s was seen to run out on a busy two-core machine;
        clients' requests wait 30 s by default). Past it the answer goes anyway (the
        partitions exist; Metadata says LEADER_NOT_AVAILABLE until they have leaders)."""
        deadline = time.monotonic() + max(15.0, 3 * self.ttl)
        while time.monotonic() < deadline:
            ready = True
            for p in indexes:
                lease = self.leader(info.name, p, info.topic_id)
                if lease is None or (lease.owner == self.node_id
                                     and self.serving(info.name, p) is None):
                    ready = False
                    break
            if ready:
                return
            await asyncio.sleep(0.02)

    async def _sync_group_configs(self) -> None:
        """The groups' own configs and the cluster-wide broker configs, as the database has
        them, made this broker's."""
        if self.db is None:
            return
        if self.group_configs is not None:
            self.group_configs.adopt(await group_config_rows.group_configs(self.db))
        if self.broker_configs is not None:
            stored = await group_config_rows.cluster_broker_configs(self.db)
            try:
                self.broker_configs.adopt_cluster(stored)
            except Exception as e:
                log.warning("node %d: cannot apply the cluster-wide broker configs %s: %s",
                            self.node_id, stored, e)

    async def alter_cluster_broker_configs(self, configs: dict[str, str]) -> None:
        """AlterConfigs of the cluster-wide broker configs (already checked)."""
        assert self.db is not None
        await self._share_configs(
            group_config_rows.replace_cluster_broker_configs(self.db, configs),
            "the cluster's brokers")

    async def alter_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """AlterConfigs of a group (already checked), so that whichever broker coordinates
        the group applies them."""
        assert self.db is not None
        await self._share_configs(
            group_config_rows.replace_group_configs(self.db, group_id, configs),
            f"group '{group_id}'")

    async def _share_configs(self, write: Awaitable[None], what: str) -> None:
        """A config change: the database's row (`write`), then here, then the others."""
        try:
            await write
        except psycopg.Error as e:
            raise LogStorageError(f"cannot change the configs of {what} in the database: "
                                  f"{str(e).strip()}") from e
        await self._sync_group_configs()
        await self._tell_others()

    async def _sync_acls(self) -> None:
        """The ACLs, as the database has them, made this broker's (read only when their
        digest changed since the last round)."""
        if self.db is not None and self.acls is not None:
            digest = await acl_rows.fingerprint(self.db)
            if digest != self._acls_digest:
                self.acls.adopt(await acl_rows.acls(self.db))
                self._acls_digest = digest

    async def create_acls(self, bindings: list[Any]) -> None:
        """CreateAcls (bindings already checked): the database's rows, then here, then the
        other brokers, so that every broker describes and enforces the same ACLs."""
        assert self.db is not None
        try:
            await acl_rows.add_acls(self.db, bindings)
        except psycopg.Error as e:
            raise LogStorageError(f"cannot store the ACLs in the database: "
                                  f"{str(e).strip()}") from e
        await self._sync_acls()
        await self._tell_others()

    async def delete_acls(self, filters: list[Any], limit: int) -> list[list[Any]] | None:
        """DeleteAcls: what each filter removed from the database (None, removing nothing,
        past `limit`), then here, then the other brokers."""
        assert self.db is not None
        try:
            matched = await acl_rows.delete_acls(self.db, filters, limit)
        except psycopg.Error as e:
            raise LogStorageError(f"cannot delete ACLs in the database: "
                                  f"{str(e).strip()}") from e
        if matched is not None and any(matched):
            await self._sync_acls()
            await self._tell_others()
        return matched

    async def _sync_scram_credentials(self) -> None:
        """The users' SCRAM credentials, as the database has them, made this broker's."""
        if self.db is not None and self.scram_credentials is not None:
            stored = await scram_rows.scram_credentials(self.db)
            self.scram_credentials.adopt({key: ScramCredential(*row)
                                          for key, row in stored.items()})

    async def alter_scram_credentials(self, upserts: dict[tuple[str, int], ScramCredential],
                                      deletions: list[tuple[str, int]]
                                      ) -> list[tuple[str, int]]:
        """AlterUserScramCredentials (already checked): the database's rows in one
        transaction, then here, then the other brokers (NOTIFY), so that a user created
        through one broker logs in on any. Returns the deletions that found nothing."""
        assert self.db is not None
        rows = {key: (c.salt, c.iterations, c.stored_key, c.server_key)
                for key, c in upserts.items()}
        try:
            missing = await scram_rows.alter_scram_credentials(self.db, rows, deletions)
        except psycopg.Error as e:
            raise LogStorageError("cannot change the SCRAM credentials in the database: "
                                  f"{str(e).strip()}") from e
        await self._sync_scram_credentials()
        await self._tell_others()
        return missing

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """AlterConfigs of a topic (already validated): the database's row, then here, then
        the other brokers, so that every broker describes and applies the same configs."""
        assert self.db is not None and self.logs is not None
        info = self.logs.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        try:
            await topic_rows.alter_topic_configs(self.db, info.topic_id, configs)
        except UnknownTopic:
            raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
        except psycopg.Error as e:
            raise LogStorageError(f"cannot change the configs of topic '{name}' in the "
                                  f"database: {str(e).strip()}") from e
        await self._sync_topics()
        await self._tell_others()

    async def enforce_retention(self, now_ms: int) -> int:
        """Retention of the partitions this broker leads, decided and done in the database
        (by batch, under the lease: `PostgresLog.enforce_retention`), then the copy's log
        start moved to the database's. The copies never apply retention on their own: a log
        start the database does not have would go back at the next failover. Returns how
        many batches went."""
        assert self.store is not None
        dropped = 0
        for led in list(self._led.values()):
            config = led.part.config
            if not config.deletes or (config.retention_ms < 0 and config.retention_bytes < 0):
                continue
            try:
                went = await self.store.enforce_retention(
                    led.tp, led.lease, Retention(config.retention_ms, config.retention_bytes),
                    now_ms)
                if not went:
                    continue
                start = await self.store.log_start_offset(led.tp)
            except (StorageError, psycopg.Error, OSError) as e:
                log.warning("retention of %s-%d not applied now: %s", led.name, led.index,
                            str(e).strip() or type(e).__name__)
                continue
            dropped += went
            if self._led.get((led.name, led.index)) is led:
                led.part.delete_records(min(start, led.part.log_end_offset))
        return dropped

    async def publish_cleaned(self, name: str, index: int, part: PartitionLog,
                              result: CleanResult) -> bool:
        """The log cleaner's pass over a led partition's copy, done to the database's rows
        first (`PostgresLog.compact`, under the lease): the batches it dropped go and the
        ones it thinned are rewritten, so that what compaction removed stays removed after
        a failover. The rows are the copy's batches byte for byte (the copy was read from
        them and every append since was written through), and the pass only reaches sealed
        segments below the last stable offset, which is at most what the database holds.
        False (the pass is thrown away, the copy stays as the database is) when this broker
        no longer leads the partition or the database did not take it. A partition this
        broker does not lead is not cleaned at all: its copy is dropped at the next take."""
        led = self._led.get((name, index))
        if led is None or led.part is not part or self.reads is None:
            return False
        if part.durable_end is None or result.cleaned_to > part.durable_end:
            return False
        dropped = [base for g in result.groups for base in g.dropped]

        async def rebuilt() -> AsyncIterator[list[bytes]]:
            for group in result.groups:
                chunk: list[int] = []
                size = 0
                for i in group.rebuilt:
                    chunk.append(i)
                    size += group.batches[i][3]
                    if size >= COMPACT_CHUNK:
                        yield await asyncio.to_thread(rebuilt_batches, group, chunk)
                        chunk, size = [], 0
                if chunk:
                    yield await asyncio.to_thread(rebuilt_batches, group, chunk)

        try:
            deleted, rewritten = await PostgresLog(self.reads).compact(
                led.tp, led.lease, dropped, rebuilt())
        except (StorageError, psycopg.Error, OSError) as e:
            log.warning("compaction of %s-%d not applied now: %s", name, index,
                        str(e).strip() or type(e).__name__)
            return False
        log.info("compacted %s-%d in the database: %d batches deleted, %d rewritten", name,
                 index, deleted, rewritten)
        return self._led.get((name, index)) is led

    def create_soon(self, name: str, partitions: int,
                    configs: dict[str, str] | None = None) -> None:
        """Auto-creation (Metadata, a streams group's internal topics): create the topic in
        the background; the client's next Metadata finds it (or another broker's creation
        of it)."""

        async def create() -> None:
            try:
                await self.create_topic(name, partitions, dict(configs or {}))
            except TopicExistsError:
                pass
            except Exception as e:
                log.warning("could not create topic %s: %s", name, e)

        self._spawn(create())

    async def delete_topic(self, name: str) -> None:
        assert self.db is not None and self.logs is not None
        info = self.logs.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        try:
            await topic_rows.delete_topic(self.db, info.topic_id)
        except psycopg.Error as e:
            raise LogStorageError(f"cannot delete topic '{name}' in the database: "
                                  f"{str(e).strip()}") from e
        await self._sync_topics()
        await self._tell_others()

    async def create_partitions(self, name: str, total: int) -> None:
        assert self.db is not None and self.logs is not None
        info = self.logs.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        try:
            await topic_rows.create_partitions(self.db, info.topic_id, total)
        except psycopg.Error as e:
            raise LogStorageError(f"cannot add partitions to '{name}' in the database: "
                                  f"{str(e).strip()}") from e
        await self._announce(name, range(info.partitions, total))

    # -- taking and dropping partitions ------------------------------------------------------
    async def _take(self, lease: Lease) -> None:
        """Copy a partition just taken from the database into the local log (its last
        `copy_bytes` when `_bounded`, with the producer state below them), then lead it."""
        assert self.logs is not None and self.reads is not None and self.membership
        key = self._resources.get(lease.resource)
        if key is None:
            return
        name, index = key
        info = self.logs.topics[name]
        tp = TopicIdPartition(info.topic_id, index)
        reader = PostgresLog(self.reads)
        started = time.monotonic()
        try:
            bounded = self._bounded(name)
            start, copy_from, end = await reader.copy_bounds(
                tp, self.copy_bytes if bounded else None)
            # The producer state the batches below the copy left (their header columns
            # only): sequence checks and open transactions as if all had been copied.
            producers = (await reader.producer_states(tp, copy_from)
                         if copy_from > start else None)
            chunks: list[bytes] = []
            offset = copy_from
            while offset < end:
                data = await reader.read(tp, offset, READ_CHUNK)
                if not data:
                    break
                chunks.append(data)
                offset = _end_of(data)
            if self.membership.lease(lease.resource) != lease or \
                    self.logs.topics.get(name) is not info:
                return  # lost or deleted meanwhile
            part = self.logs.replace_partition(name, index, copy_from, end, chunks,
                                               self.clock_ms(), producers)
            if copy_from > start:
                part.store_start = start
            if part.log_end_offset != end:
                raise StorageError(f"the copy of {name}-{index} ends at {part.log_end_offset}, "
                                   f"the database's at {end}")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("node %d: could not take %s-%d: %s; giving its lease back", self.node_id,
                        name, index, str(e).strip() or type(e).__name__)
            self.membership.tenures.lost(lease.resource)
            return
        part.durable_end = end
        copied = sum(map(len, chunks))
        self.copied_bytes += copied
        led = _Led(name, index, tp, lease, part, bounded)
        part.on_append = functools.partial(self._write, led)
        self._led[key] = led
        self.version += 1
        log.info("node %d leads %s-%d at epoch %d (%d batches' bytes copied, offsets %d-%d "
                 "of %d-%d, %.0f ms)", self.node_id, name, index, lease.epoch, copied,
                 copy_from, end, start, end, (time.monotonic() - started) * 1000)
        self.waiters.notify(name, index)
        loading = self.on_gained(name, index)
        if loading is not None:
            await loading

    def _bounded(self, name: str) -> bool:
        """Whether a partition's copy holds its recent batches only (`cluster.copy.bytes`).
        Not the coordinators' partitions, whose shards load by reading them from the start,
        nor compacted topics, which the cleaner compacts over the whole copy."""
        config = self.logs.log_config(name) if self.logs is not None else None
        return not is_internal_topic(name) and config is not None and not config.compacts

    def _trim(self, led: _Led) -> None:
        """Keep a copy within its bound as it grows: its oldest segments go while the rest
        still holds `copy_bytes`, but only what the database holds already (below the
        durable end); reads below the copy then go to the database."""
        part = led.part
        durable = part.durable_end or 0
        cut = part.copy_cut(self.copy_bytes, durable)
        if cut is not None and part.trim_copy(cut):
            log.debug("node %d: the copy of %s-%d now starts at %d", self.node_id, led.name,
                      led.index, part.local_start_offset)

    # -- reading below a copy ----------------------------------------------------------------
    async def read_below_copy(self, led: _Led, offset: int, max_bytes: int) -> bytes:
        """Whole batches from `offset` (below the copy's start) out of the database, within
        max_bytes but at least one batch: one query (`PostgresLog.read`)."""
        assert self.reads is not None
        return await PostgresLog(self.reads).read(led.tp, offset, max_bytes)

    async def aborted_below_copy(self, led: _Led, start: int, end: int) -> list[Any]:
        """The aborted transactions with records in [start, end), from the database."""
        assert self.reads is not None
        return await PostgresLog(self.reads).aborted_transactions(led.tp, start, end)

    async def offset_for_timestamp(self, led: _Led, timestamp: int) -> Any:
        """ListOffsets by timestamp of a partition whose copy starts late: the database's
        answer (at most what it holds, the high watermark)."""
        assert self.reads is not None
        store = PostgresLog(self.reads)
        if timestamp == -3:
            return await store.max_timestamp(led.tp)
        return await store.offset_for_timestamp(led.tp, timestamp)

    def _drop(self, resource: Resource, why: str, forget: bool) -> None:
        key = self._resources.get(resource)
        if key is not None:
            self._drop_key(key, why, forget)

    def _drop_key(self, key: Key, why: str, forget: bool = False) -> None:
        """Stop leading a partition: answers waiting on its writes get False, its shard (if
        a coordinator's) goes. `forget`: also stop counting on its lease (after a failed
        write, when the database may still name this broker)."""
        led = self._led.pop(key, None)
        if led is None:
            return
        led.part.on_append = None
        self._pending_internal.discard(led)
        for _, fut in led.waiting:
            if not fut.done():
                fut.set_result(False)
        led.waiting.clear()
        if forget and self.membership is not None:
            self.membership.tenures.lost(led.lease.resource)
        self.version += 1
        log.info("node %d no longer leads %s-%d (epoch %d): %s", self.node_id, led.name,
                 led.index, led.lease.epoch, why)
        self.waiters.notify(led.name, led.index)
        self.on_lost(led.name, led.index)

    # -- writing through ---------------------------------------------------------------------
    def _write(self, led: _Led, first: int, data: bytes) -> None:
        """A local append of a led partition: on to the database, numbered from `first`."""
        if self._led.get((led.name, led.index)) is not led or not self._commits:
            return
        end = _end_of(data)
        lane = self._commits[(led.tp.topic_id.int + led.tp.partition) % len(self._commits)]
        fut = lane.submit(Append(led.tp, data, led.lease, expected_offset=first))
        if is_internal_topic(led.name):
            self._pending_internal.add(led)
        fut.add_done_callback(functools.partial(self._written, led, end))

    def _written(self, led: _Led, end: int, fut: asyncio.Future) -> None:
        error = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
        if self._led.get((led.name, led.index)) is not led:
            return  # dropped meanwhile (its waiting answers were told so then)
        if error is not None:
            self._drop_key((led.name, led.index),
                           f"a write failed ({str(error).strip() or type(error).__name__})",
                           forget=True)
            return
        part = led.part
        if part.durable_end is None or end > part.durable_end:
            part.durable_end = end
        if led.bounded:
            self._trim(led)
        if led.waiting:
            still = []
            for offset, waiter in led.waiting:
                if offset < end:
                    if not waiter.done():
                        waiter.set_result(True)
                else:
                    still.append((offset, waiter))
            led.waiting = still
        if end >= part.log_end_offset:
            self._pending_internal.discard(led)
        self.waiters.notify(led.name, led.index)

    async def delete_records(self, led: _Led, offset: int) -> int:
        """DeleteRecords of a led partition: the database's log start moved (under the
        lease), then the copy's; returns the log start. LeaseLost if the lease is gone."""
        assert self.store is not None
        start = await self.store.delete_records(led.tp, offset, led.lease)
        if self._led.get((led.name, led.index)) is led:
            led.part.delete_records(min(start, led.part.log_end_offset))
        return start

    # -- what handlers ask -------------------------------------------------------------------
    def leads(self, name: str, index: int) -> bool:
        """Whether this broker leads the partition right now (`serving`)."""
        return self.serving(name, index) is not None

    def serving(self, name: str, index: int) -> _Led | None:
        """The partition, if this broker leads it right now (its copy loaded, its lease
        still counted on); None: NOT_LEADER_OR_FOLLOWER."""
        led = self._led.get((name, index))
        if led is None or self.membership is None:
            return None
        if self.membership.lease(led.lease.resource) != led.lease:
            return None
        return led

    def durable(self, led: _Led, offset: int) -> asyncio.Future[bool] | None:
        """None if `offset` is in the database already; else a future that says whether it
        got there (False: the partition was dropped first)."""
        durable_end = led.part.durable_end
        if durable_end is not None and durable_end > offset:
            return None
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self._led.get((led.name, led.index)) is not led:
            fut.set_result(False)
        else:
            led.waiting.append((offset, fut))
        return fut

    def coordinator_barrier(self) -> Awaitable[bool] | None:
        """None when every record a coordinator wrote here is in the database; else what
        says, once they are, whether all of them got there. A coordinator's answer may rest
        on what it just wrote (Kafka answers after the write is committed), so answers wait
        for it."""
        if not self._pending_internal:
            return None
        futures = []
        for led in list(self._pending_internal):
            fut = self.durable(led, led.part.log_end_offset - 1)
            if fut is not None:
                futures.append(fut)
        if not futures:
            return None
        return _all_true(futures)

    def leader(self, name: str, index: int, topic_id: uuid.UUID) -> Lease | None:
        """Who leads a partition, as this broker knows it: itself where it serves it, else
        the last round's picture; None if nobody does."""
        led = self.serving(name, index)
        if led is not None:
            return led.lease
        lease = self.picture.get(Resource.partition(TopicIdPartition(topic_id, index)))
        if lease is None or lease.owner not in self._live_ids:
            # Never a leader missing from the brokers Metadata lists (a broker whose
            # registration ran out before its leases did): clients would take the
            # partition for unknown, not for leaderless, and not ask again soon.
            return None
        return lease

    @property
    def brokers(self) -> list[BrokerRow]:
        """The live brokers (as of the last round), this one always among them."""
        return list(self.membership.live) if self.membership is not None else []

    # -- producer ids ------------------------------------------------------------------------
    def next_id(self) -> int:
        """An id no broker of the cluster gave out before (blocks from the database; the
        next is fetched while the current one still lasts)."""
        if self._next_pid >= self._pid_end:
            if not self._blocks:
                self._refill()
                raise LogStorageError("no producer ids at hand; the next block is on its way")
            block = self._blocks.pop(0)
            self._next_pid, self._pid_end = block.first_id, block.end
        pid = self._next_pid
        self._next_pid += 1
        if not self._blocks and self._pid_end - self._next_pid < 500:
            self._refill()
        return pid

    def _refill(self) -> None:
        if self._refilling is not None or self.db is None:
            return

        async def fetch() -> None:
            assert self.db is not None
            try:
                self._blocks.append(await allocate_block(self.db, self.node_id))
            except Exception as e:
                log.warning("node %d: no new producer-id block: %s", self.node_id, e)
            finally:
                self._refilling = None

        self._refilling = asyncio.ensure_future(fetch())

    # -- stopping ----------------------------------------------------------------------------
    async def stop(self) -> None:
        """Leave at once: leases released and the node.id freed, so the others take over
        without waiting for expiries (best effort: a database that is gone is left as is)."""
        for task in list(self._tasks):
            task.cancel()
        for key in list(self._led):
            self._drop_key(key, "the broker is stopping")
        if self.membership is not None:
            try:
                await asyncio.wait_for(self.membership.stop(), 5)
            except Exception as e:
                log.warning("node %d: could not leave the cluster cleanly: %s", self.node_id, e)
        await self.close()

    async def close(self) -> None:
        for db in (self.db, self.reads, self.shares, *self._lanes):
            if db is not None:
                with contextlib.suppress(Exception):
                    await db.close()


async def _all_true(futures: list[asyncio.Future[bool]]) -> bool:
    return all(await asyncio.gather(*futures))
