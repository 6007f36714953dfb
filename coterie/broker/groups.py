"""The group coordinator's runtime: the I/O around the pure core in coterie.group.

It holds both cores, classic groups (`ClassicCoordinator`) and KIP-848 consumer groups
(`ConsumerCoordinator`), behind `coordinator`, a `GroupCoordinator` that routes every group
request, timer (of every kind), topic change and loaded record to the group holding the id,
and converts groups between the two types: classic members inside consumer groups, online
upgrade and downgrade, group.consumer.migration.policy (`coterie.group.mixed.coordinator`
has the rules). DescribeGroups and ListGroups read the cores directly.

It owns the internal compacted topic `__consumer_offsets`: a group maps to one of its
partitions by Java's `String.hashCode` (as Kafka does), and every record a handler returns is
appended there as one record batch *before* any response of that call is sent. At start-up
the partitions are read back and every record, of either family, is replayed in log order
through the same `replay` code the tests use; until that finishes, group APIs answer
COORDINATOR_LOAD_IN_PROGRESS. Then the consumer core is told the current topics, which bumps
the epoch of any group whose subscribed topics changed while the broker was down.

Topic changes (created, deleted, more partitions) reach the consumer core through
`topics_changed`; the epoch bumps it returns are persisted like any other records.

It also turns the core's timer operations into event-loop timers and its parked requests into
futures: a handler that gets no immediate answer awaits the future of its token, which a later
call (another member's join, a timer) resolves through `Result.completed`.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import gc
import io
import itertools
import logging
import uuid
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as WireRecord
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode

from coterie.broker.group_events import GroupEventPublisher
from coterie.group.classic.coordinator import ClassicConfig, ClassicCoordinator
from coterie.group.classic.messages import JoinGroupResponse, SyncGroupResponse
from coterie.group.consumer.coordinator import ConsumerCoordinator
from coterie.group.limits import MAX_STRING_BYTES
from coterie.group.mixed.coordinator import GroupCoordinator
from coterie.group.offsets.store import OffsetStore
from coterie.group.records.classic import OffsetCommitKey, Record
from coterie.group.records.classic_codec import UnknownRecordType
from coterie.group.records.topic_codec import decode, encode, is_consumer_record
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey

if TYPE_CHECKING:
    from coterie.broker.server import Broker

log = logging.getLogger("coterie.groups")

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK_BYTES = 4 * 1024 * 1024

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


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's mapping of a group to a coordinator partition (Utils.abs maps MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions


def with_error(response: Any, error: ErrorCode) -> Any:
    """The same answer, carrying `error` instead (for records that could not be persisted)."""
    if isinstance(response, ErrorCode):
        return error
    if dataclasses.is_dataclass(response) and hasattr(response, "error"):
        return dataclasses.replace(response, error=error)
    return response


# At most 4 UTF-8 bytes per character: this many characters plus "-" and a 36-character UUID
# always fit in a record's int16-length string.
_MAX_CLIENT_ID_PREFIX = (MAX_STRING_BYTES - 37) // 4


class GroupRuntime:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.props = {**GROUP_DEFAULTS, **broker.config.props}
        self.num_partitions = int(self.props["offsets.topic.num.partitions"])
        self.classic = ClassicCoordinator(ClassicConfig(
            min_session_timeout_ms=self._int("group.min.session.timeout.ms"),
            max_session_timeout_ms=self._int("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=self._int("group.initial.rebalance.delay.ms"),
            max_size=self._int("group.max.size"),
            max_metadata_bytes=self._int("group.classic.max.member.metadata.bytes"),
        ), self._new_member_id)
        self.consumer = ConsumerCoordinator(
            broker.config.consumer_group_config(), self._new_consumer_member_id,
            client_assignment_timeout_ms=self._int("group.consumer.client.assignment.timeout.ms"))
        self.coordinator = GroupCoordinator(self.classic, self.consumer)
        self.offsets = OffsetStore()
        self.loaded = False
        self._timers: dict[TimerKey, asyncio.TimerHandle] = {}
        # Per armed timer: the deadline its handle was armed for, and the one now wanted.
        self._armed: dict[TimerKey, int] = {}
        self._deadlines: dict[TimerKey, int] = {}
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        # The compacted view of __consumer_offsets: the last value of every live key, per
        # partition. Compaction rewrites it as a snapshot and drops the history before it.
        self._live: dict[int, dict[Any, Record]] = {}
        # Every group change, as JSON events in __group_events (coterie.broker.group_events).
        self.events = GroupEventPublisher(self)

    def _int(self, key: str) -> int:
        return int(self.props[key])

    @property
    def offset_metadata_max_bytes(self) -> int:
        return self._int("offset.metadata.max.bytes")

    @property
    def retention_check_interval_ms(self) -> int:
        return self._int("offsets.retention.check.interval.ms")

    @property
    def retention_ms(self) -> int:
        return self._int("offsets.retention.minutes") * 60_000

    @staticmethod
    def _new_member_id(client_id: str) -> str:
        """Kafka's form, client id + "-" + UUID. The client id part is cut short when it is
        so long (a header allows 32,767 bytes) that the id would not fit in a record."""
        prefix = client_id[:_MAX_CLIENT_ID_PREFIX] if client_id else "member"
        return f"{prefix}-{uuid.uuid4()}"

    @staticmethod
    def _new_consumer_member_id() -> str:
        """For ConsumerGroupHeartbeat v0 joins without a member id: a Kafka Uuid string."""
        return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()

    # -- start-up -------------------------------------------------------------------------
    def ensure_topic(self) -> None:
        logs = self.broker.logs
        if OFFSETS_TOPIC not in logs.topics:
            self.broker.create_topic(OFFSETS_TOPIC, self.num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": self.props["offsets.topic.segment.bytes"],
            })
        else:
            self.num_partitions = logs.topics[OFFSETS_TOPIC].partitions
        self.events.ensure_topic()

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
        started = self.broker.now_ms()
        count = skipped = 0
        for index in range(self.num_partitions):
            part = self.broker.logs.partition(OFFSETS_TOPIC, index)
            if part is None:
                continue
            offset = part.log_start_offset
            while offset < part.log_end_offset:
                data = part.read(offset, LOAD_CHUNK_BYTES)
                if not data:
                    break
                pos = 0
                while pos < len(data):
                    batch, size = read_batch(data, pos)
                    pos += size
                    for wire in batch.records:
                        offset = wire.offset + 1
                        if wire.offset < part.log_start_offset or wire.key is None:
                            continue
                        try:
                            self._replay(decode(wire.key, wire.value))
                            count += 1
                        except UnknownRecordType:
                            skipped += 1
                    offset = max(offset, batch.base_offset + batch.last_offset_delta + 1)
                await asyncio.sleep(0)
        self._apply_timers(self.coordinator.timers_after_load(self.broker.now_ms()))
        self.loaded = True
        # What loading built lives as long as the broker: move it out of the collector's
        # reach, so later full collections (pauses felt as p99 latency) do not walk it.
        gc.freeze()
        self.events.prime()
        self.topics_changed()
        log.info("loaded %d group records (%d of unknown types skipped) from %s in %d ms: "
                 "%d classic groups, %d consumer groups, %d groups with offsets", count,
                 skipped, OFFSETS_TOPIC, self.broker.now_ms() - started,
                 len(self.classic.groups), len(self.consumer.groups),
                 len(self.offsets.groups()))

    def _remember(self, record: Record) -> None:
        live = self._live.setdefault(
            partition_for(record.key.group_id, self.num_partitions), {})
        if record.value is None:
            live.pop(record.key, None)
        else:
            live[record.key] = record

    def _replay(self, record: Record) -> None:
        """Apply one loaded record to whichever part of the state it belongs to."""
        self._remember(record)
        if isinstance(record.key, OffsetCommitKey):
            self.offsets.replay(record)
        else:
            self.coordinator.replay(record)

    # -- topics -----------------------------------------------------------------------------
    def topics_changed(self) -> None:
        """Tell the consumer core the broker's topics (after a create, a delete, more
        partitions, and once loading is done) and persist the epoch bumps it returns.
        Skipped while loading: the end of loading hands over the full picture anyway."""
        if not self.loaded:
            return
        topics = {info.name: (info.topic_id, info.partitions)
                  for info in self.broker.logs.topics.values()}
        try:
            self.run_many(self.coordinator.on_metadata_change(topics, self.broker.now_ms()))
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
        """Persist and apply `result`; return the answer for `token` (awaiting it if the
        request was parked)."""
        response = self.run(group_id, result)
        if response is not None:
            self._waiters.pop(token, None)
            return response
        try:
            return await fut
        finally:
            self._waiters.pop(token, None)

    def run(self, group_id: str, result: Result) -> Any:
        """Append the records, then answer, then arm timers. Returns the immediate answer."""
        response = result.response
        completed = result.completed
        restore = False
        if result.records:
            try:
                self.persist(group_id, result.records)
            except Exception:
                log.exception("could not persist %d records of group %s",
                              len(result.records), group_id)
                error = ErrorCode.coordinator_not_available
                response = with_error(response, error)
                completed = [(t, with_error(r, error)) for t, r in completed]
                # The consumer core (and any conversion between the two group types) applies
                # its records before they are durable: go back to what the log holds.
                restore = any(is_consumer_record(r) for r in result.records)
                group = None if restore else self.classic.groups.get(group_id)
                if group is not None:
                    retry = self.classic.persist_failed(group_id, group.generation,
                                                        self.broker.now_ms())
                    result.timers.extend(retry.timers)
                    completed.extend(retry.completed)
        self._apply_timers(result.timers)
        if restore:
            self._restore(group_id)
        for token, answer in completed:
            self._resolve(token, answer)
        self.events.observe(group_id, wrote_records=bool(result.records))
        return response

    def _restore(self, group_id: str) -> None:
        """Rebuild a group's state from its durable records, after records the cores had
        already applied could not be persisted: whichever group (classic or consumer) the
        in-memory state holds goes, with its timers, and the last value of each of the
        group's keys in `_live` is replayed (in an order replay accepts: current values never
        conflict). This covers both directions of a conversion: a failed upgrade brings the
        classic group back and drops the consumer group, a failed downgrade the reverse, and
        a JoinGroup that was to replace an empty consumer group leaves it in place."""
        error = ErrorCode.coordinator_not_available
        dropped = self.classic.groups.pop(group_id, None)
        if dropped is not None:
            # Requests the dropped classic group parked are answered with the storage error.
            for m in dropped.members.values():
                if m.awaiting_join:
                    self._resolve(m.join_token, JoinGroupResponse(error, member_id=m.member_id))
                if m.awaiting_sync:
                    self._resolve(m.sync_token, SyncGroupResponse(error))
        self.consumer.groups.pop(group_id, None)
        cancels = self.coordinator.classic_members.forget_group(group_id)
        cancels += [TimerOp(key, None) for key in self._timers if key.group_id == group_id]
        self._apply_timers(cancels)
        live = self._live.get(partition_for(group_id, self.num_partitions), {})
        for record in [r for r in live.values() if r.key.group_id == group_id]:
            self.coordinator.replay(record)
        now = self.broker.now_ms()
        self._apply_timers([op for op in self.coordinator.timers_after_load(now)
                            if op.key.group_id == group_id])

    def persist(self, group_id: str, records: list[Record]) -> None:
        """Append records as one batch to the group's partition and replay offset records
        (classic and consumer group state is already live: each core applies its own
        records; they exist for recovery)."""
        self._append(partition_for(group_id, self.num_partitions), records)
        for record in records:
            self._remember(record)
            if isinstance(record.key, OffsetCommitKey):
                self.offsets.replay(record)
        if not all(isinstance(r.key, OffsetCommitKey) for r in records):
            self.events.observe(group_id)  # e.g. DeleteGroups, which persists directly

    def _append(self, index: int, records: list[Record]) -> None:
        now = self.broker.now_ms()
        stamp = datetime.datetime.fromtimestamp(now / 1000, datetime.UTC)
        wire = []
        for i, record in enumerate(records):
            key, value = encode(record)
            wire.append(WireRecord(attributes=0, timestamp=stamp, offset=i, key=key,
                                   value=value, headers=()))
        buf = io.BytesIO()
        write_new_batch(buf, NewRecordBatch(producer_id=-1, producer_epoch=-1,
                                            base_sequence=-1, records=tuple(wire),
                                            attributes=0))
        part = self.broker.logs.partition(OFFSETS_TOPIC, index)
        if part is None:
            raise RuntimeError(f"{OFFSETS_TOPIC}-{index} is missing")
        part.append(buf.getvalue(), 0, now)

    def _resolve(self, token: Hashable, answer: Any) -> None:
        fut = self._waiters.pop(token, None) if isinstance(token, int) else None
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def _apply_timers(self, ops: list[TimerOp]) -> None:
        """Arm and cancel the core's timers. A timer pushed later (every heartbeat pushes its
        member's session timer) keeps its armed handle and only records the new deadline:
        when the handle fires early, `_fire` re-arms it for the rest. That saves a cancel
        and a new loop timer per heartbeat."""
        loop: asyncio.AbstractEventLoop | None = None
        now = self.broker.now_ms()
        for op in ops:
            key, deadline = op.key, op.deadline_ms
            handle = self._timers.get(key)
            if deadline is not None and handle is not None and self._armed[key] <= deadline:
                self._deadlines[key] = deadline
                continue
            if handle is not None:
                handle.cancel()
                del self._timers[key]
                self._armed.pop(key, None)
                self._deadlines.pop(key, None)
            if deadline is not None:
                loop = loop or asyncio.get_running_loop()
                self._arm(loop, key, deadline, now)

    def _arm(self, loop: asyncio.AbstractEventLoop, key: TimerKey, deadline: int,
             now: int) -> None:
        """A deadline already due (a 0 ms initial rebalance delay) still goes through the
        loop: never inside the request that armed it, but on a later turn, after the
        handlers of requests read off their sockets before that turn (their tasks are queued
        already) have run. Kafka likewise queues such a timer behind the requests already
        queued for the coordinator."""
        self._armed[key] = self._deadlines[key] = deadline
        self._timers[key] = loop.call_later(max(0.0, (deadline - now) / 1000), self._fire, key)

    def _fire(self, key: TimerKey) -> None:
        self._timers.pop(key, None)
        self._armed.pop(key, None)
        deadline = self._deadlines.pop(key, None)
        now = self.broker.now_ms()
        if deadline is not None and deadline > now:  # pushed back since it was armed
            self._arm(asyncio.get_running_loop(), key, deadline, now)
            return
        group_id = key.group_id
        # Why members a timer removes went (a TimerKind: a str, "session" and so on).
        self.events.cause = key.kind
        try:
            self.run(group_id, self.coordinator.on_timer(key, self.broker.now_ms()))
        except Exception:
            log.exception("timer %s failed", key)

    def subscribed_topics(self, group_id: str) -> set[str]:
        """Topics a live group subscribes to (for OffsetDelete)."""
        return self.coordinator.subscribed_topics(group_id)

    # -- offsets housekeeping -------------------------------------------------------------
    def expire_offsets(self) -> int:
        records = self.offsets.expire(self.broker.now_ms(), self.retention_ms,
                                      self.coordinator.empty_since())
        by_group: dict[str, list[Record]] = {}
        for r in records:
            by_group.setdefault(r.key.group_id, []).append(r)
        for group_id, rs in by_group.items():
            self.persist(group_id, rs)
        return len(records)

    def compact(self, min_segments: int = 2) -> int:
        """Compaction of __consumer_offsets by snapshot: for each partition that has grown to
        `min_segments` segments, roll, append the last value of every live key (tombstoned
        keys are simply absent), flush, then delete every segment before the snapshot.

        A crash at any point is safe: before the old segments are deleted, replay sees the
        history followed by (part of) the snapshot, whose records only restate current
        values; after, it sees the snapshot and what followed. Returns partitions compacted.
        """
        compacted = 0
        for index in range(self.num_partitions):
            part = self.broker.logs.partition(OFFSETS_TOPIC, index)
            if part is None or part.segment_count < min_segments:
                continue
            part.roll()
            start = part.log_end_offset
            records = list(self._live.get(index, {}).values())
            for chunk_start in range(0, len(records), 1000):
                chunk = records[chunk_start:chunk_start + 1000]
                self._append(index, chunk)
            part.flush()
            part.delete_segments_before(start)
            compacted += 1
        return compacted

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._armed.clear()
        self._deadlines.clear()
