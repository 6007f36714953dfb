"""Numbering a produce payload at a partition's tail, without a database: offsets, byte
positions, the running maximum timestamp, and bytes changed only in baseOffset and the
leader epoch."""

from __future__ import annotations

import struct
import uuid

from coterie.log.batch import validate_batches
from coterie.storage.api import TopicIdPartition
from coterie.storage.batch_rows import Tail, number_batches
from tests.unit.log.batches import make_batch, without_offset

TP = TopicIdPartition(uuid.UUID(int=7), 3)


def test_rows_continue_the_tail() -> None:
    batches = [make_batch(2, timestamps=[50, 70]), make_batch(1, timestamp=40),
               make_batch(3, timestamp=90, producer_id=12)]
    payload = b"".join(batches)
    rows, tail = number_batches(TP, payload, validate_batches(payload),
                                Tail(next_offset=10, next_position=1000, max_timestamp=60),
                                leader_epoch=5)
    assert [(r.base_offset, r.last_offset) for r in rows] == [(10, 11), (12, 12), (13, 15)]
    sizes = [len(b) for b in batches]
    assert [r.byte_position for r in rows] == [1000, 1000 + sizes[0],
                                               1000 + sizes[0] + sizes[1]]
    assert [r.max_timestamp for r in rows] == [70, 40, 90]
    assert [r.running_max_timestamp for r in rows] == [70, 70, 90]
    assert tail == Tail(16, 1000 + sum(sizes), 90)
    assert [r.producer_id for r in rows] == [-1, -1, 12]
    assert all((r.topic_id, r.partition, r.leader_epoch) == (TP.topic_id, 3, 5) for r in rows)
    for row, sent in zip(rows, batches, strict=True):
        assert row.size == len(row.data) == len(sent)
        assert struct.unpack_from(">qii", row.data)[::2] == (row.base_offset, 5)
        assert without_offset(row.data) == without_offset(sent)
    assert len(validate_batches(b"".join(r.data for r in rows))) == 3  # CRCs still hold
