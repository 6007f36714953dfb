"""The state machine of one share partition (KIP-932): which member holds which record of
one (group, topic, partition), until when, and how often each record was delivered.

Rules of this file: no I/O, no clock (every operation takes `now` in milliseconds), every
change of a record's state happens here, and every operation returns, in an `Outcome`, the
`__share_group_state` records that make its changes durable. The broker appends them before
it answers; nothing is told to a client before it is durable.

Theory of operation. The in-flight window runs from the share-partition start offset (SPSO,
`start_offset`) to `next_offset` (exclusive; Kafka's SPEO, `end_offset`, is its last
offset). Every offset in the window has an `InFlight` state:

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--------------------> ACKNOWLEDGED
        ^                     |  |----REJECT, GAP, or RELEASE/expiry/leave
        |                     |        with the deliveries used up------> ARCHIVED
        +---RELEASE, lock expiry, member leaving (deliveries left)---+

(`states.TRANSITIONS`). `acquire` hands a member the AVAILABLE records of what the leader
read, then new records past the window, up to `max_records` and to the window's bound
(`max_record_locks` offsets from the SPSO, all members together); each acquisition counts a
delivery and sets a lock deadline `now + record_lock_duration_ms`. A lock ends by an
acknowledgement of its holder, by the holder leaving (`release_member`) or by the deadline
passing (`expire`, which every operation runs first, so a late acknowledgement finds the
record no longer acquired whether or not the broker's timer fired). A record that ends its
lock without a terminal acknowledgement goes back to AVAILABLE for redelivery, or to
ARCHIVED once it has been delivered `delivery_count_limit` times. The SPSO moves over the
leading run of ACKNOWLEDGED/ARCHIVED records, whose state is then dropped, and over
everything below the log start offset when that moves (`advance_log_start`).

Durability follows Kafka 4.2's SharePartition: an acquisition is not written (nor a RENEW);
every other transition is, with the SPSO, in the same record. So after a restart
(`replay.replay`) an ACQUIRED record is AVAILABLE again with the delivery count last written
for it: an ACCEPTED record is never delivered again and no record below the end is lost,
but a delivery cut short by the restart is not counted.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coterie.share.config import ShareConfig
from coterie.share.inflight import AckBatch, AcquiredRange, InFlight, RecordView
from coterie.share.records import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateKey,
    ShareUpdateValue,
)
from coterie.share.state_batches import coalesce
from coterie.share.states import ACK_TARGET, TRANSITIONS, AckType, AcquireMode, RecordState

__all__ = ["AckTuple", "Outcome", "SharePartition"]

# An acknowledgement batch as plain values: (first offset, last offset, acknowledge types).
AckTuple = tuple[int, int, Sequence[int]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an operation did: its error (ErrorCode.none when it succeeded), the records it
    acquired (acquire only) and the records to append before answering (possibly some even
    on error: the lock expiries every operation runs first)."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    acquired: tuple[AcquiredRange, ...] = ()
    records: tuple[ShareStateRecord, ...] = ()

    @property
    def acquired_count(self) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.acquired)


class _Refused(Exception):
    """An acknowledgement request that must change nothing (all or nothing per partition)."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error, self.message = error, message


