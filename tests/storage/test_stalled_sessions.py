"""A broker stopped inside a write's statement (issue 24: a paused broker must not stop the
others from taking its leases). A real PostgreSQL session is stalled the way a broker paused
(SIGSTOP) in the middle of sending a large write leaves it: its transaction holds a lease
row (FOR SHARE, as every write does until it commits), and the next statement's Parse has
arrived but its Bind only in part. The server's idle-in-transaction timeout does not end such
a session (it is 'active', reading); coterie.storage.stalled does, and the lease can then be
taken over."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time

import psycopg
import pytest

from coterie.storage import leases
from coterie.storage.api import Resource
from coterie.storage.database import Database
from coterie.storage.membership import Membership
from coterie.storage.stalled import application_name, end_stalled_sessions
from tests.storage.helpers import LONG_TTL, expire, open_db

IDLE_TIMEOUT_MS = 300


class StalledSession:
    """A raw protocol-3 session (trust authentication, as the test server has), stopped
    half-way through a statement while its transaction holds `resource`'s lease row."""

    def __init__(self, dsn: str, name: str, resource: Resource | None) -> None:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        self.sock = socket.create_connection((str(info["host"]), int(info["port"])), 10)
        params = {"user": str(info["user"]), "database": str(info["dbname"]),
                  "application_name": name,
                  "options": f"-c idle_in_transaction_session_timeout={IDLE_TIMEOUT_MS}"}
        body = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items())
        body += b"\0"
        self.sock.sendall(struct.pack("!ii", 8 + len(body), 196608) + body)
        self._until_ready()
        if resource is not None:
            self._query(f"BEGIN; SELECT 1 FROM leases WHERE kind = '{resource.kind}' "
                        f"AND name = '{resource.name}' FOR SHARE")
        # The next statement: its Parse whole, its Bind cut short (a large write's bytes
        # still on their way when the writer stopped).
        parse = b"\0SELECT length($1::bytea)\0\0\0"
        self.sock.sendall(b"P" + struct.pack("!i", 4 + len(parse)) + parse
                          + b"B" + struct.pack("!i", 1 << 20) + b"\0\0\0\0")

    def _query(self, sql: str) -> None:
        q = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!i", 4 + len(q)) + q)
        self._until_ready()

    def _until_ready(self) -> None:
        while True:
            kind = self._exactly(1)
            (length,) = struct.unpack("!i", self._exactly(4))
            payload = self._exactly(length - 4)
            if kind == b"E":
                raise AssertionError(f"the server refused: {payload!r}")
            if kind == b"Z":
                return

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the server closed the session")
            data += chunk
        return data

    def closed_by_server(self) -> bool:
        self.sock.settimeout(5)
        try:
            while self.sock.recv(65536):
                pass
        except (ConnectionError, TimeoutError, OSError) as e:
            return not isinstance(e, TimeoutError)
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@contextlib.contextmanager
def stalled(dsn: str, name: str, resource: Resource | None):
    session = StalledSession(dsn, name, resource)
    try:
        yield session
    finally:
        session.close()


async def _impatient(dsn: str) -> Database:
    """A broker round's connection: a lock is waited for a moment only."""
    await (await open_db(dsn)).close()  # migrated
    return await Database.connect(dsn, settings={"lock_timeout": "200ms"},
                                  application_name=application_name(1))


def test_a_session_stalled_inside_a_statement_keeps_its_locks_until_ended(pg_dsn: str) -> None:
    shard = Resource.group_shard(0)

    async def scenario() -> None:
        db = await open_db(pg_dsn)
        impatient = await _impatient(pg_dsn)
        try:
            lease = await leases.acquire(db, shard, 3, LONG_TTL)
            assert lease is not None
            await expire(db, lease)  # as if node 3 had stopped renewing it
            with stalled(pg_dsn, application_name(3), shard) as session:
                # Many idle timeouts later the lock is still held: the server is reading.
                await asyncio.sleep(IDLE_TIMEOUT_MS / 1000 * 4)
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    await leases.acquire(impatient, shard, 1, LONG_TTL)
                # Not yet stalled for as long as asked: left alone.
                assert await end_stalled_sessions(impatient, 60.0) == []
                ended = await end_stalled_sessions(impatient, 0.5)
                assert [(s.application_name, s.ended) for s in ended] == \
                    [(application_name(3), True)]
                assert ended[0].stalled_s >= 0.5
                assert session.closed_by_server()
                taken = await leases.acquire(impatient, shard, 1, LONG_TTL)
                assert taken is not None and taken.epoch == lease.epoch + 1
        finally:
            await impatient.close()
            await db.close()

    asyncio.run(scenario())


def test_only_coterie_sessions_stalled_inside_a_statement_are_ended(pg_dsn: str) -> None:
    async def scenario() -> None:
        impatient = await _impatient(pg_dsn)
        try:
            with stalled(pg_dsn, "psql", None) as other, \
                    stalled(pg_dsn, application_name(2), None) as broker:
                # An idle coterie session (between statements) is not stalled either.
                idle = await Database.connect(pg_dsn, application_name=application_name(4))
                await asyncio.sleep(0.6)
                ended = await end_stalled_sessions(impatient, 0.5)
                assert [s.application_name for s in ended] == [application_name(2)]
                assert broker.closed_by_server()
                other.sock.settimeout(0.3)
                with pytest.raises(TimeoutError):
                    other.sock.recv(1)  # still open, still waiting for its Bind
                async with idle.session() as conn:
                    assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
                await idle.close()
        finally:
            await impatient.close()

    asyncio.run(scenario())


def test_a_round_goes_on_past_a_lease_still_locked_by_a_stalled_write(pg_dsn: str) -> None:
    """Node 1's round finds one resource it should take locked by node 3's stalled write:
    it takes the others, and that one once the stalled session is ended."""
    ttl = 1.0
    resources = [Resource("partition", f"t-{i}") for i in range(3)]

    async def scenario() -> None:
        db = await open_db(pg_dsn)
        impatient = await _impatient(pg_dsn)
        node1 = Membership(impatient, 1, "127.0.0.1", 9001, lambda: resources, ttl=ttl)
        try:
            held = await leases.acquire(db, resources[0], 3, LONG_TTL)
            assert held is not None
            await expire(db, held)
            with stalled(pg_dsn, application_name(3), resources[0]):
                await node1.start()
                started = time.monotonic()
                changes = await node1.round()
                assert time.monotonic() - started < ttl  # a lock timeout, not a stall
                assert sorted(lease.resource.name for lease in changes.gained) == ["t-1", "t-2"]
                assert node1.lease(resources[0]) is None
                await asyncio.sleep(0.6)
                assert [s.ended for s in await end_stalled_sessions(impatient, 0.5)] == [True]
                changes = await node1.round()
                assert [lease.resource for lease in changes.gained] == [resources[0]]
                assert changes.gained[0].epoch == held.epoch + 1
        finally:
            await node1.stop()
            await impatient.close()
            await db.close()

    asyncio.run(scenario())
