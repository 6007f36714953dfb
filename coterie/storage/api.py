"""The storage seam for partition logs, as the broker will use it, and the values it speaks in.

Why a Protocol: the broker must serve a partition the same way whether its batches live in
segment files on this machine (coterie.log, one broker) or in PostgreSQL (several brokers).
Writing down what the broker needs from a partition log, and nothing more, is what lets the
two implementations sit behind one interface and be tested against the same scenarios. The
local file log keeps its synchronous API; an adapter (to come, with the broker's rewiring)
fits it to this asynchronous one, holding a lease that never expires.

Every write names the `Lease` it is conditional on. On PostgreSQL that is the fencing rule of
issue 24: the write happens, in the same database transaction, only if the writer still holds
the lease at that epoch; otherwise `LeaseLost` and nothing is written. The lease's epoch is
the partition's leader epoch, stamped into each stored batch.

Offsets and bytes follow Kafka: a batch is stored as the producer's v2 record-batch bytes with
only baseOffset and partitionLeaderEpoch rewritten (both outside the CRC), and a read returns
whole batches from the one holding the offset asked for.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from coterie.log.record_scan import OffsetAndTimestamp

__all__ = [
    "Append",
    "Appended",
    "Lease",
    "OffsetAndTimestamp",
    "PartitionLogStore",
    "Resource",
    "Retention",
    "TopicIdPartition",
]


class TopicIdPartition(NamedTuple):
    """A partition by topic id (a topic's name can be reused after deletion; its id not)."""

    topic_id: uuid.UUID
    partition: int

    def __str__(self) -> str:
        return f"{self.topic_id}-{self.partition}"


class Resource(NamedTuple):
    """What a lease is on: a kind ("partition", "group-shard", "txn-shard", ...) and a name
    unique within the kind."""

    kind: str
    name: str

    @classmethod
    def partition(cls, tp: TopicIdPartition) -> Resource:
        """The lease of a partition's leadership (its epoch is the leader epoch)."""
        return cls("partition", str(tp))

    @classmethod
    def group_shard(cls, shard: int) -> Resource:
        """The lease of one group coordinator shard (a `__consumer_offsets` partition)."""
        return cls("group-shard", str(shard))

    @classmethod
    def txn_shard(cls, shard: int) -> Resource:
        """The lease of one transaction coordinator shard (a `__transaction_state`
        partition)."""
        return cls("txn-shard", str(shard))

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class Lease:
    """A held lease: the proof a write presents. `epoch` grows with every new tenure, so a
    write carrying an older epoch is refused even when its owner took the lease back."""

    resource: Resource
    owner: int  # the node.id of the broker holding it
    epoch: int


@dataclass(frozen=True, slots=True)
class Append:
    """One partition's share of a group commit: its batches and the lease they rely on."""

    tp: TopicIdPartition
    records: bytes | bytearray | memoryview  # one or more complete v2 record batches
    lease: Lease
    # The offset the writer numbered the first batch with (a broker writing through from its
    # own copy of the partition): the append is refused (Diverged) unless the stored log
    # ends exactly there. None: numbered at whatever the log end is.
    expected_offset: int | None = None


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append answers (Produce's baseOffset and the span it took)."""

    first_offset: int
    last_offset: int
    record_count: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class Retention:
    """A partition's deletion policy (retention.ms and retention.bytes; -1 keeps forever)."""

    retention_ms: int = -1
    retention_bytes: int = -1


@runtime_checkable
class PartitionLogStore(Protocol):
    """A store of partition logs: what the broker needs of each partition it leads or reads.

    All offsets are Kafka's. The log holds [log start offset, log end offset); reads and
    lookups never see below the log start, even where a stored batch straddles it.
    """

    async def append(self, tp: TopicIdPartition, records: bytes | bytearray | memoryview,
                     lease: Lease) -> Appended:
        """Store `records` (one or more v2 batches) at the log end, if `lease` is still held;
        raises LeaseLost (nothing written) otherwise."""
        ...

    async def append_many(self, appends: Sequence[Append]) -> list[Appended]:
        """Group commit: several appends (any partitions, the same one more than once, in
        order) stored together, all or nothing: LeaseLost for any lease writes none."""
        ...

    async def read(self, tp: TopicIdPartition, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`, at most `max_bytes` in total but at
        least one batch (KIP-74); b"" at the log end. OffsetOutOfRange outside the log."""
        ...

    async def log_start_offset(self, tp: TopicIdPartition) -> int:
        """The first offset a reader may see."""
        ...

    async def log_end_offset(self, tp: TopicIdPartition) -> int:
        """The next offset to assign (the high watermark: what is stored is committed)."""
        ...

    async def offset_for_timestamp(self, tp: TopicIdPartition,
                                   timestamp: int) -> OffsetAndTimestamp | None:
        """The first record, in offset order, with a timestamp >= `timestamp` (ListOffsets);
        None when there is none."""
        ...

    async def max_timestamp(self, tp: TopicIdPartition) -> OffsetAndTimestamp | None:
        """The first record carrying the log's largest timestamp (ListOffsets -3)."""
        ...

    async def delete_records(self, tp: TopicIdPartition, offset: int, lease: Lease) -> int:
        """DeleteRecords: move the log start up to `offset` and drop the batches wholly below
        it; returns the log start. OffsetOutOfRange above the log end."""
        ...

    async def enforce_retention(self, tp: TopicIdPartition, lease: Lease, policy: Retention,
                                now_ms: int) -> int:
        """Drop the oldest batches that retention.ms / retention.bytes no longer keep;
        returns how many batches went."""
        ...
