"""Migrations on a real PostgreSQL: applied once, idempotent, safe from several brokers at
once, all-or-nothing, and a newer schema refused with a message that says what to do."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from coterie.storage.errors import SchemaTooNew
from coterie.storage.migrations import migrate, schema_version
from coterie.storage.schema import MIGRATIONS, Migration, latest_version

TABLES = {"topics", "partitions", "batches", "brokers", "leases", "producer_id_blocks",
          "cluster", "group_configs", "cluster_broker_configs", "schema_version",
          "scram_credentials", "acls", "share_states", "share_state_entries"}


async def _tables(conn: psycopg.AsyncConnection) -> set[str]:
    cur = await conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    return {r[0] for r in await cur.fetchall()}


async def _versions(conn: psycopg.AsyncConnection) -> list[int]:
    cur = await conn.execute("SELECT version FROM schema_version ORDER BY version")
    return [r[0] for r in await cur.fetchall()]


def test_migrate_applies_every_migration_once(pg_dsn: str) -> None:
    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            assert await schema_version(conn) == 0
            assert await migrate(conn) == latest_version()
            assert await _tables(conn) == TABLES
            assert await _versions(conn) == [m.version for m in MIGRATIONS]
            # Idempotent: a second run (a broker's restart) changes nothing.
            assert await migrate(conn) == latest_version()
            assert await _versions(conn) == [m.version for m in MIGRATIONS]
            assert await schema_version(conn) == latest_version()

    asyncio.run(scenario())


def test_concurrent_migrations_from_several_connections_are_safe(pg_dsn: str) -> None:
    """Brokers starting together each migrate; the advisory lock lines them up."""

    async def one() -> int:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            return await migrate(conn)

    async def scenario() -> None:
        assert await asyncio.gather(*(one() for _ in range(4))) == [latest_version()] * 4
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            assert await _versions(conn) == [m.version for m in MIGRATIONS]
            assert await _tables(conn) == TABLES

    asyncio.run(scenario())


def test_a_newer_schema_is_refused_and_left_alone(pg_dsn: str) -> None:
    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await migrate(conn)
            newer = latest_version() + 2
            await conn.execute("INSERT INTO schema_version (version, summary) VALUES (%s, %s)",
                               (newer, "from a future coterie"))
            with pytest.raises(SchemaTooNew) as refused:
                await migrate(conn)
            assert str(refused.value) == (
                f"database schema is version {newer}, this coterie knows up to "
                f"{latest_version()}: upgrade coterie")
            assert await schema_version(conn) == newer

    asyncio.run(scenario())


def test_a_failing_migration_changes_nothing(pg_dsn: str) -> None:
    """DDL is transactional: a migration that breaks half-way leaves no table and no
    version row behind, and the database stays at the version before it."""
    broken = (*MIGRATIONS, Migration(
        latest_version() + 1, "a broken one",
        "CREATE TABLE half_done (x integer); SELECT no_such_function()"))

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await migrate(conn)
            with pytest.raises(psycopg.errors.UndefinedFunction):
                await migrate(conn, broken)
            assert "half_done" not in await _tables(conn)
            assert await schema_version(conn) == latest_version()

    asyncio.run(scenario())


def test_migrations_applied_from_an_older_version(pg_dsn: str) -> None:
    """A database at version N gets only what comes after N."""
    extra = Migration(latest_version() + 1, "a column", "ALTER TABLE topics ADD COLUMN x int")

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await migrate(conn)
            assert await migrate(conn, (*MIGRATIONS, extra)) == extra.version
            assert await _versions(conn) == [*(m.version for m in MIGRATIONS), extra.version]
            cur = await conn.execute("SELECT x FROM topics")
            assert await cur.fetchall() == []

    asyncio.run(scenario())
