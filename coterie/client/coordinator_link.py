"""A group member's connection to its group coordinator, rediscovered when it goes away.

The member talks to the coordinator over one dedicated connection. When that connection
fails, or the coordinator answers COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR, the member
drops it (`drop`) and the next `connection()` finds the coordinator again (FindCoordinator
through the cluster's shared connection) and connects to it, sleeping a bounded, jittered
backoff between attempts.

"Bounded" has two meanings here: each delay is capped (`retry_backoff_max_ms`), and, when
`unavailable_timeout_ms` is set, the whole outage is: once no coordinator has answered for
that long, `connection()` raises `BrokerUnavailableError` and the member reports it instead of
retrying forever. The outage clock starts at the first failure and stops at the first
response (`alive()`), not at the first accepted TCP connection, so a broker that accepts and
immediately drops connections still counts as unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from coterie.client.cluster import Cluster
from coterie.client.connection import Connection
from coterie.client.errors import BrokerConnectionError, BrokerUnavailableError
from coterie.client.versions import VersionRange

log = logging.getLogger("coterie.client.member")


class CoordinatorLink:
    """The coordinator connection of one group member."""

    def __init__(self, cluster: Cluster, group_id: str,
                 unavailable_timeout_ms: float | None) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.unavailable_timeout_ms = unavailable_timeout_ms
        self._conn: Connection | None = None
        self._lock = asyncio.Lock()
        self._backoff = cluster.backoff()
        self._outage_since: float | None = None
        self.reconnects = 0

    @property
    def current(self) -> Connection | None:
        return self._conn if self._conn is not None and not self._conn.closed else None

    def alive(self) -> None:
        """The coordinator answered: the outage (if any) is over."""
        self._outage_since = None

    def succeeded(self) -> None:
        """A request did what it was sent for: the next retry starts from the first delay."""
        self._backoff.reset()

    def _deadline(self) -> float | None:
        now = asyncio.get_running_loop().time()
        if self._outage_since is None:
            self._outage_since = now
        if self.unavailable_timeout_ms is None:
            return None
        return self._outage_since + self.unavailable_timeout_ms / 1000

    async def connection(self) -> Connection:
        """The coordinator connection, found and opened again if needed."""
        async with self._lock:
            if self.current is not None:
                return self._conn  # type: ignore[return-value]
            loop = asyncio.get_running_loop()
            while True:
                deadline = self._deadline()
                try:
                    node = await self.cluster.find_coordinator(self.group_id, deadline=deadline)
                    self._conn = await self.cluster.open(node.host, node.port)
                    self.reconnects += 1
                    return self._conn
                except BrokerConnectionError as e:
                    if deadline is not None and loop.time() >= deadline:
                        raise BrokerUnavailableError(
                            f"group {self.group_id!r}: no coordinator reachable for "
                            f"{self.unavailable_timeout_ms:.0f} ms") from e
                    delay = self._backoff.next_s()
                    if deadline is not None:
                        delay = max(0.0, min(delay, deadline - loop.time()))
                    log.info("group %s: coordinator unreachable (%s); retrying in %.0f ms",
                             self.group_id, e, delay * 1000)
                    await asyncio.sleep(delay)

    def drop(self, conn: Connection | None = None, reason: str = "dropped") -> None:
        """Forget the coordinator connection (only if it is still `conn`, when given)."""
        if self._conn is None or (conn is not None and conn is not self._conn):
            return
        self._conn.close(reason)
        self._conn = None
        self._deadline()  # an outage starts now, unless one already runs

    def retry_delay_s(self) -> float:
        """The next retry delay, in seconds (growing until `succeeded()`)."""
        return self._backoff.next_s()

    async def backoff(self) -> None:
        """Sleep the next retry delay (a response said: try again later)."""
        await asyncio.sleep(self.retry_delay_s())

    async def call(self, api_key: int, fields: Mapping[str, Any], *,
                   versions: VersionRange | None = None,
                   timeout_ms: float | None = None) -> Any:
        """One request on the coordinator connection; a broken connection is dropped and the
        error re-raised (the caller decides whether to retry)."""
        conn = await self.connection()
        try:
            response = await conn.call(api_key, fields, versions=versions,
                                       timeout_ms=timeout_ms)
        except BrokerConnectionError:
            self.drop(conn, "failed")
            raise
        self.alive()
        return response

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.aclose()
