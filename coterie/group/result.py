"""What a coordinator handler returns: a response, records, timers and completed requests.

The broker appends `records` to `__consumer_offsets` and only after they are durable sends
`response` and the responses in `completed` (requests that were parked earlier and that this
call finishes). It then applies `timers`: each names a deadline to (re)arm or, with
`deadline_ms` None, to cancel. A timer that fires comes back as `on_timer(key, now_ms)`; its
key is a `TimerKey` (`coterie.group.timers`).

`producer` is set for TxnOffsetCommit: the records are then written as one transactional
batch of that (producer id, epoch), and stay pending until the transaction's marker.

`verify` is set when the shard needs the transaction coordinator's word before it can go on
(a TxnOffsetCommit: `VerifyTransaction`); such a result carries nothing else, and the caller
asks and sends the request again with the answer.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from coterie.group.records.record import Record
from coterie.group.timers import TimerKey


@dataclass(frozen=True, slots=True)
class TimerOp:
    key: TimerKey
    deadline_ms: int | None  # None cancels


@dataclass(frozen=True, slots=True)
class VerifyTransaction:
    """Ask the transaction coordinator whether `transactional_id`'s ongoing transaction of
    (producer id, epoch) may write to `partition` of __consumer_offsets (TxnOffsetCommit
    `version`: from v5 the transaction adds the partition itself)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partition: int
    version: int


@dataclass(slots=True)
class Result:
    response: Any = None
    records: list[Record] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    completed: list[tuple[Hashable, Any]] = field(default_factory=list)
    producer: tuple[int, int] | None = None
    verify: VerifyTransaction | None = None

    def merge(self, other: Result) -> None:
        """Fold another result's side effects into this one (keeping our response)."""
        self.records.extend(other.records)
        self.timers.extend(other.timers)
        self.completed.extend(other.completed)
