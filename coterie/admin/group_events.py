"""Reading one group's events from `__group_events` over the Kafka protocol.

coterie's brokers append every group change to `__group_events` as one JSON record keyed by
the group id (`coterie.broker.group_events`), on the partition the id hashes to
(`coterie.common.partitioning.partition_for`, with the topic's partition count), so one
group's events are in order on one partition. This module reads them as any client would:
coterie's own `PartitionReader` (no group membership, nothing committed), from the log
start to the end offset as it is at call time, keeping the records whose key is the group
id. It works against any coterie broker or cluster and obeys its authentication and ACLs
(reading needs READ on the topic). Apache Kafka has no such topic: `NoGroupEventsError`
says so instead of an empty timeline.

`all_partitions=True` reads every partition instead of the one the id hashes to: needed
only when the topic's partition count was altered after events were written (the old
events then sit on another partition).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from coterie.admin.timeline import Timeline, build_timeline
from coterie.client.errors import ClientError
from coterie.client.reader import EARLIEST, LATEST, PartitionReader, UnknownTopicError
from coterie.client.records import ConsumerRecord
from coterie.client.security import SecuritySettings
from coterie.common.partitioning import partition_for

EVENTS_TOPIC = "__group_events"


class NoGroupEventsError(ClientError):
    """The cluster keeps no group events (not a coterie broker, or events turned off)."""


def events_of(records: Iterable[ConsumerRecord], group: str) -> list[dict[str, Any]]:
    """The events of `group` among `records` (key = the group id; a value that is not a
    JSON object of that group is skipped)."""
    key = group.encode()
    out = []
    for r in records:
        if r.key != key or r.value is None:
            continue
        try:
            event = json.loads(r.value)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("group") == group:
            out.append(event)
    return out


async def read_group_events(bootstrap: str | Sequence[str], group: str, *,
                            security: SecuritySettings | Mapping[str, object] | None = None,
                            request_timeout_ms: int = 30_000, all_partitions: bool = False,
                            limit: int | None = None,
                            since_ms: int | None = None) -> list[dict[str, Any]]:
    """Every event of `group` in `__group_events` up to its end offset now, oldest first
    (`limit`: only the newest that many; `since_ms`: only from the first record stamped at
    or after that time, found with ListOffsets, so a long history is not read in full).
    Raises NoGroupEventsError when the cluster has no such topic, ClientError subclasses
    when it cannot be reached or refuses."""
    async with PartitionReader(bootstrap, security=security, client_id="coterie-admin",
                               request_timeout_ms=request_timeout_ms) as reader:
        try:
            partitions = await reader.partitions(EVENTS_TOPIC)
        except UnknownTopicError:
            raise NoGroupEventsError(
                f"the cluster has no {EVENTS_TOPIC} topic: group timelines need coterie "
                "brokers with group.events.enable=true (Apache Kafka does not record group "
                "events)") from None
        if not partitions:
            return []
        chosen = partitions if all_partitions else [partition_for(group, len(partitions))]
        tps = [(EVENTS_TOPIC, p) for p in chosen]
        starts = await reader.offsets(tps, EARLIEST)
        ends = await reader.offsets(tps, LATEST)
        if since_ms is not None:
            found = await reader.offsets(tps, max(0, since_ms))
            # -1: nothing at or after that time.
            starts = {tp: ends[tp] if found[tp] < 0 else max(found[tp], starts[tp])
                      for tp in tps}
        kept: deque[dict[str, Any]] = deque(maxlen=limit)
        positions = {tp: starts[tp] for tp in tps if starts[tp] < ends[tp]}
        batches: list[list[dict[str, Any]]] = []
        while positions:
            fetched = await reader.fetch(positions, max_wait_ms=100)
            for tp, got in fetched.items():
                records = [r for r in got.records if r.offset < ends[tp]]
                events = events_of(records, group)
                if all_partitions:
                    batches.append(events)
                else:
                    kept.extend(events)
                nxt = max(got.next_offset, positions[tp])
                if nxt >= ends[tp] or nxt == positions[tp]:  # done, or nothing more to read
                    del positions[tp]
                else:
                    positions[tp] = nxt
        if all_partitions:
            merged = sorted((e for b in batches for e in b),
                            key=lambda e: e.get("ts") if isinstance(e.get("ts"), int) else 0)
            kept.extend(merged)
        return list(kept)


async def read_timeline(bootstrap: str | Sequence[str], group: str, *,
                        security: SecuritySettings | Mapping[str, object] | None = None,
                        request_timeout_ms: int = 30_000, all_partitions: bool = False,
                        since_ms: int | None = None) -> Timeline:
    """`read_group_events` then `build_timeline`."""
    events = await read_group_events(bootstrap, group, security=security,
                                     request_timeout_ms=request_timeout_ms,
                                     all_partitions=all_partitions, since_ms=since_ms)
    return build_timeline(group, events)
