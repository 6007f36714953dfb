"""The cluster id of every broker on one database.

Why in the database: clients compare the cluster id of the brokers they talk to (a client
that finds another id thinks it reached a different cluster), so every broker of a cluster
must answer the same one, and it must outlive every broker. The first broker to start writes
the id it proposes; every later one reads that.
"""

from __future__ import annotations

from coterie.storage.database import Database

__all__ = ["cluster_id"]


async def cluster_id(db: Database, proposed: str) -> str:
    """The database's cluster id, `proposed` if it had none yet."""
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO cluster (cluster_id) VALUES (%s) "
                           "ON CONFLICT (singleton) DO NOTHING", (proposed,))
        cur = await conn.execute("SELECT cluster_id FROM cluster")
        row = await cur.fetchone()
    assert row is not None
    return str(row[0])
