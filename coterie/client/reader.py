"""`PartitionReader`: read chosen partitions from chosen offsets, with no consumer group.

What an operator's tool needs (`coterie consume --partition`, `coterie groups timeline`
reading `__group_events`): the partitions of a topic, their start and end offsets, and the
records from an offset on, without joining a group or committing anything. `Consumer` is a
group member; this is the assignment side only, over the same pieces (`Leaders` for leaders
and connections, `decode_batches` for the records).

`fetch` sends one Fetch per leader for all the partitions asked (in parallel across
leaders) and answers, per partition, the records, the offset to fetch next and the high
watermark. Leadership errors and lost connections are retried against the leader looked up
again until the timeout; OFFSET_OUT_OF_RANGE and other errors are raised as BrokerError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coterie.client.cluster import Cluster
from coterie.client.errors import BrokerConnectionError, BrokerError, ClientError
from coterie.client.leaders import DATA_API_RANGES, RETRIABLE, TP, Leaders, UnknownTopicError
from coterie.client.records import ConsumerRecord, decode_batches
from coterie.client.security import SecuritySettings
from coterie.client.versions import ApiKey

E = ErrorCode
EARLIEST = -2
LATEST = -1

__all__ = ["EARLIEST", "LATEST", "Fetched", "PartitionReader", "UnknownTopicError"]


@dataclass(frozen=True, slots=True)
class Fetched:
    """One partition's share of a fetch."""

    records: list[ConsumerRecord]
    next_offset: int
    high_watermark: int


class PartitionReader:
    """Reads partitions without a group (see the module docstring)."""

    def __init__(self, bootstrap: str | Sequence[str], *,
                 security: SecuritySettings | Mapping[str, object] | None = None,
                 client_id: str = "coterie-reader", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 10_000) -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id, security=security,
                               request_timeout_ms=request_timeout_ms,
                               connect_timeout_ms=connect_timeout_ms,
                               api_ranges=DATA_API_RANGES)
        self.leaders = Leaders(self.cluster, timeout_s=request_timeout_ms / 1000)
        self.request_timeout_ms = request_timeout_ms

    async def __aenter__(self) -> PartitionReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.leaders.close()
        await self.cluster.close()

    async def partitions(self, topic: str) -> list[int]:
        """The topic's partition numbers; UnknownTopicError if there is no such topic."""
        return list(range(await self.leaders.refresh(topic)))

    async def _retrying(self, tps: Sequence[TP], attempt):  # type: ignore[no-untyped-def]
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.leaders.timeout_s
        pause = 0.05
        while True:
            try:
                return await attempt()
            except (BrokerConnectionError, BrokerError) as e:
                if isinstance(e, BrokerError) and e.error_code not in RETRIABLE:
                    raise
                if loop.time() + pause > give_up:
                    raise
                for tp in tps:
                    self.leaders.forget(tp)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

    async def _by_leader(self, tps: Sequence[TP]) -> dict[int, list[TP]]:
        out: dict[int, list[TP]] = {}
        for tp in tps:
            out.setdefault(await self.leaders.leader(tp), []).append(tp)
        return out

    # -- offsets ------------------------------------------------------------------------------
    async def offsets(self, tps: Sequence[TP], timestamp: int) -> dict[TP, int]:
        """ListOffsets per partition: EARLIEST (log start), LATEST (end offset) or a
        timestamp in ms (the first offset at or after it; -1 when there is none)."""
        return await self._retrying(tps, lambda: self._offsets(tps, timestamp))

    async def _offsets(self, tps: Sequence[TP], timestamp: int) -> dict[TP, int]:
        out: dict[TP, int] = {}
        for node, group in (await self._by_leader(tps)).items():
            conn = await self.leaders.connection(node)
            topics: dict[str, list[int]] = {}
            for topic, partition in group:
                topics.setdefault(topic, []).append(partition)
            response = await conn.call(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": t, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                    for p in ps]} for t, ps in topics.items()]})
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code != E.none:
                        raise BrokerError(p.error_code, "ListOffsets",
                                          f"{topic.name}-{p.partition_index}")
                    out[(topic.name, int(p.partition_index))] = int(p.offset)
        return out

    # -- records ------------------------------------------------------------------------------
    async def fetch(self, positions: Mapping[TP, int], *, max_wait_ms: int = 500,
                    partition_max_bytes: int = 1024 * 1024) -> dict[TP, Fetched]:
        """The records of each partition from its position (one Fetch per leader)."""
        tps = list(positions)
        return await self._retrying(
            tps, lambda: self._fetch(positions, max_wait_ms, partition_max_bytes))

    async def _fetch(self, positions: Mapping[TP, int], max_wait_ms: int,
                     max_bytes: int) -> dict[TP, Fetched]:
        groups = await self._by_leader(list(positions))
        answers = await asyncio.gather(*(
            self._fetch_at(node, {tp: positions[tp] for tp in group}, max_wait_ms, max_bytes)
            for node, group in groups.items()))
        out: dict[TP, Fetched] = {}
        for answer in answers:
            out.update(answer)
        return out

    async def _fetch_at(self, node: int, positions: Mapping[TP, int], max_wait_ms: int,
                        max_bytes: int) -> dict[TP, Fetched]:
        conn = await self.leaders.connection(node)
        topics: dict[str, list[int]] = {}
        for topic, partition in positions:
            topics.setdefault(topic, []).append(partition)
        response = await conn.call(ApiKey.FETCH, {
            "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1,
            "max_bytes": max_bytes * max(1, len(positions)), "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": [{
                "partition": p, "current_leader_epoch": -1,
                "fetch_offset": positions[(t, p)], "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": max_bytes} for p in ps]}
                for t, ps in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""},
            timeout_ms=self.request_timeout_ms + max_wait_ms)
        top = getattr(response, "error_code", E.none)
        if top != E.none:
            raise BrokerError(top, "Fetch", f"node {node}")
        out: dict[TP, Fetched] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, int(p.partition_index))
                if tp not in positions:
                    continue
                if p.error_code != E.none:
                    raise BrokerError(p.error_code, "Fetch", f"{tp[0]}-{tp[1]}")
                decoded = decode_batches(p.records, tp[0], tp[1], positions[tp])
                out[tp] = Fetched(decoded.records, decoded.next_offset, int(p.high_watermark))
        missing = [tp for tp in positions if tp not in out]
        if missing:
            raise ClientError(f"the Fetch answer left out {missing}")
        return out
