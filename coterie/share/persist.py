"""Which `__share_group_state` record an operation writes, as Kafka's share coordinator
chooses (ShareCoordinatorShard): an update holding the changed state batches, except every
`snapshot_update_records_per_snapshot + 1`-th write, which is a full snapshot so that replay
never reads more than that many updates after one.

The durable state of an offset is what was last written for it (`InFlight.persisted`); an
ACQUIRED record is written only when its lock ends, so a snapshot holds it as its last
written state or leaves it out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from coterie.share.records import StateBatch
from coterie.share.states import RecordState


def coalesce(entries: Iterable[tuple[int, RecordState, int]]) -> Iterator[StateBatch]:
    """State batches from (offset, state, delivery count) in ascending offset order:
    consecutive offsets with the same state and count make one batch."""
    run: list[int] | None = None  # [first, last, state, count]
    for offset, state, count in entries:
        if run is not None and offset == run[1] + 1 and run[2] == state and run[3] == count:
            run[1] = offset
            continue
        if run is not None:
            yield StateBatch(run[0], run[1], run[2], run[3])
        run = [offset, offset, int(state), count]
    if run is not None:
        yield StateBatch(run[0], run[1], run[2], run[3])
