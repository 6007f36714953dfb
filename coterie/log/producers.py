"""Per-partition producer state: what makes a retried batch harmless (idempotent producers)
and tells where open transactions begin (the last stable offset).

Kafka's ProducerStateManager is the reference for the rules; coterie keeps them as values:

* A batch with producer id -1 is not tracked and never refused.
* Duplicates first: a batch of the producer's current epoch whose (first, last) sequence
  equals one of the last five batches appended for it is a retry of a batch already in the
  log. It is not written again; the caller answers with the original batch's offsets.
* A batch of an epoch older than the producer's: InvalidProducerEpochError
  (INVALID_PRODUCER_EPOCH).
* A client batch of a newer epoch must start at sequence 0, unless nothing is known of the
  producer's epoch. In the same epoch the first sequence must follow the last one (wrapping
  from 2^31-1 to 0). Otherwise OutOfOrderSequenceError (OUT_OF_ORDER_SEQUENCE_NUMBER).
  A producer the partition does not know at all (never seen, expired, or its batches gone
  with retention) may start at any sequence. Kafka 4.x answers it the same way; it no
  longer sends UNKNOWN_PRODUCER_ID on the produce path.
* The coordinator's own writes (transactional offset commits and transaction markers) skip
  the sequence checks, as Kafka's coordinator-origin appends do. They keep the epoch checks.
* A transactional batch opens the producer's transaction at its first offset, if none is
  open. A COMMIT or ABORT marker (a control batch) closes it and reports the completed
  transaction, so the partition can index aborted ones. A plain batch while a transaction
  is open is InvalidTxnStateError (Kafka: INVALID_TXN_STATE).

Validation is separate from update. `prepare` checks every batch of an append in order,
against the state as the earlier batches would leave it, and changes nothing. It returns
either the duplicate or a `PendingUpdate`, which `apply` installs once the batches are in
the segment. A refused append leaves no trace.

Expiry: producers idle for `producer.id.expiration.ms` and without an open transaction are
forgotten (`expire`). Producers whose last batch fell below the log start go too
(`truncate_head`), as in Kafka.

Snapshots: a partition writes `<offset>.snapshot` (20-digit offset) with the state as of
that log offset, at every segment roll and at close. The file is a small versioned binary
(see `encode`/`decode`) ending in a CRC-32C. On open, the newest snapshot at or below the
recovered log end is loaded and the batches after it are replayed (`replay_batch`), so a
retry across a kill -9 is still recognised.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import crc32c

from coterie.log.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from coterie.wire.record_batch import BatchHeader

__all__ = [
    "NO_PRODUCER_ID",
    "RETAINED_BATCHES",
    "BatchMeta",
    "CompletedTxn",
    "PendingUpdate",
    "ProducerEntry",
    "ProducerStates",
]

NO_PRODUCER_ID = -1
NO_EPOCH = -1
NO_SEQUENCE = -1
RETAINED_BATCHES = 5  # Kafka's NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"


def _in_sequence(last: int, nxt: int) -> bool:
    return nxt == last + 1 or (nxt == 0 and last == INT32_MAX)


def _last_sequence(h: BatchHeader) -> int:
    seq = h.base_sequence + h.last_offset_delta
    return seq - INT32_MAX - 1 if seq > INT32_MAX else seq


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))
    last_timestamp: int = -1
    txn_first_offset: int | None = None
    coordinator_epoch: int = -1
    last_offset: int = -1  # of its last batch, data or marker

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             deque(self.batches, maxlen=RETAINED_BATCHES),
                             self.last_timestamp, self.txn_first_offset,
                             self.coordinator_epoch, self.last_offset)

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMeta | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


@dataclass(slots=True)
class PendingUpdate:
    """What an accepted append will change, installed by `ProducerStates.apply`."""

    entries: dict[int, ProducerEntry]
    completed: list[CompletedTxn]


class ProducerStates:
    """The producer state of one partition."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        # Open transactions: producer id -> first offset (for the last stable offset).
        self._open: dict[int, int] = {}

    # -- appends -------------------------------------------------------------------------
    def prepare(self, headers: Sequence[BatchHeader], first_offset: int, *,
                coordinator: bool = False,
                marker_types: Sequence[int | None] = ()) -> BatchMeta | PendingUpdate | None:
        """Check an append of `headers` (offsets to be assigned from `first_offset`).

        Returns None when no batch has a producer id (nothing to do), the duplicate's
        metadata when the append is a retry, or the update to apply after the write.
        `marker_types` gives, for each control batch in order, its marker type (0 ABORT,
        1 COMMIT; None for other control records). Raises the errors of the module
        docstring; nothing changes either way."""
        if all(h.producer_id == NO_PRODUCER_ID for h in headers):
            return None
        touched: dict[int, ProducerEntry] = {}
        completed: list[CompletedTxn] = []
        markers = iter(marker_types)
        offset = first_offset
        for h in headers:
            base, offset = offset, offset + h.last_offset_delta + 1
            pid = h.producer_id
            if pid == NO_PRODUCER_ID:
                if h.is_control:
                    next(markers, None)
                continue
            entry = touched.get(pid)
            if entry is None:
                known = self.entries.get(pid)
                entry = known.copy() if known is not None else ProducerEntry(pid)
            epoch = h.producer_epoch
            if h.is_control:
                kind = next(markers, None)
                self._check_epoch(entry, epoch, base, pid)
                if epoch != entry.epoch:
                    # A marker of a newer epoch (transactions version 2 bumps the epoch at
                    # every EndTxn): the producer's next batch starts that epoch afresh, at
                    # sequence 0, and older batches are no longer duplicates of anything.
                    entry.batches.clear()
                entry.epoch = epoch
                entry.last_offset = base + h.last_offset_delta
                entry.last_timestamp = h.max_timestamp
                if kind is not None and entry.txn_first_offset is not None:
                    completed.append(CompletedTxn(pid, entry.txn_first_offset,
                                                  entry.last_offset, aborted=kind == 0))
                    entry.txn_first_offset = None
                touched[pid] = entry
                continue
            first_seq, last_seq = h.base_sequence, _last_sequence(h)
            if not coordinator:
                dup = entry.duplicate_of(epoch, first_seq, last_seq)
                if dup is not None:
                    return dup
            self._check_epoch(entry, epoch, base, pid)
            if not coordinator:
                self._check_sequence(entry, epoch, first_seq, pid)
            if not h.is_transactional and entry.txn_first_offset is not None:
                raise InvalidTxnStateError(
                    f"producer {pid} wrote a non-transactional batch at offset {base} while "
                    f"its transaction from offset {entry.txn_first_offset} is open")
            if epoch != entry.epoch:
                entry.batches.clear()
                entry.epoch = epoch
            last = base + h.last_offset_delta
            entry.batches.append(BatchMeta(first_seq, last_seq, base, last, h.max_timestamp))
            entry.last_offset = last
            entry.last_timestamp = h.max_timestamp
            if h.is_transactional and entry.txn_first_offset is None:
                entry.txn_first_offset = base
            touched[pid] = entry
        return PendingUpdate(touched, completed)

    @staticmethod
    def _check_epoch(entry: ProducerEntry, epoch: int, offset: int, pid: int) -> None:
        if entry.epoch != NO_EPOCH and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} wrote with epoch {epoch} at offset {offset}, older than its "
                f"current epoch {entry.epoch}")

    @staticmethod
    def _check_sequence(entry: ProducerEntry, epoch: int, first_seq: int, pid: int) -> None:
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {pid} started epoch {epoch} at sequence {first_seq}; a new "
                    "epoch starts at sequence 0")
            return
        if entry.epoch == NO_EPOCH:
            return
        last = entry.last_seq
        if not _in_sequence(last, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow "
                f"{last}, the last one written")

    def apply(self, update: PendingUpdate) -> list[CompletedTxn]:
        """Install an update from `prepare` (its batches are in the log now)."""
        for pid, entry in update.entries.items():
            self.entries[pid] = entry
            if entry.txn_first_offset is None:
                self._open.pop(pid, None)
            else:
                self._open[pid] = entry.txn_first_offset
        return update.completed

    def replay_batch(self, h: BatchHeader, marker_type: int | None) -> list[CompletedTxn]:
        """Rebuild from a batch already in the log (recovery): as a coordinator append, so
        nothing stored is refused again; a batch that contradicts the state is skipped."""
        try:
            update = self.prepare([h], h.base_offset, coordinator=True,
                                  marker_types=[marker_type] if h.is_control else [])
        except (InvalidProducerEpochError, InvalidTxnStateError):
            return []
        if not isinstance(update, PendingUpdate):
            return []
        return self.apply(update)

    # -- queries -------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None."""
        return min(self._open.values()) if self._open else None

    def open_transactions(self) -> dict[int, int]:
        return dict(self._open)

    # -- housekeeping --------------------------------------------------------------------
    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for `expiration_ms` without an open transaction."""
        gone = [pid for pid, e in self.entries.items()
                if e.txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.entries[pid]
        return len(gone)

    def truncate_head(self, log_start: int) -> None:
        """Forget producers whose last batch is below the new log start."""
        for pid in [pid for pid, e in self.entries.items()
                    if e.last_offset < log_start and e.txn_first_offset is None]:
            del self.entries[pid]

    # -- snapshots -----------------------------------------------------------------------
    def encode(self) -> bytes:
        return encode(self.entries.values())

    @classmethod
    def decode(cls, data: bytes) -> ProducerStates:
        return cls.from_entries(decode(data))

    @classmethod
    def from_entries(cls, entries: Iterable[ProducerEntry]) -> ProducerStates:
        """The state holding `entries` (a snapshot's, or one read from elsewhere)."""
        states = cls()
        for entry in entries:
            states.entries[entry.producer_id] = entry
            if entry.txn_first_offset is not None:
                states._open[entry.producer_id] = entry.txn_first_offset
        return states


# Snapshot layout (big-endian): version int16 (1), count int32, then per producer:
#   producer id int64, epoch int16, last timestamp int64, coordinator epoch int32,
#   txn first offset int64 (-1: none), last offset int64, batch count int8, then per batch:
#   first seq int32, last seq int32, first offset int64, last offset int64, max ts int64;
# and a CRC-32C (uint32) of everything before it.
_HEAD = struct.Struct(">hi")
_ENTRY = struct.Struct(">qhqiqqb")
_BATCH = struct.Struct(">iiqqq")
_CRC = struct.Struct(">I")
_SNAPSHOT_VERSION = 1


def encode(entries: Iterable[ProducerEntry]) -> bytes:
    entries = list(entries)
    out = bytearray(_HEAD.pack(_SNAPSHOT_VERSION, len(entries)))
    for e in entries:
        out += _ENTRY.pack(e.producer_id, e.epoch, e.last_timestamp, e.coordinator_epoch,
                           -1 if e.txn_first_offset is None else e.txn_first_offset,
                           e.last_offset, len(e.batches))
        for b in e.batches:
            out += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset,
                               b.max_timestamp)
    out += _CRC.pack(crc32c.crc32c(out))
    return bytes(out)


def decode(data: bytes) -> list[ProducerEntry]:
    """Raises CorruptRecordError for a snapshot that is torn or of another version."""
    if len(data) < _HEAD.size + _CRC.size:
        raise CorruptRecordError("producer snapshot too short")
    (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    body = memoryview(data)[: len(data) - _CRC.size]
    if crc32c.crc32c(body) != crc:
        raise CorruptRecordError("producer snapshot fails its CRC check")
    version, count = _HEAD.unpack_from(body, 0)
    if version != _SNAPSHOT_VERSION:
        raise CorruptRecordError(f"producer snapshot version {version} is not known")
    pos = _HEAD.size
    entries = []
    try:
        for _ in range(count):
            pid, epoch, ts, coord, txn, last, n = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
            batches: deque[BatchMeta] = deque(maxlen=RETAINED_BATCHES)
            for _ in range(n):
                batches.append(BatchMeta(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(ProducerEntry(pid, epoch, batches, ts,
                                         None if txn < 0 else txn, coord, last))
    except struct.error as exc:
        raise CorruptRecordError(f"producer snapshot is cut short: {exc}") from exc
    return entries
