"""The share partitions this broker leads (KIP-932): loaded, driven, persisted, timed.

Why here: a share partition's state (coterie.share.SharePartition, pure) belongs with the
leader of its topic partition, which reads the records it hands out. This module gives each
(group, topic, partition) one such state machine, and does the I/O around it:

- **Loading.** On first use, the state is replayed from the share-state store
  (coterie.storage.share_state: local files, or PostgreSQL in a cluster). With nothing
  stored, the share partition starts where the group's `share.auto.offset.reset` says
  (latest by default, as Kafka's) and its first snapshot is written. A cluster broker that
  finds the partition's lease at another epoch than the state it holds was not the leader
  all along: it drops the state and loads it again (another broker may have written since).
- **One operation at a time per share partition**, each followed by the durable write of
  what it changed (`Outcome.records`), before the caller answers anyone: nothing is told to a
  client before it is durable. The write is conditional on the partition's lease (a broker
  that lost it writes nothing: NOT_LEADER_OR_FOLLOWER), and on the state epoch of the copy
  (one reset since by a coordinator elsewhere refuses it the same way). A failed write
  leaves the in-memory state ahead of the stored one, so the state is dropped and loaded
  again next time.
- **Lock expiry.** One timer task sleeps until the earliest lock deadline of all share
  partitions, expires what is due, writes it, and wakes the share fetches waiting on those
  partitions (released records are news to them).
- **Members going.** A member whose share session ends, or who leaves the group, has its
  acquired records released at once.

Decision (docs/share-groups.md): coterie has no separate share coordinator. Kafka's leader
writes the state through the share coordinator to `__share_group_state`; coterie's leader
writes Kafka's same ShareSnapshot/ShareUpdate records itself, beside its partition, fenced
by the same lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.config_defs import STATIC_CONFIGS
from coterie.broker.context import LEADER_EPOCH
from coterie.group import ShareGroupDescribeRequest
from coterie.share import (
    AbortedTransaction,
    AcquireMode,
    FetchedBatch,
    OffsetNotAvailable,
    Outcome,
    ShareConfig,
    SharePartition,
    ShareSnapshotKey,
    ShareStateRecord,
    aborted_batches,
    decode,
    encode,
    replay,
    resolve_start_offset,
)
from coterie.storage.api import Lease, Resource, TopicIdPartition
from coterie.storage.errors import LeaseLost, StateEpochFenced
from coterie.wire.record_batch import batch_headers

log = logging.getLogger("coterie.share")

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
_KEY_LEN = struct.Struct(">H")


def broker_int(config: Any, key: str) -> int:
    """A broker property, or its Kafka default (config_defs) when not set."""
    value = config.props.get(key)
    return int(value) if value else int(STATIC_CONFIGS[key][1])


class ShareUnavailable(Exception):
    """The share partition cannot be served here now: `code` says why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def entry_bytes(record: ShareStateRecord) -> bytes:
    """One record as the share-state store keeps it: its key's length, key, value."""
    key, value = encode(record)
    return _KEY_LEN.pack(len(key)) + key + (value or b"")


def entry_record(entry: bytes) -> ShareStateRecord:
    (n,) = _KEY_LEN.unpack_from(entry)
    return decode(entry[2:2 + n], entry[2 + n:])


@dataclass(frozen=True, slots=True)
class Read:
    """What `SharePartitions.read_for` read: the stored bytes, (first offset, last offset,
    start, end) of each batch in them, and (first, last) of the batches of aborted
    transactions among them (read_committed only)."""

    data: bytes = b""
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)
    aborted: list[tuple[int, int]] = field(default_factory=list)


def _read_of(data: bytes, headers: list[Any], txns: list[AbortedTransaction]) -> Read:
    """A Read of whole batches `data` with their `headers`; `txns` the aborted transactions
    overlapping them (read_committed), whose data batches are listed for archiving."""
    aborted: list[tuple[int, int]] = []
    if txns:
        aborted = aborted_batches(
            (FetchedBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional,
                          h.is_control) for h in headers), txns)
    return Read(data, [(h.base_offset, h.last_offset, h.position, h.end) for h in headers],
                aborted)


