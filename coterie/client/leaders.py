"""Partition leaders and one connection per leader, for the data-plane clients that are not a
group member: the producer (`coterie.client.producer`) and the partition reader
(`coterie.client.reader`).

A Produce or a Fetch must go to the partition's leader. `Leaders` asks Metadata for a topic
once, remembers each partition's leader and keeps one dedicated connection per leader (not
the cluster's shared one, so a long-polled Fetch never holds back another request). After a
leadership error or a lost connection the caller `forget`s the partition: the next call
looks its leader up again, as Kafka's clients do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from coterie.client.cluster import Cluster
from coterie.client.connection import Connection
from coterie.client.consumer import CONSUMER_API_RANGES
from coterie.client.errors import BrokerError, ClientError
from coterie.client.versions import ApiKey, VersionRange

E = ErrorCode
TP = tuple[str, int]

#: What the consumer speaks, plus Produce v3 to v12 (v3: record batches; v12 is the last
#: version that names topics rather than topic ids).
DATA_API_RANGES: Mapping[int, VersionRange] = {**CONSUMER_API_RANGES, ApiKey.PRODUCE: (3, 12)}

# Errors after which a request is sent again to the partition's leader, looked up anew.
RETRIABLE = frozenset({E.not_leader_or_follower, E.leader_not_available, E.request_timed_out,
                       E.not_enough_replicas, E.not_enough_replicas_after_append,
                       E.kafka_storage_error, E.fenced_leader_epoch, E.unknown_leader_epoch,
                       E.network_exception, E.unknown_topic_or_partition})


class UnknownTopicError(ClientError):
    """The topic does not exist (or this principal may not see it)."""


class Leaders:
    """Each partition's leader and one connection per leader (see the module docstring)."""

    def __init__(self, cluster: Cluster, *, timeout_s: float = 30.0) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._partitions: dict[str, int] = {}
        self._leaders: dict[TP, int] = {}
        self._conns: dict[int, Connection] = {}

    def deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.timeout_s

    async def refresh(self, topic: str) -> int:
        """Look the topic's partitions and leaders up again; returns the partition count.
        A topic whose leaders are being elected is asked again until the timeout."""
        deadline = self.deadline()
        while True:
            md = await self.cluster.metadata([topic], deadline=deadline)
            info = md.topics.get(topic)
            if info is None or info.error == E.unknown_topic_or_partition:
                raise UnknownTopicError(f"unknown topic {topic!r}")
            if info.error == E.leader_not_available or (
                    info.error == E.none and any(p.leader_id < 0 for p in info.partitions)):
                if asyncio.get_running_loop().time() >= deadline:
                    raise BrokerError(E.leader_not_available, "Metadata", topic)
                await asyncio.sleep(0.1)
                continue
            if info.error != E.none:
                raise BrokerError(info.error, "Metadata", topic)
            for p in info.partitions:
                self._leaders[(topic, p.partition)] = p.leader_id
            self._partitions[topic] = len(info.partitions)
            return len(info.partitions)

    async def partition_count(self, topic: str) -> int:
        count = self._partitions.get(topic)
        return count if count is not None else await self.refresh(topic)

    async def leader(self, tp: TP) -> int:
        leader = self._leaders.get(tp)
        if leader is None:
            count = await self.refresh(tp[0])
            if not 0 <= tp[1] < count:
                raise ClientError(f"topic {tp[0]!r} has {count} partition(s); there is no "
                                  f"partition {tp[1]}")
            leader = self._leaders[tp]
        return leader

    async def connection(self, node_id: int) -> Connection:
        conn = self._conns.get(node_id)
        if conn is None or conn.closed:
            node = self.cluster.brokers.get(node_id)
            if node is None:
                raise ClientError(f"broker {node_id} is not in the cluster's metadata")
            conn = await self.cluster.open(node.host, node.port)
            self._conns[node_id] = conn
        return conn

    def forget(self, tp: TP) -> None:
        """After an error: look the partition's leader up again, on a new connection."""
        leader = self._leaders.pop(tp, None)
        conn = self._conns.pop(leader, None) if leader is not None else None
        if conn is not None:
            conn.close("dropped after an error")

    async def close(self) -> None:
        for conn in self._conns.values():
            with contextlib.suppress(Exception):
                await conn.aclose()
        self._conns.clear()
