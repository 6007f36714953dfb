"""The local file log (coterie.log) behind the storage seam (`api.PartitionLogStore`).

Why an adapter and not a second log: the embedded default stays exactly as it is (segment
files, indexes, recovery, the cleaner, sendfile on fetch), and the seam is what the broker
will be rewired onto for PostgreSQL. Seeing the file log through the same Protocol lets one
set of scenarios (tests/storage/test_log_contract.py) run against both storages, so the two
cannot drift apart on what Kafka's clients see: offsets, the bytes of a read, KIP-74's
"at least one batch", timestamp lookups, DeleteRecords.

One broker owns every partition of its data directory, so a lease here never expires: a
write presents it for its epoch, which is stamped into the batches as their leader epoch, as
the PostgreSQL log does. Retention keeps the file log's own unit, the segment (as Kafka
does), where PostgreSQL drops single batches; both keep what the policy asks for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from coterie.log.batch import validate_batches
from coterie.log.errors import OffsetOutOfRangeError
from coterie.log.manager import LogManager
from coterie.log.partition import PartitionLog
from coterie.log.record_scan import OffsetAndTimestamp
from coterie.storage.api import Append, Appended, Lease, Retention, TopicIdPartition
from coterie.storage.errors import OffsetOutOfRange, UnknownPartition

__all__ = ["FilesLog"]


class FilesLog:
    """`PartitionLogStore` over a `LogManager`'s partitions, found by topic id."""

    def __init__(self, logs: LogManager, clock: Callable[[], int]) -> None:
        self.logs = logs
        self.now_ms = clock

    def _part(self, tp: TopicIdPartition) -> PartitionLog:
        info = self.logs.topic_by_id(tp.topic_id)
        part = None if info is None else self.logs.partition(info.name, tp.partition)
        if part is None:
            raise UnknownPartition(f"no partition {tp}")
        return part

    async def append(self, tp: TopicIdPartition, records: bytes | bytearray | memoryview,
                     lease: Lease) -> Appended:
        part = self._part(tp)
        info = part.append(records, lease.epoch, self.now_ms())
        return Appended(info.first_offset, info.last_offset, info.record_count,
                        part.log_start_offset)

    async def append_many(self, appends: Sequence[Append]) -> list[Appended]:
        # Every partition and every payload is checked before the first write, so a bad one
        # writes nothing (one broker: no lease can be lost in between).
        for a in appends:
            self._part(a.tp)
            validate_batches(a.records)
        return [await self.append(a.tp, a.records, a.lease) for a in appends]

    async def read(self, tp: TopicIdPartition, offset: int, max_bytes: int) -> bytes:
        part = self._part(tp)
        try:
            return part.read(offset, max_bytes)
        except OffsetOutOfRangeError as e:
            raise OffsetOutOfRange(str(e)) from e

    async def log_start_offset(self, tp: TopicIdPartition) -> int:
        return self._part(tp).log_start_offset

    async def log_end_offset(self, tp: TopicIdPartition) -> int:
        return self._part(tp).log_end_offset

    async def offset_for_timestamp(self, tp: TopicIdPartition,
                                   timestamp: int) -> OffsetAndTimestamp | None:
        return self._part(tp).offset_for_timestamp(timestamp)

    async def max_timestamp(self, tp: TopicIdPartition) -> OffsetAndTimestamp | None:
        return self._part(tp).max_timestamp()

    async def delete_records(self, tp: TopicIdPartition, offset: int, lease: Lease) -> int:
        part = self._part(tp)
        try:
            return part.delete_records(offset)
        except OffsetOutOfRangeError as e:
            raise OffsetOutOfRange(str(e)) from e

    async def enforce_retention(self, tp: TopicIdPartition, lease: Lease, policy: Retention,
                                now_ms: int) -> int:
        """Whole segments, never the active one (coterie.log's rule), under `policy`."""
        part = self._part(tp)
        config = part.config
        part.update_config(dataclasses.replace(config, retention_ms=policy.retention_ms,
                                               retention_bytes=policy.retention_bytes))
        try:
            return part.enforce_retention(now_ms)
        finally:
            part.update_config(config)
