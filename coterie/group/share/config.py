"""The broker settings share groups read (Kafka 4.2's `group.share.*` names; the broker maps
its properties onto them in `coterie.broker.groups`). Per-group overrides
(`share.session.timeout.ms`, `share.heartbeat.interval.ms`) reach the kind through
`set_group_config`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
