"""Who is connected: connection limits, idle expiry and rate-limited complaints.

Kafka's names and defaults: `max.connections` and `max.connections.per.ip` (both unlimited
by default) and `connections.max.idle.ms` (10 minutes). A connection over a limit is closed
as soon as it is accepted, with one log line per interval however many are refused (a
client retrying in a loop must not fill the log). Kafka's acceptor instead stops accepting
while the broker-wide limit is reached; coterie closes at once, so a client of a full
broker learns it now rather than waiting in the listen backlog (coterie.broker.sockets).

A connection is idle when nothing was read from it for `connections.max.idle.ms` and it is
not waiting for an answer of ours (a parked JoinGroup or Fetch is the broker's doing, not
the client's). A half-sent frame therefore no longer holds a connection and its buffer
forever. The table is swept from the broker's housekeeping loop.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

__all__ = ["Connection", "ConnectionTable", "RateLimitedLog"]

UNLIMITED = 2**31 - 1  # Kafka's Int.MAX_VALUE default for both connection limits


class Connection:
    """One accepted socket as the table sees it: peer address and activity. The server's
    connection class (coterie.broker.server) extends it and says how to `close` it."""

    __slots__ = ("ip", "last_read", "waiting")

    def __init__(self, ip: str) -> None:
        self.ip = ip
        self.last_read = time.monotonic()
        self.waiting = False  # an async handler of ours holds its current request

    def close(self) -> None:
        raise NotImplementedError


class RateLimitedLog:
    """At most one line per `interval_s` for one kind of complaint, counting the rest."""

    def __init__(self, logger: logging.Logger, interval_s: float = 60.0) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._next = 0.0
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" ({self._suppressed} more like this since the last report)"
            self._suppressed = 0
        self._next = now + self.interval_s
        self.logger.warning(message, *args)


class ConnectionTable:
    """The live connections, with the limits checked when one is accepted."""

    def __init__(self, max_connections: int = UNLIMITED, max_per_ip: int = UNLIMITED,
                 max_idle_ms: int = 600_000) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.max_idle_s = max_idle_ms / 1000
        self._live: set[Connection] = set()
        self._per_ip: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._live)

    def refusal(self, ip: str) -> str | None:
        """Why a new connection from `ip` may not stay, or None if it may."""
        if len(self._live) >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        if self._per_ip[ip] >= self.max_per_ip:
            return f"max.connections.per.ip ({self.max_per_ip}) reached for {ip}"
        return None

    def add(self, conn: Connection) -> None:
        self._live.add(conn)
        self._per_ip[conn.ip] += 1

    def remove(self, conn: Connection) -> None:
        if conn in self._live:
            self._live.discard(conn)
            self._per_ip[conn.ip] -= 1
            if not self._per_ip[conn.ip]:
                del self._per_ip[conn.ip]

    def live(self) -> list[Connection]:
        return list(self._live)

    def idle(self, now: float) -> list[Connection]:
        """Connections silent for longer than `connections.max.idle.ms`."""
        cutoff = now - self.max_idle_s
        return [c for c in self._live if not c.waiting and c.last_read < cutoff]
