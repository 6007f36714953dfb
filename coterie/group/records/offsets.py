"""Committed offsets as coordinator records (Kafka's OffsetCommitKey / OffsetCommitValue).

One record per (group, topic, partition); a tombstone deletes the committed offset. Offsets
committed inside a transaction are the same records, written in a transactional batch of
their producer (`coterie.group.offsets.store`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # -1 means "expires by offsets.retention.minutes" (Kafka >= 2.1 semantics).
    expire_timestamp_ms: int = -1
