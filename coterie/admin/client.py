"""The admin client's connections: any broker, one given broker, or a group's coordinator.

Why a layer over `coterie.client.cluster.Cluster`: an operator command sends each request where
Kafka's AdminClient sends it. Metadata, configs and topic changes go to any broker (a KRaft
broker forwards to the controller); ListOffsets to each partition's leader; ListGroups and
DescribeLogDirs to every broker; everything about one group to that group's coordinator,
found with FindCoordinator and asked again when the answer is NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (the group moved, or its
coordinator is still loading it).

Every call is bounded by one deadline per `AdminClient` operation (`timeout_s`): an unreachable
cluster ends in `BrokerUnavailableError`, never in a hang, which is what lets the CLI promise
exit code 1 within `--timeout` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Self

from kio.schema.errors import ErrorCode

from coterie.client.cluster import COORDINATOR_RETRIABLE, Cluster, Node
from coterie.client.connection import Connection
from coterie.client.errors import BrokerConnectionError, BrokerError, BrokerUnavailableError
from coterie.client.security import SecuritySettings
from coterie.client.versions import ApiKey, VersionRange

__all__ = ["ADMIN_API_RANGES", "AdminClient", "AdminError"]

# The versions whose fields this package reads and writes (see each module). Ranges start where
# the shape the code builds begins (OffsetFetch v8 is batched by group, DeleteTopics v6 names
# topics as entries), and stop at the newest version coterie and Kafka 4.2 both answer and the
# code was written for.
ADMIN_API_RANGES: Mapping[int, VersionRange] = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (1, 12),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.LIST_OFFSETS: (1, 8),
    ApiKey.OFFSET_COMMIT: (8, 9),
    ApiKey.OFFSET_FETCH: (8, 9),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (3, 5),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (6, 6),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.STREAMS_GROUP_DESCRIBE: (0, 0),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (1, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}


class AdminError(Exception):
    """An operation the cluster refused or that cannot be done as asked (unknown group or
    topic, a group that is not empty, an offset that cannot be computed ...). The message is
    written for an operator; the CLI prints it and exits 1."""


class AdminClient:
    """Connections to a cluster for the admin modules; use as `async with AdminClient(...)`."""

    def __init__(self, bootstrap_servers: str, *,
                 security: SecuritySettings | Mapping[str, object] | None = None,
                 timeout_s: float = 30.0, client_id: str = "coterie-admin") -> None:
        self.timeout_s = timeout_s
        self.cluster = Cluster(bootstrap_servers, client_id=client_id, security=security,
                               connect_timeout_ms=min(10_000.0, timeout_s * 1000),
                               request_timeout_ms=timeout_s * 1000,
                               api_ranges=ADMIN_API_RANGES)
        self._nodes: dict[tuple[str, int], Connection] = {}
        self._deadline: float | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for conn in self._nodes.values():
            with contextlib.suppress(Exception):
                await conn.aclose()
        self._nodes.clear()
        await self.cluster.close()

    # -- deadlines ----------------------------------------------------------------------------
    def deadline(self) -> float:
        """The end of the current operation: `timeout_s` after its first request (each
        public function of the admin modules starts an operation: `start_operation`)."""
        if self._deadline is None:
            self._deadline = asyncio.get_running_loop().time() + self.timeout_s
        return self._deadline

    def _expired(self) -> bool:
        return asyncio.get_running_loop().time() >= self.deadline()

    # -- where requests go --------------------------------------------------------------------
    async def request(self, api_key: int, fields: Mapping[str, Any]) -> Any:
        """One request to any broker."""
        return await self.cluster.request(api_key, fields, deadline=self.deadline())

    async def brokers(self) -> list[Node]:
        """Every broker of the cluster (from Metadata), by node id."""
        meta = await self.cluster.metadata([], deadline=self.deadline())
        return sorted(meta.brokers.values(), key=lambda n: n.node_id)

    async def node_connection(self, node: Node) -> Connection:
        """A connection of our own to `node`, opened once and kept for the client's life."""
        key = (node.host, node.port)
        conn = self._nodes.get(key)
        if conn is not None and not conn.closed:
            return conn
        backoff = self.cluster.backoff()
        while True:
            try:
                conn = await self.cluster.open(node.host, node.port)
            except BrokerConnectionError as e:
                if self._expired():
                    raise BrokerUnavailableError(f"cannot reach broker {node.node_id} at "
                                                 f"{node.address}: {e}") from e
                await asyncio.sleep(backoff.next_s())
                continue
            self._nodes[key] = conn
            return conn

    async def to_node(self, node: Node, api_key: int, fields: Mapping[str, Any]) -> Any:
        """One request to one broker, reconnecting (within the deadline) if the link drops."""
        backoff = self.cluster.backoff()
        while True:
            conn = await self.node_connection(node)
            try:
                return await conn.call(api_key, fields)
            except BrokerConnectionError as e:
                conn.close()
                if self._expired():
                    raise BrokerUnavailableError(
                        f"{ApiKey(api_key).name} to broker {node.node_id} failed: {e}") from e
                await asyncio.sleep(backoff.next_s())

    async def coordinator(self, group_id: str) -> Node:
        """The coordinator of `group_id`."""
        return await self.cluster.find_coordinator(group_id, deadline=self.deadline())

    async def to_coordinator(self, group_id: str, api_key: int,
                             fields: Mapping[str, Any] | Callable[[int], Mapping[str, Any]],
                             error_of: Callable[[Any], ErrorCode]) -> tuple[Any, Node]:
        """One request about `group_id` to its coordinator, and the coordinator. `fields` may
        depend on the version sent (a callable of it); `error_of` reads the answer's group
        error, so that a coordinator that moved is looked up again and asked again."""
        backoff = self.cluster.backoff()
        while True:
            node = await self.coordinator(group_id)
            conn = await self.node_connection(node)
            try:
                version = conn.version(api_key)
                body = fields(version) if callable(fields) else fields
                response = await conn.call(api_key, body)
            except BrokerConnectionError as e:
                conn.close()
                if self._expired():
                    raise BrokerUnavailableError(
                        f"{ApiKey(api_key).name} for group {group_id!r} failed: {e}") from e
                await asyncio.sleep(backoff.next_s())
                continue
            code = error_of(response)
            if code not in COORDINATOR_RETRIABLE:
                return response, node
            if self._expired():
                raise BrokerError(code, ApiKey(api_key).name, f"group {group_id!r}")
            await asyncio.sleep(backoff.next_s())

    async def supports(self, node: Node, api_key: int) -> bool:
        """Does `node` answer some version of `api_key` this package speaks?"""
        conn = await self.node_connection(node)
        try:
            conn.version(api_key)
        except Exception:
            return False
        return True

    def start_operation(self) -> None:
        """Begin a new operation: the next request starts a fresh `timeout_s` deadline."""
        self._deadline = None
