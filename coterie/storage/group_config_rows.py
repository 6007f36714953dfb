"""Groups' own configs and the cluster-wide dynamic broker configs as stored for a cluster
(schema version 3): one row per group with any, its whole set as a JSON object; one row for
the cluster's broker configs. Small and read whole: every broker holds all of them
(coterie.broker.group_configs, coterie.broker.dynamic_configs), as Kafka's brokers all hold
the cluster's config records."""

from __future__ import annotations

from collections.abc import Mapping

from psycopg.types.json import Jsonb

from coterie.storage.database import Database

__all__ = ["cluster_broker_configs", "group_configs", "replace_cluster_broker_configs",
           "replace_group_configs"]


async def group_configs(db: Database) -> dict[str, dict[str, str]]:
    """Every group's own configs, by group id."""
    async with db.session() as conn:
        cur = await conn.execute("SELECT group_id, configs FROM group_configs")
        rows = await cur.fetchall()
    return {r[0]: dict(r[1]) for r in rows}


async def replace_group_configs(db: Database, group_id: str,
                                configs: Mapping[str, str]) -> None:
    """Make `configs` the group's whole set (none: the row goes)."""
    async with db.transaction() as conn:
        if not configs:
            await conn.execute("DELETE FROM group_configs WHERE group_id = %s", (group_id,))
            return
        await conn.execute(
            "INSERT INTO group_configs (group_id, configs) VALUES (%s, %s) "
            "ON CONFLICT (group_id) DO UPDATE SET configs = EXCLUDED.configs",
            (group_id, Jsonb(dict(configs))))


async def cluster_broker_configs(db: Database) -> dict[str, str]:
    """The cluster-wide dynamic broker configs (none set: empty)."""
    async with db.session() as conn:
        cur = await conn.execute("SELECT configs FROM cluster_broker_configs")
        row = await cur.fetchone()
    return dict(row[0]) if row else {}


async def replace_cluster_broker_configs(db: Database, configs: Mapping[str, str]) -> None:
    """Make `configs` the whole cluster-wide set."""
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO cluster_broker_configs (singleton, configs) VALUES (true, %s) "
            "ON CONFLICT (singleton) DO UPDATE SET configs = EXCLUDED.configs",
            (Jsonb(dict(configs)),))
