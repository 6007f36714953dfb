"""A partition's copy, as a cluster broker takes one over (coterie.broker.cluster): the
batches another broker stored, laid out as local segments (`write_copy`) and opened, must be
the same log as the one that wrote them: offsets, bytes, producer state (a retry is still a
duplicate, a gap still a gap), the open transaction holding the last stable offset back. And
every local append is handed on (`on_append`) with the bytes as written, while readers see
only what reached the shared store (`durable_end`)."""

from __future__ import annotations

import pytest

from coterie.log.errors import BelowCopyError, OutOfOrderSequenceError
from coterie.log.partition import PartitionLog, write_copy
from coterie.log.producers import ProducerStates
from coterie.wire.record_batch import batch_headers
from coterie.wire.txn_markers import control_batch
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


def test_a_copy_from_a_recent_point_with_the_producer_state_below_it(tmp_path):
    """Only the batches from `start` on, and the producer state the earlier ones left (as a
    cluster broker reads it from the database): the same duplicates, sequence checks and
    open transaction as the whole copy; offsets below the copy are refused to local reads
    (BelowCopyError: the database serves them) while the log start stays the store's."""
    handed: list[tuple[int, bytes]] = []
    original = open_log(tmp_path / "a")
    original.on_append = lambda first, data: handed.append((first, data))
    original.append(batch(8, 0, 0, n=2, txn=True), 5, NOW)  # open, far below the copy
    for seq in range(0, 200, 20):
        original.append(batch(7, 0, seq, n=20), 5, NOW)
    start = 142  # batch boundary: 2 + 7 * 20
    below = ProducerStates()
    for first, data in handed:
        if first < start:
            for h in batch_headers(data, strict=True):
                below.replay_batch(h, None)
    recent = [data for first, data in handed if first >= start]
    write_copy(tmp_path / "b", start, original.log_end_offset, recent, SMALL.segment_bytes,
               below)
    copy = PartitionLog.open(tmp_path / "b", SMALL, NOW)
    copy.store_start = 0
    assert (copy.log_start_offset, copy.local_start_offset) == (0, start)
    assert copy.last_stable_offset == 0  # the transaction open below the copy
    assert copy.append(batch(7, 0, 180, n=20), 6, NOW).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        copy.append(batch(7, 0, 400, n=1), 6, NOW)
    with pytest.raises(BelowCopyError):
        copy.locate(10, 1000)
    with pytest.raises(BelowCopyError):
        copy.offset_for_timestamp(0)
    assert copy.locate(start, 1000) is not None
    found = copy.offset_for_timestamp(0, within_copy=True)  # a share group's start
    assert found is not None and found.offset == start
    # DeleteRecords below the copy moves the log start only; above it, the copy's too.
    assert copy.delete_records(50) == 50 and copy.local_start_offset == start
    assert copy.delete_records(150) == 150 and copy.local_start_offset == 150
    # The commit of the transaction open below the copy completes it.
    copy.append(control_batch(8, 0, True, 0, NOW), 6, NOW, coordinator=True)
    assert copy.last_stable_offset == copy.high_watermark


def test_a_copy_trimmed_to_its_bound_keeps_its_producer_state(tmp_path):
    log = open_log(tmp_path / "a")
    log.append(batch(8, 0, 0, n=2, txn=True), 5, NOW)
    for seq in range(0, 400, 20):
        log.append(batch(7, 0, seq, n=20), 5, NOW)
    assert log.segment_count >= 3
    size = log.size_bytes
    cut = log.copy_cut(size // 2, log.log_end_offset)
    assert cut is not None and log.copy_cut(size // 2, 10) is None  # not durable yet
    assert log.trim_copy(cut) > 0
    assert log.size_bytes >= size // 2 and log.local_start_offset == cut > 0
    assert log.log_start_offset == 0 and log.store_start == 0
    assert log.last_stable_offset == 0  # the open transaction is still known
    assert log.append(batch(7, 0, 380, n=20), 6, NOW).duplicate
    with pytest.raises(BelowCopyError):
        log.read(0, 100)
