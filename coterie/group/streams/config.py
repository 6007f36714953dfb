"""The broker settings streams groups read (Kafka 4.2's `group.streams.*` names; the broker
maps its properties onto them in `coterie.broker.groups`). Per-group overrides
(`streams.session.timeout.ms`, `streams.heartbeat.interval.ms`,
`streams.num.standby.replicas`, `streams.initial.rebalance.delay.ms`) reach the kind
through `set_group_config`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StreamsGroupConfig:
    session_timeout_ms: int = 45_000  # group.streams.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.streams.heartbeat.interval.ms
    num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    initial_rebalance_delay_ms: int = 3_000  # group.streams.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.streams.max.size
