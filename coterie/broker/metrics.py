"""Prometheus metrics of the broker (issue 28, point 2; docs/operations.md lists
every series).

Off unless `metrics.listen=HOST:PORT` is set; then `/metrics` is served there in the
Prometheus text format (coterie.broker.metrics_http) and the broker's hot paths pay one
`is not None` test each when it is off.

**Never blocking or racing the event loop.** Two kinds of series, kept apart on purpose:

* Updated inline, on the loop, by prometheus_client's own thread-safe counters and
  histograms, which the scrape thread reads directly (they never wait for the loop): the
  requests, their latency and errors per API and version, connections, event-loop lag,
  coordinator load time, cleaner and retention runs.
* Everything read from broker state (groups and lag, log offsets and sizes, bytes per
  topic, leases) is *collected on the loop*: the scrape thread asks the loop for a snapshot
  with `run_coroutine_threadsafe` and waits at most `SNAPSHOT_TIMEOUT_S`. The snapshot is
  built in one synchronous step (no await: nothing changes under it) with bounded work (the
  caps of `metrics.series.max`), as plain prometheus_client families the scrape thread only
  encodes; no broker dict is ever iterated from another thread. If the loop does not answer
  in time (the broker is busy), the scrape is answered with the last snapshot; on a broker
  with an authorizer, whose filtering needs the loop too, it is answered 503 instead.

Series names follow Kafka's where Kafka has the metric (its JMX name in Prometheus form,
`kafka_<domain>_<type>_<name>`), coterie's own otherwise (`coterie_<area>_<name>`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from types import CoroutineType
from typing import Any

from kio.schema.errors import ErrorCode
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from coterie.broker.context import Parked
from coterie.broker.metrics_groups import GroupMetrics, group_count_family, group_families
from coterie.broker.metrics_settings import MetricsSettings

__all__ = ["BrokerMetrics"]

log = logging.getLogger("coterie.metrics")

# How long a scrape waits for the loop's snapshot before answering without it.
SNAPSHOT_TIMEOUT_S = 2.0
# How often the event-loop lag is measured.
LOOP_LAG_INTERVAL_S = 0.1

# Request latency, seconds: heartbeats take microseconds, a parked JoinGroup many seconds.
LATENCY_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                   0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
LOAD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)


def _error_name(code: Any) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(int(code))


class BrokerMetrics:
    """The broker's metrics (module docstring): the instruments the broker updates, the
    snapshot the loop builds, and the HTTP server (`start`)."""

    def __init__(self, settings: MetricsSettings, broker: Any) -> None:
        self.settings = settings
        self.broker = broker
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests answered, per API and version",
            ["request", "version"], registry=r)
        self.latency = Histogram(
            "kafka_network_requestmetrics_total_time_seconds",
            "From a request's decoding to its handler's answer (Kafka's TotalTimeMs, "
            "without the sending)", ["request", "version"], buckets=LATENCY_BUCKETS,
            registry=r)
        self.errors = Counter(
            "kafka_network_requestmetrics_errors", "Answers with a top-level error code "
            "other than NONE, per API, version and error", ["request", "version", "error"],
            registry=r)
        self.connections_open = Gauge(
            "kafka_server_socket_server_metrics_connection_count",
            "Client connections open, per listener", ["listener"], registry=r)
        self.connections_accepted = Counter(
            "kafka_server_socket_server_metrics_connection_creation",
            "Client connections accepted, per listener", ["listener"], registry=r)
        self.connections_closed = Counter(
            "kafka_server_socket_server_metrics_connection_close",
            "Client connections closed, per listener", ["listener"], registry=r)
        self.loop_lag = Histogram(
            "coterie_event_loop_lag_seconds",
            "How late the event loop woke a task that slept a fixed interval",
            buckets=LOOP_LAG_BUCKETS, registry=r)
        self.load_time = Histogram(
            "kafka_server_group_coordinator_metrics_partition_load_time_seconds",
            "Time to load the group coordinator's state from __consumer_offsets (the whole "
            "log on a single broker, one shard on a cluster broker)", buckets=LOAD_BUCKETS,
            registry=r)
        self.cleaner_runs = Counter(
            "coterie_log_cleaner_runs", "Log cleaner passes that cleaned a partition",
            registry=r)
        self.retention_runs = Counter(
            "coterie_log_retention_runs", "Retention checks run", registry=r)
        self.retention_deleted = Counter(
            "coterie_log_retention_deleted",
            "What retention deleted: segments on local files, batches on PostgreSQL",
            registry=r)
        self._children: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._names: dict[int, str] = {}
        # Loop-owned: bytes per topic, rebalances (read only by the loop's snapshot).
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.groups = GroupMetrics()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.last: list[Metric] = []
        self.server: Any = None
        self._lag_task: asyncio.Task | None = None

    # -- inline instruments (on the loop) ---------------------------------------------------
    def track(self, api: Any, version: int, started: float, response: Any) -> Any:
        """A handler's answer to a request that began at `started` (perf_counter): counted
        when it is there (a coroutine's and a parked request's when they finish)."""
        kind = type(response)
        if kind is CoroutineType:
            return self._later(api, version, started, response)
        if kind is Parked:
            answer = response.answer

            def counted(ctx: Any, result: Any) -> Any:
                out = answer(ctx, result)
                self.count(api, version, started, out)
                return out
            response.answer = counted
            return response
        self.count(api, version, started, response)
        return response

    async def _later(self, api: Any, version: int, started: float, pending: Any) -> Any:
        response = await pending
        self.count(api, version, started, response)
        return response

    def count(self, api: Any, version: int, started: float, response: Any) -> None:
        key = (api.key, version)
        children = self._children.get(key)
        if children is None:
            labels = (api.name, str(version))
            children = self._children[key] = (self.requests.labels(*labels),
                                              self.latency.labels(*labels))
        children[0].inc()
        children[1].observe(time.perf_counter() - started)
        code = getattr(response, "error_code", None)
        if code:
            self.errors.labels(api.name, str(version), _error_name(code)).inc()

    def accepted(self, listener: str) -> None:
        self.connections_accepted.labels(listener).inc()
        self.connections_open.labels(listener).inc()

    def closed(self, listener: str) -> None:
        self.connections_closed.labels(listener).inc()
        self.connections_open.labels(listener).dec()

    def produced(self, topic: str, size: int) -> None:
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size

    def fetched(self, logs: Any, topics: list[tuple[Any, list[Any]]]) -> None:
        """A Fetch answer's planned topics (coterie.broker.handlers.fetch): its record
        bytes per topic (a topic id from v13 on is named through the log manager)."""
        for echo, parts in topics:
            size = sum(p.span[2] - p.span[1] for p in parts if p.span is not None)
            if not size:
                continue
            if isinstance(echo, str):
                name = echo
            else:
                info = logs.topic_by_id(echo)
                if info is None:
                    continue
                name = info.name
            self.bytes_out[name] = self.bytes_out.get(name, 0) + size

    def group_events(self, group_id: str, events: list[dict[str, Any]], now_ms: int) -> None:
        self.groups.observe_events(group_id, events, now_ms)

    def cleaned(self) -> None:
        self.cleaner_runs.inc()

    def retention_ran(self, deleted: int) -> None:
        self.retention_runs.inc()
        if deleted:
            self.retention_deleted.inc(deleted)

    def loaded(self, seconds: float) -> None:
        self.load_time.observe(seconds)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Serve `/metrics` (on its own thread) and measure the loop's lag (on the loop)."""
        from coterie.broker.metrics_http import MetricsServer  # the server's wiring

        # No `_created` series: a broker's counters start with the process, which the
        # scraper knows; they would double the lines of every counter and histogram.
        disable_created_metrics()
        self.loop = asyncio.get_running_loop()
        self._lag_task = self.loop.create_task(self._measure_lag())
        self.server = MetricsServer(self, self.settings.host, self.settings.port)
        log.info("metrics on http://%s:%d/metrics", self.settings.host, self.server.port)

    async def stop(self) -> None:
        if self._lag_task is not None:
            self._lag_task.cancel()
            with contextlib.suppress(BaseException):
                await self._lag_task
        if self.server is not None:
            await asyncio.to_thread(self.server.close)

    async def _measure_lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + LOOP_LAG_INTERVAL_S
            await asyncio.sleep(LOOP_LAG_INTERVAL_S)
            self.loop_lag.observe(max(0.0, loop.time() - expected))

    # -- the snapshot (on the loop) -------------------------------------------------------
    def snapshot(self) -> list[Metric]:
        """Every series read from broker state, as it is now (module docstring)."""
        broker = self.broker
        cap = self.settings.series_max
        dropped: dict[str, int] = {}
        families: list[Metric] = []
        families += self._topic_families()
        families += self._log_families(cap, dropped)
        logs = broker.logs

        def end_offset(topic: str, index: int) -> int | None:
            part = logs.partition(topic, index)
            return None if part is None else part.high_watermark

        families += group_families(broker.groups, self.groups, end_offset,
                                   self.settings.partition_series, cap, dropped)
        families.append(group_count_family(broker.groups))
        families += self._lease_families()
        families.append(self._dropped_family(dropped))
        self.last = families
        return families

    def _topic_families(self) -> list[Metric]:
        topics = self.broker.logs.topics
        out = []
        for name, counts, what in (
                ("kafka_server_brokertopicmetrics_bytes_in", self.bytes_in,
                 "Record bytes produced to the topic on this broker"),
                ("kafka_server_brokertopicmetrics_bytes_out", self.bytes_out,
                 "Record bytes fetched from the topic on this broker")):
            family = CounterMetricFamily(name, what, labels=["topic"])
            for topic in [t for t in counts if t not in topics]:
                del counts[topic]  # a deleted topic's series ends
            for topic, count in sorted(counts.items()):
                family.add_metric([topic], count)
            out.append(family)
        return out

    def _log_families(self, cap: int, dropped: dict[str, int]) -> list[Metric]:
        labels = ["topic", "partition"]
        end = GaugeMetricFamily("kafka_log_log_log_end_offset",
                                "The partition's log end offset", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_log_start_offset",
                                  "The partition's log start offset", labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size_bytes",
                                 "Bytes of the partition's segments on this broker",
                                 labels=labels)
        logs = self.broker.logs
        left = cap
        for name in sorted(logs.topics):
            info = logs.topics[name]
            for index in range(info.partitions):
                part = logs.partition(name, index)
                if part is None:
                    continue
                if left <= 0:
                    dropped["log_partition"] = dropped.get("log_partition", 0) + 1
                    continue
                left -= 1
                key = [name, str(index)]
                end.add_metric(key, part.log_end_offset)
                start.add_metric(key, part.log_start_offset)
                size.add_metric(key, part.size_bytes)
        return [end, start, size]

    def _lease_families(self) -> list[Metric]:
        held = GaugeMetricFamily("coterie_cluster_leases_held",
                                 "Leases this broker holds in its cluster's database")
        by_kind = GaugeMetricFamily("coterie_cluster_leases_held_by_kind",
                                    "Leases this broker holds, per lease kind",
                                    labels=["kind"])
        cluster = self.broker.cluster
        if cluster is None:
            return []
        kinds: dict[str, int] = {}
        for lease in cluster.picture.values():
            if lease.owner == cluster.node_id:
                kinds[lease.resource.kind] = kinds.get(lease.resource.kind, 0) + 1
        held.add_metric([], sum(kinds.values()))
        for kind, count in sorted(kinds.items()):
            by_kind.add_metric([kind], count)
        return [held, by_kind]

    @staticmethod
    def _dropped_family(dropped: dict[str, int]) -> Metric:
        family = GaugeMetricFamily(
            "coterie_metrics_series_dropped",
            "Series the last snapshot left out for metrics.series.max, per family kind",
            labels=["family"])
        for kind in ("group", "group_partition", "log_partition"):
            family.add_metric([kind], dropped.get(kind, 0))
        return family

    async def _snapshot_on_loop(self, view: Any = None) -> tuple[list[Metric], Any]:
        families = self.snapshot()
        return families, None if view is None else view()

    def collect_from_thread(self, view: Any = None) -> tuple[list[Metric], Any] | None:
        """On the scrape thread: the loop's snapshot and `view()` computed with it, or None
        when the loop did not answer within SNAPSHOT_TIMEOUT_S."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return None
        future = asyncio.run_coroutine_threadsafe(self._snapshot_on_loop(view), loop)
        try:
            return future.result(SNAPSHOT_TIMEOUT_S)
        except Exception:
            future.cancel()
            return None

