"""`coterie topics ...`: list, describe, create, delete and alter topics.

Names and options follow `kafka-topics` (`--partitions`, `--replication-factor`, `--config
KEY=VALUE`) and, for configs, `kafka-configs` (`--add-config`, `--delete-config`). `describe`
shows what `kafka-topics --describe` shows (partitions, leader, replicas, ISR, the configs set
on the topic) plus each partition's size on disk.
"""

from __future__ import annotations

from typing import Any

import click

from coterie.admin.client import AdminClient, AdminError
from coterie.admin.topics import (
    TopicDescription,
    add_partitions,
    alter_topic_configs,
    create_topic,
    delete_topics,
    describe_topics,
    list_topics,
)
from coterie.cli.connect import Connection, cluster_options, output_option
from coterie.cli.render import emit_json, line, table

PARTITION_COLUMNS = ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "SIZE")


@click.group(short_help="List, describe, create, delete and alter topics.")
def topics() -> None:
    """Topics: list, describe, create, delete, alter.

    Exit codes: 0 done; 1 the cluster said no or could not be reached (message on stderr);
    2 a usage error."""


def _key_values(items: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=option)
        out[key.strip()] = value.strip()
    return out


def _ids(nodes: tuple[int, ...]) -> str:
    return ",".join(map(str, nodes))


def topic_document(t: TopicDescription, all_configs: bool = False) -> dict[str, Any]:
    return {
        "topic": t.name, "topic_id": str(t.topic_id) if t.topic_id else None,
        "internal": t.internal, "partition_count": len(t.partitions),
        "replication_factor": t.replication_factor, "size": t.size,
        "partitions": [{"partition": p.partition, "leader": p.leader,
                        "replicas": list(p.replicas), "isr": list(p.isr), "size": p.size}
                       for p in t.partitions],
        "configs": {c.name: (None if c.sensitive else c.value) for c in t.configs
                    if all_configs or c.is_topic_override},
    }


@topics.command("list")
@cluster_options
@output_option
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
def list_command(connection: Connection, output: str, exclude_internal: bool) -> None:
    """Every topic, with its partition count and replication factor."""
    found = connection.run(lambda admin: list_topics(admin,
                                                     include_internal=not exclude_internal))
    if output == "json":
        emit_json([{"topic": t.name, "partition_count": len(t.partitions),
                    "replication_factor": t.replication_factor, "internal": t.internal}
                   for t in found])
    else:
        table(("TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"),
              [(t.name, len(t.partitions), t.replication_factor, "yes" if t.internal else "")
               for t in found])


@topics.command("describe")
@click.argument("names", metavar="[TOPIC]...", nargs=-1)
@cluster_options
@output_option
@click.option("--all-configs", is_flag=True, help="Every config, not only those set on it.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
def describe_command(names: tuple[str, ...], connection: Connection, output: str,
                     all_configs: bool, exclude_internal: bool) -> None:
    """Topics (all without names): partitions, leaders, replicas, ISR, configs, sizes."""
    found = connection.run(lambda admin: describe_topics(
        admin, list(names) or None, include_internal=not exclude_internal))
    if output == "json":
        emit_json([topic_document(t, all_configs) for t in found])
        return
    for t in found:
        configs = ",".join(f"{c.name}={'<sensitive>' if c.sensitive else c.value}"
                           for c in t.configs if all_configs or c.is_topic_override)
        line(f"Topic: {t.name}\tTopicId: {t.topic_id or '-'}\tPartitionCount: "
             f"{len(t.partitions)}\tReplicationFactor: {t.replication_factor}\tSize: "
             f"{t.size if t.size is not None else '-'}\tConfigs: {configs}")
        table(PARTITION_COLUMNS, [(t.name, p.partition, p.leader, _ids(p.replicas),
                                   _ids(p.isr), p.size) for p in t.partitions])


@topics.command("create")
@click.argument("name")
@cluster_options
@click.option("--partitions", type=click.IntRange(min=1), default=None,
              help="Partition count (default: the broker's num.partitions).")
@click.option("--replication-factor", type=click.IntRange(min=1), default=None,
              help="Replicas per partition (default: the broker's default).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="A topic config (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic exists already.")
def create_command(name: str, connection: Connection, partitions: int | None,
                   replication_factor: int | None, configs: tuple[str, ...],
                   if_not_exists: bool) -> None:
    """Create a topic."""
    settings = _key_values(configs, "--config")

    async def work(admin: AdminClient) -> bool:
        try:
            await create_topic(admin, name, partitions or -1, replication_factor or -1,
                               settings)
        except AdminError as e:
            if if_not_exists and str(e).endswith("already exists"):
                return False
            raise
        return True

    if connection.run(work):
        click.echo(f"Created topic {name}.")


@topics.command("delete")
@click.argument("names", metavar="TOPIC...", nargs=-1, required=True)
@cluster_options
@click.option("--if-exists", is_flag=True, help="Succeed if a topic does not exist.")
def delete_command(names: tuple[str, ...], connection: Connection, if_exists: bool) -> None:
    """Delete topics."""
    async def work(admin: AdminClient) -> list[str]:
        wanted = list(names)
        if if_exists:
            known = {t.name for t in await list_topics(admin)}
            wanted = [n for n in wanted if n in known]
        if wanted:
            await delete_topics(admin, wanted)
        return wanted

    for name in connection.run(work):
        click.echo(f"Deleted topic {name}.")


@topics.command("alter")
@click.argument("name")
@cluster_options
@click.option("--partitions", type=click.IntRange(min=1), default=None,
              help="Grow the topic to this many partitions.")
@click.option("--add-config", "add_configs", multiple=True, metavar="KEY=VALUE",
              help="Set a topic config (repeatable).")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="KEY",
              help="Remove a topic config: back to the default (repeatable).")
def alter_command(name: str, connection: Connection, partitions: int | None,
                  add_configs: tuple[str, ...], delete_configs: tuple[str, ...]) -> None:
    """Add partitions to a topic, or set and remove its configs."""
    settings = _key_values(add_configs, "--add-config")
    if partitions is None and not settings and not delete_configs:
        raise click.UsageError("nothing to alter: give --partitions, --add-config or "
                               "--delete-config")

    async def work(admin: AdminClient) -> None:
        if settings or delete_configs:
            await alter_topic_configs(admin, name, set_configs=settings,
                                      delete_configs=delete_configs)
        if partitions is not None:
            await add_partitions(admin, name, partitions)

    connection.run(work)
    click.echo(f"Altered topic {name}.")
