"""The aborted-transaction index (coterie.log.txn_index): Kafka's .txnindex layout, lookups
by fetch range, recovery cutting entries past the log end, and segment deletion."""

from __future__ import annotations

from pathlib import Path

from coterie.log.txn_index import ENTRY, AbortedTxn, AbortedTxnIndex, index_path


def test_entries_are_kafkas_34_byte_layout(tmp_path: Path) -> None:
    index = AbortedTxnIndex(tmp_path)
    index.append(0, AbortedTxn(7, 10, 20, 21))
    data = index_path(tmp_path, 0).read_bytes()
    assert ENTRY.size == 34
    assert data == bytes.fromhex("0000" "0000000000000007" "000000000000000a"
                                 "0000000000000014" "0000000000000015")


def test_overlapping_follows_kafkas_rule(tmp_path: Path) -> None:
    index = AbortedTxnIndex(tmp_path)
    index.append(0, AbortedTxn(1, 0, 5, 6))
    index.append(0, AbortedTxn(2, 3, 9, 10))
    index.append(100, AbortedTxn(3, 50, 120, 121))
    assert [t.producer_id for t in index.overlapping(0, 4)] == [1, 2]
    assert [t.producer_id for t in index.overlapping(6, 9)] == [2]
    assert [t.producer_id for t in index.overlapping(10, 50)] == []
    assert [t.producer_id for t in index.overlapping(10, 51)] == [3]
    assert index.overlapping(7, 7) == []


def test_load_keeps_what_the_log_still_has(tmp_path: Path) -> None:
    index = AbortedTxnIndex(tmp_path)
    index.append(0, AbortedTxn(1, 0, 5, 6))
    index.append(10, AbortedTxn(2, 8, 12, 13))
    index.append(10, AbortedTxn(3, 13, 15, 16))
    # Recovery cut the log at offset 14: the marker at 15 is gone; segment 20 never existed.
    index_path(tmp_path, 20).write_bytes(ENTRY.pack(0, 9, 1, 2, 3))
    loaded = AbortedTxnIndex.load(tmp_path, [0, 10], log_end=14)
    assert [t.producer_id for t in loaded.overlapping(0, 100)] == [1, 2]
    assert len(index_path(tmp_path, 10).read_bytes()) == ENTRY.size
    assert not index_path(tmp_path, 20).exists()
    # Appending a marker already indexed (recovery replaying the tail) is a no-op.
    loaded.append(10, AbortedTxn(2, 8, 12, 13))
    assert len(loaded) == 2


def test_a_torn_last_entry_is_dropped(tmp_path: Path) -> None:
    index = AbortedTxnIndex(tmp_path)
    index.append(0, AbortedTxn(1, 0, 5, 6))
    path = index_path(tmp_path, 0)
    path.write_bytes(path.read_bytes() + b"\x00\x00\x01")
    loaded = AbortedTxnIndex.load(tmp_path, [0], log_end=100)
    assert len(loaded) == 1 and len(path.read_bytes()) == ENTRY.size


def test_drop_before_forgets_deleted_segments(tmp_path: Path) -> None:
    index = AbortedTxnIndex(tmp_path)
    index.append(0, AbortedTxn(1, 0, 5, 6))
    index.append(10, AbortedTxn(2, 8, 12, 13))
    index.drop_before(10)
    index.delete_file(0)
    assert [t.producer_id for t in index.overlapping(0, 100)] == [2]
    assert not index_path(tmp_path, 0).exists()
