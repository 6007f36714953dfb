"""A share partition rebuilt from its `__share_group_state` records, after a restart or when
another broker becomes its leader, as Kafka's share coordinator loads them: a snapshot
replaces the state, an update merges its batches over it and moves the start offset (never
back), a tombstone deletes it.

The result is `SharePartition.durable_view()` of the partition that wrote the records: every
offset last written ACKNOWLEDGED or ARCHIVED stays so, every other one up to the last written
is AVAILABLE with its last written delivery count (0 if never written). Nothing is ACQUIRED:
a lock does not survive a restart.
"""

from __future__ import annotations

from collections.abc import Iterable

from coterie.share.config import ShareConfig
from coterie.share.partition import SharePartition
from coterie.share.records import ShareSnapshotValue, ShareStateRecord, ShareUpdateValue
from coterie.share.states import RecordState

__all__ = ["ShareReplayError", "replay"]


class ShareReplayError(ValueError):
    """Records that do not make one share partition's state (another key, an update before
    any snapshot, an unknown delivery state)."""


def replay(records: Iterable[ShareStateRecord], *, config: ShareConfig | None = None,
           leader_epoch: int | None = None) -> SharePartition | None:
    """The partition the records (of one group, topic id and partition, in log order) leave,
    or None when they hold none (no snapshot, or deleted). `leader_epoch`, when given, is the
    new leader's (the records' own when higher)."""
    key = None
    snapshot: ShareSnapshotValue | None = None
    written: dict[int, tuple[RecordState, int]] = {}
    start = record_leader_epoch = snapshot_epoch = updates = 0
    for record in records:
        ident = (record.key.group_id, record.key.topic_id, record.key.partition)
        if key is None:
            key = ident
        elif ident != key:
            raise ShareReplayError(f"records of {ident} among those of {key}")
        value = record.value
        if value is None:
            snapshot, written, updates = None, {}, 0
            continue
        if isinstance(value, ShareSnapshotValue):
            snapshot, written, updates = value, {}, 0
            start, snapshot_epoch = value.start_offset, value.snapshot_epoch
            record_leader_epoch = value.leader_epoch
        elif snapshot is None:
            raise ShareReplayError("a ShareUpdate before any ShareSnapshot")
        else:
            assert isinstance(value, ShareUpdateValue)
            updates += 1
            record_leader_epoch = max(record_leader_epoch, value.leader_epoch)
            if value.start_offset != -1:
                start = max(start, value.start_offset)
        for batch in value.state_batches:
            state = _state(batch.delivery_state)
            for offset in range(max(batch.first_offset, start), batch.last_offset + 1):
                written[offset] = (state, batch.delivery_count)
        written = {o: w for o, w in written.items() if o >= start}
    if key is None or snapshot is None:
        return None
    sp = SharePartition(key[0], key[1], key[2], start, config=config,
                        leader_epoch=max(record_leader_epoch, leader_epoch or 0),
                        state_epoch=snapshot.state_epoch,
                        create_timestamp=snapshot.create_timestamp)
    sp.snapshot_epoch, sp.updates_since_snapshot = snapshot_epoch, updates
    sp._restore(written)
    return sp


def _state(delivery_state: int) -> RecordState:
    """A written delivery state; ACQUIRED (never written by Kafka) loads as AVAILABLE."""
    try:
        state = RecordState(delivery_state)
    except ValueError:
        raise ShareReplayError(f"unknown delivery state {delivery_state}") from None
    return RecordState.AVAILABLE if state is RecordState.ACQUIRED else state

