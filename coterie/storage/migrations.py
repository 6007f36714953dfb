"""Bringing a database's schema up to the version this coterie knows, safely from many brokers.

Why an advisory lock: several brokers of one cluster often start together, and each migrates
before it serves. The whole migration runs in one transaction that first takes a
transaction-scoped advisory lock, so the brokers migrate one after the other: the first
applies what is missing, the others then find nothing to do. PostgreSQL's DDL is
transactional, so a migration that fails leaves the schema as it was, version row included.

A database newer than this coterie (a newer coterie migrated it) is refused with
SchemaTooNew before anything is touched: the broker stops at start-up rather than write rows
whose meaning it does not know.
"""

from __future__ import annotations

import psycopg

from coterie.storage.errors import SchemaTooNew
from coterie.storage.schema import MIGRATIONS, Migration, latest_version

__all__ = ["MIGRATION_LOCK_KEY", "migrate", "schema_version"]

# The advisory lock every coterie takes while migrating ("coterie" in ASCII, as a bigint key).
MIGRATION_LOCK_KEY = int.from_bytes(b"coterie", "big")

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version    integer PRIMARY KEY,
    summary    text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


async def schema_version(conn: psycopg.AsyncConnection) -> int:
    """The database's schema version: the last migration applied, 0 for an empty database."""
    cur = await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    row = await cur.fetchone()
    if not row or not row[0]:
        return 0
    cur = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def migrate(conn: psycopg.AsyncConnection,
                  migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Apply the migrations the database lacks, in order, in one transaction; returns the
    schema version now. Raises SchemaTooNew for a database newer than `migrations`."""
    _check_ordered(migrations)
    known = latest_version(migrations)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        await conn.execute(_CREATE_VERSION_TABLE)
        current = await schema_version(conn)
        if current > known:
            raise SchemaTooNew(current, known)
        for m in migrations:
            if m.version <= current:
                continue
            await conn.execute(m.sql)
            await conn.execute(
                "INSERT INTO schema_version (version, summary) VALUES (%s, %s)",
                (m.version, m.summary))
    return max(current, known)


def _check_ordered(migrations: tuple[Migration, ...]) -> None:
    """Versions must run 1, 2, 3, ... with no gap: the database records only the last one."""
    for i, m in enumerate(migrations, start=1):
        if m.version != i:
            raise ValueError(f"migration {m.version} ({m.summary!r}) is number {i} in the list; "
                             "versions must run 1, 2, 3, ... in order")