class SharePartition:
    """One share partition's in-flight records; see the module docstring."""

    def __init__(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int,
                 *, config: ShareConfig | None = None, leader_epoch: int = 0,
                 state_epoch: int = 0, create_timestamp: int = 0) -> None:
        """An empty window at `start_offset`. A new partition is made by `initialize` (which
        writes its first snapshot); a restarted one by `replay.replay`."""
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} is negative")
        self.group_id, self.topic_id, self.partition = group_id, topic_id, partition
        self.config = config or ShareConfig()
        self.leader_epoch, self.state_epoch = leader_epoch, state_epoch
        self.create_timestamp = create_timestamp
        self._start = start_offset
        self._next = start_offset
        # Offsets start..next-1, in offset order: they are added at the end and removed from
        # the front only, so iterating the dict needs no sort.
        self._window: dict[int, InFlight] = {}
        # (deadline, offset) of every lock taken or renewed; an entry whose record no longer
        # holds that deadline is stale and dropped when it reaches the top.
        self._locks: list[tuple[int, int]] = []
        # The share coordinator's side: the snapshot updates apply to, how many since it.
        self.snapshot_epoch = 0
        self.updates_since_snapshot = 0

    @classmethod
    def initialize(cls, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int,
                   now: int, *, config: ShareConfig | None = None, leader_epoch: int = 0,
                   state_epoch: int = 0) -> tuple[SharePartition, Outcome]:
        """A new share partition at `start_offset` (see `offset_reset.resolve_start_offset`)
        and its first snapshot (InitializeShareGroupState): snapshot epoch 0, no batches."""
        sp = cls(group_id, topic_id, partition, start_offset, config=config,
                 leader_epoch=leader_epoch, state_epoch=state_epoch, create_timestamp=now)
        return sp, Outcome(records=(sp._snapshot(now),))

    def _restore(self, written: dict[int, tuple[RecordState, int]]) -> None:
        """The window of a replayed partition (`replay.replay`): what was last written for
        each offset from the SPSO to the last written one; an offset between them never
        written (acquired when the leader stopped) is AVAILABLE, never delivered."""
        self._next = max(written, default=self._start - 1) + 1
        self._next = max(self._next, self._start)
        self._window = {}
        for offset in range(self._start, self._next):
            w = written.get(offset)
            self._window[offset] = (InFlight(w[0], w[1], persisted=w) if w is not None
                                    else InFlight(RecordState.AVAILABLE, 0))
        self._advance_start()

    # ------------------------------------------------------------------------------------
    # Reading the state.
    # ------------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The SPSO: every offset below it is delivered for good (or gone from the log)."""
        return self._start

    @property
    def next_offset(self) -> int:
        """The first offset never acquired: the in-flight window is start..next-1."""
        return self._next

    @property
    def end_offset(self) -> int:
        """Kafka's SPEO: the last offset of the window, or the SPSO when it is empty."""
        return self._next - 1 if self._next > self._start else self._start

    @property
    def in_flight_count(self) -> int:
        """Offsets in the window, whatever their state: what `max_record_locks` bounds."""
        return self._next - self._start

    def next_fetch_offset(self) -> int:
        """Where the leader should read for the next acquisition: the first AVAILABLE record of
        the window, else the end of the window."""
        for offset in range(self._start, self._next):
            if self._window[offset].state is RecordState.AVAILABLE:
                return offset
        return self._next

    def next_deadline(self) -> int | None:
        """The earliest lock deadline (for the broker's timer to call `expire`), None when no
        record is acquired."""
        self._drop_stale_locks()
        return self._locks[0][0] if self._locks else None

    def record(self, offset: int) -> RecordView | None:
        """The window's state of one offset, None outside the window."""
        r = self._window.get(offset)
        if r is None:
            return None
        return RecordView(offset, r.state, r.delivery_count, r.member_id, r.deadline)

    def in_flight(self) -> list[RecordView]:
        """The whole window in offset order."""
        return [RecordView(o, r.state, r.delivery_count, r.member_id, r.deadline)
                for o, r in self._window.items()]

    def acquired_by(self, member_id: str) -> list[int]:
        return [o for o, r in self._window.items()
                if r.state is RecordState.ACQUIRED and r.member_id == member_id]

    def durable_view(self) -> tuple[int, tuple[tuple[int, RecordState, int], ...]]:
        """What a restart would rebuild: the SPSO and (offset, state, delivery count) of each
        offset up to the last one ever written; an ACQUIRED record as last written, an offset
        never written as AVAILABLE with count 0."""
        last_written = max((o for o, r in self._window.items() if r.persisted is not None),
                           default=self._start - 1)
        view = []
        for offset in range(self._start, last_written + 1):
            written = self._window[offset].persisted
            state, count = written if written is not None else (RecordState.AVAILABLE, 0)
            view.append((offset, state, count))
        return self._start, tuple(view)

    # ------------------------------------------------------------------------------------
    # Operations.
    # ------------------------------------------------------------------------------------

    def acquire(self, member_id: str, fetched: Sequence[tuple[int, int]], max_records: int,
                now: int, *, mode: AcquireMode = AcquireMode.RECORD_LIMIT,
                aborted: Sequence[tuple[int, int]] = (), batch_size: int = 0) -> Outcome:
        """Acquire for `member_id` what the leader read: `fetched` is the (first, last) offsets
        of each batch it returned, read at `next_fetch_offset()`.

        AVAILABLE records of the window within the read are acquired again (a redelivery),
        then offsets past the window up to the last one read, as long as the window stays
        within `max_record_locks` offsets; offsets in a read range without a record
        (compacted, markers) are acquired too and acknowledged by the client as GAP, as in
        Kafka. RECORD_LIMIT: at most `max_records` records. BATCH_OPTIMIZED (Kafka's default,
        the only mode of ShareFetch v1): the fetched batch in which either bound is reached is
        still acquired to its end, as Kafka does, so the window may pass `max_record_locks` by
        less than one batch. A record on its last delivery (when the limit is above 2) is
        delivered alone, as Kafka does, so that one poison record does not use up its
        neighbours' deliveries. Nothing is written for an acquisition; `records` holds only
        expiries.

        `aborted` (read_committed, `transactions.aborted_batches`): (first, last) offsets of
        fetched batches of aborted transactions. As Kafka's SharePartition does, they are
        acquired with the rest (so they count against `max_records`), then archived at once
        and left out of the acquired ranges; that archiving is written.

        `batch_size` (ShareFetch's BatchSize; 0: none): in BATCH_OPTIMIZED mode, the acquired
        records are handed out as AcquiredRecords of at least `batch_size` records each, cut
        at the first fetched log batch that starts `batch_size` or more offsets after the
        range's first, as Kafka 4.2's SharePartition splits a new acquisition into in-flight
        batches. It changes how the ranges are told, not how many records are acquired.
        """
        records = list(self._expire(now))
        if max_records <= 0 or not fetched:
            return Outcome(records=tuple(records))
        batches = sorted(fetched)
        if any(f > b or f < 0 for f, b in batches):
            return Outcome(ErrorCode.invalid_request, f"bad fetched range in {list(fetched)}",
                           records=tuple(records))
        first, last = batches[0][0], max(b for _, b in batches)
        whole_batches = mode is AcquireMode.BATCH_OPTIMIZED
        deadline = now + self.config.record_lock_duration_ms
        limit = self.config.delivery_count_limit
        isolate = limit > 2
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        stop_after: int | None = None  # BATCH_OPTIMIZED: the end of the batch max_records hit
        alone = False
        for offset in range(max(first, self._start), min(last, self._next - 1) + 1):
            if len(taken) >= max_records and (stop_after is None or offset > stop_after):
                break
            r = self._window[offset]
            if r.state is not RecordState.AVAILABLE:
                continue
            if isolate and r.delivery_count == limit - 1 and taken:
                alone = True
                break
            self._move(r, RecordState.ACQUIRED)
            r.delivery_count += 1
            self._lock(offset, r, member_id, deadline)
            taken.append((offset, r.delivery_count))
            if isolate and r.delivery_count == limit:
                alone = True
                break
            if whole_batches and stop_after is None and len(taken) >= max_records:
                stop_after = _batch_end(batches, offset)
        if not alone and last >= self._next:
            room = self.config.max_record_locks - self.in_flight_count
            count = min(max_records - len(taken), room, last - self._next + 1)
            if whole_batches and count > 0:
                count = min(_batch_end(batches, self._next + count - 1), last) - self._next + 1
            elif stop_after is not None and stop_after >= self._next and room > 0:
                # The batch max_records was reached in runs past the window: finish it,
                # unless the window was already full (the bound is passed by less than
                # one batch only when it is reached inside that batch).
                count = min(stop_after, last) - self._next + 1
            for offset in range(self._next, self._next + max(count, 0)):
                r = self._window[offset] = InFlight(RecordState.ACQUIRED, 1)
                self._lock(offset, r, member_id, deadline)
                taken.append((offset, 1))
            self._next += max(count, 0)
        if aborted:
            taken = self._archive_aborted(taken, aborted, now, records)
        cuts: frozenset[int] = frozenset()
        if whole_batches and batch_size > 0:
            cuts = frozenset(f for f, _ in batches)
        return Outcome(acquired=_ranges(taken, cuts, batch_size), records=tuple(records))

    def _archive_aborted(self, taken: list[tuple[int, int]], aborted: Sequence[tuple[int, int]],
                         now: int, records: list[ShareStateRecord]) -> list[tuple[int, int]]:
        """Archive the just-acquired offsets inside `aborted` ranges; the rest of `taken`."""
        kept, archived = [], []
        for offset, count in taken:
            if any(first <= offset <= last for first, last in aborted):
                self._end_lock(self._window[offset], RecordState.ARCHIVED)
                archived.append(offset)
            else:
                kept.append((offset, count))
        if archived:
            records.extend(self._write(archived, now))
        return kept

    def acknowledge(self, member_id: str, batches: Iterable[AckBatch | AckTuple],
                    now: int) -> Outcome:
        """Apply one ShareAcknowledge (or ShareFetch acknowledgement) partition of `member_id`.

        All or nothing, as Kafka rolls back the whole partition's acknowledgement on the first
        error: INVALID_REQUEST for a malformed batch (an unknown type, a type count that is
        neither 1 nor one per offset, first > last) or offsets past the window's end;
        INVALID_RECORD_STATE for a record that is not acquired, or acquired by another member
        (so one member's bad acknowledgement never touches another's records). Offsets below
        the SPSO are skipped (already delivered for good, or gone from the log).
        """
        records = list(self._expire(now))
        try:
            plan = self._plan_acknowledgement(member_id, [_ack_batch(b) for b in batches])
        except _Refused as refused:
            return Outcome(refused.error, refused.message, records=tuple(records))
        changed = []
        renewed_deadline = now + self.config.record_lock_duration_ms
        for offset, ack in plan.items():
            r = self._window[offset]
            if ack is AckType.RENEW:
                self._lock(offset, r, member_id, renewed_deadline)
                continue
            target = ACK_TARGET[ack]
            if target is RecordState.AVAILABLE:
                target = self._release_state(r)
            self._end_lock(r, target)
            changed.append(offset)
        records.extend(self._write(changed, now))
        return Outcome(records=tuple(records))

    def release_member(self, member_id: str, now: int) -> Outcome:
        """The member left the group or its share session closed: its records go back to
        AVAILABLE with their delivery counts (ARCHIVED when used up), as Kafka 4.2 does."""
        records = list(self._expire(now))
        changed = []
        for offset in self.acquired_by(member_id):
            r = self._window[offset]
            self._end_lock(r, self._release_state(r))
            changed.append(offset)
        records.extend(self._write(changed, now))
        return Outcome(records=tuple(records))

    def expire(self, now: int) -> Outcome:
        """End every lock whose deadline is not after `now`."""
        return Outcome(records=tuple(self._expire(now)))

    def advance_log_start(self, log_start_offset: int, now: int) -> Outcome:
        """The log's start offset moved (retention, DeleteRecords): the SPSO moves with it and
        the window's state below it is dropped, acquired records included; their holders'
        acknowledgements of them are then skipped, as Kafka skips offsets below the SPSO."""
        records = list(self._expire(now))
        if log_start_offset <= self._start:
            return Outcome(records=tuple(records))
        for offset in range(self._start, min(log_start_offset, self._next)):
            del self._window[offset]
        self._start = log_start_offset
        self._next = max(self._next, log_start_offset)
        self._advance_start()
        records.extend(self._write((), now, force=True))
        return Outcome(records=tuple(records))

    def reset(self, start_offset: int, now: int) -> Outcome:
        """Start over at `start_offset` (AlterShareGroupOffsets, or DeleteShareGroupOffsets
        with a new start): a new state epoch, an empty window (the group has no members, which
        the group coordinator checks, so no lock is taken from anyone) and a snapshot with the
        next snapshot epoch, as Kafka's InitializeShareGroupState writes."""
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} is negative")
        self.state_epoch += 1
        self.snapshot_epoch += 1
        self.create_timestamp = now
        self._start = self._next = start_offset
        self._window, self._locks = {}, []
        return Outcome(records=(self._snapshot(now),))

    # ------------------------------------------------------------------------------------
    # Transitions.
    # ------------------------------------------------------------------------------------

    def _plan_acknowledgement(self, member_id: str,
                              batches: list[AckBatch]) -> dict[int, AckType]:
        """Every offset's acknowledgement, checked before any is applied; raises `_Refused`."""
        plan: dict[int, AckType] = {}
        for b in batches:
            size = b.last_offset - b.first_offset + 1
            if b.first_offset < 0 or size < 1:
                raise _Refused(ErrorCode.invalid_request,
                               f"bad acknowledgement range {b.first_offset}-{b.last_offset}")
            if len(b.ack_types) not in (1, size):
                raise _Refused(ErrorCode.invalid_request,
                               f"{len(b.ack_types)} acknowledge types for {size} offsets")
            try:
                types = [AckType(t) for t in b.ack_types]
            except ValueError:
                raise _Refused(ErrorCode.invalid_request,
                               f"invalid acknowledge type in {list(b.ack_types)}") from None
            if b.last_offset < self._start:
                continue
            if b.last_offset >= self._next:
                raise _Refused(ErrorCode.invalid_request,
                               f"offsets {b.first_offset}-{b.last_offset} past the acquired "
                               f"records (end {self.end_offset})")
            for offset in range(max(b.first_offset, self._start), b.last_offset + 1):
                ack = types[0] if len(types) == 1 else types[offset - b.first_offset]
                r = self._window[offset]
                earlier = plan.get(offset)
                if (r.state is not RecordState.ACQUIRED
                        or (earlier is not None and earlier is not AckType.RENEW)):
                    raise _Refused(ErrorCode.invalid_record_state,
                                   f"offset {offset} is not acquired")
                if r.member_id != member_id:
                    raise _Refused(ErrorCode.invalid_record_state,
                                   f"offset {offset} is acquired by another member")
                plan[offset] = ack
        return plan

    def _release_state(self, r: InFlight) -> RecordState:
        """Where a lock ending without a terminal acknowledgement leaves the record."""
        if r.delivery_count >= self.config.delivery_count_limit:
            return RecordState.ARCHIVED
        return RecordState.AVAILABLE

    def _move(self, r: InFlight, target: RecordState) -> None:
        if (r.state, target) not in TRANSITIONS:
            raise AssertionError(f"illegal share record transition {r.state.name} -> "
                                 f"{target.name}")
        r.state = target

    def _end_lock(self, r: InFlight, target: RecordState) -> None:
        self._move(r, target)
        r.member_id = r.deadline = None

    def _lock(self, offset: int, r: InFlight, member_id: str, deadline: int) -> None:
        r.member_id, r.deadline = member_id, deadline
        heapq.heappush(self._locks, (deadline, offset))

    def _drop_stale_locks(self) -> None:
        while self._locks:
            deadline, offset = self._locks[0]
            r = self._window.get(offset)
            if r is not None and r.deadline == deadline:
                return
            heapq.heappop(self._locks)

    def _expire(self, now: int) -> list[ShareStateRecord]:
        changed = []
        while True:
            self._drop_stale_locks()
            if not self._locks or self._locks[0][0] > now:
                break
            _, offset = heapq.heappop(self._locks)
            r = self._window[offset]
            self._end_lock(r, self._release_state(r))
            changed.append(offset)
        return self._write(changed, now)

    def _advance_start(self) -> None:
        """Move the SPSO over the leading delivered records and forget them."""
        while self._start < self._next and self._window[self._start].state.terminal:
            del self._window[self._start]
            self._start += 1

    # ------------------------------------------------------------------------------------
    # Records.
    # ------------------------------------------------------------------------------------

    def _write(self, changed: Iterable[int], now: int, *, force: bool = False
               ) -> list[ShareStateRecord]:
        """The record that makes `changed` offsets (and the SPSO) durable, then the SPSO moved
        over what became delivered. Nothing when nothing changed."""
        changed = list(changed)
        self._advance_start()
        offsets = sorted(o for o in changed if o >= self._start)
        if not offsets and not force and not _moved(changed, self._start):
            return []
        for offset in offsets:
            r = self._window[offset]
            r.persisted = (r.state, r.delivery_count)
        limit = self.config.snapshot_update_records_per_snapshot
        if self.updates_since_snapshot >= limit:
            self.snapshot_epoch += 1
            return [self._snapshot(now)]
        self.updates_since_snapshot += 1
        batches = tuple(coalesce((o, self._window[o].state, self._window[o].delivery_count)
                                 for o in offsets))
        return [ShareStateRecord(
            ShareUpdateKey(self.group_id, self.topic_id, self.partition),
            ShareUpdateValue(self.snapshot_epoch, self.leader_epoch, self._start, batches,
                             self._delivery_complete_count()))]

    def _snapshot(self, now: int) -> ShareStateRecord:
        """The whole durable state (`durable_view`, without the offsets never written)."""
        self.updates_since_snapshot = 0
        written = ((o, *r.persisted) for o, r in self._window.items()
                   if r.persisted is not None)
        return ShareStateRecord(
            ShareSnapshotKey(self.group_id, self.topic_id, self.partition),
            ShareSnapshotValue(self.snapshot_epoch, self.state_epoch, self.leader_epoch,
                               self._start, self.create_timestamp, now,
                               tuple(coalesce(written)), self._delivery_complete_count()))

    def _delivery_complete_count(self) -> int:
        """KIP-1226's DeliveryCompleteCount: delivered-for-good offsets from the SPSO on."""
        return sum(1 for r in self._window.values() if r.state.terminal)


