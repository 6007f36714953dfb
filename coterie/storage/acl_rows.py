"""The ACLs as stored for a cluster (schema version 5, table `acls`): one row per binding,
Kafka's enum codes as numbers, the whole binding its key (a binding stored twice is one
ACL, as in Kafka). Every broker reads them whole at each of its rounds
(coterie.broker.acls), as Kafka's brokers all hold the ACL records of the metadata log;
a DeleteAcls chooses and deletes its rows in one transaction, so two brokers deleting at
once each report only what they removed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from coterie.security import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from coterie.storage.database import Database

__all__ = ["acls", "add_acls", "delete_acls", "fingerprint"]

_COLUMNS = ("resource_type, resource_name, pattern_type, principal, host, operation, "
            "permission_type")
_Row = tuple[int, str, int, str, str, int, int]


def _row(b: AclBinding) -> _Row:
    return (int(b.resource_type), b.name, int(b.pattern_type), b.principal, b.host,
            int(b.operation), int(b.permission))


def _binding(r: Sequence) -> AclBinding:
    return AclBinding(ResourceType.of(r[0]), r[1], PatternType.of(r[2]), r[3], r[4],
                      AclOperation.of(r[5]), AclPermissionType.of(r[6]))


async def acls(db: Database) -> list[AclBinding]:
    """Every ACL."""
    async with db.session() as conn:
        cur = await conn.execute(f"SELECT {_COLUMNS} FROM acls")
        rows = await cur.fetchall()
    return [_binding(r) for r in rows]


async def fingerprint(db: Database) -> str:
    """A digest of every row, computed by the server: a broker's round compares it with the
    last one it saw and reads the rows (`acls`) only when it changed, so thousands of ACLs
    cost one small answer per round, not thousands of rows."""
    async with db.session() as conn:
        cur = await conn.execute(
            f"SELECT count(*), md5(coalesce(string_agg(concat_ws(chr(1), {_COLUMNS}), chr(2) "
            f"ORDER BY {_COLUMNS}), '')) FROM acls")
        row = await cur.fetchone()
    return f"{row[0]}:{row[1]}" if row else ""


async def add_acls(db: Database, bindings: Iterable[AclBinding]) -> None:
    """Store `bindings` (those stored already stay as they are), in one transaction."""
    rows = [_row(b) for b in bindings]
    if not rows:
        return
    async with db.transaction() as conn, conn.cursor() as cur:
        await cur.executemany(f"INSERT INTO acls ({_COLUMNS}) VALUES "
                              "(%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)


async def delete_acls(db: Database, filters: Sequence[AclBindingFilter],
                      limit: int | None = None) -> list[list[AclBinding]] | None:
    """Delete what the filters match, in one transaction: the rows each filter matched
    (each filter against the same rows, so a row two filters match is in both lists). None,
    deleting nothing, when more than `limit` rows would go (Kafka's bound on one delete)."""
    async with db.transaction() as conn:
        cur = await conn.execute(f"SELECT {_COLUMNS} FROM acls FOR UPDATE")
        stored = [_binding(r) for r in await cur.fetchall()]
        matched = [sorted((b for b in stored if f.matches(b)), key=AclBinding.key)
                   for f in filters]
        gone = {b for found in matched for b in found}
        if limit is not None and len(gone) > limit:
            return None
        if gone:
            async with conn.cursor() as c:
                await c.executemany(
                    "DELETE FROM acls WHERE resource_type = %s AND resource_name = %s AND "
                    "pattern_type = %s AND principal = %s AND host = %s AND operation = %s "
                    "AND permission_type = %s", [_row(b) for b in gone])
    return matched
