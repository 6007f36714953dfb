"""SCRAM credentials as stored for a cluster (schema version 5, table `scram_credentials`):
one row per user and mechanism (Kafka's mechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
with the salt, the iteration count, StoredKey and ServerKey; never the password. Few and
small: every broker reads them whole at each round (coterie.broker.scram_credentials), as
Kafka's brokers all hold the credential records of the metadata log."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from coterie.storage.database import Database

__all__ = ["StoredCredential", "alter_scram_credentials", "scram_credentials"]

# (salt, iterations, stored_key, server_key)
StoredCredential = tuple[bytes, int, bytes, bytes]


async def scram_credentials(db: Database) -> dict[tuple[str, int], StoredCredential]:
    """Every credential, by (user, mechanism)."""
    async with db.session() as conn:
        cur = await conn.execute("SELECT user_name, mechanism, salt, iterations, stored_key, "
                                 "server_key FROM scram_credentials")
        rows = await cur.fetchall()
    return {(r[0], r[1]): (bytes(r[2]), r[3], bytes(r[4]), bytes(r[5])) for r in rows}


async def alter_scram_credentials(db: Database,
                                  upserts: Mapping[tuple[str, int], StoredCredential],
                                  deletions: Iterable[tuple[str, int]]
                                  ) -> list[tuple[str, int]]:
    """Delete and set credentials in one transaction (all of a request's changes or none);
    returns the deletions that found no credential (nothing else is refused)."""
    missing: list[tuple[str, int]] = []
    async with db.transaction() as conn:
        for user, mechanism in deletions:
            cur = await conn.execute(
                "DELETE FROM scram_credentials WHERE user_name = %s AND mechanism = %s "
                "RETURNING 1", (user, mechanism))
            if await cur.fetchone() is None:
                missing.append((user, mechanism))
        for (user, mechanism), (salt, iterations, stored_key, server_key) in upserts.items():
            await conn.execute(
                "INSERT INTO scram_credentials (user_name, mechanism, salt, iterations, "
                "stored_key, server_key) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (user_name, mechanism) DO UPDATE SET salt = EXCLUDED.salt, "
                "iterations = EXCLUDED.iterations, stored_key = EXCLUDED.stored_key, "
                "server_key = EXCLUDED.server_key",
                (user, mechanism, salt, iterations, stored_key, server_key))
    return missing
