"""One in-flight record of a share partition, and the ranges operations hand back."""

from __future__ import annotations

from dataclasses import dataclass

from coterie.share.states import RecordState


@dataclass(slots=True)
class InFlight:
    """The state of one offset between the share-partition start offset and its end.

    `persisted` is the (state, delivery count) last written for this offset, None if never:
    an acquisition is not written (as in Kafka 4.2), so after a restart an ACQUIRED record
    comes back as what was last written for it, and a record never written as AVAILABLE
    with delivery count 0.
    """

    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline: int | None = None
    persisted: tuple[RecordState, int] | None = None


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """ShareFetch's AcquiredRecords: offsets first..last, all delivered this many times."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """ShareAcknowledge's AcknowledgementBatch: one type for the whole range, or one per
    offset (len == last - first + 1)."""

    first_offset: int
    last_offset: int
    ack_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RecordView:
    """What the in-flight window says about one offset (introspection, tests)."""

    offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None
    deadline: int | None
