"""The share-partition state as records of `__share_group_state`, Kafka 4.2's
ShareSnapshotKey/Value and ShareUpdateKey/Value (share-coordinator's message schemas) as
plain values; their bytes are `codec.py`'s.

A snapshot is the whole durable state of one (group, topic id, partition): it replaces what
came before. An update holds only the state batches that changed, merged over the state when
replayed, and the share-partition start offset (-1 when unchanged). A None value is a
tombstone: the partition's state is deleted.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final

SNAPSHOT_KEY_VERSION: Final = 0  # ShareSnapshotKey's apiKey, the key's int16 prefix
UPDATE_KEY_VERSION: Final = 1    # ShareUpdateKey's
VALUE_VERSION: Final = 0
UNKNOWN_DELIVERY_COMPLETE_COUNT: Final = -1  # the tagged field's default (KIP-1226)


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets first..last (inclusive) in one delivery state with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareUpdateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT


ShareKey = ShareSnapshotKey | ShareUpdateKey
ShareValue = ShareSnapshotValue | ShareUpdateValue


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """One record to append to `__share_group_state`; value None is a tombstone."""

    key: ShareKey
    value: ShareValue | None

    def __post_init__(self) -> None:
        expected = {ShareSnapshotKey: ShareSnapshotValue, ShareUpdateKey: ShareUpdateValue}
        if self.value is not None and not isinstance(self.value, expected[type(self.key)]):
            raise TypeError(f"{type(self.value).__name__} cannot be the value of a "
                            f"{type(self.key).__name__}")


def tombstones(group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[ShareStateRecord,
                                                                              ShareStateRecord]:
    """What deletes a share partition's state (DeleteShareGroupState): both keys' tombstones,
    so that compaction drops the snapshot and the updates alike."""
    return (ShareStateRecord(ShareSnapshotKey(group_id, topic_id, partition), None),
            ShareStateRecord(ShareUpdateKey(group_id, topic_id, partition), None))
