"""The client's view of a cluster: bootstrap servers, Metadata, FindCoordinator, reconnects.

A `Cluster` keeps one shared connection to "any broker" for short requests (Metadata,
FindCoordinator) and opens dedicated connections on demand (`open`): a group member wants
its own connection to the coordinator, because a JoinGroup parks on the broker and holds back
whatever is queued behind it on the same connection; a consumer will want one per partition
leader for long-polled fetches.

Retries: every operation that may retry takes an optional `deadline` (the event loop's clock,
`loop.time()`; None means no deadline). Between attempts it sleeps a `Backoff` delay
(exponential, capped at `retry_backoff_max_ms`, with jitter from the injected `rng`), tries the
next address (known brokers from the last Metadata first, then the bootstrap list), and once
the deadline has passed raises `BrokerUnavailableError` with the last failure as the cause.
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR from
FindCoordinator are retried the same way; GROUP_AUTHORIZATION_FAILED is raised at once.

Security: every connection the cluster opens, shared or dedicated, is secured by the same
`security` settings (`coterie.client.security`: TLS and SASL under Kafka's property names);
the TLS context is built once, here, so a missing certificate file fails at construction,
naming its setting. An AuthenticationError is raised at once, never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.client.backoff import Backoff
from coterie.client.connection import SOFTWARE_NAME, Connection
from coterie.client.errors import (
    BrokerConnectionError,
    BrokerError,
    BrokerUnavailableError,
    fatal_group_error,
)
from coterie.client.security import SecuritySettings, security_settings
from coterie.client.versions import MEMBER_API_RANGES, ApiKey, VersionRange

log = logging.getLogger("coterie.client")

COORDINATOR_RETRIABLE = frozenset({
    ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
})


@dataclass(frozen=True, slots=True)
class Node:
    """A broker as Metadata or FindCoordinator names it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID | None
    error: ErrorCode
    is_internal: bool
    partitions: tuple[PartitionMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: Mapping[int, Node]
    topics: Mapping[str, TopicMetadata]


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """`"h1:9092,h2:9092"`, `["h1:9092"]` or `"[::1]:9092"` -> [(host, port), ...]."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


def _expired(deadline: float | None) -> bool:
    return deadline is not None and _loop_time() >= deadline


class Cluster:
    """Bootstrap servers, cluster metadata and coordinator discovery, with bounded retries."""

    def __init__(self, bootstrap_servers: str | Sequence[str], *,
                 client_id: str = SOFTWARE_NAME, connect_timeout_ms: float = 10_000,
                 request_timeout_ms: float = 30_000, retry_backoff_ms: float = 100,
                 retry_backoff_max_ms: float = 1_000,
                 api_ranges: Mapping[int, VersionRange] = MEMBER_API_RANGES,
                 rng: random.Random | None = None,
                 security: SecuritySettings | Mapping[str, object] | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security_settings(security)
        self._ssl_context = self.security.ssl_context()
        self.client_id = client_id
        self.connect_timeout_ms = connect_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.api_ranges = dict(api_ranges)
        self.rng = rng or random.Random()
        self.brokers: dict[int, Node] = {}
        self._shared: Connection | None = None
        self._shared_lock = asyncio.Lock()
        self._next_address = 0
        self._connect_backoff = self.backoff()  # kept across calls: an outage keeps growing it
        self._closed = False

    def backoff(self) -> Backoff:
        """A fresh backoff with this cluster's settings (and its random source)."""
        return Backoff(self.retry_backoff_ms, self.retry_backoff_max_ms, rng=self.rng)

    # -- connections --------------------------------------------------------------------------
    async def open(self, host: str, port: int) -> Connection:
        """A new dedicated connection (no retry; the caller owns and closes it)."""
        if self._closed:
            raise BrokerConnectionError("the cluster client is closed")
        return await Connection.open(
            host, port, client_id=self.client_id, connect_timeout_ms=self.connect_timeout_ms,
            request_timeout_ms=self.request_timeout_ms, api_ranges=self.api_ranges,
            security=self.security, ssl_context=self._ssl_context)

    def _addresses(self) -> list[tuple[str, int]]:
        known = [(n.host, n.port) for n in self.brokers.values()]
        return known + [a for a in self.bootstrap if a not in known]

    async def connection(self, *, deadline: float | None = None) -> Connection:
        """The shared connection to some broker, (re)connecting with backoff if needed."""
        async with self._shared_lock:
            if self._shared is not None and not self._shared.closed:
                return self._shared
            backoff = self._connect_backoff
            while True:
                addresses = self._addresses()
                host, port = addresses[self._next_address % len(addresses)]
                self._next_address += 1
                try:
                    self._shared = await self.open(host, port)
                    backoff.reset()
                    return self._shared
                except BrokerConnectionError as e:
                    if _expired(deadline) or self._closed:
                        raise BrokerUnavailableError(
                            f"no broker reachable (last tried {host}:{port})") from e
                    delay = backoff.next_s()
                    log.info("cannot reach %s:%d (%s); retrying in %.0f ms", host, port, e,
                             delay * 1000)
                    await self._sleep(delay, deadline)

    @staticmethod
    async def _sleep(delay: float, deadline: float | None) -> None:
        if deadline is not None:
            delay = max(0.0, min(delay, deadline - _loop_time()))
        await asyncio.sleep(delay)

    def _drop_shared(self, conn: Connection) -> None:
        conn.close("dropped after an error")
        if self._shared is conn:
            self._shared = None

    async def request(self, api_key: int, fields: Mapping[str, Any], *,
                      deadline: float | None = None) -> Any:
        """One request to any broker, retried on connection errors until `deadline`."""
        backoff = self.backoff()
        while True:
            conn = await self.connection(deadline=deadline)
            try:
                return await conn.call(api_key, fields)
            except BrokerConnectionError as e:
                self._drop_shared(conn)
                if _expired(deadline):
                    raise BrokerUnavailableError(f"{ApiKey(api_key).name} failed: {e}") from e
                await self._sleep(backoff.next_s(), deadline)

    # -- metadata -----------------------------------------------------------------------------
    async def metadata(self, topics: Sequence[str] | None = None, *,
                       allow_auto_topic_creation: bool = False,
                       deadline: float | None = None) -> ClusterMetadata:
        """Metadata for `topics` (None: every topic); also refreshes the known brokers."""
        response = await self.request(ApiKey.METADATA, {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_topic_creation,
            "include_topic_authorized_operations": False,
        }, deadline=deadline)
        brokers = {int(b.node_id): Node(int(b.node_id), b.host, int(b.port),
                                        getattr(b, "rack", None)) for b in response.brokers}
        if brokers:
            self.brokers = dict(brokers)
        topic_map = {}
        for t in response.topics:
            if t.name is None:
                continue
            topic_id = getattr(t, "topic_id", None)
            topic_map[t.name] = TopicMetadata(
                name=t.name,
                topic_id=topic_id if topic_id not in (None, uuid.UUID(int=0)) else None,
                error=t.error_code, is_internal=bool(getattr(t, "is_internal", False)),
                partitions=tuple(sorted((PartitionMetadata(
                    partition=int(p.partition_index), leader_id=int(p.leader_id),
                    leader_epoch=int(getattr(p, "leader_epoch", -1)),
                    replicas=tuple(int(r) for r in p.replica_nodes),
                    isr=tuple(int(r) for r in p.isr_nodes), error=p.error_code)
                    for p in t.partitions), key=lambda p: p.partition)))
        return ClusterMetadata(
            cluster_id=getattr(response, "cluster_id", None),
            controller_id=int(getattr(response, "controller_id", -1)),
            brokers=brokers, topics=topic_map)

    # -- coordinators -------------------------------------------------------------------------
    async def find_coordinator(self, group_id: str, *,
                               deadline: float | None = None) -> Node:
        """The coordinator of `group_id`; coordinator errors are retried with backoff."""
        backoff = self.backoff()
        while True:
            conn = await self.connection(deadline=deadline)
            try:
                version = conn.version(ApiKey.FIND_COORDINATOR)
                response = await conn.call(ApiKey.FIND_COORDINATOR, {
                    "key": group_id, "key_type": 0, "coordinator_keys": [group_id]})
            except BrokerConnectionError as e:
                self._drop_shared(conn)
                if _expired(deadline):
                    raise BrokerUnavailableError(f"FindCoordinator failed: {e}") from e
                await self._sleep(backoff.next_s(), deadline)
                continue
            entry = response.coordinators[0] if version >= 4 else response
            code = entry.error_code
            if code == ErrorCode.none:
                return Node(int(entry.node_id), entry.host, int(entry.port))
            detail = getattr(entry, "error_message", None) or ""
            if code not in COORDINATOR_RETRIABLE:
                if code == ErrorCode.group_authorization_failed:
                    raise fatal_group_error(code, "FindCoordinator", detail)
                raise BrokerError(code, "FindCoordinator", detail)
            if _expired(deadline):
                raise BrokerUnavailableError(
                    f"no coordinator for group {group_id!r}: {code.name}")
            delay = backoff.next_s()
            log.info("FindCoordinator(%s): %s; retrying in %.0f ms", group_id, code.name,
                     delay * 1000)
            await self._sleep(delay, deadline)

    async def close(self) -> None:
        self._closed = True
        if self._shared is not None:
            with contextlib.suppress(Exception):
                await self._shared.aclose()
            self._shared = None
