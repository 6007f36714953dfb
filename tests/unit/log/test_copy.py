"""A partition's copy, as a cluster broker takes one over (coterie.broker.cluster): the
batches another broker stored, laid out as local segments (`write_copy`) and opened, must be
the same log as the one that wrote them: offsets, bytes, producer state (a retry is still a
duplicate, a gap still a gap), the open transaction holding the last stable offset back. And
every local append is handed on (`on_append`) with the bytes as written, while readers see
only what reached the shared store (`durable_end`)."""

from __future__ import annotations

import pytest

from coterie.log.errors import OutOfOrderSequenceError
from coterie.log.partition import PartitionLog, write_copy
from coterie.wire.record_batch import batch_headers
from tests.unit.log.test_producers import NOW, SMALL, batch, open_log


def all_batches(log: PartitionLog) -> list[bytes]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        if not chunk:
            break  # a gap up to the log end (compacted away)
        out.append(chunk)
        offset = batch_headers(chunk, strict=True)[-1].next_offset
    return out


def test_a_copy_is_the_same_log_with_the_same_producer_state(tmp_path):
    handed: list[tuple[int, bytes]] = []
    original = open_log(tmp_path / "a")
    original.on_append = lambda first, data: handed.append((first, data))
    for seq in range(0, 200, 20):  # spans several segments of SMALL
        original.append(batch(7, 0, seq, n=20), 5, NOW)
    original.append(batch(8, 0, 0, n=2, txn=True), 5, NOW)  # a transaction left open
    chunks = [data for _, data in handed]
    # What was handed on is what the log holds, batch for batch.
    assert b"".join(chunks) == b"".join(all_batches(original))
    assert [first for first, _ in handed] == [*range(0, 200, 20), 200]

    write_copy(tmp_path / "b", 0, original.log_end_offset, chunks, SMALL.segment_bytes)
    copy = PartitionLog.open(tmp_path / "b", SMALL, NOW)
    assert copy.log_end_offset == original.log_end_offset == 202
    assert b"".join(all_batches(copy)) == b"".join(chunks)
    assert copy.segment_count > 1
    assert copy.last_stable_offset == 200  # the open transaction's first offset
    # The producer state came with the batches: a retry of the last batch is a duplicate,
    # a gap is refused, the next sequence goes on.
    retry = copy.append(batch(7, 0, 180, n=20), 6, NOW)
    assert retry.duplicate and retry.first_offset == 180
    with pytest.raises(OutOfOrderSequenceError):
        copy.append(batch(7, 0, 400, n=1), 6, NOW)
    assert copy.append(batch(7, 0, 200, n=1), 6, NOW).first_offset == 202


def test_a_copy_keeps_the_log_start_and_an_emptied_log_its_end(tmp_path):
    original = open_log(tmp_path / "a")
    chunks = []
    original.on_append = lambda first, data: chunks.append(data)
    for seq in range(5):
        original.append(batch(1, 0, seq), 0, NOW)
    write_copy(tmp_path / "b", 3, 5, chunks, SMALL.segment_bytes)
    copy = PartitionLog.open(tmp_path / "b", SMALL, NOW)
    assert (copy.log_start_offset, copy.log_end_offset) == (3, 5)
    write_copy(tmp_path / "c", 9, 9, [], SMALL.segment_bytes)  # every batch gone
    empty = PartitionLog.open(tmp_path / "c", SMALL, NOW)
    assert (empty.log_start_offset, empty.log_end_offset) == (9, 9)
    assert empty.append(batch(2, 0, 0), 0, NOW).first_offset == 9


def test_a_copy_whose_last_batches_were_compacted_away_keeps_its_end(tmp_path):
    """Compaction can remove a sealed segment's last batches (an expired tombstone, an
    empty transaction's marker) while the active segment is empty: the stored rows then end
    before the log does, and the copy must still continue at the log end."""
    original = open_log(tmp_path / "a")
    chunks = []
    original.on_append = lambda first, data: chunks.append(data)
    for seq in range(5):
        original.append(batch(1, 0, seq), 0, NOW)
    write_copy(tmp_path / "b", 0, 9, chunks, SMALL.segment_bytes)  # 5..8 compacted away
    copy = PartitionLog.open(tmp_path / "b", SMALL, NOW)
    assert (copy.log_start_offset, copy.log_end_offset) == (0, 9)
    assert b"".join(all_batches(copy)) == b"".join(chunks)
    assert copy.append(batch(2, 0, 0), 0, NOW).first_offset == 9


def test_readers_see_only_what_reached_the_store(tmp_path):
    log = open_log(tmp_path / "a")
    for seq in range(3):
        log.append(batch(1, 0, seq), 0, NOW)
    assert log.high_watermark == log.last_stable_offset == 3  # a single broker: all of it
    log.durable_end = 1
    assert log.high_watermark == 1
    assert log.last_stable_offset == 1  # never above the high watermark
    log.append(batch(2, 0, 0, txn=True), 0, NOW)
    log.durable_end = 4
    assert log.last_stable_offset == 3  # the open transaction, below the high watermark
