"""`Producer`: a small asyncio producer (what `coterie produce` sends with).

    async with Producer("127.0.0.1:9092", acks=-1) as producer:
        await producer.send("orders", b"value", key=b"k", headers=[("h", b"v")])
        await producer.flush()

Records are buffered per partition and sent as one v2 record batch (kio's writer,
uncompressed, CreateTime timestamps) in one Produce to the partition's leader when the
batch reaches `batch_bytes`, and on `flush()`. Partitioning as Kafka's default partitioner:
an explicit partition wins; a keyed record goes to murmur2(key) mod partitions
(`coterie.common.partitioning.default_partition`, where Java clients put it); records
without a key fill one partition's batch, then the next (sticky, as Kafka's producer).

acks: -1 ("all", the default), 1 (the leader) or 0 (no answer: the batch is written to the
socket and counted as sent, offsets are unknown). Not idempotent, no transactions: a batch
whose leader moved or whose connection broke is sent again to the new leader until the
request timeout, so it may be written twice (at-least-once, as the Spark sink, which shares
the partitioner). Errors that resending cannot fix are raised as BrokerError.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAwareMicros

from coterie.client.cluster import Cluster
from coterie.client.errors import BrokerConnectionError, BrokerError, ClientError
from coterie.client.leaders import DATA_API_RANGES, RETRIABLE, TP, Leaders, UnknownTopicError
from coterie.client.security import SecuritySettings
from coterie.client.versions import ApiKey
from coterie.wire.batch_builder import BatchBuilder

E = ErrorCode
ACKS = (-1, 0, 1)

__all__ = ["ACKS", "Producer", "Sent", "UnknownTopicError"]


@dataclass(frozen=True, slots=True)
class Sent:
    """One acknowledged batch: where it went and its first offset (-1 with acks=0)."""

    topic: str
    partition: int
    base_offset: int
    count: int


class Producer:
    """Buffers records per partition and produces them as record batches."""

    def __init__(self, bootstrap: str | Sequence[str], *, acks: int = -1,
                 client_id: str = "coterie-producer", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 10_000, batch_bytes: int = 256 * 1024,
                 security: SecuritySettings | Mapping[str, object] | None = None) -> None:
        if acks not in ACKS:
            raise ValueError(f"acks must be one of {ACKS}, not {acks!r}")
        self.acks = acks
        self.batches = BatchBuilder(batch_bytes)
        self.request_timeout_ms = request_timeout_ms
        self.cluster = Cluster(bootstrap, client_id=client_id, security=security,
                               request_timeout_ms=request_timeout_ms,
                               connect_timeout_ms=connect_timeout_ms,
                               api_ranges=DATA_API_RANGES)
        self.leaders = Leaders(self.cluster, timeout_s=request_timeout_ms / 1000)
        self.sent: list[Sent] = []

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        try:
            if exc_type is None:
                await self.flush()
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the connections (records not flushed are dropped)."""
        self.batches.clear()
        await self.leaders.close()
        await self.cluster.close()

    async def partition_count(self, topic: str) -> int:
        """The topic's partitions; UnknownTopicError if it does not exist."""
        return await self.leaders.partition_count(topic)

    async def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                   headers: Iterable[tuple[str, bytes | None]] = (),
                   partition: int | None = None) -> TP:
        """Buffer one record (sending its partition's batch once it is full); returns the
        partition it goes to."""
        count = await self.leaders.partition_count(topic)
        if partition is None:
            partition = self.batches.partition_for(topic, key, count)
        elif not 0 <= partition < count:
            raise ClientError(f"topic {topic!r} has {count} partition(s); there is no "
                              f"partition {partition}")
        tp = (topic, partition)
        if self.batches.add(tp, key, value, headers, _now()):
            await self._flush(tp)
        return tp

    @property
    def buffered(self) -> int:
        return self.batches.buffered

    async def flush(self) -> None:
        """Send every buffered batch (in parallel) and wait for the acknowledgements."""
        await asyncio.gather(*(self._flush(tp) for tp in self.batches.waiting()))

    async def _flush(self, tp: TP) -> None:
        taken = self.batches.take(tp)
        if taken is None:
            return
        batch, count = taken
        base = await self._produce(tp, batch)
        self.sent.append(Sent(tp[0], tp[1], base, count))

    async def _produce(self, tp: TP, batch: bytes) -> int:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.request_timeout_ms / 1000
        pause = 0.05
        while True:
            try:
                return await self._produce_once(tp, batch)
            except (BrokerConnectionError, BrokerError) as e:
                if isinstance(e, BrokerError) and e.error_code not in RETRIABLE:
                    raise
                if loop.time() + pause > give_up:
                    raise
                self.leaders.forget(tp)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

    async def _produce_once(self, tp: TP, batch: bytes) -> int:
        conn = await self.leaders.connection(await self.leaders.leader(tp))
        fields = {"transactional_id": None, "acks": self.acks,
                  "timeout": self.request_timeout_ms,
                  "topic_data": [{"name": tp[0], "partition_data": [
                      {"index": tp[1], "records": batch}]}]}
        if self.acks == 0:
            await conn.call_no_response(ApiKey.PRODUCE, fields)
            return -1
        response = await conn.call(ApiKey.PRODUCE, fields)
        for topic in response.responses:
            for p in topic.partition_responses:
                if p.error_code != E.none:
                    message = getattr(p, "error_message", None) or f"{tp[0]}-{tp[1]}"
                    raise BrokerError(p.error_code, "Produce", message)
                return int(p.base_offset)
        raise BrokerError(E.unknown_server_error, "Produce", f"no answer for {tp[0]}-{tp[1]}")


def _now() -> TZAwareMicros:
    return TZAwareMicros.parse(datetime.datetime.now(datetime.UTC))
