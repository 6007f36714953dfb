"""The group coordinator's runtime: the broker's one door to the pure shards of coterie.group.

`__consumer_offsets` has N partitions (offsets.topic.num.partitions, 50); one `GroupShard`
per partition coordinates the groups whose ids map there. `GroupRuntime` is what the broker's
handlers call, and it only puts the parts together, each doing one job:

- `ShardRouter` (`shard_router.py`): the shard of a group id;
- `ResultWriter` (`group_writer.py`): a result's records appended before its answers, the
  one undo on a failed append, timers armed, parked requests answered, events observed;
- the timer seam (`group_timers.py`): `LoopTimers` on the event loop, `MemoryTimers` for
  tests; a deadline that passes goes back to its shard;
- `ParkedRequests` (`parked.py`): the futures of JoinGroups and SyncGroups that wait;
- `load_shards` (`group_loader.py`): the log replayed at start-up;
- `GroupHousekeeping` (`group_housekeeping.py`): offset expiry and compaction.

The door (`handle`) is where the runtime's own rules are, once for every API: until loading
is done every request is answered COORDINATOR_LOAD_IN_PROGRESS (its request value says how:
`request.refused(code)`); a TxnOffsetCommit's transaction is verified by the transaction
coordinator when its shard asks (`Result.verify`, through `verify_transaction`); everything
else is the shard's. The shards' settings come from the broker's properties
(`group_settings`).
"""

from __future__ import annotations

import base64
import dataclasses
import gc
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.group_housekeeping import GroupHousekeeping
from coterie.broker.group_loader import load_shards
from coterie.broker.group_timers import LoopTimers, Timers
from coterie.broker.group_writer import GroupObserver, ResultWriter, with_error
from coterie.broker.offsets_topic import OFFSETS_TOPIC, OffsetsLog
from coterie.broker.parked import ParkedRequests
from coterie.broker.shard_router import ShardRouter
from coterie.group import (
    MAX_STRING_BYTES,
    ClassicConfig,
    ConsumerGroupConfig,
    Group,
    GroupShard,
    ListedGroup,
    SettledHeartbeat,
    ShardConfig,
    ShareGroupConfig,
    StreamsGroupConfig,
    StreamsSettledHeartbeat,
    TimerKey,
    TopicImage,
    TopicInfo,
    VerifyTransaction,
)

__all__ = ["GROUP_DEFAULTS", "OFFSETS_TOPIC", "GroupObserver", "GroupRuntime",
           "group_settings", "with_error"]

log = logging.getLogger("coterie.groups")

