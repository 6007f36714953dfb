"""The states of an in-flight record of a share partition, the acknowledgement types a
member sends, and the one table of which acknowledgement moves a record where.

The byte values are Kafka's on the wire and in `__share_group_state`: a record state is the
DeliveryState of a ShareSnapshot/ShareUpdate state batch (0 available, 2 acknowledged,
4 archived; 1, acquired, is never written because acquisitions are not persisted), an
acknowledgement type is the AcknowledgeTypes byte of ShareFetch/ShareAcknowledge.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class RecordState(IntEnum):
    """Where one record of the in-flight window stands (KIP-932)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        """Delivery is complete: the record is never delivered again and the share-partition
        start offset may move past it."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AckType(IntEnum):
    """What a member says about a record it acquired. GAP (0) is for offsets of an acquired
    range that hold no record (compacted away, transaction markers)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222 (Kafka 4.2, ShareAcknowledge v2): extends the lock, changes no state


class AcquireMode(IntEnum):
    """ShareFetch's ShareAcquireMode (v2, KIP-1206; v1 requests are BATCH_OPTIMIZED): whether
    max_records may be exceeded to hand out the rest of the log batch it falls in."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


# Where an acknowledgement moves an ACQUIRED record. RENEW is absent: it keeps the record
# ACQUIRED and only moves its lock deadline. RELEASE to AVAILABLE becomes ARCHIVED when the
# record has used up its deliveries (`SharePartition._release_state`).
ACK_TARGET: Final[dict[AckType, RecordState]] = {
    AckType.GAP: RecordState.ARCHIVED,
    AckType.ACCEPT: RecordState.ACKNOWLEDGED,
    AckType.RELEASE: RecordState.AVAILABLE,
    AckType.REJECT: RecordState.ARCHIVED,
}

# The transitions the state machine makes, in one place (`SharePartition` asserts them):
# acquisition, the lock ending (acknowledgement, expiry, member leaving) and nothing out of a
# terminal state.
TRANSITIONS: Final[frozenset[tuple[RecordState, RecordState]]] = frozenset({
    (RecordState.AVAILABLE, RecordState.ACQUIRED),
    (RecordState.ACQUIRED, RecordState.AVAILABLE),
    (RecordState.ACQUIRED, RecordState.ACKNOWLEDGED),
    (RecordState.ACQUIRED, RecordState.ARCHIVED),
})
