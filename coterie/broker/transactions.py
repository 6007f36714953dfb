"""The transaction coordinator's runtime: `__transaction_state`, markers, timeouts.

The rules are the pure core's (coterie.txn.manager, one `TxnManager` per partition of
`__transaction_state`, a transactional id mapped to its partition as Kafka does). Around it
this runtime does the I/O, in the shape of the group runtime (coterie.broker.groups):

- every result's records are appended to the manager's partition before the answer; a
  failed append is reverted and answered COORDINATOR_NOT_AVAILABLE;
- marker jobs are carried out at once: a COMMIT or ABORT control batch for each partition
  of the transaction, written as a coordinator append to data partitions (waking long-poll
  fetches) and through the group runtime to `__consumer_offsets` partitions (which commits
  or drops the transaction's pending offsets); then `markers_written` completes the
  transaction. A job that cannot finish (a disk error) stays in PREPARE_* and is retried by
  `tick`, as are the jobs found pending when the partitions are loaded;
- `tick` (from the broker's housekeeping) also aborts transactions past their timeout and
  forgets idle transactional ids;
- a transactional id no record can hold (longer than 32,767 bytes of UTF-8) is refused
  INVALID_REQUEST by every way in (`handle`, `describe`, `verify`, `add_implicitly`),
  before it is hashed to its partition (issue 23).

Single node: the markers are local appends, not WriteTxnMarkers requests, and the
coordinator epoch written in them is 0. A cluster broker coordinates the transactional ids of
the `__transaction_state` partitions it leads (`load_shard` when it comes to lead one, as
Kafka's coordinator loads a partition after a failover); it appends the markers of partitions
it leads and sends the others' leaders WriteTxnMarkers (coterie.broker.peers), with its
lease's epoch as the coordinator epoch, and completes a transaction once all of them are in
the database.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as WireRecord
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode

from coterie.broker.groups import GroupRuntime
from coterie.broker.offsets_topic import OFFSETS_TOPIC
from coterie.broker.peers import Peers
from coterie.broker.waiters import FetchWaiters
from coterie.common.limits import too_long
from coterie.common.partitioning import partition_for
from coterie.log.errors import LogError
from coterie.log.manager import LogManager
from coterie.txn import log_codec
from coterie.txn.manager import MarkerJob, ProducerIds, TxnConfig, TxnManager, TxnResult
from coterie.txn.metadata import TxnMetadata
from coterie.txn.versions import ABORTABLE_TXN_OFFSET_COMMIT, TV2_TXN_OFFSET_COMMIT
from coterie.wire.txn_markers import control_batch

log = logging.getLogger("coterie.transactions")

TXN_TOPIC = "__transaction_state"
WRITE_TXN_MARKERS = 27
LOAD_CHUNK_BYTES = 4 * 1024 * 1024
TXN_DEFAULTS = {
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.segment.bytes": str(100 * 1024 * 1024),
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": str(7 * 24 * 3_600_000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
}


class TxnRuntime:
    def __init__(self, logs: LogManager, groups: GroupRuntime, waiters: FetchWaiters,
                 producer_ids: ProducerIds, clock: Callable[[], int],
                 props: dict[str, str]) -> None:
        settings = {**TXN_DEFAULTS, **props}
        self.logs = logs
        self.groups = groups
        self.waiters = waiters
        self.now_ms = clock
        # Created by the broker (coterie.broker.internal_topics) before this runtime.
        partitions = logs.topics[TXN_TOPIC].partitions
        config = TxnConfig(max_timeout_ms=int(settings["transaction.max.timeout.ms"]),
                           offsets_partitions=groups.num_partitions,
                           id_expiration_ms=int(settings["transactional.id.expiration.ms"]))
        self._new_manager = lambda: TxnManager(config, producer_ids)
        self.managers = [self._new_manager() for _ in range(partitions)]
        self.tick_interval_ms = int(
            settings["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
        self.loaded = False
        # A cluster broker (coterie.broker.cluster): the partitions of __transaction_state
        # it leads (`load_shard`), those being loaded, its cluster, and its links to the
        # other brokers for markers (WriteTxnMarkers). None: a single broker, which
        # coordinates every partition and writes every marker itself.
        self.owned: set[int] | None = None
        self._loading: set[int] = set()
        self.cluster: Any = None
        self.peers: Peers | None = None
        self._marking: set[tuple[int, str]] = set()  # marker jobs under way
        self._tasks: set[asyncio.Task] = set()

    def partition_of(self, tid: str) -> int:
        return partition_for(tid, len(self.managers))

    def manager(self, tid: str) -> TxnManager:
        return self.managers[self.partition_of(tid)]

    # -- the door --------------------------------------------------------------------------
    def handle(self, tid: str, operation: Callable[[TxnManager, int], TxnResult]) -> TxnResult:
        """The handlers' way in: `operation(manager, now_ms)` on the core of `tid`'s
        partition, its records persisted before the answer (`run`); until loading is done,
        COORDINATOR_LOAD_IN_PROGRESS, once here for every API."""
        refusal = self._refusal(tid)
        if refusal is not None:
            return TxnResult(refusal)
        return self.run(tid, operation(self.manager(tid), self.now_ms()))

    def _refusal(self, tid: str) -> ErrorCode | None:
        """What every way in answers before `tid` is hashed to its partition: an id no
        record can hold, or the partitions still loading."""
        if too_long(tid):
            return ErrorCode.invalid_request
        if not self.loaded:
            return ErrorCode.coordinator_load_in_progress
        if self.owned is not None:
            index = self.partition_of(tid)
            if index in self._loading:
                return ErrorCode.coordinator_load_in_progress
            if index not in self.owned:
                return ErrorCode.not_coordinator
        return None

    def _elsewhere(self, tid: str) -> bool:
        """A cluster broker that is not `tid`'s coordinator (another broker leads its
        partition of __transaction_state)."""
        return self.owned is not None and self.partition_of(tid) not in self.owned

    def describe(self, tid: str) -> TxnMetadata | ErrorCode:
        """DescribeTransactions of one id: its state, or the error (loading, not found, an
        id no record could hold)."""
        refusal = self._refusal(tid)
        if refusal is not None:
            return refusal
        meta = self.manager(tid).describe(tid) if tid else None
        return ErrorCode.transactional_id_not_found if meta is None else meta

    def listing(self, states: list[str], producer_ids: Iterable[int],
                duration_ms: int) -> list[TxnMetadata] | None:
        """ListTransactions over every partition (filters as `TxnManager.listing`); None
        while loading."""
        if not self.loaded:
            return None
        now = self.now_ms()
        return [m for index, manager in enumerate(self.managers) if self._mine(index)
                for m in manager.listing(states, producer_ids, duration_ms, now)]

    def _mine(self, index: int) -> bool:
        return self.owned is None or index in self.owned

    # -- loading --------------------------------------------------------------------------
    async def load(self) -> None:
        count = 0
        if self.owned is None:  # a cluster broker loads a partition when it comes to lead it
            for index, manager in enumerate(self.managers):
                count += await self._replay(index, manager)
        self.loaded = True
        log.info("loaded %d transaction records from %s", count, TXN_TOPIC)
        for index, manager in enumerate(self.managers):
            for job in manager.pending_marker_jobs():
                self._write_markers(index, job)

    async def _replay(self, index: int, manager: TxnManager) -> int:
        count = 0
        for chunk in self._read(index):
            for tid, meta in chunk:
                manager.replay(tid, meta)
                manager.committed([meta if meta is not None else tid])
                count += 1
            await asyncio.sleep(0)
        return count

    # -- a cluster's partitions ------------------------------------------------------------
    def serve_only_loaded(self, cluster: Any, peers: Peers) -> None:
        """A cluster broker: coordinate the transactional ids of the partitions it leads,
        once loaded (`load_shard`); the others answer NOT_COORDINATOR."""
        self.owned = set()
        self.cluster = cluster
        self.peers = peers

    async def load_shard(self, index: int) -> None:
        """This broker now leads partition `index` of __transaction_state: replay it into a
        new manager (as at a restart); its transactions go on from their last state, open
        ones stay open, and markers of ones that were ending are written again (`tick`), as
        a Kafka coordinator does after a failover."""
        assert self.owned is not None
        self.owned.discard(index)
        self._loading.add(index)
        manager = self.managers[index] = self._new_manager()
        try:
            count = await self._replay(index, manager)
        except Exception:
            log.exception("loading %s-%d failed; its transactions stay unavailable here",
                          TXN_TOPIC, index)
            return
        finally:
            self._loading.discard(index)
        if self.managers[index] is not manager:
            return  # given up meanwhile
        self.owned.add(index)
        log.info("coordinating transactions of %s-%d (%d records)", TXN_TOPIC, index, count)
        for job in manager.pending_marker_jobs():
            self._write_markers(index, job)

    def unload_shard(self, index: int) -> None:
        """Another broker leads partition `index` now."""
        if self.owned is None:
            return
        self.owned.discard(index)
        self._loading.discard(index)
        self.managers[index] = self._new_manager()

    def _read(self, index: int) -> Iterator[list[tuple[str, TxnMetadata | None]]]:
        part = self.logs.partition(TXN_TOPIC, index)
        if part is None:
            return
        offset = part.log_start_offset
        while offset < part.log_end_offset:
            data = part.read(offset, LOAD_CHUNK_BYTES)
            if not data:
                break
            chunk = []
            pos = 0
            while pos < len(data):
                batch, size = read_batch(data, pos)
                pos += size
                for wire in batch.records:
                    offset = wire.offset + 1
                    if wire.key is None:
                        continue
                    try:
                        chunk.append(log_codec.decode(wire.key, wire.value))
                    except (log_codec.TxnRecordError, UnicodeDecodeError):
                        log.warning("skipped an unreadable record at %s-%d offset %d",
                                    TXN_TOPIC, index, wire.offset)
                offset = max(offset, batch.base_offset + batch.last_offset_delta + 1)
            yield chunk

    # -- running results ------------------------------------------------------------------
    def run(self, tid: str, result: TxnResult) -> TxnResult:
        """Append the result's records, then carry out its marker jobs."""
        index = self.partition_of(tid)
        manager = self.managers[index]
        if result.records:
            try:
                self._append(index, result.records)
            except (LogError, OSError) as e:
                log.error("could not persist the state of transactional id %r: %s", tid, e)
                manager.revert(result.records)
                return TxnResult(ErrorCode.coordinator_not_available)
            manager.committed(result.records)
        for job in result.markers:
            self._write_markers(index, job)
        return result

    def _append(self, index: int, records: list[TxnMetadata | str]) -> None:
        now = self.now_ms()
        stamp = datetime.datetime.fromtimestamp(now / 1000, datetime.UTC)
        wire = []
        for i, r in enumerate(records):
            key, value = (log_codec.encode(None, r) if isinstance(r, str)
                          else log_codec.encode(r))
            wire.append(WireRecord(attributes=0, timestamp=stamp, offset=i, key=key,
                                   value=value, headers=()))
        buf = io.BytesIO()
        write_new_batch(buf, NewRecordBatch(producer_id=-1, producer_epoch=-1,
                                            base_sequence=-1, records=tuple(wire),
                                            attributes=0))
        part = self.logs.partition(TXN_TOPIC, index)
        if part is None:
            raise LogError(f"{TXN_TOPIC}-{index} is missing")
        part.append(buf.getvalue(), 0, now, coordinator=True)

    def _write_markers(self, index: int, job: MarkerJob) -> None:
        if self.owned is not None:
            key = (index, job.transactional_id)
            if key not in self._marking:  # one attempt at a time; `tick` retries
                self._marking.add(key)
                task = asyncio.ensure_future(self._write_markers_in_cluster(index, job))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return
        now = self.now_ms()
        producer = (job.producer_id, job.producer_epoch)
        try:
            for topic, p in sorted(job.partitions):
                if topic == OFFSETS_TOPIC:
                    self.groups.end_transaction(p, producer, job.commit, 0)
                    continue
                part = self.logs.partition(topic, p)
                if part is None:
                    continue  # deleted since: nothing left to mark
                part.append(control_batch(job.producer_id, job.producer_epoch, job.commit,
                                          0, now), 0, now, coordinator=True)
                self.waiters.notify(topic, p)
        except Exception:
            log.exception("could not write the markers of transactional id %r; retrying "
                          "later", job.transactional_id)
            return
        manager = self.managers[index]
        self.run(job.transactional_id, manager.markers_written(job.transactional_id, now))

    async def _write_markers_in_cluster(self, index: int, job: MarkerJob) -> None:
        """A cluster's markers: those of partitions this broker leads appended here, the
        others sent to their leaders (WriteTxnMarkers), and only once every one is in the
        database is the transaction complete. Anything short of that leaves the job pending
        for `tick` to try again (a marker written twice is harmless: the producer cannot
        start its next transaction before this one is complete)."""
        cluster = self.cluster
        tid = job.transactional_id
        try:
            own = cluster.serving(TXN_TOPIC, index)
            if own is None or not self._mine(index):
                return
            coordinator_epoch = own.lease.epoch
            producer = (job.producer_id, job.producer_epoch)
            now = self.now_ms()
            waits = []
            remote: dict[int, list[tuple[str, int]]] = {}
            for topic, p in sorted(job.partitions):
                info = self.logs.topics.get(topic)
                if info is None:
                    continue  # deleted since: nothing left to mark
                led = cluster.serving(topic, p)
                if led is None:
                    lease = cluster.leader(topic, p, info.topic_id)
                    if lease is None or lease.owner == cluster.node_id:
                        raise LogError(f"{topic}-{p} has no leader now")
                    remote.setdefault(lease.owner, []).append((topic, p))
                    continue
                if topic == OFFSETS_TOPIC:
                    if not self.groups.coordinates(p):
                        raise LogError(f"{topic}-{p} is still loading here")
                    self.groups.end_transaction(p, producer, job.commit, coordinator_epoch)
                else:
                    led.part.append(control_batch(job.producer_id, job.producer_epoch,
                                                  job.commit, coordinator_epoch, now),
                                    led.lease.epoch, now, coordinator=True)
                    self.waiters.notify(topic, p)
                durable = cluster.durable(led, led.part.log_end_offset - 1)
                if durable is not None:
                    waits.append(durable)
            for node, parts in remote.items():
                await self._send_markers(node, job, parts, coordinator_epoch)
            for durable in waits:
                if not await durable:
                    raise LogError("a marker did not reach the database")
            if self.managers[index].describe(tid) is None or not self._mine(index):
                return
            self.run(tid, self.managers[index].markers_written(tid, self.now_ms()))
        except Exception as e:
            log.warning("could not write the markers of transactional id %r yet (%s); "
                        "retrying", tid, str(e).strip() or type(e).__name__)
        finally:
            self._marking.discard((index, tid))

    async def _send_markers(self, node: int, job: MarkerJob, parts: list[tuple[str, int]],
                            coordinator_epoch: int) -> None:
        """WriteTxnMarkers to the broker leading `parts`; raises unless every one of them
        was written."""
        address = next((b for b in self.cluster.brokers if b.node_id == node), None)
        if address is None or self.peers is None:
            raise LogError(f"broker {node} is not live")
        topics: dict[str, list[int]] = {}
        for topic, p in parts:
            topics.setdefault(topic, []).append(p)
        answer = await self.peers.call(address.host, address.port, WRITE_TXN_MARKERS, 1, {
            "markers": [{"producer_id": job.producer_id, "producer_epoch": job.producer_epoch,
                         "transaction_result": job.commit, "coordinator_epoch":
                         coordinator_epoch, "topics": [
                             {"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]})
        failed = [(t.name, p.partition_index, p.error_code) for m in answer.markers
                  for t in m.topics for p in t.partitions if p.error_code != ErrorCode.none]
        if failed:
            raise LogError(f"broker {node} refused markers: {failed[:3]}")

    # -- housekeeping ---------------------------------------------------------------------
    def tick(self) -> None:
        """Abort timed-out transactions, retry unfinished markers, forget idle ids."""
        if not self.loaded:
            return
        now = self.now_ms()
        for index, manager in enumerate(self.managers):
            if not self._mine(index):
                continue
            for job in manager.pending_marker_jobs():
                self._write_markers(index, job)
            expired = manager.expire_transactions(now)
            for r in expired.records:
                if not isinstance(r, str):
                    log.info("aborting transaction of %r: open longer than its timeout",
                             r.transactional_id)
            self._run_many(index, expired)
            self._run_many(index, manager.expire_transactional_ids(now))

    def _run_many(self, index: int, result: TxnResult) -> None:
        if not result.records and not result.markers:
            return
        manager = self.managers[index]
        try:
            self._append(index, result.records) if result.records else None
        except (LogError, OSError) as e:
            log.error("could not persist transaction state: %s", e)
            manager.revert(result.records)
            return
        manager.committed(result.records)
        for job in result.markers:
            self._write_markers(index, job)

    # -- checks for the data path ---------------------------------------------------------
    def verify(self, tid: str, producer_id: int, epoch: int, topic: str,
               partition: int, abortable: bool = True) -> ErrorCode | None:
        """A transactional write (Produce, TxnOffsetCommit) to a partition the transaction
        has not added is TRANSACTION_ABORTABLE, or INVALID_TXN_STATE for a request version
        older than that error (`abortable` False: Produce before v11, TxnOffsetCommit
        before v4); a stale epoch is INVALID_PRODUCER_EPOCH. Kafka's partition leader maps
        its coordinator's answers the same way (AddPartitionsToTxnManager)."""
        if self._elsewhere(tid) and not too_long(tid):
            # A cluster broker leading the partition but not coordinating the transaction
            # does not verify (Kafka's leaders did not before 3.6); docs/cluster.md.
            return None
        refusal = self._refusal(tid)
        if refusal is not None:
            return refusal
        return _for_writer(self.manager(tid).verify(tid, producer_id, epoch,
                                                    (topic, partition)), abortable)

    def verify_offsets(self, tid: str, producer_id: int, epoch: int, offsets_partition: int,
                       version: int) -> ErrorCode | None:
        """TxnOffsetCommit v5+ (transactions version 2) adds the group's offsets partition
        to the transaction itself; older versions need AddOffsetsToTxn first."""
        if self._elsewhere(tid) and not too_long(tid):
            return None  # as `verify`: the coordinator is another broker
        if version >= TV2_TXN_OFFSET_COMMIT:
            return self.add_implicitly(tid, producer_id, epoch, OFFSETS_TOPIC,
                                       offsets_partition)
        return self.verify(tid, producer_id, epoch, OFFSETS_TOPIC, offsets_partition,
                           abortable=version >= ABORTABLE_TXN_OFFSET_COMMIT)

    def add_implicitly(self, tid: str, producer_id: int, epoch: int, topic: str,
                       partition: int) -> ErrorCode | None:
        """Transactions version 2: a transactional write (Produce v12, TxnOffsetCommit v5)
        adds its partition to the transaction (starting one if none is open), persisted
        before the write is appended, as Kafka's partition leader asks the coordinator
        (AddPartitionsToTxn) before appending. None if the write may go on."""
        if self._elsewhere(tid) and not too_long(tid):
            # Transactions version 2 is not finalized by a cluster (api_versions), so a
            # client does not write so; one that does is told the transaction is unusable.
            return ErrorCode.invalid_txn_state
        refusal = self._refusal(tid)
        if refusal is not None:
            return refusal
        result = self.run(tid, self.manager(tid).add_partitions(
            tid, producer_id, epoch, [(topic, partition)], self.now_ms(), tv2=True))
        return _for_writer(None if result.error == ErrorCode.none else result.error, True)


def _for_writer(error: ErrorCode | None, abortable: bool) -> ErrorCode | None:
    """The coordinator's answer as the writing client gets it (see `TxnRuntime.verify`)."""
    if error == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if error == ErrorCode.transaction_abortable and not abortable:
        return ErrorCode.invalid_txn_state
    return error
