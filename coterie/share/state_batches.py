"""State batches, the ranges `__share_group_state` records hold: per-offset state folded into
runs of consecutive offsets with one delivery state and one delivery count."""

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
