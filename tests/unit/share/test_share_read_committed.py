"""read_committed share partitions (share.isolation.level): the batches of aborted
transactions are archived at acquisition and never handed out, as Kafka 4.2's SharePartition
does; which batches those are is `aborted_batches`'s answer from the batch headers and the
log's aborted-transaction index."""

from __future__ import annotations

from coterie.share import (
    AbortedTransaction,
    AcquireMode,
    FetchedBatch,
    ShareUpdateValue,
    StateBatch,
    aborted_batches,
)
from tests.unit.share.harness import Harness

ARCHIVED = 4


def _data(first: int, last: int, pid: int = -1) -> FetchedBatch:
    return FetchedBatch(first, last, pid, transactional=pid >= 0, control=False)


def _marker(offset: int, pid: int) -> FetchedBatch:
    return FetchedBatch(offset, offset, pid, transactional=True, control=True)


def test_only_data_batches_of_an_aborted_transaction_of_their_producer_are_aborted():
    # Producer 7 aborts 0-2 (marker 3); producer 8 commits 4-5 (marker 6) while producer 7
    # writes 7-8 in a new transaction it later aborts (marker 10); 9 is not transactional.
    batches = [_data(0, 2, 7), _marker(3, 7), _data(4, 5, 8), _marker(6, 8), _data(7, 8, 7),
               _data(9, 9), _marker(10, 7)]
    txns = [AbortedTransaction(7, 0, 3), AbortedTransaction(7, 7, 10)]
    assert aborted_batches(batches, txns) == [(0, 2), (7, 8)]
    assert aborted_batches(batches, []) == []
    # A committed transaction of the same producer after an aborted one is not aborted.
    later = [_data(0, 2, 7), _marker(3, 7), _data(4, 6, 7), _marker(7, 7)]
    assert aborted_batches(later, [AbortedTransaction(7, 0, 3)]) == [(0, 2)]


def test_aborted_batches_are_archived_written_and_left_out_of_the_acquired_ranges():
    h = Harness()
    outcome = h.keep(h.sp.acquire("a", [(0, 2), (3, 3), (4, 6), (7, 7)], 500, 0,
                                  aborted=[(0, 2)]))
    # 3 (the ABORT marker) goes out like any offset without a record: the client GAPs it.
    assert [(r.first_offset, r.last_offset) for r in outcome.acquired] == [(3, 7)]
    [record] = outcome.records
    assert record.value == ShareUpdateValue(0, 3, 3, (), 0)  # the SPSO moved over 0-2
    assert h.sp.start_offset == 3
    assert h.sp.acquired_by("a") == [3, 4, 5, 6, 7]
    # What is written survives a restart: the aborted records are never acquired again.
    h.restart()
    assert h.sp.start_offset == 3


def test_an_aborted_batch_inside_the_window_is_archived_on_redelivery():
    h = Harness()
    assert h.acquire("a", 0, 5) == [(0, 5, 1)]
    h.expire(30_000)  # everything AVAILABLE again, delivered once
    outcome = h.keep(h.sp.acquire("b", [(0, 1), (2, 3), (4, 5)], 500, 30_000,
                                  aborted=[(2, 3)]))
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in outcome.acquired] == [(0, 1, 2), (4, 5, 2)]
    assert h.states()[2][0] == "ARCHIVED" and h.states()[3][0] == "ARCHIVED"
    assert outcome.records[-1].value.state_batches == (StateBatch(2, 3, ARCHIVED, 2),)


def test_aborted_records_count_against_max_records_as_on_kafka():
    h = Harness()
    outcome = h.keep(h.sp.acquire("a", [(0, 4), (5, 9)], 5, 0, aborted=[(0, 4)],
                                  mode=AcquireMode.RECORD_LIMIT))
    assert outcome.acquired == ()
    assert h.sp.start_offset == 5 and h.sp.next_offset == 5
    assert h.acquire("a", 5, 9, max_records=5) == [(5, 9, 1)]


def test_without_aborted_ranges_nothing_changes():
    h = Harness()
    outcome = h.keep(h.sp.acquire("a", [(0, 2), (3, 3)], 500, 0))
    assert [(r.first_offset, r.last_offset) for r in outcome.acquired] == [(0, 3)]
    assert outcome.records == ()