LOADING = ErrorCode.coordinator_load_in_progress

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
    "group.streams.session.timeout.ms": "45000",
    "group.streams.heartbeat.interval.ms": "5000",
    "group.streams.num.standby.replicas": "0",
    "group.streams.initial.rebalance.delay.ms": "3000",
    "group.streams.max.size": str(2**31 - 1),
    "group.share.session.timeout.ms": "45000",
    "group.share.heartbeat.interval.ms": "5000",
    "group.share.max.size": "200",
}


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
        streams=StreamsGroupConfig(
            session_timeout_ms=int(p["group.streams.session.timeout.ms"]),
            heartbeat_interval_ms=int(p["group.streams.heartbeat.interval.ms"]),
            num_standby_replicas=int(p["group.streams.num.standby.replicas"]),
            initial_rebalance_delay_ms=int(p["group.streams.initial.rebalance.delay.ms"]),
            max_size=int(p["group.streams.max.size"])),
        share=ShareGroupConfig(
            session_timeout_ms=int(p["group.share.session.timeout.ms"]),
            heartbeat_interval_ms=int(p["group.share.heartbeat.interval.ms"]),
            max_size=int(p["group.share.max.size"])),
    )


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
    """The door to the group coordinator (module docstring). `timers`, if given, builds the
    timer seam from the function that fires a key (default: `LoopTimers`)."""

    def __init__(self, offsets_log: OffsetsLog, clock: Callable[[], int],
                 config: ShardConfig, retention_check_interval_ms: int = 600_000,
                 timers: Callable[[Callable[[TimerKey, int], None]], Timers] | None = None
                 ) -> None:
        self.now_ms = clock
        self.config = config
        self.retention_check_interval_ms = retention_check_interval_ms
        self.router = ShardRouter(offsets_log.partitions, config, new_member_id,
                                  new_consumer_member_id)
        self.parked = ParkedRequests()
        self.timers: Timers = (LoopTimers(clock, self._fire) if timers is None
                               else timers(self._fire))
        self.writer = ResultWriter(offsets_log, self.router, self.timers, self.parked, clock)
        self.housekeeping = GroupHousekeeping(self.router, offsets_log, self.writer, clock)
        self.loaded = False
        # The transaction coordinator's verification of a TxnOffsetCommit (the broker plugs
        # in its transaction runtime); None: every transaction may write.
        self.verify_transaction: Callable[[VerifyTransaction], ErrorCode | None] | None = None
        self._topics: dict[str, Any] | None = None  # the last topics handed over
        self._loading_shards: set[int] = set()  # a cluster's shards being loaded
        # Called when a cluster broker makes a shard anew (`load_shard`): the broker hands
        # the groups' own configs over again (GroupConfigs.apply_all).
        self.on_new_shard: Callable[[], None] = lambda: None
        # Told how long each load took, seconds (the broker's metrics), if set.
        self.on_loaded: Callable[[float], None] | None = None

    # -- the parts ---------------------------------------------------------------------------
    @property
    def log(self) -> OffsetsLog:
        return self.writer.log

    @log.setter
    def log(self, offsets_log: OffsetsLog) -> None:
        """(Tests put a log that can fail appends in front of the broker's.)"""
        self.writer.log = self.housekeeping.log = offsets_log

    @property
    def events(self) -> GroupObserver:
        """Who watches groups change (the broker plugs in its group events publisher)."""
        return self.writer.events

    @events.setter
    def events(self, observer: GroupObserver) -> None:
        self.writer.events = observer

    @property
    def shards(self) -> list[GroupShard]:
        return self.router.shards

    @property
    def num_partitions(self) -> int:
        return len(self.router)

    def shard_for(self, group_id: str) -> GroupShard:
        """The shard coordinating `group_id`."""
        return self.router.shard_for(group_id)

    def partition_of(self, group_id: str) -> int:
        """The __consumer_offsets partition holding `group_id` (a transaction that commits
        its offsets adds this partition)."""
        return self.router.shard_for(group_id).partition

    # -- the door ----------------------------------------------------------------------------
    def handle(self, request: Any) -> Any:
        """Any group API, for the group `request.group_id`: the answer now, or None when the
        request parked (its future, from `park`, gets the answer)."""
        if not self.loaded:
            return request.refused(LOADING)
        group_id = request.group_id
        shard = self.router.shard_for(group_id)
        if self.router.owned is not None and shard.partition not in self.router.owned:
            return request.refused(self._not_here(shard.partition))
        now = self.now_ms()
        result = shard.handle(request, now)
        if result.verify is not None:
            check = self.verify_transaction
            verdict = None if check is None else check(result.verify)
            result = shard.handle(dataclasses.replace(request, verify=False,
                                                      verified=verdict), now)
        return self.writer.run(group_id, result)

    def settled_heartbeat(self, request: SettledHeartbeat | StreamsSettledHeartbeat) -> Any:
        """A consumer or streams group heartbeat that sets no field: its answer, or None
        when the core sends it down the general path (`handle` with the full request)."""
        if not self.loaded:
            return request.refused(LOADING)
        shard = self.router.shard_for(request.group_id)
        if self.router.owned is not None and shard.partition not in self.router.owned:
            return request.refused(self._not_here(shard.partition))
        result = shard.handle(request, self.now_ms())
        if result is None:
            return None
        return self.writer.run_settled(request.group_id, result)

    def list_groups(self, states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> list[ListedGroup] | None:
        """ListGroups over every shard; None while loading."""
        if not self.loaded:
            return None
        return [g for shard in self.router.served() for g in shard.list_groups(states, types)]

    def group(self, group_id: str) -> Group | None:
        """The group holding `group_id`, of any type (for observers: read only)."""
        return self.router.shard_for(group_id).groups.get(group_id)

    def group_ids(self) -> list[str]:
        """Every group of every shard."""
        return [g.group_id for g in self.router.groups()]

    def set_group_config(self, group_id: str, config: Mapping[str, Any]) -> None:
        """A group's own settings (the GROUP config resource) changed, or were loaded."""
        self.router.shard_for(group_id).set_group_config(group_id, config)

    def park(self) -> tuple[int, Any]:
        """A token for a request that may park, and the future of its answer."""
        return self.parked.park()

    def forget(self, token: int) -> None:
        """The request parked under `token` was answered at once."""
        self.parked.forget(token)

    # -- start-up ----------------------------------------------------------------------------
    async def load(self) -> None:
        """Replay every partition of __consumer_offsets (`load_shards`), then arm what the
        loaded groups must meet again."""
        started = self.now_ms()
        try:
            # A cluster broker loads each shard when it comes to lead it (`load_shard`).
            count, skipped = await load_shards(
                self.router, self.writer.log, None if self.router.owned is None else [])
        except Exception:
            # A record that contradicts the state (ReplayError) or bytes that do not decode:
            # like Kafka, refuse to serve groups from a log that cannot be trusted.
            log.exception("loading %s failed; group APIs stay unavailable", OFFSETS_TOPIC)
            raise
        now = self.now_ms()
        if self.on_loaded is not None:
            self.on_loaded((now - started) / 1000)
        for shard in self.router.shards:
            self.timers.apply(shard.timers_after_load(now))
        self.loaded = True
        # What loading built lives as long as the broker: move it out of the collector's
        # reach, so later full collections (pauses felt as p99 latency) do not walk it.
        gc.freeze()
        self.events.prime()
        by_type: dict[str, int] = {}
        for group in self.router.groups():
            by_type[group.group_type] = by_type.get(group.group_type, 0) + 1
        log.info("loaded %d group records (%d of unknown types skipped) from %s in %d ms: "
                 "groups %s, %d groups with offsets", count, skipped, OFFSETS_TOPIC,
                 self.now_ms() - started, dict(sorted(by_type.items())) or "none",
                 sum(len(s.offsets.groups()) for s in self.router.shards))

    # -- a cluster's shards ------------------------------------------------------------------
    def serve_only_loaded(self, barrier: Callable[[], Any]) -> None:
        """A cluster broker: coordinate no shard until its partition is led here
        (`load_shard`); the others answer NOT_COORDINATOR. Parked requests are answered
        once `barrier` says the records before their answers are in the database."""
        self.router.owned = set()
        self.writer.barrier = barrier

    def coordinates(self, partition: int) -> bool:
        """Whether this broker coordinates shard `partition` now (loaded, not given up)."""
        return self.router.owned is None or partition in self.router.owned

    def _not_here(self, partition: int) -> ErrorCode:
        return LOADING if partition in self._loading_shards else ErrorCode.not_coordinator

    async def load_shard(self, partition: int) -> None:
        """This broker now leads `partition` of __consumer_offsets: replay it into a new
        shard (as at a restart), then coordinate its groups."""
        owned = self.router.owned
        assert owned is not None, "a single broker coordinates every shard from the start"
        if partition in owned:
            self.unload_shard(partition)
        self._loading_shards.add(partition)
        shard = self.router.replace(partition)
        self.on_new_shard()  # the groups' own configs, handed to the new shard too
        started = self.now_ms()
        try:
            count, _ = await load_shards(self.router, self.writer.log, [shard])
        except Exception:
            log.exception("loading %s-%d failed; its groups stay unavailable here",
                          OFFSETS_TOPIC, partition)
            self.router.replace(partition)
            return
        finally:
            self._loading_shards.discard(partition)
        if self.router.shards[partition] is not shard:
            return  # given up while loading
        now = self.now_ms()
        if self.on_loaded is not None:
            self.on_loaded((now - started) / 1000)
        self.timers.apply(shard.timers_after_load(now))
        owned.add(partition)
        if self._topics is not None:
            image = TopicImage.of(self._topics, shard.next_image_version())
            self.writer.run_many(shard.on_topics_changed(image, now))
        log.info("coordinating shard %d: %d records, %d groups, in %d ms", partition, count,
                 len(shard.groups), self.now_ms() - started)

    def unload_shard(self, partition: int) -> None:
        """Another broker leads `partition` now (or this one lost it): its groups go from
        here, their parked requests answered NOT_COORDINATOR, their timers cancelled."""
        owned = self.router.owned
        if owned is None:
            return
        owned.discard(partition)
        self._loading_shards.discard(partition)
        shard = self.router.shards[partition]
        for group_id, group in list(shard.groups.items()):
            self.timers.cancel_group(group_id)
            for token, answer in group.dropped(ErrorCode.not_coordinator):
                self.parked.resolve(token, answer)
        self.router.replace(partition)

    # -- topics ------------------------------------------------------------------------------
    def topics_changed(self, topics: Mapping[str, tuple[uuid.UUID, int] | TopicInfo]) -> None:
        """Tell every shard the broker's topics (after a create, a delete, more partitions,
        and once loading is done) and persist the epoch bumps they return. Skipped while
        loading: the end of loading hands over the full picture anyway."""
        self._topics = dict(topics)
        if not self.loaded:
            return
        now = self.now_ms()
        # One picture for every shard (built once: a broker may have many topics), at a
        # version newer than any shard has seen.
        image = TopicImage.of(topics, max(s.next_image_version() for s in self.router.shards))
        for shard in self.router.served():
            try:
                self.writer.run_many(shard.on_topics_changed(image, now))
            except Exception:
                # Never fail the topic operation itself; the next change retries the picture.
                log.exception("groups could not take the topic change")

    # -- timers ------------------------------------------------------------------------------
    def _fire(self, key: TimerKey, now: int) -> None:
        group_id = key.group_id
        shard = self.router.shard_for(group_id)
        if self.router.owned is not None and shard.partition not in self.router.owned:
            return  # a timer of a shard given up (cancelled with it; never fired here)
        # Why members a timer removes went (a TimerKind: a str, "session" and so on).
        self.events.cause = key.kind
        try:
            self.writer.run(group_id, self.router.shard_for(group_id).on_timer(key, now))
        except Exception:
            log.exception("timer %s failed", key)

    # -- housekeeping and transactions -------------------------------------------------------
    def expire_offsets(self) -> int:
        return self.housekeeping.expire_offsets()

    def compact(self, min_segments: int = 2) -> int:
        return self.housekeeping.compact(min_segments)

    def end_transaction(self, partition: int, producer: tuple[int, int], commit: bool,
                        coordinator_epoch: int) -> None:
        self.writer.end_transaction(partition, producer, commit, coordinator_epoch)

    def close(self) -> None:
        self.timers.close()
