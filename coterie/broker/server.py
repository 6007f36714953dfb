"""The asyncio broker: sockets in, handlers, responses out.

Each connection is a non-blocking socket in the broker's poller (coterie.broker.sockets: one
epoll set the asyncio loop watches) and a small `ClientConnection`: the poller says when it
can be read, it answers the complete frames strictly in order, one at a time, as Kafka does
(a client may pipeline many requests; they are answered in the order sent). Most answers are
written at once, inside the read callback; an answer that must be awaited (a parked
JoinGroup or Fetch, a large answer encoded on a worker thread, a file sent by sendfile) is
finished by a task, and the connection's next frames wait for it. A parked fetch therefore
holds back only its own connection. No task, stream, transport or socket object exists per
idle connection: a connection costs about 0.4 KiB of memory, where asyncio's transports
took 1.8 KiB and its streams 5.4 KiB.

Fairness: one connection's frames are answered for at most `TURN_S` before the others get
a turn; a connection whose unread answers exceed `UNSENT_LIMIT` is not read any more until
its client reads (it costs bounded memory), nor is one whose requests pile up while an
answer is awaited.

Failure containment: a frame above `socket.request.max.bytes`, an undecodable frame or an
unknown API key closes that one connection; a handler bug answers nothing and closes that
connection, logging the traceback; no error in one connection touches another.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import logging
import shutil
import socket
import struct
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import CoroutineType
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker import heap
from coterie.broker.acls import BrokerAuthorizer, authorizer_settings
from coterie.broker.apis import API_VERSIONS, APIS, Api
from coterie.broker.client_connection import READ_CHUNK, ClientConnection, CloseConnection
from coterie.broker.cluster import ClusterNode
from coterie.broker.config import DEFAULTS, BrokerConfig, ConfigError
from coterie.broker.connections import ConnectionTable, RateLimitedLog
from coterie.broker.context import Parked, RequestContext
from coterie.broker.dynamic_configs import DynamicBrokerConfigs
from coterie.broker.group_configs import GroupConfigs
from coterie.broker.group_events import GroupEventPublisher
from coterie.broker.groups import GROUP_DEFAULTS, GroupRuntime, group_settings
from coterie.broker.handlers.api_versions import unsupported_version_answer
from coterie.broker.internal_topics import internal_topics
from coterie.broker.large import BIG_FRAME, OffLoop, decoded_big, encoded_off_loop
from coterie.broker.log_cleaner import LogCleaner
from coterie.broker.metrics import BrokerMetrics
from coterie.broker.metrics_settings import metrics_settings
from coterie.broker.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from coterie.broker.peers import Peers
from coterie.broker.producer_ids import ProducerIdAllocator
from coterie.broker.request_memory import RequestMemory
from coterie.broker.sasl import SaslState, sasl_settings
from coterie.broker.scram import ScramCredential
from coterie.broker.scram_credentials import Plan, ScramCredentials
from coterie.broker.services import ApiRange, Services
from coterie.broker.share_partitions import SharePartitions, broker_int
from coterie.broker.share_sessions import ShareSessions
from coterie.broker.sockets import Listener, LoopPoller, Poller, make_poller
from coterie.broker.ssl_principal import principal_mapper
from coterie.broker.steady_answers import SteadyAnswers
from coterie.broker.tls import server_context
from coterie.broker.tls_connection import TlsClientConnection
from coterie.broker.topic_admin import TopicAdmin
from coterie.broker.transactions import TXN_DEFAULTS, TXN_TOPIC, TxnRuntime
from coterie.broker.waiters import FetchWaiters
from coterie.common.partitioning import give_back, lend
from coterie.common.shared_table import shared_str
from coterie.log.errors import InvalidConfigError
from coterie.log.files import unlink_all
from coterie.log.manager import LogManager, TopicInfo
from coterie.storage.files_share_state import FilesShareStateStore
from coterie.storage.postgres_share_state import PostgresShareStateStore
from coterie.wire.build import build, field_names
from coterie.wire.codec import (
    DecodeError,
    RawResponse,
    decode_request_and_header,
    encode_response,
    peek_api,
    peek_header,
    response_schema,
)
from coterie.wire.framing import SMALL_FRAME

log = logging.getLogger("coterie.broker")

# Recent requests up to this size are kept decoded, this many (`Broker._handle_frame`).
DECODED_MAX_BYTES = 512
DECODED_MAX_ENTRIES = 2048
_DECODED: dict[bytes, tuple[Any, Any]] = {}
# Keys seen once lately: a request is kept decoded only when its bytes come again while
# still here (see `Broker._handle_frame`).
_SEEN: dict[bytes, None] = {}
_CORRELATION = struct.Struct(">i")


def new_cluster_id() -> str:
    """A new cluster id, as Kafka's are: a random UUID in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _load_cluster_id(data_dir: Path) -> str:
    """Read or create `meta.properties`, which pins the cluster id across restarts."""
    meta = data_dir / "meta.properties"
    if meta.exists():
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    cluster_id = new_cluster_id()
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\n")
    tmp.replace(meta)
    return cluster_id


