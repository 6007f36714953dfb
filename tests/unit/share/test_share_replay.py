"""Rebuilding a share partition from `__share_group_state` records, including records it did
not write itself (Kafka's), and what replay refuses."""

from __future__ import annotations

import uuid

import pytest

from coterie.share import (
    RecordState,
    ShareReplayError,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
    replay,
    tombstones,
)

T = uuid.UUID(int=7)
SNAP = ShareSnapshotKey("g", T, 0)
UPD = ShareUpdateKey("g", T, 0)


def snapshot(start: int, *batches: StateBatch, epoch: int = 0) -> ShareStateRecord:
    return ShareStateRecord(SNAP, ShareSnapshotValue(epoch, 2, 5, start, 100, 200, batches))


def update(start: int, *batches: StateBatch, leader_epoch: int = 5) -> ShareStateRecord:
    return ShareStateRecord(UPD, ShareUpdateValue(0, leader_epoch, start, batches))


def states(sp) -> dict[int, tuple[RecordState, int]]:
    return {v.offset: (v.state, v.delivery_count) for v in sp.in_flight()}


def test_updates_merge_over_the_snapshot_and_move_the_start_offset():
    sp = replay([snapshot(10, StateBatch(10, 14, 0, 1)),
                 update(-1, StateBatch(12, 13, 2, 1), StateBatch(15, 16, 0, 2)),
                 update(11, StateBatch(11, 11, 4, 3)),
                 update(9)])  # the start offset never goes back
    assert sp is not None
    assert (sp.start_offset, sp.next_offset, sp.state_epoch, sp.leader_epoch) == (14, 17, 2, 5)
    assert states(sp) == {14: (RecordState.AVAILABLE, 1), 15: (RecordState.AVAILABLE, 2),
                          16: (RecordState.AVAILABLE, 2)}
    assert sp.updates_since_snapshot == 3 and sp.create_timestamp == 100


def test_a_snapshot_replaces_everything_before_it():
    sp = replay([snapshot(0, StateBatch(0, 9, 0, 3)), update(-1, StateBatch(10, 19, 2, 1)),
                 snapshot(5, StateBatch(6, 6, 2, 1), epoch=1)])
    assert sp is not None
    assert sp.snapshot_epoch == 1 and sp.updates_since_snapshot == 0
    # 5 was never written: available, never delivered.
    assert states(sp) == {5: (RecordState.AVAILABLE, 0), 6: (RecordState.ACKNOWLEDGED, 1)}


def test_an_acquired_state_written_by_someone_else_loads_as_available():
    sp = replay([snapshot(0, StateBatch(0, 1, 1, 2))])
    assert sp is not None and states(sp) == {0: (RecordState.AVAILABLE, 2),
                                             1: (RecordState.AVAILABLE, 2)}


def test_the_new_leaders_epoch_wins_when_higher():
    records = [snapshot(0), update(-1, leader_epoch=6)]
    assert replay(records).leader_epoch == 6
    assert replay(records, leader_epoch=9).leader_epoch == 9


def test_no_snapshot_or_a_tombstone_is_no_partition():
    assert replay([]) is None
    assert replay([snapshot(0), *tombstones("g", T, 0)]) is None
    after = replay([snapshot(0), *tombstones("g", T, 0), snapshot(3)])
    assert after is not None and after.start_offset == 3


def test_what_replay_refuses():
    with pytest.raises(ShareReplayError):
        replay([update(0)])
    with pytest.raises(ShareReplayError):
        replay([snapshot(0), ShareStateRecord(ShareUpdateKey("other", T, 0), None)])
    with pytest.raises(ShareReplayError):
        replay([snapshot(0, StateBatch(0, 0, 3, 1))])
