"""The group coordinator's runtime: the I/O around the pure shards of coterie.group.

`__consumer_offsets` has N partitions (offsets.topic.num.partitions, 50); the runtime holds
one `GroupShard` per partition (`coterie.group.shard`) and routes every group request,
timer and record to the shard of the group's partition (Kafka's mapping,
`coterie.common.partitioning`). A shard is pure: the runtime passes it `now_ms` from its
clock, appends the records of every result to the shard's partition as one batch *before*
any response of that call is sent, and on a failed append answers with
COORDINATOR_NOT_AVAILABLE and has the shard revert (`GroupShard.revert`, the one undo path).

Its seams: an `OffsetsLog` (`coterie.broker.offsets_topic`: the broker's real topic, or an
in-memory log in tests), a clock, and the group settings (`group_settings`). It knows
nothing of sockets or of the broker object.

At start-up the partitions are read back and every record, of any kind, is replayed in log
order through the shards' `replay`; until that finishes, group APIs answer
COORDINATOR_LOAD_IN_PROGRESS. Then the shards are told the current topics, which bumps the
epoch of any consumer group whose subscribed topics changed while the broker was down.

It also turns the shards' timer operations into event-loop timers and parked requests into
futures: a handler that gets no immediate answer awaits the future of its token, which a
later call (another member's join, a timer) resolves through `Result.completed`.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gc
import heapq
import itertools
import logging
import uuid
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from coterie.broker.offsets_topic import OFFSETS_TOPIC, OffsetsLog, TxnMarker, TxnRecord
from coterie.common.partitioning import partition_for
from coterie.group.classic.config import ClassicConfig
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.limits import MAX_STRING_BYTES
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.shard import GroupShard, ShardConfig
from coterie.group.timers import TimerKey, TimerKind
from coterie.group.topic_image import TopicImage, TopicInfo

__all__ = ["GROUP_DEFAULTS", "OFFSETS_TOPIC", "GroupObserver", "GroupRuntime",
           "group_settings", "with_error"]

log = logging.getLogger("coterie.groups")

GROUP_DEFAULTS = {
    "offsets.topic.num.partitions": "50",
    "offsets.topic.segment.bytes": str(100 * 1024 * 1024),
    "offsets.retention.minutes": str(7 * 24 * 60),
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.max.size": str(2**31 - 1),
    "group.classic.max.member.metadata.bytes": str(1024 * 1024),
    # coterie extension: how long the member chosen to compute a client-side assignment has
    # to install it before the server-side fallback does (docs/extensions.md).
    "group.consumer.client.assignment.timeout.ms": "10000",
}

# How many group ids' shard indexes are remembered (Java's hash is a Python loop; every
# request needs it). Cleared whole when full.
_SHARD_CACHE_MAX = 65_536


def group_settings(props: Mapping[str, str], consumer: ConsumerGroupConfig) -> ShardConfig:
    """The shard settings from the broker's properties (Kafka's names and defaults)."""
    p = {**GROUP_DEFAULTS, **props}
    return ShardConfig(
        classic=ClassicConfig(
            min_session_timeout_ms=int(p["group.min.session.timeout.ms"]),
            max_session_timeout_ms=int(p["group.max.session.timeout.ms"]),
            initial_rebalance_delay_ms=int(p["group.initial.rebalance.delay.ms"]),
            max_size=int(p["group.max.size"]),
            max_metadata_bytes=int(p["group.classic.max.member.metadata.bytes"])),
        consumer=consumer,
        client_assignment_timeout_ms=int(p["group.consumer.client.assignment.timeout.ms"]),
        offset_metadata_max_bytes=int(p["offset.metadata.max.bytes"]),
        offsets_retention_ms=int(p["offsets.retention.minutes"]) * 60_000,
    )


def with_error(response: Any, error: ErrorCode) -> Any:
    """The same answer, carrying `error` instead (for records that could not be persisted).
    An answer with a `with_error` method says itself what changes (per-partition codes)."""
    if isinstance(response, ErrorCode):
        return error
    if hasattr(response, "with_error"):
        return response.with_error(error)
    if dataclasses.is_dataclass(response) and hasattr(response, "error"):
        return dataclasses.replace(response, error=error)
    return response


class GroupObserver(Protocol):
    """Who watches groups change (`coterie.broker.group_events` publishes them)."""

    cause: TimerKind | None

    def observe(self, group_id: str, wrote_records: bool = True) -> None: ...

    def prime(self) -> None: ...


class _Unobserved:
    cause: TimerKind | None = None

    def observe(self, group_id: str, wrote_records: bool = True) -> None:
        pass

    def prime(self) -> None:
        pass


# At most 4 UTF-8 bytes per character: this many characters plus "-" and a 36-character UUID
# always fit in a record's int16-length string.
_MAX_CLIENT_ID_PREFIX = (MAX_STRING_BYTES - 37) // 4


def new_member_id(client_id: str) -> str:
    """Kafka's form, client id + "-" + UUID. The client id part is cut short when it is so
    long (a header allows 32,767 bytes) that the id would not fit in a record."""
    prefix = client_id[:_MAX_CLIENT_ID_PREFIX] if client_id else "member"
    return f"{prefix}-{uuid.uuid4()}"


def new_consumer_member_id() -> str:
    """For ConsumerGroupHeartbeat v0 joins without a member id: a Kafka Uuid string."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class GroupRuntime:
    def __init__(self, offsets_log: OffsetsLog, clock: Callable[[], int],
                 config: ShardConfig, retention_check_interval_ms: int = 600_000) -> None:
        self.log = offsets_log
        self.now_ms = clock
        self.config = config
        self.retention_check_interval_ms = retention_check_interval_ms
        self.shards = [GroupShard(i, config, new_member_id, new_consumer_member_id)
                       for i in range(offsets_log.partitions)]
        self._shard_of: dict[str, GroupShard] = {}
        self.loaded = False
        # The core's armed timers (every member has its session timer), by key: the deadline
        # each wants (`_apply_timers`), and a heap of (deadline, sequence, key) entries
        # behind a single loop timer, `_wake`, armed for the earliest (`_wake_at`).
        self._timers: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._sequence = itertools.count()
        self._wake: asyncio.TimerHandle | None = None
        self._wake_at = 0
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        # Every group change, as JSON events in __group_events, once the broker plugs in
        # its publisher (coterie.broker.group_events).
        self.events: GroupObserver = _Unobserved()

    @property
    def num_partitions(self) -> int:
        return len(self.shards)

    def shard_for(self, group_id: str) -> GroupShard:
        """The shard coordinating `group_id`."""
        shard = self._shard_of.get(group_id)
        if shard is None:
            if len(self._shard_of) >= _SHARD_CACHE_MAX:
                self._shard_of.clear()
            shard = self._shard_of[group_id] = self.shards[
                partition_for(group_id, len(self.shards))]
        return shard

    def partition_of(self, group_id: str) -> int:
        """The __consumer_offsets partition holding `group_id` (a transaction that commits
        its offsets adds this partition)."""
        return self.shard_for(group_id).partition

    def group_ids(self) -> list[str]:
        """Every group of every shard (classic and consumer)."""
        return [g.group_id for shard in self.shards for g in shard.coordinator.groups()]

    # -- start-up -------------------------------------------------------------------------
    async def load(self) -> None:
        """Replay every partition of __consumer_offsets, yielding to the loop as it goes so
        that other requests are answered (group ones with COORDINATOR_LOAD_IN_PROGRESS)."""
        try:
            await self._load()
        except Exception:
            # A record that contradicts the state (ReplayError) or bytes that do not decode:
            # like Kafka, refuse to serve groups from a log that cannot be trusted.
            log.exception("loading %s failed; group APIs stay unavailable", OFFSETS_TOPIC)
            raise

    async def _load(self) -> None:
        started = self.now_ms()
        count = skipped = 0
        for shard in self.shards:
            for chunk in self.log.read(shard.partition):
                for item in chunk:
                    if item is None:
                        skipped += 1
                        continue
                    if isinstance(item, TxnMarker):
                        shard.replay_marker(item.producer_id, item.commit)
                    elif isinstance(item, TxnRecord):
                        shard.replay(item.record, item.producer_id)
                    else:
                        shard.replay(item)
                    count += 1
                await asyncio.sleep(0)
        now = self.now_ms()
        for shard in self.shards:
            self._apply_timers(shard.timers_after_load(now))
        self.loaded = True
        # What loading built lives as long as the broker: move it out of the collector's
        # reach, so later full collections (pauses felt as p99 latency) do not walk it.
        gc.freeze()
        self.events.prime()
        log.info("loaded %d group records (%d of unknown types skipped) from %s in %d ms: "
                 "%d classic groups, %d consumer groups, %d groups with offsets", count,
                 skipped, OFFSETS_TOPIC, self.now_ms() - started,
                 sum(len(s.classic.groups) for s in self.shards),
                 sum(len(s.consumer.groups) for s in self.shards),
                 sum(len(s.offsets.groups()) for s in self.shards))

    # -- topics -----------------------------------------------------------------------------
    def topics_changed(self, topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo]) -> None:
        """Tell every shard the broker's topics (after a create, a delete, more partitions,
        and once loading is done) and persist the epoch bumps they return. Skipped while
        loading: the end of loading hands over the full picture anyway."""
        if not self.loaded:
            return
        now = self.now_ms()
        # One picture for every shard (built once: a broker may have many topics), at a
        # version newer than any shard has seen.
        image = TopicImage.of(topics, max(s.consumer.next_image_version()
                                          for s in self.shards))
        for shard in self.shards:
            try:
                self.run_many(shard.on_metadata_change(image, now))
            except Exception:
                # Never fail the topic operation itself; the next change retries the picture.
                log.exception("consumer groups could not take the topic change")

    def run_many(self, result: Result) -> None:
        """Persist a result whose records span many groups (one batch per group, in order),
        then arm its timers."""
        by_group: dict[str, list[Record]] = {}
        for record in result.records:
            by_group.setdefault(record.key.group_id, []).append(record)
        for group_id, records in by_group.items():
            self.run(group_id, Result(records=records))
        self._apply_timers(result.timers)

    # -- running results ------------------------------------------------------------------
    def park(self) -> tuple[int, asyncio.Future[Any]]:
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        return token, fut

    async def complete(self, group_id: str, result: Result, token: int,
                       fut: asyncio.Future[Any]) -> Any:
        """Persist and apply `result`; return the answer for `token`, awaiting it if the
        request was parked. (The broker's handlers park without awaiting: `Parked` in
        coterie.broker.context; this is for callers that run the runtime in-process.)"""
        response = self.run(group_id, result)
        if response is not None:
            self._waiters.pop(token, None)
            return response
        try:
            return await fut
        finally:
            self._waiters.pop(token, None)

    def forget(self, token: int) -> None:
        """The request parked under `token` was answered at once."""
        self._waiters.pop(token, None)

    def run_settled(self, group_id: str, result: Result) -> Any:
        """`run` for a settled member's heartbeat, which writes and completes nothing and
        only moves the member's session timer: the same outcome without the steps that
        would find nothing to do (no append, no revert, and a consumer group unchanged
        by records publishes no event)."""
        if result.records or result.completed:
            return self.run(group_id, result)
        self._apply_timers(result.timers)
        return result.response

    def run(self, group_id: str, result: Result) -> Any:
        """Append the records, then answer, then arm timers. Returns the immediate answer.
        The shard has applied the result already; if the append fails, it reverts."""
        response = result.response
        completed = result.completed
        timers = result.timers
        shard = self.shard_for(group_id)
        revert = None
        if result.records:
            try:
                self.log.append(shard.partition, result.records, self.now_ms(),
                                result.producer)
            except Exception:
                log.exception("could not persist %d records of group %s",
                              len(result.records), group_id)
                error = ErrorCode.coordinator_not_available
                response = with_error(response, error)
                completed = [(t, with_error(r, error)) for t, r in completed]
                revert = shard.revert(group_id, result.records, self.now_ms(),
                                      result.producer)
            else:
                shard.committed(result.records, result.producer)
        self._apply_timers(timers)
        if revert is not None:
            if revert.rebuilt:
                self._apply_timers([TimerOp(key, None) for key in list(self._timers)
                                    if key.group_id == group_id])
            self._apply_timers(revert.result.timers)
            completed = [*completed, *revert.result.completed]
        for token, answer in completed:
            self._resolve(token, answer)
        self.events.observe(group_id, wrote_records=bool(result.records))
        return response

    def _resolve(self, token: Hashable, answer: Any) -> None:
        fut = self._waiters.pop(token, None) if isinstance(token, int) else None
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def _apply_timers(self, ops: list[TimerOp]) -> None:
        """Arm and cancel the core's timers. Why not a loop timer each: at 10,000 members
        a loop handle per session timer cost about 300 bytes a member. Here a key's entry
        in the heap stays where it is when its deadline moves later (every heartbeat
        pushes its member's session timer): when the entry comes due, `_fire_due` finds
        the later deadline and puts the key back for it. So a heartbeat costs one dict
        store. An earlier deadline adds an entry; entries of cancelled keys are skipped."""
        timers = self._timers
        now = -1
        for op in ops:
            key, deadline = op.key, op.deadline_ms
            wanted = timers.get(key)
            if deadline is None:
                if wanted is not None:
                    del timers[key]
                continue
            timers[key] = deadline
            if wanted is not None and wanted <= deadline:
                continue  # an entry at or before `deadline` is in the heap already
            heap = self._heap
            heapq.heappush(heap, (deadline, next(self._sequence), key))
            if len(heap) > 2 * len(timers) + 1024:  # mostly stale: members come and go
                heap[:] = [(d, next(self._sequence), k) for k, d in timers.items()]
                heapq.heapify(heap)
            if self._wake is None or deadline < self._wake_at:
                if now < 0:
                    now = self.now_ms()
                self._schedule(deadline, now)

    def _schedule(self, deadline: int, now: int) -> None:
        """A deadline already due (a 0 ms initial rebalance delay) still goes through the
        loop: never inside the request that armed it, but on a later turn, after the
        handlers of requests read off their sockets before that turn (their tasks are queued
        already) have run. Kafka likewise queues such a timer behind the requests already
        queued for the coordinator."""
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = deadline
        self._wake = asyncio.get_running_loop().call_later(
            max(0.0, (deadline - now) / 1000), self._fire_due)

    def _fire_due(self) -> None:
        """Fire every timer due now, in deadline order. Timers the firing ones arm wait for
        a later turn, even those already due (`_schedule`)."""
        self._wake = None
        heap = self._heap
        timers = self._timers
        now = self.now_ms()
        due: list[TimerKey] = []
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[2])
        for key in due:
            wanted = timers.get(key)
            if wanted is None:
                continue  # cancelled, or fired already by an earlier entry
            if wanted > now:  # pushed back since its entry went in
                heapq.heappush(heap, (wanted, next(self._sequence), key))
                continue
            del timers[key]
            self._fire(key, now)
        if heap and (self._wake is None or heap[0][0] < self._wake_at):
            self._schedule(heap[0][0], now)

    def _fire(self, key: TimerKey, now: int) -> None:
        group_id = key.group_id
        # Why members a timer removes went (a TimerKind: a str, "session" and so on).
        self.events.cause = key.kind
        try:
            self.run(group_id, self.shard_for(group_id).coordinator.on_timer(key, now))
        except Exception:
            log.exception("timer %s failed", key)

    # -- offsets housekeeping -------------------------------------------------------------
    def expire_offsets(self) -> int:
        """Delete the offsets whose retention ran out (each shard says which)."""
        expired = 0
        now = self.now_ms()
        for shard in self.shards:
            records = shard.expire_offsets(now)
            by_group: dict[str, list[Record]] = {}
            for r in records:
                by_group.setdefault(r.key.group_id, []).append(r)
            for group_id, rs in by_group.items():
                self.run(group_id, Result(records=rs))
            expired += len(records)
        return expired

    def compact(self, min_segments: int = 2) -> int:
        """Bound what a reload of __consumer_offsets replays (`OffsetsLog.compact`: on the
        broker, roll partitions with much history for the log cleaner). Returns how many
        partitions were compacted or rolled."""
        now = self.now_ms()
        # A partition with open transactions waits: their pending offsets belong in their
        # producers' transactional batches, which a snapshot of live values cannot restate.
        return sum(self.log.compact(shard.partition, shard.durable, now,
                                    min_segments)
                   for shard in self.shards if not shard.has_open_transactions())

    def end_transaction(self, partition: int, producer: tuple[int, int], commit: bool,
                        coordinator_epoch: int) -> None:
        """Write the marker of `producer`'s transaction to a __consumer_offsets partition,
        then let its shard commit or drop the transaction's pending offsets. Raises if the
        marker could not be written (the transaction coordinator retries)."""
        self.log.append_marker(partition, producer, commit, coordinator_epoch, self.now_ms())
        self.shards[partition].replay_marker(producer[0], commit)

    def close(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        self._timers.clear()
        self._heap.clear()
