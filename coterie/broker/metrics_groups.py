"""The per-group series of `/metrics` (docs/operations.md): state, members, epoch,
rebalances, time to Stable, and committed offset and lag per partition.

Two halves, both on the event loop:

* `GroupMetrics.observe_events` is handed the events the group-event deriver makes
  (coterie.broker.group_events): a `rebalance_started` counts a rebalance and starts its
  clock, the group's `state_changed` to Stable stops it and records the time to Stable. So
  rebalances are counted whether or not `__group_events` is published (the deriver runs for
  the metrics too), with the events' own definition of a rebalance for every group type.
* `group_families` reads the coordinator's groups and offsets as they are now and returns
  prometheus_client metric families (plain values: the scrape thread only encodes them).

Cardinality is bounded: at most `series_max` groups get per-group series (the first in id
order) and at most `series_max` per-partition series are built in all, and per-partition
series can be turned off (`metrics.group.partition.series.enable=false`); what a cap left
out is counted in `coterie_metrics_series_dropped{family}`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

__all__ = ["STABLE_BUCKETS", "GroupMetrics", "group_families"]

# Time to Stable, seconds: from a quick cooperative round to a slow eager one.
STABLE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# Groups whose rebalance bookkeeping is kept at most (beyond, the oldest idle ones go).
MAX_TRACKED_GROUPS = 100_000


class _Histogram:
    """A histogram kept on the loop: counts per bucket, sum, count."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(STABLE_BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(STABLE_BUCKETS, value)] += 1
        self.sum += value

    def buckets(self) -> list[tuple[str, int]]:
        out, total = [], 0
        for bound, count in zip((*STABLE_BUCKETS, float("inf")), self.counts, strict=True):
            total += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return out


class _Tracked:
    """One group's rebalance bookkeeping since this broker started coordinating it."""

    __slots__ = ("group_type", "rebalances", "since_ms", "to_stable")

    def __init__(self, group_type: str) -> None:
        self.group_type = group_type
        self.rebalances = 0
        self.since_ms: int | None = None  # when the rebalance under way started
        self.to_stable = _Histogram()


class GroupMetrics:
    """Rebalances and time to Stable per group, from the group events (module docstring)."""

    def __init__(self) -> None:
        self.tracked: dict[str, _Tracked] = {}

    def observe_events(self, group_id: str, events: Iterable[dict[str, Any]],
                       now_ms: int) -> None:
        for event in events:
            kind = event.get("type")
            if kind == "group_deleted":
                self.tracked.pop(group_id, None)
                continue
            if kind not in ("rebalance_started", "state_changed") or event.get("member"):
                continue
            tracked = self.tracked.get(group_id)
            if tracked is None:
                if len(self.tracked) >= MAX_TRACKED_GROUPS:
                    self.tracked.pop(next(iter(self.tracked)))
                tracked = self.tracked[group_id] = _Tracked(str(event.get("protocol")))
            if kind == "rebalance_started":
                tracked.rebalances += 1
                if tracked.since_ms is None:
                    tracked.since_ms = event.get("ts", now_ms)
            else:
                state = (event.get("details") or {}).get("state")
                state = getattr(state, "value", state)
                if state == "Stable" and tracked.since_ms is not None:
                    tracked.to_stable.observe(max(0, now_ms - tracked.since_ms) / 1000)
                    tracked.since_ms = None


def _epoch(group: Any) -> int:
    """A classic group's generation, any other type's group epoch."""
    epoch = getattr(group, "group_epoch", None)
    if epoch is None:
        epoch = getattr(group, "generation", -1)
    return int(epoch)


def group_families(runtime: Any, tracked: GroupMetrics,
                   end_offset: Callable[[str, int], int | None],
                   partition_series: bool, series_max: int,
                   dropped: dict[str, int]) -> list[Metric]:
    """The group series as they are now (module docstring). `runtime`: the broker's
    GroupRuntime; `end_offset(topic, partition)`: the partition's high watermark here, None
    when this broker does not have it; `dropped` is given what the caps left out."""
    state = GaugeMetricFamily("coterie_group_state",
                              "1 for the group's current state (Kafka's spelling per type)",
                              labels=["group", "type", "state"])
    members = GaugeMetricFamily("coterie_group_members", "Members of the group",
                                labels=["group", "type"])
    epoch = GaugeMetricFamily("coterie_group_epoch",
                              "Classic group generation, or the group epoch of other types",
                              labels=["group", "type"])
    rebalances = CounterMetricFamily(
        "coterie_group_rebalances", "Rebalances started since this broker coordinates "
        "the group", labels=["group", "type"])
    to_stable = HistogramMetricFamily(
        "coterie_group_time_to_stable_seconds",
        "From a rebalance's start to the group being Stable again", labels=["group", "type"])
    committed = GaugeMetricFamily("coterie_group_committed_offset",
                                  "The group's committed offset of a partition",
                                  labels=["group", "topic", "partition"])
    lag = GaugeMetricFamily("coterie_group_lag",
                            "Log end (high watermark) minus the committed offset",
                            labels=["group", "topic", "partition"])
    if not runtime.loaded:
        return [state, members, epoch, rebalances, to_stable, committed, lag]
    shards = runtime.router.served()
    group_ids: set[str] = set()
    for shard in shards:
        group_ids.update(shard.groups)
        group_ids.update(shard.offsets.groups())
    chosen = sorted(group_ids)
    if len(chosen) > series_max:
        dropped["group"] = len(chosen) - series_max
        chosen = chosen[:series_max]
    partitions_left = series_max
    for group_id in chosen:
        shard = runtime.shard_for(group_id)
        group = shard.groups.get(group_id)
        if group is not None:
            listing = group.listing()
            group_type = group.group_type
            if listing is not None:
                state.add_metric([group_id, group_type, str(listing.state)], 1)
            members.add_metric([group_id, group_type], len(getattr(group, "members", ())))
            epoch.add_metric([group_id, group_type], _epoch(group))
        t = tracked.tracked.get(group_id)
        if t is not None:
            rebalances.add_metric([group_id, t.group_type], t.rebalances)
            to_stable.add_metric([group_id, t.group_type], t.to_stable.buckets(),
                                 t.to_stable.sum)
        if not partition_series:
            continue
        offsets = shard.offsets.fetch_all(group_id)
        for (topic, index), value in sorted(offsets.items()):
            if partitions_left <= 0:
                dropped["group_partition"] = dropped.get("group_partition", 0) + 1
                continue
            partitions_left -= 1
            labels = [group_id, topic, str(index)]
            committed.add_metric(labels, value.offset)
            end = end_offset(topic, index)
            if end is not None:
                lag.add_metric(labels, max(0, end - value.offset))
    return [state, members, epoch, rebalances, to_stable, committed, lag]


def group_count_family(runtime: Any) -> Metric:
    """Kafka's group-coordinator-metrics group-count, per protocol (group type)."""
    family = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                               "Groups this broker coordinates, per group type",
                               labels=["protocol"])
    counts: dict[str, int] = {}
    if runtime.loaded:
        for group in runtime.router.groups():
            counts[group.group_type] = counts.get(group.group_type, 0) + 1
    for protocol, count in sorted(counts.items()):
        family.add_metric([protocol], count)
    return family
