"""A transactional id's state, as Kafka's transaction coordinator keeps it.

One value per transactional id: the producer id and epoch it currently owns, its transaction
timeout, the state of its current transaction and the partitions in it. The states and their
numbers are Kafka's (they are written to `__transaction_state` as the TransactionStatus byte):

    EMPTY 0, ONGOING 1, PREPARE_COMMIT 2, PREPARE_ABORT 3, COMPLETE_COMMIT 4,
    COMPLETE_ABORT 5, DEAD 6, PREPARE_EPOCH_FENCE 7

A transaction goes EMPTY/COMPLETE_* -> ONGOING (first partition added) -> PREPARE_COMMIT or
PREPARE_ABORT (EndTxn, or a timeout: the markers are being written) -> COMPLETE_COMMIT or
COMPLETE_ABORT (every partition has its marker).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

__all__ = ["NO_PRODUCER_ID", "TxnMetadata", "TxnState"]

NO_PRODUCER_ID = -1


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name Kafka's tools show (DescribeTransactions, ListTransactions)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                        TxnState.PREPARE_EPOCH_FENCE)

    @property
    def completed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    txn_start_ms: int = -1
    last_update_ms: int = -1
    # Transactions version 2 (KIP-890 part 2): the version the client's transactions use
    # (2: every EndTxn bumps the epoch), the id a bumped epoch ran out on, and the id the
    # client moves to when the running transaction completes (epochs ran out).
    client_version: int = 0
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID

    def moved(self, now_ms: int, **changes: object) -> TxnMetadata:
        """A copy with `changes` and the update time set."""
        return replace(self, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]