class SharePartitions:
    """Every share partition of this broker; see the module docstring."""

    def __init__(self, services: Any, store: Any) -> None:
        self._services = services
        self._store = store
        self._parts: dict[Key, SharePartition] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._by_group: dict[str, set[Key]] = {}
        self._deadlines: list[tuple[int, Key]] = []
        # Each share partition's earliest deadline in the heap: a later one is not pushed
        # (the expiry at the earlier one schedules the next), so the heap holds about one
        # entry per share partition, not one per acquisition.
        self._scheduled: dict[Key, int] = {}
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.Task[None] | None = None

    # -- settings ------------------------------------------------------------------------

    def config_of(self, group_id: str) -> ShareConfig:
        """The group's share settings: the broker's `group.share.*`, with the group's own
        `share.record.lock.duration.ms` when it has one."""
        lock_ms = broker_int(self._services.config, "group.share.record.lock.duration.ms")
        own = self._group_config(group_id, "share.record.lock.duration.ms")
        if own is not None:
            lock_ms = int(own)
        return ShareConfig(
            max_record_locks=broker_int(self._services.config,
                                        "group.share.partition.max.record.locks"),
            delivery_count_limit=broker_int(self._services.config,
                                            "group.share.delivery.count.limit"),
            record_lock_duration_ms=lock_ms,
            read_committed=(self._group_config(group_id, "share.isolation.level")
                            == "read_committed"))

    def _group_config(self, group_id: str, name: str) -> str | None:
        configs = self._services.group_configs
        if configs is None:
            return None
        return configs.current(group_id).get(name)

    # -- the lease ------------------------------------------------------------------------

    def lease_of(self, topic: str, tp: TopicIdPartition) -> Lease:
        """The lease this broker leads the partition under; ShareUnavailable if it does
        not lead it (a cluster broker)."""
        cluster = self._services.cluster
        if cluster is None:
            return Lease(Resource.partition(tp), self._services.config.node_id, LEADER_EPOCH)
        led = cluster.serving(topic, tp.partition)
        if led is None:
            raise ShareUnavailable(ErrorCode.not_leader_or_follower,
                                   f"this broker does not lead {topic}-{tp.partition}")
        return led.lease

    # -- operations -----------------------------------------------------------------------

    def lock(self, key: Key) -> asyncio.Lock:
        found = self._locks.get(key)
        if found is None:
            found = self._locks[key] = asyncio.Lock()
        return found

    async def state(self, key: Key, topic: str, lease: Lease, now: int, *,
                    subscribed_only: bool = True) -> SharePartition:
        """The share partition of `key`, loaded or started (only for a group subscribed to
        the topic, unless not `subscribed_only`); call holding `lock(key)`."""
        sp = self._parts.get(key)
        if sp is not None and sp.leader_epoch == lease.epoch:
            sp.config = self.config_of(key[0])
            return sp
        group_id, topic_id, partition = key
        tp = TopicIdPartition(topic_id, partition)
        config = self.config_of(group_id)
        try:
            entries = await self._store.load(group_id, tp)
        except Exception as e:
            raise ShareUnavailable(ErrorCode.kafka_storage_error,
                                   f"share state of {topic}-{partition} unreadable: {e}") from e
        sp = None
        if entries:
            sp = replay([entry_record(e) for e in entries], config=config,
                        leader_epoch=lease.epoch)
        if sp is None:
            part = self._services.logs.partition(topic, partition)
            if part is None:
                raise ShareUnavailable(ErrorCode.unknown_topic_or_partition,
                                       f"no partition {topic}-{partition}")
            if subscribed_only:
                self._check_subscribed(group_id, topic)
            strategy = self._group_config(group_id, "share.auto.offset.reset") or "latest"
            try:
                start = await self._start_offset(strategy, topic, partition, part, now)
            except OffsetNotAvailable as e:
                raise ShareUnavailable(ErrorCode.offset_not_available, str(e)) from e
            sp, outcome = SharePartition.initialize(group_id, topic_id, partition, start, now,
                                                    config=config, leader_epoch=lease.epoch)
            await self._write(key, outcome, lease, sp.state_epoch)
        self._parts[key] = sp
        self._by_group.setdefault(group_id, set()).add(key)
        return sp

    def _check_subscribed(self, group_id: str, topic: str) -> None:
        """A share partition is set up only for a share group subscribed to its topic.

        Kafka 4.2 sets share partitions up when the group subscribes, and answers a
        ShareFetch for a partition it never set up with UNKNOWN_SERVER_ERROR (seen against a
        4.2.1 broker): so does coterie, with a message saying why. Where this broker is not
        the group's coordinator (a cluster), the group cannot be asked and is trusted."""
        described = self._services.groups.handle(ShareGroupDescribeRequest(group_id))
        if described.error == ErrorCode.group_id_not_found:
            raise ShareUnavailable(ErrorCode.unknown_server_error,
                                   f"there is no share group {group_id}")
        if described.error != ErrorCode.none:
            return
        if not any(topic in m.subscribed_topic_names for m in described.members):
            raise ShareUnavailable(ErrorCode.unknown_server_error,
                                   f"share group {group_id} is not subscribed to {topic}")

    async def persist(self, key: Key, sp: SharePartition, outcome: Outcome,
                      lease: Lease) -> ErrorCode:
        """Write what an operation changed; ErrorCode.none once durable. On failure the
        state is dropped (loaded again at next use) and the error is the partition's."""
        try:
            await self._write(key, outcome, lease, sp.state_epoch)
        except ShareUnavailable as e:
            self.forget(key)
            return e.code
        finally:
            self._schedule(key, sp)
        return ErrorCode.none

    async def _write(self, key: Key, outcome: Outcome, lease: Lease, state_epoch: int) -> None:
        records = outcome.records
        if not records:
            return
        tp = TopicIdPartition(key[1], key[2])
        last_snapshot = max((i for i, r in enumerate(records)
                             if isinstance(r.key, ShareSnapshotKey)), default=None)
        try:
            if last_snapshot is None:
                await self._store.append(key[0], tp, [entry_bytes(r) for r in records], lease,
                                         state_epoch=state_epoch)
            else:
                await self._store.replace(key[0], tp, [entry_bytes(r) for r in
                                                       records[last_snapshot:]], lease,
                                          state_epoch=state_epoch)
        except (LeaseLost, StateEpochFenced) as e:
            # Kafka answers FENCED_STATE_EPOCH as NOT_LEADER_OR_FOLLOWER too: the client
            # retries, and the state, dropped by `persist`, is loaded again.
            raise ShareUnavailable(ErrorCode.not_leader_or_follower, str(e)) from e
        except Exception as e:
            log.warning("share state of %s not written: %s", key, e)
            raise ShareUnavailable(ErrorCode.kafka_storage_error,
                                   f"share state not written: {e}") from e

    def forget(self, key: Key) -> None:
        self._parts.pop(key, None)
        keys = self._by_group.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_group[key[0]]

    def forget_group(self, group_id: str) -> None:
        """Drop a deleted group's share partitions from memory."""
        for key in list(self._by_group.get(group_id, ())):
            self.forget(key)

    @property
    def store(self) -> Any:
        return self._store

    def cached(self, key: Key) -> SharePartition | None:
        """The live state of a share partition this broker holds, if it does.

        In a cluster, only while this broker still leads the partition at the epoch the
        state was loaded under: a broker that lost the lease keeps its copy until it next
        touches the partition, and another leader may have moved the stored state on since
        (a describe must then read the store)."""
        sp = self._parts.get(key)
        if sp is None or self._services.cluster is None:
            return sp
        try:
            lease = self.lease_of(self._topic_name(key[1]) or "",
                                  TopicIdPartition(key[1], key[2]))
        except ShareUnavailable:
            return None
        return sp if sp.leader_epoch == lease.epoch else None

    async def delete_state(self, group_id: str, tp: TopicIdPartition) -> None:
        """DeleteShareGroupOffsets: the group's state on `tp` goes, stored and held."""
        key = (group_id, tp.topic_id, tp.partition)
        async with self.lock(key):
            self.forget(key)
            await self._store.delete(group_id, tp)

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups: every share partition state of the group goes."""
        self.forget_group(group_id)
        await self._store.delete(group_id)

    async def reset(self, group_id: str, topic: str, tp: TopicIdPartition,
                    start_offset: int) -> None:
        """AlterShareGroupOffsets: the share partition starts over at `start_offset` (a new
        state epoch, nothing in flight); ShareUnavailable where it cannot be written.

        Where this broker leads the partition, its own copy is reset and written under the
        lease. Where another broker does (a cluster coordinator), the new state is written
        with no lease and the next state epoch (`_reset_elsewhere`)."""
        key = (group_id, tp.topic_id, tp.partition)
        try:
            lease = self.lease_of(topic, tp)
        except ShareUnavailable:
            if self._services.cluster is None:
                raise
            await self._reset_elsewhere(key, start_offset)
            return
        now = self._services.now_ms()
        async with self.lock(key):
            sp = await self.state(key, topic, lease, now, subscribed_only=False)
            code = await self.persist(key, sp, sp.reset(start_offset, now), lease)
        if code != ErrorCode.none:
            raise ShareUnavailable(code, f"share state of {topic}-{tp.partition} not written")
        self._services.waiters.notify(topic, tp.partition)

    async def _reset_elsewhere(self, key: Key, start_offset: int) -> None:
        """Reset a share partition another broker leads, as Kafka's share coordinator
        initializes it anew for AlterShareGroupOffsets: a snapshot at `start_offset` with
        the stored state epoch plus one, written with `store.reset` (no lease: an
        administrator's action on an empty group). The leader's copy, if it still holds one
        from before, is older: its next write is refused (StateEpochFenced), which makes it
        drop the copy and load this state. A reset racing with another is refused the
        same way (NOT_LEADER_OR_FOLLOWER here; the administrator retries)."""
        group_id, topic_id, partition = key
        tp = TopicIdPartition(topic_id, partition)
        async with self.lock(key):
            self.forget(key)  # a copy from an earlier tenure here is stale from now on
            try:
                entries = await self._store.load(group_id, tp)
            except Exception as e:
                raise ShareUnavailable(ErrorCode.kafka_storage_error,
                                       f"share state unreadable: {e}") from e
            stored = replay([entry_record(e) for e in entries]) if entries else None
            state_epoch = (stored.state_epoch if stored is not None else 0) + 1
            _, outcome = SharePartition.initialize(
                group_id, topic_id, partition, start_offset, self._services.now_ms(),
                config=self.config_of(group_id), leader_epoch=-1, state_epoch=state_epoch)
            try:
                await self._store.reset(group_id, tp, [entry_bytes(r) for r in outcome.records],
                                        state_epoch)
            except StateEpochFenced as e:
                raise ShareUnavailable(ErrorCode.not_leader_or_follower, str(e)) from e
            except Exception as e:
                log.warning("share state of %s not reset: %s", key, e)
                raise ShareUnavailable(ErrorCode.kafka_storage_error,
                                       f"share state not written: {e}") from e

    async def release_member(self, group_id: str, member_id: str) -> None:
        """Release what `member_id` holds in every share partition of its group (its share
        session here has ended). When no member of the group has a session here any more,
        the group's copies are dropped (nothing is acquired in them: every session's end
        released its records): the group may now be changed by its coordinator on another
        broker (Delete/AlterShareGroupOffsets, DeleteGroups need it empty), which writes
        the store and cannot reach this broker's copies, so the next session loads again."""
        now = self._services.now_ms()
        for key in list(self._by_group.get(group_id, ())):
            async with self.lock(key):
                sp = self._parts.get(key)
                if sp is None or not sp.acquired_by(member_id):
                    continue
                topic = self._topic_name(key[1])
                try:
                    lease = self.lease_of(topic or "", TopicIdPartition(key[1], key[2]))
                except ShareUnavailable:
                    self.forget(key)
                    continue
                await self.persist(key, sp, sp.release_member(member_id, now), lease)
            if topic is not None:
                self._services.waiters.notify(topic, key[2])
        sessions = getattr(self._services, "share_sessions", None)
        if sessions is not None and not sessions.has_group(group_id):
            self.forget_group(group_id)

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self._services.logs.topic_by_id(topic_id)
        return None if info is None else info.name

    # -- acquisition ----------------------------------------------------------------------

    async def read_for(self, sp: SharePartition, topic: str, max_bytes: int,
                       max_records: int) -> Read:
        """The whole batches at the share partition's next fetch offset, as stored.

        Only as far as one acquisition can reach: `max_records` past the window's end, and
        not past the window's bound (max record locks from the start offset). Reading up to
        `max_bytes` instead made every ShareFetch read, and split, megabytes of which it
        took a few hundred records (docs/benchmarks.md, "Share groups: consume
        throughput"). At least the batch holding the next fetch offset is read.

        read_committed (the group's share.isolation.level): only below the last stable
        offset, as Kafka's share fetch reads with TXN_COMMITTED isolation, so an open
        transaction holds delivery there; and the batches of aborted transactions in what
        was read are listed, for `acquire` to archive.

        A cluster broker's copy may hold recent batches only (docs/cluster.md, "The copy of
        a partition"): below its start, the batches come from the database, one read, as a
        Fetch below the copy does. The caller holds the share partition's lock, so nothing
        else acquires meanwhile."""
        part = self._services.logs.partition(topic, sp.partition)
        if part is None:
            return Read()
        offset = max(sp.next_fetch_offset(), part.log_start_offset)
        committed = sp.config.read_committed
        end = part.last_stable_offset if committed else part.high_watermark
        bound = min(end, sp.next_offset + max(max_records, 1),
                    sp.start_offset + sp.config.max_record_locks)
        if offset >= bound:
            return Read()
        if offset < part.local_start_offset:
            return await self._read_below_copy(topic, sp.partition, offset, max_bytes,
                                               bound, end, committed)
        span = part.locate(offset, max(max_bytes, 1), bound)
        if span is None:  # the batch at `offset` holds the bound: that batch alone
            span = part.locate(offset, 1, end)
            if span is None:
                return Read()
        seg, start, stop = span
        data = seg.read_range(start, stop)
        headers = batch_headers(data)
        txns: list[AbortedTransaction] = []
        if committed and headers:
            txns = [AbortedTransaction(t.producer_id, t.first_offset, t.last_offset)
                    for t in part.aborted_transactions(headers[0].base_offset,
                                                       headers[-1].next_offset)]
        return _read_of(data, headers, txns)

    async def _start_offset(self, strategy: str, topic: str, index: int, part: Any,
                            now: int) -> int:
        """Where a new share partition starts (`share.auto.offset.reset`). A cluster
        broker's copy may hold recent batches only (docs/cluster.md, "The copy of a
        partition"): a by_duration lookup the copy answers with its first offset may have an
        earlier answer in the database, which is asked then."""
        asked: list[int] = []

        def in_copy(timestamp: int) -> int | None:
            asked.append(timestamp)
            return _offset_in_copy(part, timestamp)

        def resolve(lookup: Any) -> int:
            return resolve_start_offset(strategy, log_start_offset=part.log_start_offset,
                                        log_end_offset=part.high_watermark, now=now,
                                        offset_for_timestamp=lookup)

        start = resolve(in_copy)
        local = part.local_start_offset
        cluster = self._services.cluster
        if asked and start <= local and part.log_start_offset < local and cluster is not None:
            led = cluster.serving(topic, index)
            if led is None:
                raise ShareUnavailable(ErrorCode.not_leader_or_follower,
                                       f"this broker does not lead {topic}-{index}")
            try:
                found = _offset_of(await cluster.offset_for_timestamp(led, asked[0]))
            except Exception as e:  # the database failed: retriable, never a crash
                raise ShareUnavailable(ErrorCode.kafka_storage_error,
                                       f"looking up {topic}-{index} by time in the "
                                       f"database failed: {e}") from e
            start = resolve(lambda _ts: found)
        return start

    async def _read_below_copy(self, topic: str, index: int, offset: int, max_bytes: int,
                               bound: int, end: int, committed: bool) -> Read:
        """`read_for` below a cluster broker's copy: the database's whole batches from
        `offset`, cut at the first batch reaching `bound` (at least one batch, none at or
        past `end`)."""
        cluster = self._services.cluster
        led = cluster.serving(topic, index) if cluster is not None else None
        if led is None:
            raise ShareUnavailable(ErrorCode.not_leader_or_follower,
                                   f"this broker does not lead {topic}-{index}")
        try:
            data = await cluster.read_below_copy(led, offset, max(max_bytes, 1))
            headers = batch_headers(data)
            kept = []
            for h in headers:
                if h.base_offset >= end or (kept and h.base_offset >= bound):
                    break
                kept.append(h)
            data = data[:kept[-1].end] if kept else b""
            txns: list[AbortedTransaction] = []
            if committed and kept:
                txns = [AbortedTransaction(t.producer_id, t.first_offset, t.last_offset)
                        for t in await cluster.aborted_below_copy(
                            led, kept[0].base_offset, kept[-1].next_offset)]
        except ShareUnavailable:
            raise
        except Exception as e:  # the database failed: retriable, never a crash
            log.warning("share read of %s-%d from offset %d in the database failed: %s",
                        topic, index, offset, str(e).strip() or type(e).__name__)
            raise ShareUnavailable(ErrorCode.kafka_storage_error,
                                   f"reading {topic}-{index} from the database failed") from e
        return _read_of(data, kept, txns)

    @staticmethod
    def acquire(sp: SharePartition, member_id: str, read: Read, max_records: int,
                mode: AcquireMode, now: int, batch_size: int = 0) -> tuple[Outcome, bytes]:
        """Acquire from the batches read for `member_id`; the outcome, and the stored bytes
        from the first batch holding an acquired record to the last (one slice: a batch in
        between whose records others hold goes too, and the client skips it, as it skips
        what is outside its acquired ranges)."""
        batches = read.batches
        outcome = sp.acquire(member_id, [(f, last) for f, last, _, _ in batches],
                             max_records, now, mode=mode, aborted=read.aborted,
                             batch_size=batch_size)
        if not outcome.acquired:
            return outcome, b""
        lo, hi = outcome.acquired[0].first_offset, outcome.acquired[-1].last_offset
        held = [(s, e) for first, last, s, e in batches if first <= hi and lo <= last]
        return outcome, read.data[held[0][0]:held[-1][1]] if held else b""

    # -- lock expiry ----------------------------------------------------------------------

    def _schedule(self, key: Key, sp: SharePartition) -> None:
        deadline = sp.next_deadline()
        if deadline is None:
            return
        scheduled = self._scheduled.get(key)
        if scheduled is not None and scheduled <= deadline:
            return
        self._scheduled[key] = deadline
        heapq.heappush(self._deadlines, (deadline, key))
        if self._timer is None or self._timer.done():
            self._wake = asyncio.Event()
            self._timer = asyncio.get_running_loop().create_task(self._expiry_loop())
        elif self._deadlines[0][1] == key and self._wake is not None:
            self._wake.set()

    async def _expiry_loop(self) -> None:
        while self._deadlines:
            wake = self._wake
            assert wake is not None
            delay = max(self._deadlines[0][0] - self._services.now_ms(), 0) / 1000
            if delay > 0:
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), delay)
                continue
            now = self._services.now_ms()
            due = set()
            while self._deadlines and self._deadlines[0][0] <= now:
                deadline, key = heapq.heappop(self._deadlines)
                if self._scheduled.get(key) == deadline:  # else replaced by an earlier one
                    del self._scheduled[key]
                    due.add(key)
            for key in due:
                await self._expire(key, now)

    async def _expire(self, key: Key, now: int) -> None:
        topic = self._topic_name(key[1])
        async with self.lock(key):
            sp = self._parts.get(key)
            if sp is None:
                return
            outcome = sp.expire(now)
            if outcome.records:
                try:
                    lease = self.lease_of(topic or "", TopicIdPartition(key[1], key[2]))
                except ShareUnavailable:
                    self.forget(key)
                    return
                await self.persist(key, sp, outcome, lease)
            else:
                self._schedule(key, sp)
        if topic is not None:
            self._services.waiters.notify(topic, key[2])

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _offset_of(found: Any) -> int | None:
    return None if found is None else found.offset


def _offset_in_copy(part: Any, timestamp: int) -> int | None:
    """The timestamp lookup of a share partition's start, within the copy a cluster broker
    holds (all of the log elsewhere; `_start_offset` asks the database below it)."""
    return _offset_of(part.offset_for_timestamp(timestamp, within_copy=True))
