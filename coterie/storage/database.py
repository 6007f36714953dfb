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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg

__all__ = ["Database"]


class Database:
    """A connection and the lock that gives it to one transaction (or statement) at a time."""

    def __init__(self, conn: psycopg.AsyncConnection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(cls, dsn: str, *, connect_timeout: float = 10.0) -> Database:
        """Open an autocommit connection to `dsn` (a libpq connection string or URI)."""
        conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout)))
        return cls(conn)

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
