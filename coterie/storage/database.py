"""One connection to PostgreSQL, shared by the coroutines of a broker, one transaction at a
time.

Why a lock: a psycopg AsyncConnection runs one statement at a time, but a transaction is
several statements, and two coroutines sharing the connection would otherwise interleave
theirs inside each other's transaction (a lease checked by one, rows written by the other).
Holding the connection for a whole transaction keeps them apart; throughput comes from group
commit (`PostgresLog.append_many`: many appends, one transaction), not from many connections.
A pool can replace this class later without changing its callers.

The connection is in autocommit mode: a lone read is one round trip with no transaction left
open, and a write says where its transaction starts and ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import psycopg

__all__ = ["Database"]


class Database:
    """A connection and the lock that gives it to one transaction (or statement) at a time."""

    def __init__(self, conn: psycopg.AsyncConnection, dsn: str | None = None,
                 connect_timeout: float = 10.0, settings: Mapping[str, str] | None = None,
                 application_name: str | None = None) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._dsn = dsn
        self._connect_timeout = connect_timeout
        self._settings = dict(settings or {})
        self._application_name = application_name

    @classmethod
    async def connect(cls, dsn: str, *, connect_timeout: float = 10.0,
                      settings: Mapping[str, str] | None = None,
                      application_name: str | None = None) -> Database:
        """Open an autocommit connection to `dsn` (a libpq connection string or URI), with
        server `settings` for its session (`lock_timeout`, ...) and the `application_name`
        it shows in pg_stat_activity (both kept on reconnects)."""
        return cls(await cls._open(dsn, connect_timeout, settings, application_name), dsn,
                   connect_timeout, settings, application_name)

    @staticmethod
    async def _open(dsn: str, connect_timeout: float,
                    settings: Mapping[str, str] | None = None,
                    application_name: str | None = None) -> psycopg.AsyncConnection:
        extra = {}
        if settings:
            extra["options"] = " ".join(f"-c {k}={v}" for k, v in settings.items())
        if application_name:
            extra["application_name"] = application_name
        return await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout)), **extra)

    @property
    def broken(self) -> bool:
        """Whether the connection is gone (the server restarted, the network failed)."""
        return self._conn.closed or self._conn.broken

    async def reconnect(self) -> None:
        """Replace a broken connection with a new one (raises while the server is still
        unreachable). Statements waiting for the lock then run on the new one."""
        if self._dsn is None:
            raise RuntimeError("this Database was made from a connection, not a DSN")
        async with self._lock:
            if not self.broken:
                return
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = await self._open(self._dsn, self._connect_timeout, self._settings,
                                         self._application_name)

    @property
    def connection(self) -> psycopg.AsyncConnection:
        """The raw connection, for code that holds it alone (migrations at start-up)."""
        return self._conn

    @asynccontextmanager
    async def session(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """The connection, alone, for statements that each commit on their own."""
        async with self._lock:
            yield self._conn

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """The connection, alone, inside one transaction: committed when the block ends,
        rolled back when it raises."""
        async with self._lock, self._conn.transaction():
            yield self._conn

    async def close(self) -> None:
        await self._conn.close()
