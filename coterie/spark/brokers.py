"""A blocking facade over `coterie.client` for Spark's synchronous callbacks.

Spark calls a Python data source from plain threads (the driver's planner and streaming
runner processes, the executors' Python workers), one call at a time. `coterie.client` is
asyncio. `Brokers` owns a private event loop and runs each operation to completion on it, so
the data source reuses coterie's own client (Cluster for bootstrap and metadata, Connection
for kio-encoded requests with version negotiation, OffsetClient for group commits) instead
of carrying a second Kafka client. Fetched record batches are handed back still encoded: the
reader decodes them straight into Arrow columns (`coterie.spark.columns`).

A `Brokers` is never pickled: readers and writers open one inside the call that needs it
(`read`, `write`, `latestOffset` ...) and close it when done (the streaming reader keeps its
own for the life of the query, on the driver).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from coterie.client.cluster import Cluster, ClusterMetadata
from coterie.client.commits import OffsetClient
from coterie.client.connection import Connection
from coterie.client.consumer import CONSUMER_API_RANGES
from coterie.client.errors import (
    BrokerConnectionError,
    BrokerError,
    SecuritySettingError,
)
from coterie.client.leaders import UnknownTopicError  # the client's: one error for one fact
from coterie.client.subscription import TopicPartition
from coterie.client.versions import ApiKey, VersionRange
from coterie.spark.options import Connect

T = TypeVar("T")
TP = tuple[str, int]
E = ErrorCode

#: The consumer's ranges plus Produce up to v12 (the last version that names topics).
SPARK_API_RANGES: Mapping[int, VersionRange] = {**CONSUMER_API_RANGES,
                                                ApiKey.PRODUCE: (3, 12)}
# Errors after which a request is sent again to the partition's leader, looked up anew.
RETRIABLE = frozenset({E.not_leader_or_follower, E.leader_not_available, E.request_timed_out,
                       E.not_enough_replicas, E.kafka_storage_error, E.fenced_leader_epoch,
                       E.unknown_leader_epoch, E.network_exception})

EARLIEST_TS = -2
LATEST_TS = -1


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One partition's share of a Fetch answer (its record batches still encoded)."""

    error: ErrorCode
    records: bytes
    high_watermark: int
    log_start_offset: int


