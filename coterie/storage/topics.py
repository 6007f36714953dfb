"""Topic rows and their partitions' rows: what exists, under which id, with which configs.

Why here and this small: a partition's log needs its `partitions` row (the counters an append
advances) before the first batch, and every broker of a cluster must agree on a topic's id
and partition count, so creating a topic is one transaction that writes the topic and all of
its partitions. Configs are the topic-level overrides as Kafka names them (`retention.ms`,
...), kept as a JSON object: they are read whole and validated by coterie.log.config, so a
table of rows per key would buy nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import psycopg
from psycopg.types.json import Jsonb

from coterie.storage.database import Database
from coterie.storage.errors import UnknownTopic

__all__ = ["TopicRow", "alter_topic_configs", "create_partitions", "create_topic",
           "delete_topic", "topic_by_name", "topics"]


@dataclass(frozen=True, slots=True)
class TopicRow:
    """A topic as stored."""

    topic_id: uuid.UUID
    name: str
    partition_count: int
    configs: dict[str, str] = field(default_factory=dict)


async def create_topic(db: Database, name: str, partitions: int,
                       configs: Mapping[str, str] | None = None,
                       topic_id: uuid.UUID | None = None) -> TopicRow:
    """Create a topic and its partitions' rows in one transaction. Raises
    psycopg.errors.UniqueViolation when the name is taken (TOPIC_ALREADY_EXISTS)."""
    if partitions <= 0:
        raise ValueError(f"a topic needs at least one partition, not {partitions}")
    row = TopicRow(topic_id or uuid.uuid4(), name, partitions, dict(configs or {}))
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO topics (topic_id, name, partition_count, configs) "
            "VALUES (%s, %s, %s, %s)",
            (row.topic_id, name, partitions, Jsonb(row.configs)))
        await _insert_partitions(conn, row.topic_id, 0, partitions)
    return row


async def create_partitions(db: Database, topic_id: uuid.UUID, total: int) -> None:
    """CreatePartitions: grow a topic to `total` partitions (never shrinks)."""
    async with db.transaction() as conn:
        cur = await conn.execute(
            "SELECT partition_count FROM topics WHERE topic_id = %s FOR UPDATE", (topic_id,))
        found = await cur.fetchone()
        if found is None:
            raise UnknownTopic(f"no topic with id {topic_id}")
        current = int(found[0])
        if total <= current:
            raise ValueError(f"topic {topic_id} has {current} partitions; cannot go to {total}")
        await conn.execute("UPDATE topics SET partition_count = %s WHERE topic_id = %s",
                           (total, topic_id))
        await _insert_partitions(conn, topic_id, current, total)


async def alter_topic_configs(db: Database, topic_id: uuid.UUID,
                              configs: Mapping[str, str]) -> None:
    """AlterConfigs of a topic: its whole set of overrides replaced. UnknownTopic if the
    topic is gone."""
    async with db.transaction() as conn:
        cur = await conn.execute("UPDATE topics SET configs = %s WHERE topic_id = %s",
                                 (Jsonb(dict(configs)), topic_id))
        if cur.rowcount == 0:
            raise UnknownTopic(f"no topic with id {topic_id}")


async def _insert_partitions(conn: psycopg.AsyncConnection, topic_id: uuid.UUID,
                             first: int, end: int) -> None:
    await conn.execute(
        "INSERT INTO partitions (topic_id, partition) "
        "SELECT %s, p FROM generate_series(%s::integer, %s::integer - 1) AS p",
        (topic_id, first, end))


async def topic_by_name(db: Database, name: str) -> TopicRow:
    """The topic called `name`; UnknownTopic if none."""
    async with db.session() as conn:
        cur = await conn.execute(
            "SELECT topic_id, name, partition_count, configs FROM topics WHERE name = %s",
            (name,))
        found = await cur.fetchone()
    if found is None:
        raise UnknownTopic(f"no topic named {name!r}")
    return TopicRow(found[0], found[1], found[2], dict(found[3]))


async def topics(db: Database) -> list[TopicRow]:
    """Every topic, by name."""
    async with db.session() as conn:
        cur = await conn.execute(
            "SELECT topic_id, name, partition_count, configs FROM topics ORDER BY name")
        rows = await cur.fetchall()
    return [TopicRow(r[0], r[1], r[2], dict(r[3])) for r in rows]


async def delete_topic(db: Database, topic_id: uuid.UUID) -> bool:
    """Delete a topic with its partitions and batches; False if there was none."""
    async with db.transaction() as conn:
        cur = await conn.execute("DELETE FROM topics WHERE topic_id = %s", (topic_id,))
        return cur.rowcount > 0
