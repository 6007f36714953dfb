"""Topics as an operator sees them: list, describe (partitions, leaders, replicas, ISR,
configs, sizes), create, delete, alter configs and add partitions.

Where each fact comes from: partitions, leaders, replicas and ISR from Metadata; configs from
DescribeConfigs (with each value's source, so a caller can show only what was set on the
topic, as `kafka-topics --describe` does); sizes from DescribeLogDirs asked of every broker
(a partition's size is its leader's log, the replicas' being copies). Changes are
CreateTopics, DeleteTopics, IncrementalAlterConfigs (SET and DELETE, never the legacy
AlterConfigs, which would reset every config not named) and CreatePartitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.admin.client import AdminClient, AdminError
from coterie.client.versions import ApiKey

__all__ = ["ConfigEntry", "PartitionInfo", "TopicDescription", "add_partitions",
           "alter_topic_configs", "create_topic", "delete_topics", "describe_topics",
           "list_topics"]

TOPIC_RESOURCE = 2
# DescribeConfigs' config_source values (Kafka's ConfigSource), by name.
CONFIG_SOURCES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    size: int | None = None  # bytes in the leader's log, when DescribeLogDirs answered


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str          # a CONFIG_SOURCES name
    read_only: bool
    sensitive: bool

    @property
    def is_topic_override(self) -> bool:
        """Set on the topic itself (what `kafka-topics --describe` lists)."""
        return self.source == "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    configs: tuple[ConfigEntry, ...] = field(default=())

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    @property
    def size(self) -> int | None:
        sizes = [p.size for p in self.partitions]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


def _check(api: str, name: str, code: ErrorCode, message: str | None = None) -> None:
    if code == ErrorCode.none:
        return
    if code == ErrorCode.unknown_topic_or_partition:
        raise AdminError(f"topic {name!r} does not exist")
    if code == ErrorCode.topic_already_exists:
        raise AdminError(f"topic {name!r} already exists")
    detail = f": {message}" if message else ""
    raise AdminError(f"{api} of topic {name!r} failed with {code.name.upper()}{detail}")


async def list_topics(admin: AdminClient, *, include_internal: bool = True
                      ) -> list[TopicDescription]:
    """Every topic (Metadata), sorted by name, without configs or sizes."""
    admin.start_operation()
    meta = await admin.cluster.metadata(None, deadline=admin.deadline())
    return sorted((_described(t) for t in meta.topics.values()
                   if t.error == ErrorCode.none and (include_internal or not t.is_internal)),
                  key=lambda t: t.name)


def _described(t: Any, sizes: Mapping[tuple[str, int], int] | None = None,
               configs: tuple[ConfigEntry, ...] = ()) -> TopicDescription:
    return TopicDescription(
        t.name, t.topic_id, t.is_internal,
        tuple(PartitionInfo(p.partition, p.leader_id, p.replicas, p.isr,
                            None if sizes is None else sizes.get((t.name, p.partition)))
              for p in t.partitions), configs)


async def topic_configs(admin: AdminClient, names: Iterable[str]
                        ) -> dict[str, tuple[ConfigEntry, ...]]:
    """Every config of each topic, with its source (DescribeConfigs)."""
    names = list(names)
    if not names:
        return {}
    response = await admin.request(ApiKey.DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n,
                       "configuration_keys": None} for n in names],
        "include_synonyms": False, "include_documentation": False})
    out = {}
    for r in response.results:
        _check("DescribeConfigs", r.resource_name, r.error_code, r.error_message)
        out[r.resource_name] = tuple(sorted((ConfigEntry(
            c.name, c.value, CONFIG_SOURCES.get(int(getattr(c, "config_source", 0)), "UNKNOWN"),
            bool(c.read_only), bool(c.is_sensitive)) for c in r.configs),
            key=lambda c: c.name))
    return out


async def partition_sizes(admin: AdminClient, names: Iterable[str]
                          ) -> dict[tuple[str, int], int]:
    """Bytes per partition from DescribeLogDirs on every broker (the largest copy: the
    leader's, unless a follower is ahead of what the leader kept, which only Kafka's
    retention timing can make)."""
    names = list(names)
    meta = await admin.cluster.metadata(names, deadline=admin.deadline())
    wanted = [{"topic": n, "partitions": [p.partition for p in meta.topics[n].partitions]}
              for n in names if n in meta.topics]
    sizes: dict[tuple[str, int], int] = {}
    for node in sorted(meta.brokers.values(), key=lambda n: n.node_id):
        response = await admin.to_node(node, ApiKey.DESCRIBE_LOG_DIRS, {"topics": wanted})
        for result in response.results:
            if result.error_code != ErrorCode.none:
                continue
            for t in result.topics:
                for p in t.partitions:
                    key = (t.name, int(p.partition_index))
                    sizes[key] = max(sizes.get(key, 0), int(p.partition_size))
    return sizes


async def describe_topics(admin: AdminClient, names: Iterable[str] | None = None, *,
                          with_configs: bool = True, with_sizes: bool = True,
                          include_internal: bool = True) -> list[TopicDescription]:
    """The named topics (None: every topic) with partitions, configs and sizes. An unknown
    name raises AdminError."""
    admin.start_operation()
    asked = None if names is None else list(names)
    meta = await admin.cluster.metadata(asked, deadline=admin.deadline())
    for name in asked or ():
        t = meta.topics.get(name)
        _check("Metadata", name, ErrorCode.unknown_topic_or_partition if t is None else t.error)
    topics = sorted((t for t in meta.topics.values() if t.error == ErrorCode.none
                     and (asked is not None or include_internal or not t.is_internal)),
                    key=lambda t: t.name)
    found = [t.name for t in topics]
    configs = await topic_configs(admin, found) if with_configs else {}
    sizes = await partition_sizes(admin, found) if with_sizes and found else None
    return [_described(t, sizes, configs.get(t.name, ())) for t in topics]


async def create_topic(admin: AdminClient, name: str, partitions: int = -1,
                       replication_factor: int = -1,
                       configs: Mapping[str, str] | None = None) -> None:
    """CreateTopics for one topic (-1: the broker's num.partitions / default replication)."""
    admin.start_operation()
    response = await admin.request(ApiKey.CREATE_TOPICS, {
        "topics": [{"name": name, "num_partitions": partitions,
                    "replication_factor": replication_factor, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout": int(admin.timeout_s * 1000), "validate_only": False})
    for t in response.topics:
        _check("CreateTopics", t.name, t.error_code, t.error_message)


async def delete_topics(admin: AdminClient, names: Iterable[str]) -> None:
    """DeleteTopics; the first topic that could not be deleted raises AdminError."""
    admin.start_operation()
    response = await admin.request(ApiKey.DELETE_TOPICS, {
        "topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
        "timeout": int(admin.timeout_s * 1000)})
    for t in response.responses:
        _check("DeleteTopics", t.name or "", t.error_code, t.error_message)


async def alter_topic_configs(admin: AdminClient, name: str, *,
                              set_configs: Mapping[str, str] | None = None,
                              delete_configs: Iterable[str] = ()) -> None:
    """IncrementalAlterConfigs on one topic: SET each of `set_configs`, DELETE (back to the
    default) each of `delete_configs`; nothing else changes."""
    admin.start_operation()
    changes = [{"name": k, "config_operation": SET, "value": v}
               for k, v in (set_configs or {}).items()]
    changes += [{"name": k, "config_operation": DELETE, "value": None} for k in delete_configs]
    response = await admin.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name,
                       "configs": changes}], "validate_only": False})
    for r in response.responses:
        _check("IncrementalAlterConfigs", r.resource_name, r.error_code, r.error_message)


async def add_partitions(admin: AdminClient, name: str, total: int) -> None:
    """CreatePartitions: grow `name` to `total` partitions (Kafka never shrinks a topic)."""
    admin.start_operation()
    response = await admin.request(ApiKey.CREATE_PARTITIONS, {
        "topics": [{"name": name, "count": total, "assignments": None}],
        "timeout": int(admin.timeout_s * 1000), "validate_only": False})
    for r in response.results:
        _check("CreatePartitions", r.name, r.error_code, r.error_message)
