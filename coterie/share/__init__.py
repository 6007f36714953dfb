"""The pure core of KIP-932 share partitions: which member of a share group holds which
record of a partition, the lock and delivery count of each, and that state as records of
`__share_group_state` (Kafka 4.2's ShareSnapshot and ShareUpdate) to append and replay.
No I/O, no clock: time comes in as `now` (milliseconds). docs/share-partitions.md."""

from coterie.share.codec import ShareRecordDecodeError, ShareRecordEncodeError, decode, encode
from coterie.share.config import ShareConfig
from coterie.share.inflight import AckBatch, AcquiredRange, RecordView
from coterie.share.offset_reset import (
    OffsetNotAvailable,
    parse_duration_ms,
    resolve_start_offset,
)
from coterie.share.partition import Outcome, SharePartition
from coterie.share.records import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
    tombstones,
)
from coterie.share.replay import ShareReplayError, replay
from coterie.share.states import AckType, AcquireMode, RecordState
from coterie.share.transactions import AbortedTransaction, FetchedBatch, aborted_batches

__all__ = [
    "AbortedTransaction",
    "AckBatch",
    "AckType",
    "AcquireMode",
    "AcquiredRange",
    "FetchedBatch",
    "OffsetNotAvailable",
    "Outcome",
    "RecordState",
    "RecordView",
    "ShareConfig",
    "SharePartition",
    "ShareRecordDecodeError",
    "ShareRecordEncodeError",
    "ShareReplayError",
    "ShareSnapshotKey",
    "ShareSnapshotValue",
    "ShareStateRecord",
    "ShareUpdateKey",
    "ShareUpdateValue",
    "StateBatch",
    "aborted_batches",
    "decode",
    "encode",
    "parse_duration_ms",
    "replay",
    "resolve_start_offset",
    "tombstones",
]
