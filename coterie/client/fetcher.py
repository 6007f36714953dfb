"""The consumer's fetch loop: positions from committed offsets or the reset policy, then Fetch
requests to each partition's leader, their records into the partition buffers.

Theory of operation. One task (`run`) loops:

    1. resolve positions: OffsetFetch for newly assigned partitions (committed offset ->
       position); the rest get the reset policy, resolved with ListOffsets at the leader;
    2. group the fetchable partitions (position known, not paused, not being revoked, buffer
       empty) by leader and start one Fetch per leader that has none in flight;
    3. sleep until something changes: a fetch completes, the consumer wakes it (assignment
       changed, the user drained a buffer, seeked, resumed) or a back-off timer expires.

Each leader gets two dedicated connections: one for Fetch (a long poll that parks up to
`fetch_max_wait_ms` on the broker and would hold back anything queued behind it) and one for
ListOffsets. Fetches are full fetches (no KIP-227 fetch sessions), from Fetch v4 to v12 (the
last version that names topics; v13+ would need topic ids).

A fetch's records are kept only if the partition is still owned by the same state, not being
revoked and still at the offset the fetch was sent for (`Assignment.deliver`). Errors per
partition: OFFSET_OUT_OF_RANGE applies the reset policy (or stops the partition with
OffsetOutOfRangeError under "none"); leadership errors (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, FENCED/UNKNOWN_LEADER_EPOCH, ...) back the partition off and ask
for fresh metadata; undecodable bytes stop the partition with CorruptRecordsError. Errors the
user must see are handed to `on_error`, which the consumer raises from `poll()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.client.backoff import Backoff
from coterie.client.cluster import Cluster, ClusterMetadata, Node
from coterie.client.commits import OffsetClient
from coterie.client.connection import Connection
from coterie.client.errors import (
    BrokerConnectionError,
    BrokerError,
    ClientError,
    CorruptRecordsError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from coterie.client.partition_state import EARLIEST, LATEST, Assignment, PartitionState
from coterie.client.records import RecordDecodeError, decode_batches
from coterie.client.subscription import TopicPartition
from coterie.client.versions import ApiKey

log = logging.getLogger("coterie.client.consumer")

E = ErrorCode
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
LEADERSHIP_ERRORS = frozenset({
    E.not_leader_or_follower, E.unknown_topic_or_partition, E.leader_not_available,
    E.fenced_leader_epoch, E.unknown_leader_epoch, E.kafka_storage_error,
    E.replica_not_available, E.unknown_topic_id, E.offset_not_available,
})
IDLE_WAKEUP_S = 1.0


@dataclass(frozen=True, slots=True)
class FetchSettings:
    auto_offset_reset: str = LATEST
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_partition_fetch_bytes: int = 1024 * 1024
    check_crcs: bool = True
    request_timeout_ms: int = 30_000
    rack: str | None = None


def _by_topic(states: Iterable[PartitionState]) -> dict[str, list[PartitionState]]:
    out: dict[str, list[PartitionState]] = {}
    for ps in states:
        out.setdefault(ps.tp.topic, []).append(ps)
    return out


class Fetcher:
    """Fetches the records of `assignment`'s partitions (see the module docstring)."""

    def __init__(self, cluster: Cluster, assignment: Assignment, offsets: OffsetClient,
                 settings: FetchSettings, *, on_data: Callable[[], None],
                 on_error: Callable[[BaseException], None],
                 request_metadata: Callable[[], None]) -> None:
        self.cluster = cluster
        self.assignment = assignment
        self.offsets = offsets
        self.settings = settings
        self._on_data = on_data
        self._on_error = on_error
        self._request_metadata = request_metadata
        self.leaders: dict[TopicPartition, int] = {}
        self.nodes: dict[int, Node] = {}
        self._conns: dict[tuple[int, str], Connection] = {}
        self._inflight: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._backoff: Backoff = cluster.backoff()  # positions (OffsetFetch, ListOffsets)
        self._fetch_backoff: Backoff = cluster.backoff()  # partitions that failed a fetch
        self._positions_retry_at = 0.0
        self.fetches = 0

    # -- inputs -------------------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def update_metadata(self, md: ClusterMetadata) -> None:
        """Take partition leaders and broker addresses from a Metadata answer."""
        if md.brokers:
            self.nodes.update(md.brokers)
        for topic in md.topics.values():
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition)
                if p.leader_id >= 0:
                    self.leaders[tp] = p.leader_id
                else:
                    self.leaders.pop(tp, None)
        self.wake()

    # -- the loop -----------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                self._wake.clear()
                try:
                    await self._resolve_positions()
                except Exception:  # a bug must not silently end the fetch loop
                    log.exception("resolving positions failed unexpectedly")
                    self._positions_retry_at = loop.time() + self._backoff.next_s()
                now = loop.time()
                self._start_fetches(now)
                waits: set[asyncio.Future[Any]] = set(self._inflight.values())
                waker = asyncio.ensure_future(self._wake.wait())
                waits.add(waker)
                try:
                    await asyncio.wait(waits, timeout=self._sleep_s(now),
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waker.cancel()
                for node_id, task in list(self._inflight.items()):
                    if task.done():
                        del self._inflight[node_id]
                        if not task.cancelled() and task.exception() is not None:
                            log.error("fetch from node %d failed", node_id,
                                      exc_info=task.exception())
        finally:
            for task in self._inflight.values():
                task.cancel()
            for task in self._inflight.values():
                with contextlib.suppress(BaseException):
                    await task
            self._inflight.clear()

    def _sleep_s(self, now: float) -> float:
        timers = [ps.retry_at for ps in self.assignment.parts.values() if ps.retry_at > now]
        if self._positions_retry_at > now:
            timers.append(self._positions_retry_at)
        return max(0.0, min(timers) - now) if timers else IDLE_WAKEUP_S

    def _start_fetches(self, now: float) -> None:
        by_node: dict[int, list[PartitionState]] = {}
        missing = False
        for ps in self.assignment.fetchable(now):
            leader = self.leaders.get(ps.tp)
            if leader is None or leader not in self.nodes:
                missing = True
                continue
            by_node.setdefault(leader, []).append(ps)
        if missing:
            self._request_metadata()
        for node_id, parts in by_node.items():
            if node_id not in self._inflight:
                self._inflight[node_id] = asyncio.create_task(
                    self._fetch(node_id, parts), name=f"coterie-fetch-{node_id}")

    # -- connections --------------------------------------------------------------------------
    async def _connection(self, node_id: int, role: str) -> Connection:
        key = (node_id, role)
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        node = self.nodes[node_id]
        conn = await self.cluster.open(node.host, node.port)
        self._conns[key] = conn
        return conn

    def _drop(self, node_id: int, role: str, reason: str) -> None:
        conn = self._conns.pop((node_id, role), None)
        if conn is not None:
            conn.close(reason)

    # -- positions ----------------------------------------------------------------------------
    async def _resolve_positions(self) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() < self._positions_retry_at:
            return
        try:
            await self._fetch_committed()
            await self._apply_resets()
        except ClientError as e:
            delay = self._backoff.next_s()
            log.info("resolving positions failed (%s); retrying in %.0f ms", e, delay * 1000)
            self._positions_retry_at = loop.time() + delay
            return
        self._backoff.reset()

    async def _fetch_committed(self) -> None:
        todo = [ps for ps in self.assignment.needing_position()
                if not ps.committed_checked and ps.reset is None]
        if not todo:
            return
        committed = await self.offsets.fetch([ps.tp for ps in todo])
        policy = self.settings.auto_offset_reset
        for ps in todo:
            if not self.assignment.is_current(ps) or ps.position is not None:
                continue
            ps.committed_checked = True
            offset = committed.get(ps.tp)
            if offset is not None:
                ps.position = offset
            elif policy in (EARLIEST, LATEST):
                ps.reset = policy
            else:
                ps.error = NoOffsetForPartitionError(
                    f"{ps.tp.topic}-{ps.tp.partition} has no committed offset and "
                    "auto_offset_reset is 'none'")
                self._on_error(ps.error)
        self.wake()

    async def _apply_resets(self) -> None:
        todo = [ps for ps in self.assignment.needing_position() if ps.reset in (EARLIEST,
                                                                                  LATEST)]
        by_node: dict[int, list[PartitionState]] = {}
        for ps in todo:
            leader = self.leaders.get(ps.tp)
            if leader is None or leader not in self.nodes:
                self._request_metadata()
                continue
            by_node.setdefault(leader, []).append(ps)
        for node_id, parts in by_node.items():
            wanted = {ps: ps.reset for ps in parts}
            found = await self.list_offsets_at(node_id, {
                ps.tp: EARLIEST_TIMESTAMP if how == EARLIEST else LATEST_TIMESTAMP
                for ps, how in wanted.items()})
            for ps, how in wanted.items():
                if (self.assignment.is_current(ps) and ps.position is None
                        and ps.reset == how and ps.tp in found):
                    ps.position = found[ps.tp]
                    ps.reset = None
        if todo:
            self.wake()

    async def list_offsets_at(self, node_id: int, timestamps: Mapping[TopicPartition, int],
                              ) -> dict[TopicPartition, int]:
        """ListOffsets at one broker: partition -> offset (partitions that failed are left
        out and the metadata is refreshed)."""
        try:
            conn = await self._connection(node_id, "control")
            response = await conn.call(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": tp.partition, "current_leader_epoch": -1,
                     "timestamp": timestamps[tp]} for tp in tps]}
                    for topic, tps in _group_tps(timestamps).items()],
            })
        except BrokerConnectionError:
            self._drop(node_id, "control", "ListOffsets failed")
            self._request_metadata()
            raise
        out: dict[TopicPartition, int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                if p.error_code == E.none:
                    out[tp] = int(p.offset)
                elif p.error_code in LEADERSHIP_ERRORS:
                    self._request_metadata()
                else:
                    raise BrokerError(p.error_code, "ListOffsets", f"{tp.topic}-{tp.partition}")
        return out

    async def list_offsets(self, timestamps: Mapping[TopicPartition, int],
                           ) -> dict[TopicPartition, int]:
        """ListOffsets for partitions with known leaders, one request per leader."""
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in timestamps.items():
            leader = self.leaders.get(tp)
            if leader is None or leader not in self.nodes:
                raise ClientError(f"no known leader for {tp.topic}-{tp.partition}")
            by_node.setdefault(leader, {})[tp] = ts
        out: dict[TopicPartition, int] = {}
        for node_id, part in by_node.items():
            out.update(await self.list_offsets_at(node_id, part))
        return out

    # -- fetching -----------------------------------------------------------------------------
    async def _fetch(self, node_id: int, parts: list[PartitionState]) -> None:
        loop = asyncio.get_running_loop()
        s = self.settings
        sent = {ps: ps.position for ps in parts}
        by_key = {ps.tp: ps for ps in parts}
        try:
            conn = await self._connection(node_id, "fetch")
            response = await conn.call(ApiKey.FETCH, {
                "replica_id": -1, "max_wait": s.fetch_max_wait_ms,
                "min_bytes": s.fetch_min_bytes, "max_bytes": s.fetch_max_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": ps.tp.partition, "current_leader_epoch": -1,
                     "fetch_offset": sent[ps], "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": s.max_partition_fetch_bytes} for ps in states]}
                    for topic, states in _by_topic(parts).items()],
                "forgotten_topics_data": [], "rack_id": s.rack or "",
            }, timeout_ms=s.request_timeout_ms + s.fetch_max_wait_ms)
        except BrokerConnectionError as e:
            log.info("fetch from node %d failed (%s)", node_id, e)
            self._drop(node_id, "fetch", "fetch failed")
            self._back_off(parts, loop.time())
            self._request_metadata()
            return
        self.fetches += 1
        top = getattr(response, "error_code", E.none)
        if top != E.none:
            log.warning("fetch from node %d answered %s", node_id, top.name)
            self._back_off(parts, loop.time())
            return
        changed = False
        self._fetch_backoff.reset()
        for topic in response.responses:
            for p in topic.partitions:
                ps = by_key.get(TopicPartition(topic.topic, int(p.partition_index)))
                if ps is not None:
                    changed |= self._handle_partition(ps, sent[ps], p, loop.time())
        if changed:
            self._on_data()
        self.wake()

    def _handle_partition(self, ps: PartitionState, offset: int | None, p: Any,
                          now: float) -> bool:
        if offset is None or not self.assignment.is_current(ps) or ps.position != offset:
            return False
        code = p.error_code
        if code == E.none:
            try:
                decoded = decode_batches(p.records, ps.tp.topic, ps.tp.partition, offset,
                                         check_crc=self.settings.check_crcs)
            except RecordDecodeError as e:
                ps.error = CorruptRecordsError(str(e))
                ps.error.__cause__ = e
                self._on_error(ps.error)
                return False
            return self.assignment.deliver(ps, offset, decoded)
        if code == E.offset_out_of_range:
            policy = self.settings.auto_offset_reset
            if policy in (EARLIEST, LATEST):
                log.info("%s-%d: offset %d out of range; resetting to %s", ps.tp.topic,
                         ps.tp.partition, offset, policy)
                ps.position, ps.reset = None, policy
                return True
            ps.error = OffsetOutOfRangeError(
                f"{ps.tp.topic}-{ps.tp.partition}: offset {offset} is out of range and "
                "auto_offset_reset is 'none'")
            self._on_error(ps.error)
            return False
        if code in LEADERSHIP_ERRORS:
            self._request_metadata()
        else:
            log.warning("%s-%d: fetch answered %s", ps.tp.topic, ps.tp.partition, code.name)
        self._back_off([ps], now)
        return False

    def _back_off(self, parts: Iterable[PartitionState], now: float) -> None:
        delay = self._fetch_backoff.next_s()
        for ps in parts:
            ps.retry_at = now + delay

    async def close(self) -> None:
        for conn in list(self._conns.values()):
            with contextlib.suppress(Exception):
                await conn.aclose()
        self._conns.clear()


def _group_tps(tps: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    out: dict[str, list[TopicPartition]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp)
    return out