def _int(props: Mapping[str, str], key: str) -> int:
    """An integer setting from the properties in effect (ConfigError naming it if it is not)."""
    try:
        return int(props[key])
    except ValueError:
        raise ConfigError(f"{key}={props[key]!r} is not an integer") from None


class Broker:
    """Wires the parts (log, topic admin, group runtime, event publisher) and serves them:
    handlers see only the `Services` (coterie.broker.services)."""

    def __init__(self, config: BrokerConfig, cluster: ClusterNode | None = None) -> None:
        """`cluster`: a broker of a cluster over PostgreSQL, connected already (`create`);
        None: one broker on local files."""
        self.config = config
        self.cluster = cluster
        self.apis: dict[int, Api] = APIS
        self.waiters = FetchWaiters()
        config.data_dir.mkdir(parents=True, exist_ok=True)
        # Broker configs changed at run time, over the static ones (the file's, and the
        # listener the command line gives) and coterie's defaults; the parts that act on
        # them are handed every change (`_dynamic_changed`).
        static = {k: config.props[k] for k in config.explicit if k in config.props}
        if "listeners" not in static:
            static["listeners"] = f"PLAINTEXT://{config.host}:{config.port}"
        # Kafka's listeners (coterie.broker.listeners), each SSL one with its TLS context.
        self.listener_specs = config.listeners()
        self.tls_contexts = {spec.name: server_context(config.props, spec.name)
                             for spec in self.listener_specs if spec.tls}
        # An SSL listener's ssl.principal.mapping.rules (SASL_SSL's principal is SASL's).
        self.principal_mappers = {spec.name: principal_mapper(config.props, spec.name)
                                  for spec in self.listener_specs if spec.tls and not spec.sasl}
        self.tls_handshake_timeout_s = config.get_int("tls.handshake.timeout.ms") / 1000
        self.sasl_settings = {spec.name: sasl_settings(config.props, spec.name)
                              for spec in self.listener_specs if spec.sasl}
        self.dynamic_configs = DynamicBrokerConfigs(
            config.data_dir, static, {**GROUP_DEFAULTS, **TXN_DEFAULTS, **DEFAULTS})
        effective = self.dynamic_configs.effective()
        log_dir = config.data_dir
        if cluster is not None:
            # The copies of the partitions this broker leads: a cache, started empty.
            log_dir = config.data_dir / "cluster-cache"
            shutil.rmtree(log_dir, ignore_errors=True)
        self.logs: LogManager = LogManager.open(log_dir, effective, self.now_ms())
        self.dynamic_configs.watch(
            self.logs.set_broker_props,
            check=lambda props: self.logs.set_broker_props(props, check_only=True))
        self.producer_ids: Any
        if cluster is None:
            self.cluster_id = _load_cluster_id(config.data_dir)
            self.producer_ids = ProducerIdAllocator(config.data_dir)
        else:
            self.cluster_id = cluster.cluster_id
            self.producer_ids = cluster
            cluster.attach(self.logs, self.waiters, self.now_ms)
        self.topics = TopicAdmin(self.logs, self.now_ms)
        props = {**GROUP_DEFAULTS, **config.props}
        for spec in internal_topics(config.props):
            # Created the first time a broker starts on this data (a cluster broker finds
            # them in the database: coterie.broker.cluster); kept as found after that.
            if spec.name not in self.logs.topics:
                self.topics.create_topic(spec.name, spec.partitions, spec.configs)
        partitions = self.logs.topics[OFFSETS_TOPIC].partitions
        self.cleaner: LogCleaner | None = None
        if config.get_bool("log.cleaner.enable"):
            self.cleaner = LogCleaner(
                self.logs, self.now_ms, backoff_ms=_int(effective, "log.cleaner.backoff.ms"),
                key_budget_bytes=_int(effective, "log.cleaner.dedupe.buffer.size"),
                publish=None if cluster is None else cluster.publish_cleaned,
                leads=None if cluster is None else cluster.leads)
        # The authorizer and the ACLs (coterie.broker.acls): a cluster's come from its
        # database at every round, when an authorizer is configured. The group coordinator
        # asks it which topics a regex subscription may resolve to.
        self.authorizer = BrokerAuthorizer(authorizer_settings(config.props), config.data_dir,
                                           in_data_dir=cluster is None)
        self.groups = GroupRuntime(
            OffsetsTopic(self.logs, partitions), self.now_ms,
            dataclasses.replace(group_settings(config.props, config.consumer_group_config()),
                                topic_access=self.authorizer if self.authorizer.enabled
                                else None),
            retention_check_interval_ms=int(props["offsets.retention.check.interval.ms"]))
        if cluster is not None:
            self.groups.serve_only_loaded(cluster.coordinator_barrier)
            cluster.on_gained = self._partition_gained
            cluster.on_lost = self._partition_lost
            cluster.on_topics_changed = self.topics.changed
        self.group_events = GroupEventPublisher(self.groups, self.logs, self.topics,
                                                self.waiters, config.props, self.now_ms)
        self.groups.events = self.group_events
        self.topics.listeners.append(self._topics_changed)
        self.transactions = TxnRuntime(self.logs, self.groups, self.waiters, self.producer_ids,
                                       self.now_ms, config.props)
        self.peers: Peers | None = None
        if cluster is not None:
            self.peers = Peers(f"coterie-node-{config.node_id}")
            self.transactions.serve_only_loaded(cluster, self.peers)
        self.groups.verify_transaction = lambda v: self.transactions.verify_offsets(
            v.transactional_id, v.producer_id, v.producer_epoch, v.partition, v.version)
        self.group_configs = GroupConfigs(
            config.data_dir, config.props, config.consumer_group_config(),
            self.groups.set_group_config, in_data_dir=self.cluster is None)
        # The users' SCRAM credentials: a cluster's come from its database at every round.
        self.scram_credentials = ScramCredentials(config.data_dir,
                                                  in_data_dir=self.cluster is None)
        if self.cluster is not None and self.authorizer.enabled:
            self.cluster.acls = self.authorizer
        if self.cluster is not None:
            self.cluster.group_configs = self.group_configs
            self.cluster.broker_configs = self.dynamic_configs
            self.cluster.scram_credentials = self.scram_credentials
            self.groups.on_new_shard = self.group_configs.apply_all
        self.services = Services(
            config=config, cluster_id=self.cluster_id, logs=self.logs, topics=self.topics,
            groups=self.groups, waiters=self.waiters, producer_ids=self.producer_ids,
            clock=self.now_ms,
            apis=tuple(ApiRange(a.key, a.min_version, a.max_version)
                       for a in sorted(self.apis.values(), key=lambda a: a.key)),
            transactions=self.transactions, group_configs=self.group_configs,
            dynamic_configs=self.dynamic_configs, steady_answers=SteadyAnswers(),
            scram_credentials=self.scram_credentials,
            authorizer=self.authorizer,
            cluster=cluster)
        # KIP-932: share sessions, and the share partitions this broker leads with their
        # state kept beside the partitions (local files, or the cluster's database).
        self.services.share_sessions = ShareSessions(
            broker_int(config, "group.share.max.share.sessions"))
        # Files: each write reaches the OS before the answer (a kill -9 loses nothing), and
        # is fsynced at once only where every produced message is (the log's flush policy).
        self.share_store: FilesShareStateStore | None = None
        if cluster is None:
            self.share_store = FilesShareStateStore(
                config.data_dir, fsync=config.props.get("log.flush.interval.messages") == "1")
        self.services.share_partitions = SharePartitions(
            self.services,
            self.share_store if cluster is None else PostgresShareStateStore(cluster.shares))
        self._listeners: list[Listener] = []
        self.poller: Poller | LoopPoller | None = None
        self._stopped: asyncio.Future | None = None
        # Every connection reads into this buffer, then keeps what it got (one per broker:
        # os.readv lets other threads run, and a test may run two brokers in threads).
        read_buffer = bytearray(READ_CHUNK)
        self.request_memory = RequestMemory(config.get_int("queued.max.request.bytes"))
        self.read_view = memoryview(read_buffer)
        self.read_into = (read_buffer,)
        self.read_small = (self.read_view[:SMALL_FRAME],)
        self._tasks: list[asyncio.Task] = []
        self.connections = ConnectionTable(
            _int(effective, "max.connections"), _int(effective, "max.connections.per.ip"),
            self.config.get_int("connections.max.idle.ms"))
        self._producer_expiration_ms = _int(effective, "producer.id.expiration.ms")
        self.dynamic_configs.watch(self._dynamic_changed, check=self._check_dynamic)
        self._refusals = RateLimitedLog(log)
        self._accept_errors = RateLimitedLog(log)
        # Prometheus metrics (coterie.broker.metrics), when metrics.listen is set.
        self.metrics: BrokerMetrics | None = None
        settings = metrics_settings(config.props)
        if settings is not None:
            self.metrics = BrokerMetrics(settings, self)
            self.services.metrics = self.metrics
            self.group_events.on_events = self.metrics.group_events
            self.groups.on_loaded = self.metrics.loaded
            if self.cleaner is not None:
                self.cleaner.on_cleaned = self.metrics.cleaned

    # -- dynamic broker configs ----------------------------------------------------------
    @staticmethod
    def _check_dynamic(props: Mapping[str, str]) -> None:
        """What coterie needs of the dynamic configs it acts on, beyond Kafka's checks: the
        log cleaner's backoff and key budget must be positive, as at start-up."""
        for key in ("log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size"):
            if int(props[key]) <= 0:
                raise InvalidConfigError(f"Invalid value {props[key]} for configuration {key}: "
                                         "coterie needs a positive value")

    def _dynamic_changed(self, props: Mapping[str, str]) -> None:
        """Act on the dynamic configs coterie implements besides the log defaults (which the
        log manager takes): connection limits for the next connections, the log cleaner's
        backoff and key budget from its next pass, producer expiration from the next check."""
        self.connections.max_connections = int(props["max.connections"])
        self.connections.max_per_ip = int(props["max.connections.per.ip"])
        self._producer_expiration_ms = int(props["producer.id.expiration.ms"])
        if self.cleaner is not None:
            self.cleaner.backoff_s = int(props["log.cleaner.backoff.ms"]) / 1000
            self.cleaner.key_budget_bytes = int(props["log.cleaner.dedupe.buffer.size"])

    @classmethod
    async def create(cls, config: BrokerConfig) -> Broker:
        """A broker for `config`: with `storage=postgresql://...`, first connected to its
        cluster (ClusterStartError says why it cannot be)."""
        if config.storage is None:
            return cls(config)
        node = ClusterNode(config.storage, config.node_id, config.lease_s,
                           rack=config.props.get("broker.rack") or None,
                           write_connections=config.write_connections,
                           copy_bytes=config.copy_bytes)
        await node.connect(new_cluster_id(), internal_topics(config.props))
        try:
            return cls(config, node)
        except BaseException:
            await node.close()
            raise

    @staticmethod
    def now_ms() -> int:
        return time.time_ns() // 1_000_000

    # -- a cluster's partitions ------------------------------------------------------------
    def _partition_gained(self, name: str, index: int) -> Any:
        """This broker leads a partition now: a __consumer_offsets one makes it the
        coordinator of that shard's groups."""
        if name == OFFSETS_TOPIC:
            return self.groups.load_shard(index)
        if name == TXN_TOPIC:
            return self.transactions.load_shard(index)
        return None

    def _partition_lost(self, name: str, index: int) -> None:
        if name == OFFSETS_TOPIC:
            self.groups.unload_shard(index)
        elif name == TXN_TOPIC:
            self.transactions.unload_shard(index)

    # -- topic operations (tests and tools call them on the broker) -------------------------
    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        return self.topics.create_topic(name, partitions, configs)

    def delete_topic(self, name: str) -> None:
        self.topics.delete_topic(name)

    def create_partitions(self, name: str, total: int) -> None:
        self.topics.create_partitions(name, total)

    def _topics_changed(self, topics: dict[str, TopicInfo]) -> None:
        self.groups.topics_changed({info.name: (info.topic_id, info.partitions)
                                    for info in topics.values()})

    async def load_groups(self) -> None:
        """Load the groups, then hand them the topics as they are now."""
        await self.groups.load()
        self.group_configs.apply_all()
        self._topics_changed(self.logs.topics)
        # After the groups: markers still to write may go to __consumer_offsets.
        await self.transactions.load()

    async def set_scram_credentials(
            self, credentials: dict[tuple[str, int], ScramCredential]) -> None:
        """`coterie serve --add-scram` (coterie.broker.add_scram): users set before the
        broker serves, durably: in the data directory, or in a cluster's database (which
        the broker's rounds adopt, its first before it serves)."""
        if not credentials:
            return
        if self.cluster is not None:
            await self.cluster.alter_scram_credentials(dict(credentials), [])
        else:
            self.scram_credentials.apply(Plan(upserts=dict(credentials)))

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.poller = make_poller(loop)
        try:
            for spec in self.listener_specs:
                self._listeners.append(Listener(
                    loop, spec.host, spec.port, functools.partial(self._accepted, spec.name),
                    self._accept_errors, accepting=self.cluster is None))
        except BaseException:
            for listening in self._listeners:
                listening.close()
            raise
        for spec, listening in zip(self.listener_specs, self._listeners, strict=True):
            # Listening on an ephemeral port: advertise the one it got.
            self.services.addresses[spec.name] = (
                spec.advertised_host, spec.advertised_port or listening.port)
        first = self.listener_specs[0]
        if self.config.port == 0 or first.port != self.config.port:
            self.config.port = self.port
        if self.config.props.get("listeners"):
            self.config.host = first.host or self.config.host
        self._stopped = loop.create_future()
        if self.cluster is not None:
            try:
                host, port = self.services.address(first.name)
                await self.cluster.register(host, port, dict(self.services.addresses))
            except BaseException:
                for listening in self._listeners:
                    listening.close()
                raise
            self._tasks.append(asyncio.create_task(self.cluster.run()))
            # Clients wait in the listening backlog until this broker serves its share
            # (copied and loaded), so the first requests after a restart find it ready.
            await self.cluster.settled(timeout=self.cluster.ttl * 2)
            for listening in self._listeners:
                listening.accept_from_now()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self._tasks.append(asyncio.create_task(self.load_groups()))
        if self.metrics is not None:
            self.metrics.start()
        if self.cleaner is not None:
            self._tasks.append(asyncio.create_task(self.cleaner.run()))
        log.info("coterie listening on %s:%d (node %d, cluster %s, data %s)",
                 self.config.host, self.config.port, self.config.node_id, self.cluster_id,
                 self.config.data_dir)

    @property
    def port(self) -> int:
        assert self._listeners
        return self._listeners[0].port

    def listener_port(self, name: str) -> int:
        """The port the listener named `name` listens on."""
        for spec, listening in zip(self.listener_specs, self._listeners, strict=True):
            if spec.name == name.upper():
                return listening.port
        raise KeyError(name)

    async def serve_forever(self) -> None:
        assert self._stopped is not None
        await asyncio.shield(self._stopped)

    async def stop(self) -> None:
        for listening in self._listeners:
            listening.close()
        if self.metrics is not None:
            await self.metrics.stop()
        connections = [c for c in self.connections.live() if isinstance(c, ClientConnection)]
        tasks = [*self._tasks, *(c.task for c in connections if c.task is not None)]
        for conn in connections:
            conn.close()
        if self.cleaner is not None:
            self.cleaner.stop()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        if self.poller is not None:
            self.poller.close()
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)
        if self.cluster is not None:
            await self.cluster.stop()
        if self.peers is not None:
            self.peers.close()
        self.groups.close()
        self.services.share_partitions.close()
        if self.share_store is not None:
            self.share_store.close()  # fsyncs what the share partitions wrote
        self.logs.close()

    async def _housekeeping(self) -> None:
        """Retention, time-based flushing and producer-id expiry, on Kafka's check
        intervals."""
        retention_every = self.config.get_int("log.retention.check.interval.ms") / 1000
        flush_every = self.config.get_int("log.flush.scheduler.interval.ms") / 1000
        offsets_every = self.groups.retention_check_interval_ms / 1000
        producers_every = self.config.get_int("producer.id.expiration.check.interval.ms") / 1000
        next_retention = time.monotonic() + retention_every
        next_offsets = time.monotonic() + offsets_every
        next_producers = time.monotonic() + producers_every
        txn_every = self.transactions.tick_interval_ms / 1000
        next_txn = time.monotonic() + txn_every
        idle_every = min(30.0, self.connections.max_idle_s / 10)
        next_idle = time.monotonic() + idle_every
        while True:
            await asyncio.sleep(min(flush_every, retention_every, offsets_every,
                                    producers_every, txn_every, idle_every))
            now = self.now_ms()
            try:
                if time.monotonic() >= next_idle:
                    next_idle = time.monotonic() + idle_every
                    self._close_idle()
                    heap.trim()
                self.logs.maybe_flush(now)
                if time.monotonic() >= next_retention:
                    next_retention = time.monotonic() + retention_every
                    if self.cluster is not None:  # the database's log start leads
                        deleted = await self.cluster.enforce_retention(now)
                    else:
                        retired: list[Path] = []
                        deleted = self.logs.enforce_retention(now, retired)
                        if retired:  # unlinking large files takes milliseconds each
                            await asyncio.to_thread(unlink_all, retired)
                    if self.metrics is not None:
                        self.metrics.retention_ran(deleted)
                if time.monotonic() >= next_txn:
                    next_txn = time.monotonic() + txn_every
                    self.transactions.tick()
                if time.monotonic() >= next_producers:
                    next_producers = time.monotonic() + producers_every
                    expired = self.logs.expire_producers(now, self._producer_expiration_ms)
                    if expired:
                        log.info("expired %d idle producers", expired)
                if self.groups.loaded and time.monotonic() >= next_offsets:
                    next_offsets = time.monotonic() + offsets_every
                    expired = self.groups.expire_offsets()
                    if expired:
                        log.info("expired %d committed offsets", expired)
                if self.groups.loaded:
                    rolled = self.groups.compact()
                    if rolled and self.cleaner is not None:
                        self.cleaner.wake()
            except Exception:
                log.exception("housekeeping failed")

    # -- connections ---------------------------------------------------------------------
    def connection_gone(self, conn: Any) -> None:
        """A client connection closed: the share sessions it opened end, and their members'
        acquired records are released at once (as Kafka 4.2 does)."""
        if self.metrics is not None:
            self.metrics.closed(conn.listener)
        gone = self.services.share_sessions.disconnected(conn)
        if gone:
            task = asyncio.get_running_loop().create_task(self._release_sessions(gone))
            self._tasks.append(task)
            task.add_done_callback(self._tasks.remove)

    async def _release_sessions(self, sessions: list[Any]) -> None:
        for session in sessions:
            try:
                await self.services.share_partitions.release_member(session.group_id,
                                                                    session.member_id)
            except Exception:
                log.exception("releasing the records of share member %s failed",
                              session.member_id)

    def _close_idle(self) -> None:
        for conn in self.connections.idle(time.monotonic()):
            log.info("closing connection from %s: idle for more than "
                     "connections.max.idle.ms (%d ms)", conn.ip,
                     int(self.connections.max_idle_s * 1000))
            conn.close()
            conn.last_read = float("inf")  # reported once

    def _accepted(self, listener: str, sock: socket.socket, address: Any) -> None:
        """A new connection on `listener`: refused at once over a connection limit, else
        served (through TLS on an SSL listener)."""
        ip = shared_str(str(address[0])) if isinstance(address, tuple) else "?"
        port = address[1] if isinstance(address, tuple) else 0
        refusal = self.connections.refusal(ip)
        if refusal is not None:
            self._refusals.warning("closing new connection from %s:%s: %s", ip, port, refusal)
            sock.close()
            return
        assert self.poller is not None
        context = self.tls_contexts.get(listener)
        conn: ClientConnection
        if context is None:
            conn = ClientConnection(self, sock.detach(), ip, port, listener)
        else:
            conn = TlsClientConnection(self, sock.detach(), ip, port, listener, context,
                                       self.principal_mappers.get(listener))
        sasl = self.sasl_settings.get(listener)
        if sasl is not None:
            # Until it authenticates, a client's frames are bounded by Kafka's
            # sasl.server.max.receive.size (a token of many megabytes closes it).
            conn.sasl = SaslState(sasl)
            conn.frames.limit = min(conn.frames.limit,
                                    self.config.get_int("sasl.server.max.receive.size"))
        self.connections.add(conn)
        self.poller.add(conn.fd, conn)
        if self.metrics is not None:
            self.metrics.accepted(listener)
        log.debug("connection from %s", conn.peer)

    def _handle_frame(self, frame: bytes, peer: str, listener: str = "PLAINTEXT",
                      principal: str = "User:ANONYMOUS", connection: Any = None) -> Any:
        """Decode, dispatch and encode one request. Returns the encoded answer (bytes, or a
        RawResponse to stream), None for no answer, a `Parked` request (its answer comes
        with its future), or, for an async handler, a coroutine that returns one of those:
        most requests are answered without an await.

        Clients repeat themselves: a settled member's heartbeat is the same bytes every time
        but for the correlation id. `_DECODED` keeps recent small requests decoded, keyed by
        their bytes without the correlation id; the same bytes again are the same
        (immutable) request, so the bounds walk and kio's decode, half the cost of such a
        request, are skipped. The cache is small and shared (one per connection cost 1 KiB
        per member at 10,000 members). A request is kept only the second time its bytes are
        seen among the last 2,048 keys: when more members than that take turns, every entry
        would be replaced before its next use, and the decoded objects, promoted to the
        collector's oldest generation on the way, set off a full collection every 15 s or
        so (120-200 ms pauses at 10,000 members); the keys alone are bytes, which the
        collector does not track."""
        metrics = self.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        try:
            api_key, version = peek_api(frame)
        except DecodeError as e:
            raise CloseConnection(f"{peer}: {e}") from e
        api = self.apis.get(api_key)
        if api is None or not api.supports(version):
            try:
                head = peek_header(frame)
            except DecodeError as e:
                raise CloseConnection(f"{peer}: {e}") from e
            if api is None:
                raise CloseConnection(f"{_who(head, peer)} sent unknown api_key={api_key}")
            return self._unsupported_version(api, head, _who(head, peer))
        if len(frame) >= BIG_FRAME:
            return self._handle_big_frame(frame, api, version, peer, listener, principal,
                                          connection)
        key = None
        decoded = None
        if len(frame) <= DECODED_MAX_BYTES:
            key = frame[:4] + frame[8:]  # api key and version, then past the correlation id
            decoded = _DECODED.get(key)
        if decoded is not None:
            head, request = decoded
            correlation_id = _CORRELATION.unpack_from(frame, 4)[0]
        else:
            try:
                head, request = decode_request_and_header(frame, api_key, version)
            except DecodeError as e:
                raise CloseConnection(f"{peer}: {e}") from e
            correlation_id = head.correlation_id
            if key is not None:
                if key in _SEEN:
                    if len(_DECODED) >= DECODED_MAX_ENTRIES:
                        _DECODED.clear()
                    _DECODED[key] = (head, request)
                else:
                    if len(_SEEN) >= DECODED_MAX_ENTRIES:
                        _SEEN.clear()
                    _SEEN[key] = None
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s -> %s v%d corr=%d", _who(head, peer), api.name, version,
                      correlation_id)
        ctx = RequestContext(self.services, api_key, version, correlation_id,
                             head.client_id, peer, listener, principal, connection)
        try:
            response = api.handler(ctx, request)
        except Exception as e:
            raise _handler_failed(e, api, version, _who(head, peer)) from e
        if metrics is not None:
            response = metrics.track(api, version, started, response)
        if type(response) is CoroutineType:
            out = self._answer_later(response, api, head, ctx)
        elif response is None or type(response) is Parked:
            return response
        elif type(response) is OffLoop:
            out = self._encode_off_loop(response, api, head, ctx)
        else:
            if getattr(response, "error_code", None) == ErrorCode.invalid_request:
                _log_invalid_request(ctx, api, response)
            out = encode_response(correlation_id, response, api_key, version)
        if self.cluster is not None and api_key not in DATA_APIS:
            barrier = self.cluster.coordinator_barrier()
            if barrier is not None:
                return _after(barrier, out, f"{_who(head, peer)} {api.name}")
        return out

    async def _handle_big_frame(self, frame: bytes, api: Api, version: int,
                                peer: str, listener: str = "PLAINTEXT",
                                principal: str = "User:ANONYMOUS",
                                connection: Any = None) -> Any:
        """`_handle_frame` for a frame of BIG_FRAME bytes or more: decoded, and answered,
        on a worker thread, with the coordinator hashes of its long strings computed there
        and lent while the handler runs (coterie.broker.large)."""
        started = time.perf_counter()
        try:
            head, request, hashes = await asyncio.to_thread(decoded_big, frame, api.key,
                                                            version)
        except DecodeError as e:
            raise CloseConnection(f"{peer}: {e}") from e
        del frame
        ctx = RequestContext(self.services, api.key, version, head.correlation_id,
                             head.client_id, peer, listener, principal, connection)
        lend(hashes)
        try:
            try:
                response = api.handler(ctx, request)
            except Exception as e:
                raise _handler_failed(e, api, version, _who(head, peer)) from e
            if self.metrics is not None:
                response = self.metrics.track(api, version, started, response)
            if type(response) is Parked:
                return self._answer_parked(response, await response.future)
            pending = response if type(response) is CoroutineType else _at_once(response)
            return await self._answer_later(pending, api, head, ctx, off_loop=True)
        finally:
            give_back(hashes)

    def _answer_parked(self, parked: Parked, result: Any) -> Any:
        """The rest of `_handle_frame` for a parked request (JoinGroup, SyncGroup)."""
        ctx = parked.ctx
        api = self.apis[ctx.api_key]
        try:
            response = parked.answer(ctx, result)
        except Exception as e:
            raise _handler_failed(e, api, ctx.api_version, ctx.who) from e
        if getattr(response, "error_code", None) == ErrorCode.invalid_request:
            _log_invalid_request(ctx, api, response)
        return encode_response(ctx.correlation_id, response, api.key, ctx.api_version)

    async def _answer_later(self, pending: Any, api: Api, head: Any,
                            ctx: RequestContext, off_loop: bool = False) -> Any:
        """The rest of `_handle_frame` for an async handler (JoinGroup, SyncGroup, Fetch);
        `off_loop`, the answer is encoded on a worker thread (a big frame's)."""
        version = ctx.api_version
        try:
            response = await pending
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise _handler_failed(e, api, version, ctx.who) from e
        if response is None:
            return None
        if type(response) is OffLoop:
            return await self._encode_off_loop(response, api, head, ctx)
        if getattr(response, "error_code", None) == ErrorCode.invalid_request:
            _log_invalid_request(ctx, api, response)
        if not off_loop:
            return encode_response(ctx.correlation_id, response, api.key, version)
        try:
            return await asyncio.to_thread(encode_response, ctx.correlation_id, response,
                                           api.key, version)
        except Exception as e:
            raise _handler_failed(e, api, version, ctx.who) from e

    async def _encode_off_loop(self, response: OffLoop, api: Api, head: Any,
                               ctx: RequestContext) -> Any:
        """A large answer, built and encoded on a worker thread (coterie.broker.large)."""
        try:
            return await encoded_off_loop(response, ctx.correlation_id, api.key,
                                          ctx.api_version)
        except Exception as e:
            raise _handler_failed(e, api, ctx.api_version, ctx.who) from e

    def _unsupported_version(self, api: Api, head: Any, who: str) -> bytes:
        log.info("%s asked for %s v%d (supported %d-%d)", who, api.name, head.api_version,
                 api.min_version, api.max_version)
        if head.api_key == API_VERSIONS:
            return encode_response(head.correlation_id, unsupported_version_answer(self.services))
        # Answer in the asked version's shape when kio knows it and it has a top-level error
        # code; otherwise there is no way to write a response the client could read.
        try:
            cls = response_schema(head.api_key, head.api_version)
        except Exception:
            cls = None
        if cls is None or "error_code" not in field_names(cls):
            raise CloseConnection(f"{who} sent {api.name} v{head.api_version}, "
                                  "which coterie does not support")
        return encode_response(head.correlation_id,
                               build(cls, {"error_code": ErrorCode.unsupported_version}))


