"""The group-event stream: every group change as one JSON record in `__group_events`.

`coterie.group.events` derives the events (pure); this module is the I/O around it: it
snapshots a group after each coordinator operation (`Group.event_snapshot`, whatever the
group's type), asks the deriver what changed, encodes
each event as one JSON object (key: the group id, so every group's events stay in order on
one partition) and appends them as one record batch to `__group_events`, a normal
delete-policy topic with bounded retention that any Kafka client, or the Spark source, reads.

Settings (broker properties):

    group.events.enable        true   publish events at all
    group.events.retention.ms  604800000 (7 days)  the topic's retention.ms at creation
    group.events.partitions    1      partitions at creation

The topic is created at start-up with those settings; an existing topic is left as it is
(alter it with any admin tool). Publishing never fails a group operation: an error is logged
and the events of that operation are dropped.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as WireRecord
from kio.records.writers import write_new_batch

from coterie.broker.groups import GroupRuntime
from coterie.broker.topic_admin import TopicAdmin
from coterie.broker.waiters import FetchWaiters
from coterie.common.partitioning import partition_for
from coterie.group import Event, EventDeriver, TimerKind
from coterie.log.manager import LogManager

log = logging.getLogger("coterie.group_events")

EVENTS_TOPIC = "__group_events"
EVENTS_DEFAULTS = {
    "group.events.enable": "true",
    "group.events.retention.ms": str(7 * 24 * 60 * 60 * 1000),
    "group.events.partitions": "1",
}


def encode_event(event: Event) -> bytes:
    """One event as compact JSON (UTF-8, keys in a fixed order)."""
    return json.dumps(event, separators=(",", ":"), default=str).encode()


class GroupEventPublisher:
    """Watches a GroupRuntime's groups and appends what changed to `__group_events`."""

    def __init__(self, runtime: GroupRuntime, logs: LogManager, topics: TopicAdmin,
                 waiters: FetchWaiters, props: Mapping[str, str],
                 clock: Callable[[], int]) -> None:
        self.runtime = runtime
        self.logs = logs
        self.topics = topics
        self.waiters = waiters
        self.now_ms = clock
        props = {**EVENTS_DEFAULTS, **props}
        self.enabled = props["group.events.enable"].strip().lower() == "true"
        self.retention_ms = int(props["group.events.retention.ms"])
        # The topic is created by the broker (coterie.broker.internal_topics) when enabled.
        info = logs.topics.get(EVENTS_TOPIC)
        self.partitions = info.partitions if info is not None else max(
            1, int(props["group.events.partitions"]))
        self.deriver = EventDeriver()
        # The kind of timer being fired, if any: it says why members went (fenced, not left).
        self.cause: TimerKind | None = None
        # A cheap fingerprint of each group as last observed: most operations (heartbeats)
        # change nothing, and then no snapshot is taken at all.
        self._fingerprints: dict[str, Any] = {}
        # Also handed every group's events (the broker's metrics count rebalances from
        # them), if set: then events are derived even when they are not published.
        self.on_events: Callable[[str, list[Event], int], None] | None = None

    @property
    def deriving(self) -> bool:
        """Whether events are derived at all (published, or watched by `on_events`)."""
        return self.enabled or self.on_events is not None

    # -- start-up ---------------------------------------------------------------------------
    def prime(self) -> None:
        """After loading: take every loaded group as known, so a restart is not news."""
        if not self.deriving:
            return
        for gid in self.runtime.group_ids():
            self.deriver.prime(gid, self._snapshot(gid))
            self._fingerprints[gid] = self._fingerprint(gid)

    # -- publishing -------------------------------------------------------------------------
    def _fingerprint(self, group_id: str) -> Any:
        """Equal whenever the group's snapshot would be (`Group.event_fingerprint`), and
        cheap; None for no group."""
        group = self.runtime.group(group_id)
        return None if group is None else group.event_fingerprint()

    def _snapshot(self, group_id: str) -> Any:
        group = self.runtime.group(group_id)
        return None if group is None else group.event_snapshot()

    def observe(self, group_id: str, wrote_records: bool = True) -> None:
        """Publish whatever changed in `group_id` since it was last observed. Never raises.
        A group that changes only by records (`Group.changes_without_records` false: a
        consumer group) is skipped at once after an operation that wrote none (a settled
        member's heartbeat, most of them); a classic group also changes state without
        records."""
        if not self.deriving or not self.runtime.loaded:
            return
        if not wrote_records:
            group = self.runtime.group(group_id)
            if group is not None and not group.changes_without_records:
                return
        cause, self.cause = self.cause, None
        try:
            fingerprint = self._fingerprint(group_id)
            if group_id in self._fingerprints and self._fingerprints[group_id] == fingerprint:
                return
            self._fingerprints[group_id] = fingerprint
            if fingerprint is None:
                del self._fingerprints[group_id]
            now = self.now_ms()
            events = self.deriver.observe(group_id, self._snapshot(group_id), now, cause,
                                          self.runtime.shard_for(group_id).image.name_of)
            if events and self.on_events is not None:
                self.on_events(group_id, events, now)
            if events and self.enabled:
                self.publish(group_id, events, now)
        except Exception:
            log.exception("could not publish the events of group %s", group_id)

    def publish(self, group_id: str, events: list[Event], now_ms: int) -> None:
        index = partition_for(group_id, self.partitions)
        part = self.logs.partition(EVENTS_TOPIC, index)
        if part is None:
            raise RuntimeError(f"{EVENTS_TOPIC}-{index} is missing")
        stamp = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC)
        key = group_id.encode()
        wire = tuple(WireRecord(attributes=0, timestamp=stamp, offset=i, key=key,
                                value=encode_event(e), headers=())
                     for i, e in enumerate(events))
        buf = io.BytesIO()
        write_new_batch(buf, NewRecordBatch(producer_id=-1, producer_epoch=-1,
                                            base_sequence=-1, records=wire, attributes=0))
        part.append(buf.getvalue(), 0, now_ms)
        self.waiters.notify(EVENTS_TOPIC, index)
