"""The coordinator's durable state changes, as plain values.

Every change the group coordinator makes that must survive a crash is one of these records,
appended to `__consumer_offsets` before the client is answered, and replayed through the same
code at start-up. Their shapes follow Apache Kafka's coordinator records (a key naming what is
changed and a value holding its new state; a value of None is a tombstone that deletes it), so
the mapping to Kafka's on-disk format in `records/classic_codec.py` is direct.

Keys are hashable, so compaction is "keep the last value per key".
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


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    # Metadata of the member for the group's chosen protocol, and its assignment.
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


RecordKey = OffsetCommitKey | GroupMetadataKey
RecordValue = OffsetCommitValue | GroupMetadataValue


@dataclass(frozen=True, slots=True)
class Record:
    """One state change: `value` None is a tombstone for `key`."""

    key: RecordKey
    value: RecordValue | None
