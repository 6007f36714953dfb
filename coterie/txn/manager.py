"""The transaction coordinator of one `__transaction_state` partition, as pure state.

Kafka's TransactionCoordinator and TransactionStateManager are the reference for the rules
(transactions version 1, the protocol Kafka 4.x clients use when the broker does not
advertise `transaction.version` 2): every API is `(request values, now_ms) -> TxnResult`,
whose records the broker appends to this shard's partition before it answers, and whose
marker jobs it carries out (a COMMIT or ABORT control batch to every partition of the
transaction), reporting back with `markers_written`. State changes only by `replay`, the
path that also loads the partition after a restart; a result has been applied when it is
returned, and `revert` undoes it if its append failed (the value last made durable comes
back).

Producer ids come from an injected `ProducerIds` (the broker's durable allocator): the one
dependency that is not a value, since an id must never be handed out twice, whichever shard
asks.

Fencing: a new InitProducerId for a transactional id bumps its epoch; a transaction still
open is aborted first with the bumped epoch, so the markers themselves fence the old
producer in every partition, and the caller is told CONCURRENT_TRANSACTIONS (it retries,
and gets the next epoch). A transaction open longer than its timeout is aborted the same way
(`expire_transactions`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from coterie.common.partitioning import partition_for
from coterie.txn.metadata import TxnMetadata, TxnState

__all__ = ["MarkerJob", "ProducerIds", "TxnConfig", "TxnManager", "TxnResult"]

MAX_EPOCH = 32767  # Short.MAX_VALUE
OFFSETS_TOPIC = "__consumer_offsets"


class ProducerIds(Protocol):
    def next_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    offsets_partitions: int = 50  # partitions of __consumer_offsets
    id_expiration_ms: int = 7 * 24 * 3_600_000  # transactional.id.expiration.ms


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write a COMMIT (or ABORT) marker of (producer id, epoch) to each partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]


@dataclass(slots=True)
class TxnResult:
    error: ErrorCode = ErrorCode.none
    producer_id: int = -1
    producer_epoch: int = -1
    records: list[TxnMetadata | str] = field(default_factory=list)  # str: a tombstone
    markers: list[MarkerJob] = field(default_factory=list)


class TxnManager:
    def __init__(self, config: TxnConfig, producer_ids: ProducerIds) -> None:
        self.config = config
        self.producer_ids = producer_ids
        self.txns: dict[str, TxnMetadata] = {}
        self.durable: dict[str, TxnMetadata] = {}

    # == records ===============================================================================
    def replay(self, tid: str, meta: TxnMetadata | None) -> None:
        if meta is None:
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = meta

    def committed(self, records: Iterable[TxnMetadata | str]) -> None:
        """`records` reached the log."""
        for r in records:
            if isinstance(r, str):
                self.durable.pop(r, None)
            else:
                self.durable[r.transactional_id] = r

    def revert(self, records: Iterable[TxnMetadata | str]) -> None:
        """Their append failed: each transactional id goes back to its durable value."""
        for r in records:
            tid = r if isinstance(r, str) else r.transactional_id
            self.replay(tid, self.durable.get(tid))

    def _apply(self, result: TxnResult) -> TxnResult:
        for r in result.records:
            if isinstance(r, str):
                self.replay(r, None)
            else:
                self.replay(r.transactional_id, r)
        return result

    def pending_marker_jobs(self) -> list[MarkerJob]:
        """After loading: the transactions whose markers may not all be written."""
        return [MarkerJob(m.transactional_id, m.producer_id, m.producer_epoch,
                          m.state == TxnState.PREPARE_COMMIT, m.partitions)
                for m in self.txns.values()
                if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]

    # == InitProducerId ========================================================================
    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, epoch: int,
                         now_ms: int) -> TxnResult:
        if not tid:
            return TxnResult(ErrorCode.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return TxnResult(ErrorCode.invalid_transaction_timeout)
        meta = self.txns.get(tid)
        if meta is None:
            fresh = TxnMetadata(tid, self.producer_ids.next_id(), 0, timeout_ms,
                                last_update_ms=now_ms)
            return self._apply(TxnResult(ErrorCode.none, fresh.producer_id, 0, [fresh]))
        if meta.state.preparing:
            return TxnResult(ErrorCode.concurrent_transactions)
        if producer_id != -1:  # KIP-360: the producer says which id and epoch it holds
            if producer_id != meta.producer_id:
                return TxnResult(ErrorCode.invalid_producer_id_mapping)
            if epoch != meta.producer_epoch:
                return TxnResult(ErrorCode.producer_fenced)
        if meta.state == TxnState.ONGOING:
            # Abort the open transaction with a bumped epoch: its markers fence the old
            # producer; the caller retries.
            return self._apply(
                self._abort_fencing(meta, now_ms, ErrorCode.concurrent_transactions))
        pid, new_epoch = self._bumped(meta)
        ready = meta.moved(now_ms, producer_id=pid, producer_epoch=new_epoch,
                           timeout_ms=timeout_ms, state=TxnState.EMPTY,
                           partitions=frozenset(), txn_start_ms=-1)
        return self._apply(TxnResult(ErrorCode.none, pid, new_epoch, [ready]))

    def _bumped(self, meta: TxnMetadata) -> tuple[int, int]:
        if meta.producer_epoch + 1 >= MAX_EPOCH:
            return self.producer_ids.next_id(), 0
        return meta.producer_id, meta.producer_epoch + 1

    def _abort_fencing(self, meta: TxnMetadata, now_ms: int, error: ErrorCode) -> TxnResult:
        """Abort the open transaction under its producer id with the epoch one higher, so
        the markers fence the old producer's late writes. That holds at 32766 too: the
        abort takes 32767 (Kafka's fence does the same) and the InitProducerId that
        follows moves to a new producer id."""
        pid, epoch = meta.producer_id, min(meta.producer_epoch + 1, MAX_EPOCH)
        prepared = meta.moved(now_ms, producer_id=pid, producer_epoch=epoch,
                              state=TxnState.PREPARE_ABORT)
        job = MarkerJob(meta.transactional_id, pid, epoch, False, meta.partitions)
        return TxnResult(error, records=[prepared], markers=[job])

    # == AddPartitionsToTxn / AddOffsetsToTxn ==================================================
    def _check(self, tid: str, producer_id: int, epoch: int) -> TxnMetadata | ErrorCode:
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if epoch != meta.producer_epoch:
            return ErrorCode.producer_fenced
        if meta.state.preparing:
            return ErrorCode.concurrent_transactions
        return meta

    def add_partitions(self, tid: str, producer_id: int, epoch: int,
                       partitions: Iterable[tuple[str, int]], now_ms: int,
                       tv2: bool = False) -> TxnResult:
        """AddPartitionsToTxn v0-v3: the partitions join the transaction (which starts if
        none is open). Every partition gets the same answer. With `tv2`, the implicit add
        of transactions version 2 (a Produce v12 or TxnOffsetCommit v5 to a partition the
        transaction has not got yet): the same rules, and the transaction is marked as a
        version-2 one, whose EndTxn bumps the epoch."""
        found = self._check(tid, producer_id, epoch)
        if isinstance(found, ErrorCode):
            return TxnResult(found)
        meta = found
        wanted = frozenset(partitions)
        if meta.state == TxnState.ONGOING and wanted <= meta.partitions:
            return TxnResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)
        start = meta.txn_start_ms if meta.state == TxnState.ONGOING else now_ms
        base = meta.partitions if meta.state == TxnState.ONGOING else frozenset()
        ongoing = meta.moved(now_ms, state=TxnState.ONGOING, partitions=base | wanted,
                             txn_start_ms=start,
                             client_version=2 if tv2 else meta.client_version)
        return self._apply(TxnResult(ErrorCode.none, meta.producer_id, meta.producer_epoch,
                                     [ongoing]))

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_partitions)

    def add_offsets(self, tid: str, producer_id: int, epoch: int, group_id: str,
                    now_ms: int) -> TxnResult:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins. A group id no
        group can have (empty) is INVALID_GROUP_ID, as in Kafka, before anything else."""
        if not group_id:
            return TxnResult(ErrorCode.invalid_group_id)
        return self.add_partitions(tid, producer_id, epoch, [self.offsets_partition(group_id)],
                                   now_ms)

    def verify(self, tid: str, producer_id: int, epoch: int,
               partition: tuple[str, int]) -> ErrorCode | None:
        """Whether a transactional write to `partition` belongs to the open transaction of
        (producer id, epoch): None if so (the partition was added), else the error
        (TRANSACTION_ABORTABLE when the partition is not in an open transaction)."""
        found = self._check(tid, producer_id, epoch)
        if isinstance(found, ErrorCode):
            return found
        if found.state != TxnState.ONGOING or partition not in found.partitions:
            # Kafka's coordinator answers a failed verification so; the partition leader
            # tells clients too old for it INVALID_TXN_STATE instead.
            return ErrorCode.transaction_abortable
        return None

    # == EndTxn ================================================================================
    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool,
                now_ms: int, tv2: bool = False) -> TxnResult:
        """EndTxn. `tv2` (EndTxn v5+): transactions version 2, see `_end_txn_v2`."""
        if tv2:
            return self._end_txn_v2(tid, producer_id, epoch, commit, now_ms)
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        if epoch != meta.producer_epoch:
            return TxnResult(ErrorCode.producer_fenced)
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        pending = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if meta.state == done:
            return TxnResult(ErrorCode.none)  # a retry of an EndTxn that completed
        if meta.state == pending:
            return TxnResult(ErrorCode.concurrent_transactions)  # markers being written
        if meta.state != TxnState.ONGOING:
            return TxnResult(ErrorCode.invalid_txn_state)
        prepared = meta.moved(now_ms, state=pending)
        job = MarkerJob(tid, meta.producer_id, meta.producer_epoch, commit, meta.partitions)
        return self._apply(TxnResult(ErrorCode.none, records=[prepared], markers=[job]))

    def _end_txn_v2(self, tid: str, producer_id: int, epoch: int, commit: bool,
                    now_ms: int) -> TxnResult:
        """EndTxn of transactions version 2 (KIP-890 part 2), Kafka 4.x's rules: every end
        bumps the producer epoch; the markers carry the bumped epoch, which fences the
        transaction's own late writes, and the answer hands it to the client for its next
        transaction. When the epoch runs out, a new producer id is handed out instead (the
        markers still carry the old id at the last epoch). A retry is recognised by the
        epoch: the client's is one below the stored one (or, after a new id, it is the old
        id at the epoch that ran out). With no transaction open, an abort still bumps the
        epoch (a version-2 client may abort before it wrote anything); a commit is
        INVALID_TXN_STATE."""
        meta = self.txns.get(tid)
        if meta is None:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        retry_on_overflow = (meta.previous_producer_id == producer_id
                             and epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_epoch == epoch + 1
        if meta.state in (TxnState.ONGOING, TxnState.EMPTY):
            valid = epoch == meta.producer_epoch
        elif meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            valid = retry_on_bump
        else:
            valid = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
        if meta.producer_id != producer_id and not retry_on_overflow:
            return TxnResult(ErrorCode.invalid_producer_id_mapping)
        if not valid:
            return TxnResult(ErrorCode.producer_fenced)
        if meta.state.preparing:
            return TxnResult(ErrorCode.concurrent_transactions)
        is_retry = retry_on_bump or retry_on_overflow
        current = TxnResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)
        if meta.state == TxnState.ONGOING:
            return self._prepare_v2(meta, commit, now_ms)
        if meta.state == TxnState.COMPLETE_COMMIT:
            if commit:
                return current if is_retry else TxnResult(ErrorCode.invalid_txn_state)
            return (TxnResult(ErrorCode.invalid_txn_state) if is_retry
                    else self._prepare_v2(meta, False, now_ms))
        if meta.state == TxnState.COMPLETE_ABORT:
            if commit:
                return TxnResult(ErrorCode.invalid_txn_state)
            return current if is_retry else self._prepare_v2(meta, False, now_ms)
        if meta.state == TxnState.EMPTY and not commit:
            return self._prepare_v2(meta, False, now_ms)
        return TxnResult(ErrorCode.invalid_txn_state)

    def _prepare_v2(self, meta: TxnMetadata, commit: bool, now_ms: int) -> TxnResult:
        epoch = meta.producer_epoch + 1
        next_id = self.producer_ids.next_id() if meta.producer_epoch >= MAX_EPOCH - 1 else -1
        if epoch > MAX_EPOCH:
            epoch = MAX_EPOCH
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        start = meta.txn_start_ms if meta.state == TxnState.ONGOING else now_ms
        prepared = meta.moved(now_ms, state=state, producer_epoch=epoch, client_version=2,
                              next_producer_id=next_id, txn_start_ms=start)
        job = MarkerJob(meta.transactional_id, meta.producer_id, epoch, commit,
                        meta.partitions if meta.state == TxnState.ONGOING else frozenset())
        pid, answered = (next_id, 0) if next_id != -1 else (meta.producer_id, epoch)
        return self._apply(TxnResult(ErrorCode.none, pid, answered, [prepared], [job]))

    def markers_written(self, tid: str, now_ms: int) -> TxnResult:
        """Every marker of the transaction's job is in its partition."""
        meta = self.txns.get(tid)
        if meta is None or meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return TxnResult()
        done = (TxnState.COMPLETE_COMMIT if meta.state == TxnState.PREPARE_COMMIT
                else TxnState.COMPLETE_ABORT)
        if meta.next_producer_id != -1:  # the epochs ran out: the client has the new id
            return self._apply(TxnResult(records=[meta.moved(
                now_ms, state=done, partitions=frozenset(),
                producer_id=meta.next_producer_id, producer_epoch=0,
                previous_producer_id=meta.producer_id, next_producer_id=-1)]))
        return self._apply(TxnResult(records=[meta.moved(now_ms, state=done,
                                                         partitions=frozenset())]))

    # == timeouts and expiry ===================================================================
    def expire_transactions(self, now_ms: int) -> TxnResult:
        """Abort, with a fencing epoch bump, every transaction open past its timeout."""
        result = TxnResult()
        for meta in list(self.txns.values()):
            if (meta.state == TxnState.ONGOING
                    and now_ms - meta.txn_start_ms > meta.timeout_ms):
                aborted = self._abort_fencing(meta, now_ms, ErrorCode.none)
                result.records += aborted.records
                result.markers += aborted.markers
        return self._apply(result)

    def expire_transactional_ids(self, now_ms: int) -> TxnResult:
        """Forget ids idle past transactional.id.expiration.ms with no open transaction."""
        gone = [m.transactional_id for m in self.txns.values()
                if m.state.completed
                and now_ms - m.last_update_ms > self.config.id_expiration_ms]
        return self._apply(TxnResult(records=list(gone)))

    # == admin =================================================================================
    def describe(self, tid: str) -> TxnMetadata | None:
        return self.txns.get(tid)

    def listing(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                min_duration_ms: int = -1, now_ms: int = 0) -> list[TxnMetadata]:
        """ListTransactions' filters: state names (Kafka's labels), producer ids, and how
        long a transaction has been running."""
        wanted_states = {s.lower() for s in states}
        wanted_ids = set(producer_ids)
        out = []
        for m in self.txns.values():
            if wanted_states and m.state.label.lower() not in wanted_states:
                continue
            if wanted_ids and m.producer_id not in wanted_ids:
                continue
            if min_duration_ms >= 0 and (m.state != TxnState.ONGOING
                                         or now_ms - m.txn_start_ms < min_duration_ms):
                continue
            out.append(m)
        return sorted(out, key=lambda m: m.transactional_id)