def _moved(changed: Iterable[int], start: int) -> bool:
    """Whether some changed offset fell below the new SPSO (the SPSO moved: worth a record)."""
    return any(o < start for o in changed)


def _ack_batch(b: AckBatch | AckTuple) -> AckBatch:
    if isinstance(b, AckBatch):
        return b
    first, last, types = b
    return AckBatch(first, last, tuple(types))


def _batch_end(batches: list[tuple[int, int]], offset: int) -> int:
    """The last offset of the fetched batch holding `offset` (`offset` itself in a gap
    between batches): where BATCH_OPTIMIZED acquisition may stop."""
    for first, last in batches:
        if first <= offset <= last:
            return last
    return offset


def _ranges(taken: list[tuple[int, int]], cuts: frozenset[int] = frozenset(),
            batch_size: int = 0) -> tuple[AcquiredRange, ...]:
    """Consecutive offsets delivered the same number of times, as one AcquiredRecords; a
    range reaching `batch_size` offsets ends before the next of `cuts` (log batch starts)."""
    out: list[AcquiredRange] = []
    for offset, count in taken:
        if (out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count
                and not (offset in cuts and offset - out[-1].first_offset >= batch_size)):
            out[-1] = AcquiredRange(out[-1].first_offset, offset, count)
        else:
            out.append(AcquiredRange(offset, offset, count))
    return tuple(out)