async def _at_once(response: Any) -> Any:
    return response


# The APIs whose answers never rest on a coordinator's records: a cluster broker sends them
# without waiting for the coordinators' writes to reach the database.
DATA_APIS = frozenset({0, 1, 2, 3, 10, 18, 23, 60})


async def _after(barrier: Any, out: Any, what: str) -> Any:
    """A cluster broker's coordinator answer, sent once the records written before it are
    in the database. If they did not get there, the answer may tell of a state the database
    does not have: the connection is closed instead, and the client retries as after a
    broker's crash (it finds the coordinator again)."""
    if type(out) is CoroutineType:
        out = await out
    if not await barrier:
        if type(out) is RawResponse:
            out.close()
        raise CloseConnection(f"{what}: the coordinator's records did not reach the "
                              "database; not answering")
    return out


def _who(head: Any, peer: str) -> str:
    """The client as log lines name it: client id @ address."""
    return f"{head.client_id or '-'}@{peer}"


def _log_invalid_request(ctx: RequestContext, api: Api, response: Any) -> None:
    """Every INVALID_REQUEST coterie sends is logged with its reason: the client usually
    treats it as fatal, and the reason is what tells an operator which check refused it."""
    reason = getattr(response, "error_message", None) or ctx.refusal or "(no reason given)"
    log.warning("%s: %s v%d answered INVALID_REQUEST: %s", ctx.who, api.name,
                ctx.api_version, reason)


def _handler_failed(error: Exception, api: Api, version: int, who: str) -> CloseConnection:
    """Log a handler's crash; the connection is closed, the broker goes on."""
    log.error("%s: %s v%d handler failed", who, api.name, version, exc_info=error)
    return CloseConnection(f"internal error answering {api.name}: {error!r}")