class Brokers:
    """Blocking access to a cluster through coterie.client (see the module docstring)."""

    def __init__(self, connect: Connect) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._cluster = Cluster(connect.bootstrap, client_id=connect.client_id,
                                    request_timeout_ms=connect.request_timeout_ms,
                                    api_ranges=SPARK_API_RANGES, security=connect.security)
        except SecuritySettingError as e:
            self._loop.close()
            # The files are read here, on whichever node opens the connection.
            raise SecuritySettingError(f"kafka.{e.setting}", f"{e.problem} (certificate and "
                                       "key paths must exist on the driver and on every "
                                       f"executor; this is {socket.gethostname()})") from e
        self._deadline_s = connect.request_timeout_ms / 1000
        self._conns: dict[int, Connection] = {}
        self._leaders: dict[TP, int] = {}
        self._offset_clients: dict[str, OffsetClient] = {}

    # -- life cycle ---------------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        if self._loop.is_closed():
            return

        async def shut() -> None:
            for client in self._offset_clients.values():
                with contextlib.suppress(Exception):
                    await client.close()
            for conn in self._conns.values():
                with contextlib.suppress(Exception):
                    await conn.aclose()
            await self._cluster.close()

        try:
            self._run(shut())
        finally:
            self._loop.close()

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _deadline(self) -> float:
        return self._loop.time() + self._deadline_s

    def _retrying(self, attempt: Callable[[], Coroutine[Any, Any, T]], tps: list[TP]) -> T:
        """Run `attempt()` until it succeeds, a non-retriable error, or the request timeout:
        after a leader moved (NOT_LEADER_OR_FOLLOWER and its kin) or its broker went away,
        the leaders of `tps` are looked up again, as Kafka's clients do."""
        give_up = self._loop.time() + self._deadline_s
        pause = 0.05
        while True:
            try:
                return self._run(attempt())
            except (BrokerConnectionError, OSError, KeyError, UnknownTopicError,
                    BrokerError) as e:
                if isinstance(e, BrokerError) and e.error_code not in RETRIABLE:
                    raise
                if self._loop.time() + pause > give_up:
                    raise
                for tp in tps:
                    self._forget(tp)
                self._run(asyncio.sleep(pause))
                pause = min(pause * 2, 1.0)

    # -- metadata -----------------------------------------------------------------------------
    def _remember(self, md: ClusterMetadata) -> None:
        for topic in md.topics.values():
            for p in topic.partitions:
                if p.leader_id >= 0:
                    self._leaders[(topic.name, p.partition)] = p.leader_id

    def partitions(self, topics: Iterable[str] | None = None, *,
                   create: bool = False) -> dict[str, list[int]]:
        """Partitions of `topics` (None: every non-internal topic); raises UnknownTopicError
        naming the topics that do not exist (`create`: let the broker auto-create them)."""
        wanted = None if topics is None else sorted(set(topics))
        for _ in range(20):
            md = self._run(self._cluster.metadata(wanted, allow_auto_topic_creation=create,
                                                  deadline=self._deadline()))
            if not any(t.error == E.leader_not_available for t in md.topics.values()):
                break
            self._run(asyncio.sleep(0.1))
        self._remember(md)
        out: dict[str, list[int]] = {}
        missing = []
        for name in wanted if wanted is not None else sorted(md.topics):
            topic = md.topics.get(name)
            if topic is None or topic.error == E.unknown_topic_or_partition:
                missing.append(name)
                continue
            if topic.error != E.none:
                raise BrokerError(topic.error, "Metadata", name)
            if wanted is None and (topic.is_internal or name.startswith("__")):
                continue
            out[name] = [p.partition for p in topic.partitions]
        if missing:
            raise UnknownTopicError(f"unknown topic(s): {', '.join(missing)}")
        return out

    async def _leader_conn(self, tp: TP) -> Connection:
        leader = self._leaders.get(tp)
        if leader is None:
            md = await self._cluster.metadata([tp[0]], deadline=self._deadline())
            self._remember(md)
            leader = self._leaders.get(tp)
            if leader is None:
                raise UnknownTopicError(f"no leader known for {tp[0]}-{tp[1]}")
        conn = self._conns.get(leader)
        if conn is None or conn.closed:
            node = self._cluster.brokers[leader]
            conn = await self._cluster.open(node.host, node.port)
            self._conns[leader] = conn
        return conn

    def _forget(self, tp: TP) -> None:
        leader = self._leaders.pop(tp, None)
        conn = self._conns.pop(leader, None) if leader is not None else None
        if conn is not None:
            conn.close("dropped after an error")

    # -- offsets ------------------------------------------------------------------------------
    def list_offsets(self, tps: Iterable[TP], timestamp: int) -> dict[TP, int]:
        """ListOffsets (EARLIEST_TS: log start, LATEST_TS: high watermark) per partition."""
        wanted = sorted(set(tps))
        return self._retrying(lambda: self._list_offsets(wanted, timestamp), wanted)

    async def _list_offsets(self, tps: list[TP], timestamp: int) -> dict[TP, int]:
        by_leader: dict[int, list[TP]] = {}
        for tp in tps:
            await self._leader_conn(tp)
            by_leader.setdefault(self._leaders[tp], []).append(tp)
        out: dict[TP, int] = {}
        for leader, group in by_leader.items():
            conn = await self._leader_conn(group[0])
            topics: dict[str, list[int]] = {}
            for topic, partition in group:
                topics.setdefault(topic, []).append(partition)
            try:
                response = await conn.call(ApiKey.LIST_OFFSETS, {
                    "replica_id": -1, "isolation_level": 0,
                    "topics": [{"name": t, "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1,
                         "timestamp": timestamp} for p in ps]} for t, ps in topics.items()]})
            except BrokerConnectionError:
                self._forget(group[0])
                raise
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code != E.none:
                        raise BrokerError(p.error_code, "ListOffsets",
                                          f"{topic.name}-{p.partition_index} at node {leader}")
                    out[(topic.name, int(p.partition_index))] = int(p.offset)
        return out

    # -- records ------------------------------------------------------------------------------
    def fetch(self, tp: TP, offset: int, *, max_bytes: int, max_wait_ms: int = 200,
              ) -> FetchResult:
        """One Fetch of one partition from `offset` (the caller decodes the batches)."""
        def once() -> Coroutine[Any, Any, FetchResult]:
            return self._fetch_checked(tp, offset, max_bytes, max_wait_ms)
        return self._retrying(once, [tp])

    async def _fetch_checked(self, tp: TP, offset: int, max_bytes: int,
                             max_wait_ms: int) -> FetchResult:
        result = await self._fetch(tp, offset, max_bytes, max_wait_ms)
        if result.error in RETRIABLE:
            self._forget(tp)
            raise BrokerError(result.error, "Fetch", f"{tp[0]}-{tp[1]}")
        return result

    async def _fetch(self, tp: TP, offset: int, max_bytes: int, max_wait_ms: int,
                     ) -> FetchResult:
        conn = await self._leader_conn(tp)
        try:
            response = await conn.call(ApiKey.FETCH, {
                "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1,
                "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": tp[0], "partitions": [{
                    "partition": tp[1], "current_leader_epoch": -1, "fetch_offset": offset,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""},
                timeout_ms=self._deadline_s * 1000 + max_wait_ms)
        except BrokerConnectionError:
            self._forget(tp)
            raise
        top = getattr(response, "error_code", E.none)
        if top != E.none:
            raise BrokerError(top, "Fetch", f"{tp[0]}-{tp[1]}")
        for topic in response.responses:
            for p in topic.partitions:
                if int(p.partition_index) != tp[1]:
                    continue
                records = bytes(p.records or b"") if p.error_code == E.none else b""
                return FetchResult(p.error_code, records, int(p.high_watermark),
                                   int(getattr(p, "log_start_offset", -1)))
        raise BrokerError(E.unknown_server_error, "Fetch", f"no answer for {tp[0]}-{tp[1]}")

    # -- writing ------------------------------------------------------------------------------
    def produce(self, tp: TP, batch: bytes, *, acks: int, timeout_ms: int = 30_000) -> int:
        """Produce one encoded record batch; returns its base offset. A leader that moved
        or died is looked up again and the batch sent again until the request timeout (so
        a batch may be written twice: the sink is at-least-once)."""
        return self._retrying(lambda: self._produce(tp, batch, acks, timeout_ms), [tp])

    async def _produce(self, tp: TP, batch: bytes, acks: int, timeout_ms: int) -> int:
        conn = await self._leader_conn(tp)
        try:
            response = await conn.call(ApiKey.PRODUCE, {
                "transactional_id": None, "acks": acks, "timeout": timeout_ms,
                "topic_data": [{"name": tp[0], "partition_data": [
                    {"index": tp[1], "records": batch}]}]})
        except BrokerConnectionError:
            self._forget(tp)
            raise
        for topic in response.responses:
            for p in topic.partition_responses:
                if p.error_code != E.none:
                    if p.error_code in (E.not_leader_or_follower,
                                        E.unknown_topic_or_partition):
                        self._forget(tp)
                    raise BrokerError(p.error_code, "Produce", f"{tp[0]}-{tp[1]}")
                return int(p.base_offset)
        raise BrokerError(E.unknown_server_error, "Produce", f"no answer for {tp[0]}-{tp[1]}")

    # -- groups -------------------------------------------------------------------------------
    def commit(self, group_id: str, offsets: Mapping[TP, int]) -> None:
        """A standalone commit (generation -1, no member id): the group needs no members."""
        client = self._offset_clients.get(group_id)
        if client is None:
            client = OffsetClient(self._cluster, group_id,
                                  request_timeout_ms=self._deadline_s * 1000)
            self._offset_clients[group_id] = client
        self._run(client.commit({TopicPartition(*tp): o for tp, o in offsets.items()},
                                generation_id=-1, member_id="", group_instance_id=None))
