"""The settings a share partition runs by, under Kafka 4.2's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """Kafka 4.2's defaults (ShareGroupConfig, ShareCoordinatorConfig of the 4.2.1 jars).

    `max_record_locks` (group.share.partition.max.record.locks, 2000) bounds the in-flight
    window, SPSO to SPEO, of all members together; `delivery_count_limit`
    (group.share.delivery.count.limit, 5) is how often a record is delivered before it is
    archived; `record_lock_duration_ms` (group.share.record.lock.duration.ms, or the group's
    share.record.lock.duration.ms, 30 s) is an acquisition's lock; every
    `snapshot_update_records_per_snapshot`-th write
    (share.coordinator.snapshot.update.records.per.snapshot, 500) is a full ShareSnapshot
    instead of a ShareUpdate, so that replay reads at most that many updates after a snapshot.
    `read_committed` is the group's `share.isolation.level=read_committed` (default
    read_uncommitted): acquire only below the last stable offset, archive aborted batches.
    """

    max_record_locks: int = 2000
    delivery_count_limit: int = 5
    record_lock_duration_ms: int = 30_000
    snapshot_update_records_per_snapshot: int = 500
    read_committed: bool = False

    def __post_init__(self) -> None:
        for name in ("max_record_locks", "delivery_count_limit", "record_lock_duration_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.snapshot_update_records_per_snapshot < 0:
            raise ValueError("snapshot_update_records_per_snapshot must not be negative")
