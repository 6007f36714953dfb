"""Which fetched batches a read_committed share group must never deliver: the data batches
of aborted transactions (`share.isolation.level=read_committed`, Kafka 4.2).

Why here: a ShareFetch answer has no aborted-transactions field (a Fetch answer has), so a
share consumer cannot drop an aborted batch itself. Kafka's SharePartition therefore
archives, at acquisition, every fetched batch of an aborted transaction and leaves it out of
the acquired ranges; coterie's `SharePartition.acquire` does the same with the ranges this
module finds. Transaction markers (control batches) are not among them: they are acquired
like any offset without a record, and the client acknowledges them as GAP, as on Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["AbortedTransaction", "FetchedBatch", "aborted_batches"]


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """The header facts of one fetched batch that decide whether it was aborted."""

    first_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """One aborted transaction of the partition: its producer, its first offset and the
    offset of its ABORT marker (the log's aborted-transaction index has all three)."""

    producer_id: int
    first_offset: int
    marker_offset: int


def aborted_batches(batches: Iterable[FetchedBatch],
                    aborted: Sequence[AbortedTransaction]) -> list[tuple[int, int]]:
    """(first, last) offsets of each transactional data batch that an aborted transaction of
    its producer holds (from the transaction's first offset to before its marker), in the
    order of `batches`."""
    by_producer: dict[int, list[AbortedTransaction]] = {}
    for txn in aborted:
        by_producer.setdefault(txn.producer_id, []).append(txn)
    out = []
    for b in batches:
        if b.control or not b.transactional:
            continue
        for txn in by_producer.get(b.producer_id, ()):
            if txn.first_offset <= b.first_offset and b.last_offset < txn.marker_offset:
                out.append((b.first_offset, b.last_offset))
                break
    return out
