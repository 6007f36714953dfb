"""Share-partition scenarios in virtual time: acquisition, locks and their expiry, delivery
counts and their limit, acknowledgements and their errors, the start offset, and a restart
from the written records."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coterie.share import (
    AckType,
    AcquireMode,
    RecordState,
    ShareConfig,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
)
from tests.unit.share.harness import Harness

ACCEPT, RELEASE, REJECT, RENEW, GAP = (int(AckType.ACCEPT), int(AckType.RELEASE),
                                       int(AckType.REJECT), int(AckType.RENEW),
                                       int(AckType.GAP))
LOCK = 30_000


def test_a_new_partition_writes_its_first_snapshot():
    h = Harness(start=7, now=1000)
    [record] = h.records()
    assert record.value == ShareSnapshotValue(0, 0, 3, 7, 1000, 1000, (), 0)
    assert (h.sp.start_offset, h.sp.next_offset, h.sp.end_offset) == (7, 7, 7)
    assert h.sp.next_deadline() is None


def test_acquisition_is_not_written_and_locks_until_the_deadline():
    h = Harness()
    assert h.acquire("a", 0, 9, now=100) == [(0, 9, 1)]
    assert len(h.log) == 1  # the initial snapshot only: Kafka 4.2 persists no acquisition
    assert h.sp.next_deadline() == 100 + LOCK
    assert (h.sp.start_offset, h.sp.end_offset, h.sp.next_fetch_offset()) == (0, 9, 10)
    assert h.states()[4] == ("ACQUIRED", 1, "a")


def test_two_members_never_acquire_the_same_record():
    h = Harness()
    assert h.acquire("a", 0, 9, max_records=5) == [(0, 4, 1)]
    assert h.acquire("b", 0, 9) == [(5, 9, 1)]
    assert h.acquire("c", 0, 9) == []
    assert h.sp.acquired_by("a") == [0, 1, 2, 3, 4]
    assert h.sp.acquired_by("b") == [5, 6, 7, 8, 9]


def test_an_expired_lock_redelivers_with_a_higher_delivery_count():
    h = Harness()
    h.acquire("a", 0, 4, now=0)
    assert h.expire(LOCK - 1).records == ()
    expired = h.expire(LOCK)
    [record] = expired.records
    assert record.value == ShareUpdateValue(0, 3, 0, (StateBatch(0, 4, 0, 1),), 0)
    assert h.sp.next_fetch_offset() == 0
    assert h.acquire("b", 0, 4, now=LOCK) == [(0, 4, 2)]


def test_an_acknowledgement_after_the_deadline_finds_the_record_no_longer_acquired():
    h = Harness()
    h.acquire("a", 0, 4, now=0)
    # No timer fired: the acknowledgement itself ends the expired lock first.
    outcome = h.ack("a", (0, 4, [ACCEPT]), now=LOCK)
    assert outcome.error == ErrorCode.invalid_record_state
    assert [r.value.state_batches for r in outcome.records] == [(StateBatch(0, 4, 0, 1),)]
    assert h.states()[0] == ("AVAILABLE", 1, None)


def test_the_delivery_count_limit_archives_instead_of_redelivering():
    h = Harness(ShareConfig(delivery_count_limit=2))
    h.acquire("a", 0, 2, now=0)
    h.expire(LOCK)
    assert h.acquire("a", 0, 2, now=LOCK) == [(0, 2, 2)]
    h.expire(2 * LOCK)
    assert h.sp.start_offset == 3 and h.sp.in_flight() == []
    assert h.acquire("b", 0, 2, now=2 * LOCK) == []
    assert h.records()[-1].value.state_batches == ()  # all below the new start offset
    assert h.records()[-1].value.start_offset == 3


def test_a_release_at_the_limit_archives_and_below_it_makes_available():
    h = Harness(ShareConfig(delivery_count_limit=2))
    h.acquire("a", 0, 1)
    assert not h.ack("a", (0, 1, [RELEASE])).error
    assert h.states() == {0: ("AVAILABLE", 1, None), 1: ("AVAILABLE", 1, None)}
    assert h.acquire("a", 0, 1) == [(0, 1, 2)]
    assert not h.ack("a", (0, 1, [RELEASE])).error
    assert h.sp.start_offset == 2


def test_reject_archives_and_the_start_offset_moves_over_it():
    h = Harness()
    h.acquire("a", 0, 4)
    assert not h.ack("a", (0, 1, [REJECT])).error
    assert h.sp.start_offset == 2
    assert h.records()[-1].value == ShareUpdateValue(0, 3, 2, (), 0)


def test_renew_extends_the_lock_and_writes_nothing():
    h = Harness()
    h.acquire("a", 0, 4, now=0)
    before = len(h.log)
    assert not h.ack("a", (0, 4, [RENEW]), now=20_000).error
    assert len(h.log) == before
    assert h.sp.next_deadline() == 20_000 + LOCK
    assert h.expire(LOCK).records == ()
    assert h.states()[0] == ("ACQUIRED", 1, "a")
    assert not h.ack("a", (0, 4, [ACCEPT]), now=40_000).error
    assert h.sp.start_offset == 5


def test_per_offset_acknowledgements_split_a_range_and_renew_some_offsets():
    h = Harness()
    h.acquire("a", 0, 5)
    outcome = h.ack("a", (0, 5, [ACCEPT, RELEASE, REJECT, GAP, RENEW, ACCEPT]))
    assert not outcome.error
    assert outcome.records[0].value.state_batches == (
        StateBatch(1, 1, 0, 1), StateBatch(2, 3, 4, 1), StateBatch(5, 5, 2, 1))
    assert h.sp.start_offset == 1
    assert h.states() == {1: ("AVAILABLE", 1, None), 2: ("ARCHIVED", 1, None),
                          3: ("ARCHIVED", 1, None), 4: ("ACQUIRED", 1, "a"),
                          5: ("ACKNOWLEDGED", 1, None)}


def test_a_member_leaving_releases_only_its_records_and_keeps_delivery_counts():
    h = Harness()
    h.acquire("a", 0, 4, max_records=5)
    h.acquire("b", 0, 9)
    outcome = h.release("a", now=10)
    assert [r.value.state_batches for r in outcome.records] == [(StateBatch(0, 4, 0, 1),)]
    assert h.sp.acquired_by("b") == [5, 6, 7, 8, 9]
    assert h.acquire("c", 0, 9) == [(0, 4, 2)]


def test_max_record_locks_bounds_the_window_of_all_members():
    h = Harness(ShareConfig(max_record_locks=10))
    assert h.acquire("a", 0, 99) == [(0, 9, 1)]
    assert h.acquire("b", 0, 99) == []
    assert not h.ack("a", (0, 4, [ACCEPT])).error
    assert h.sp.in_flight_count == 5
    assert h.acquire("b", 5, 99) == [(10, 14, 1)]


def test_max_records_is_counted_exactly():
    h = Harness()
    assert h.acquire("a", 0, 99, max_records=3) == [(0, 2, 1)]
    h.ack("a", (0, 2, [RELEASE]))
    assert h.acquire("a", 0, 99, max_records=5) == [(0, 2, 2), (3, 4, 1)]


def test_the_start_offset_moves_only_over_a_leading_delivered_run():
    h = Harness()
    h.acquire("a", 0, 9)
    assert not h.ack("a", (3, 5, [ACCEPT])).error
    assert h.sp.start_offset == 0
    assert not h.ack("a", (0, 2, [ACCEPT])).error
    assert h.sp.start_offset == 6
    assert [v.offset for v in h.sp.in_flight()] == [6, 7, 8, 9]


def test_a_bad_acknowledgement_changes_nothing_at_all():
    h = Harness()
    h.acquire("a", 0, 4, max_records=5)
    h.acquire("b", 0, 9)
    before = h.states()
    # The first batch alone would be fine: all or nothing per partition.
    outcome = h.ack("a", (0, 4, [ACCEPT]), (5, 5, [ACCEPT]))
    assert outcome.error == ErrorCode.invalid_record_state and outcome.records == ()
    assert h.states() == before
    for batches, error in [
        ([(0, 4, [7])], ErrorCode.invalid_request),          # unknown type
        ([(0, 4, [ACCEPT, ACCEPT])], ErrorCode.invalid_request),  # neither 1 nor 5 types
        ([(4, 3, [ACCEPT])], ErrorCode.invalid_request),      # first > last
        ([(8, 12, [ACCEPT])], ErrorCode.invalid_request),     # past the window
        ([(0, 1, [ACCEPT]), (1, 1, [ACCEPT])], ErrorCode.invalid_record_state),  # twice
    ]:
        assert h.ack("a" if batches[0][0] < 5 else "b", *batches).error == error, batches
        assert h.states() == before


def test_acknowledging_records_not_acquired_is_invalid_record_state():
    h = Harness()
    h.acquire("a", 0, 4)
    h.ack("a", (2, 2, [RELEASE]))
    assert h.ack("a", (2, 2, [ACCEPT])).error == ErrorCode.invalid_record_state
    assert h.ack("a", (3, 3, [ACCEPT])).error == ErrorCode.none


def test_offsets_below_the_start_offset_are_skipped():
    h = Harness()
    h.acquire("a", 0, 4)
    h.ack("a", (0, 1, [ACCEPT]))
    assert not h.ack("a", (0, 1, [ACCEPT])).error
    assert not h.ack("a", (0, 2, [ACCEPT])).error
    assert h.sp.start_offset == 3


def test_the_log_start_moving_moves_the_start_offset():
    h = Harness()
    h.acquire("a", 0, 9)
    outcome = h.log_start(4)
    assert outcome.records[0].value.start_offset == 4
    assert h.sp.start_offset == 4 and h.sp.acquired_by("a") == [4, 5, 6, 7, 8, 9]
    assert not h.ack("a", (0, 9, [ACCEPT])).error  # 0-3 skipped
    assert h.sp.start_offset == 10
    h.log_start(20)
    assert (h.sp.start_offset, h.sp.next_offset, h.sp.in_flight()) == (20, 20, [])
    assert h.acquire("a", 20, 25) == [(20, 25, 1)]


def test_a_restart_gives_back_acquired_records_as_available_with_their_written_counts():
    h = Harness()
    h.acquire("a", 0, 9, now=0)
    h.ack("a", (0, 1, [ACCEPT]), (2, 3, [RELEASE]), (4, 4, [REJECT]))
    h.acquire("b", 0, 9, max_records=2)  # 2-3 again, count 2, not written
    h.acquire("b", 10, 14)              # new, never written
    live = h.sp.durable_view()
    sp = h.restart()
    assert sp.durable_view() == live
    assert sp.start_offset == 2
    assert {v.offset: (v.state, v.delivery_count) for v in sp.in_flight()} == {
        2: (RecordState.AVAILABLE, 1), 3: (RecordState.AVAILABLE, 1),
        4: (RecordState.ARCHIVED, 1)}
    # 5-9 and 10-14 were never written: read again from the log as new records.
    assert sp.next_fetch_offset() == 2 and sp.next_offset == 5
    assert h.acquire("c", 2, 14) == [(2, 3, 2), (5, 14, 1)]


def test_a_record_last_written_available_inside_the_window_keeps_unwritten_neighbours():
    h = Harness()
    h.acquire("a", 0, 9)
    h.ack("a", (7, 7, [RELEASE]))
    sp = h.restart()
    assert sp.start_offset == 0 and sp.next_offset == 8
    assert [(v.offset, v.delivery_count) for v in sp.in_flight()][:2] == [(0, 0), (1, 0)]
    assert sp.record(7).delivery_count == 1


def test_every_nth_write_is_a_snapshot_and_replay_needs_only_what_follows_it():
    h = Harness(ShareConfig(snapshot_update_records_per_snapshot=2))
    h.acquire("a", 0, 9)
    for offset in (5, 6, 7):
        h.ack("a", (offset, offset, [ACCEPT]))
    values = [r.value for r in h.records()]
    assert [type(v).__name__ for v in values] == [
        "ShareSnapshotValue", "ShareUpdateValue", "ShareUpdateValue", "ShareSnapshotValue"]
    assert values[-1].snapshot_epoch == 1
    assert values[-1].state_batches == (StateBatch(5, 7, 2, 1),)
    h.ack("a", (8, 8, [ACCEPT]))
    assert h.records()[-1].value.snapshot_epoch == 1
    live = h.sp.durable_view()
    h.log = h.log[3:]  # what compaction leaves: the last snapshot and later updates
    assert h.restart().durable_view() == live


def test_a_record_on_its_last_delivery_is_delivered_alone():
    h = Harness(ShareConfig(delivery_count_limit=3))
    h.acquire("a", 0, 4)
    h.ack("a", (0, 4, [RELEASE, RELEASE, ACCEPT, ACCEPT, ACCEPT]))
    assert h.acquire("a", 0, 4) == [(0, 1, 2)]
    h.ack("a", (0, 1, [RELEASE]))
    assert h.acquire("a", 0, 9) == [(0, 0, 3)]
    assert h.acquire("b", 0, 9) == [(1, 1, 3)]
    assert h.acquire("c", 0, 9) == [(5, 9, 1)]


def test_expiry_of_one_member_leaves_another_members_later_lock():
    h = Harness()
    h.acquire("a", 0, 4, now=0)
    h.acquire("b", 5, 9, now=10_000)
    h.expire(LOCK)
    assert h.sp.acquired_by("a") == [] and h.sp.acquired_by("b") == [5, 6, 7, 8, 9]
    assert h.sp.next_deadline() == 10_000 + LOCK


def test_malformed_fetched_ranges_and_start_offsets_are_refused():
    h = Harness()
    outcome = h.sp.acquire("a", [(5, 3)], 10, 0)
    assert outcome.error == ErrorCode.invalid_request and outcome.acquired == ()
    assert h.sp.acquire("a", [], 10, 0).acquired == ()
    assert h.sp.acquire("a", [(0, 9)], 0, 0).acquired == ()
    with pytest.raises(ValueError):
        Harness(start=-1)


def test_batch_optimized_acquisition_finishes_the_batch_a_bound_falls_in():
    h = Harness(ShareConfig(max_record_locks=8))
    batches = [(0, 4), (5, 9), (10, 14)]
    outcome = h.sp.acquire("a", batches, 7, 0, mode=AcquireMode.BATCH_OPTIMIZED)
    assert [(r.first_offset, r.last_offset) for r in outcome.acquired] == [(0, 9)]
    # The lock bound (8) fell in 5-9 too: the window passes it by less than one batch.
    assert h.sp.in_flight_count == 10
    assert h.sp.acquire("b", [(10, 14)], 7, 0, mode=AcquireMode.BATCH_OPTIMIZED).acquired == ()
    h.ack("a", (0, 9, [RELEASE]))
    outcome = h.sp.acquire("b", batches, 3, 0, mode=AcquireMode.BATCH_OPTIMIZED)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in outcome.acquired] == [
        (0, 4, 2)]
    outcome = h.sp.acquire("c", batches, 3, 0)  # RECORD_LIMIT: exactly 3
    assert [(r.first_offset, r.last_offset) for r in outcome.acquired] == [(5, 7)]


def test_a_reset_starts_over_with_a_new_state_epoch_and_snapshot():
    h = Harness()
    h.acquire("a", 0, 9)
    h.ack("a", (0, 4, [ACCEPT]))
    outcome = h.sp.reset(100, 5000)
    h.keep(outcome)
    [record] = outcome.records
    assert record.value == ShareSnapshotValue(1, 1, 3, 100, 5000, 5000, (), 0)
    assert (h.sp.start_offset, h.sp.next_offset, h.sp.next_deadline()) == (100, 100, None)
    assert h.ack("a", (5, 9, [ACCEPT])).error == ErrorCode.none  # below the start: done
    assert h.restart().durable_view() == (100, ())
    assert h.sp.state_epoch == 1


def test_batch_size_cuts_batch_optimized_acquisitions_at_log_batch_starts():
    """ShareFetch's BatchSize, as Kafka 4.2: the acquired records go out as AcquiredRecords
    of at least BatchSize records, each cut where a fetched log batch starts; the records
    acquired are the same. RECORD_LIMIT, or no BatchSize, does not cut."""
    batches = [(0, 2), (3, 5), (6, 8), (9, 11), (12, 12)]
    h = Harness()
    got = h.keep(h.sp.acquire("a", batches, 500, 0, mode=AcquireMode.BATCH_OPTIMIZED,
                              batch_size=4))
    assert [(r.first_offset, r.last_offset) for r in got.acquired] == [(0, 5), (6, 11),
                                                                        (12, 12)]
    # Redelivered records are cut the same way, by the batches of the read.
    h.expire(LOCK)
    again = h.keep(h.sp.acquire("b", batches, 500, LOCK, mode=AcquireMode.BATCH_OPTIMIZED,
                                batch_size=7))
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in again.acquired] == [(0, 8, 2), (9, 12, 2)]
    for mode, size in ((AcquireMode.RECORD_LIMIT, 4), (AcquireMode.BATCH_OPTIMIZED, 0)):
        fresh = Harness()
        whole = fresh.sp.acquire("a", batches, 500, 0, mode=mode, batch_size=size)
        assert [(r.first_offset, r.last_offset) for r in whole.acquired] == [(0, 12)]


def test_a_full_window_takes_no_new_record_to_finish_a_redelivered_batch():
    """Found by the interleavings property: a window already at max_record_locks whose
    redelivery reaches max_records inside a read batch that runs past the window must not
    acquire that batch's new records (BATCH_OPTIMIZED passes the bound by less than a batch
    only when the bound is reached inside the batch)."""
    h = Harness(ShareConfig(max_record_locks=3, delivery_count_limit=2,
                            record_lock_duration_ms=LOCK))
    bo = AcquireMode.BATCH_OPTIMIZED
    h.keep(h.sp.acquire("a", [(0, 2)], 3, 0, mode=bo))
    h.expire(LOCK)  # 0-2 available again; the window stays full
    again = h.keep(h.sp.acquire("a", [(0, 1), (2, 3)], 3, LOCK, mode=bo))
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in again.acquired] == [(0, 2, 2)]
    assert h.sp.next_offset == 3
