import os
from pathlib import Path

import pytest

from coterie.log.batch import validate_batches
from coterie.log.config import LogConfig
from coterie.log.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from coterie.log.partition import CLEAN_SHUTDOWN_FILE, PartitionLog

from .batches import batch_base_offset, make_batch, split_batches, without_offset

NOW = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def open_log(path: Path, config: LogConfig = SMALL, now: int = NOW) -> PartitionLog:
    return PartitionLog.open(path, config, now)


def read_all(log: PartitionLog, start: int | None = None) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 10_000)
        batches = split_batches(data)
        assert batches, offset
        out += batches
        h = validate_batches(batches[-1])[0]
        offset = h.next_offset
    return out


def fill(
    log: PartitionLog, n: int, records: int = 2, now: int = NOW, ts: int = 1000,
    key: bytes | None = None,
) -> list[bytes]:
    sent = []
    for i in range(n):
        b = make_batch([b"rec-%03d-%d" % (i, j) for j in range(records)], timestamp=ts + i,
                       key=key)
        log.append(b, 0, now)
        sent.append(b)
    return sent


def test_new_log_is_empty(tmp_path):
    log = open_log(tmp_path / "t-0")
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.read(0, 100) == b""
    assert log.offset_for_timestamp(0) is None and log.max_timestamp() is None
    assert (tmp_path / "t-0" / "00000000000000000000.log").exists()
    log.close()


def test_offsets_consecutive_across_batches_and_appends(tmp_path):
    log = open_log(tmp_path / "p")
    info = log.append(make_batch(3) + make_batch(2), leader_epoch=5, now_ms=NOW)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 4, 5)
    assert info.log_append_time_ms == -1
    info = log.append(make_batch(1), 5, NOW)
    assert (info.first_offset, info.last_offset) == (5, 5)
    assert log.log_end_offset == 6
    headers = validate_batches(log.read(0, 1 << 20))
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 4), (5, 5)]
    assert {h.partition_leader_epoch for h in headers} == {5}


def test_log_append_time(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(make_batch(2, timestamp=5), 0, NOW)
    assert info.log_append_time_ms == NOW
    (h,) = validate_batches(log.read(0, 1000))
    assert h.max_timestamp == NOW and h.attributes & 0x08
    # Every record of a LogAppendTime batch carries the append time: the first one answers.
    assert log.max_timestamp() == (0, NOW)


def test_corrupt_and_too_large_are_rejected_without_writing(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(max_message_bytes=200))
    bad = bytearray(make_batch(2))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(bytes(bad), 0, NOW)
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(1, magic=1), 0, NOW)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch([b"x" * 300]), 0, NOW)
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_read_mid_batch_returns_whole_batch(tmp_path):
    log = open_log(tmp_path / "p")
    first, second = make_batch(5), make_batch(4)
    log.append(first, 0, NOW)
    log.append(second, 0, NOW)
    for offset in range(5, 9):
        data = log.read(offset, 10_000)
        assert without_offset(data) == without_offset(second)
        assert batch_base_offset(data) == 5
    assert batch_base_offset(log.read(3, 10_000)) == 0


def test_max_bytes_honoured_but_at_least_one_batch(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(index_interval_bytes=50))
    sent = fill(log, 20)
    size = len(sent[0])
    assert all(len(b) == size for b in sent)
    assert len(log.read(0, 1)) == size  # KIP-74: one batch even if larger than max_bytes
    assert len(log.read(0, 0)) == size
    assert len(log.read(0, size * 3)) == size * 3
    assert len(log.read(0, size * 3 + size - 1)) == size * 3
    assert len(log.read(4, size * 7 + 5)) == size * 7
    assert len(log.read(0, 10**9)) == size * 20


def test_locate_then_read_into_gives_what_read_gives(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(segment_bytes=2000, index_interval_bytes=50))
    sent = fill(log, 40)
    size = len(sent[0])
    assert log.segment_count > 1
    for offset in range(0, log.log_end_offset):
        for max_bytes in (0, 1, size, size * 3 + 1, 10**9):
            span = log.locate(offset, max_bytes)
            assert span is not None
            seg, start, end = span
            buf = bytearray(end - start + 2)
            seg.read_into(memoryview(buf)[1 : 1 + end - start], start)
            assert bytes(buf[1:-1]) == log.read(offset, max_bytes)
            assert buf[0] == buf[-1] == 0  # nothing written outside the view
    assert log.locate(log.log_end_offset, 100) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.locate(log.log_end_offset + 1, 100)


def test_offset_out_of_range(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    assert log.read(4, 100) == b""


def test_roll_by_size(tmp_path):
    log = open_log(tmp_path / "p")
    sent = fill(log, 40)
    assert log.segment_count > 1
    names = sorted(p.name for p in (tmp_path / "p").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    for p in (tmp_path / "p").glob("*.log"):
        assert p.stat().st_size <= SMALL.segment_bytes
    assert [without_offset(b) for b in read_all(log)] == [without_offset(b) for b in sent]
    bases = [int(n[:20]) for n in names]
    assert bases == sorted(bases) and all(b % 2 == 0 for b in bases)


def test_roll_by_time(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(segment_ms=1000))
    log.append(make_batch(1), 0, NOW)
    log.append(make_batch(1), 0, NOW + 1000)
    assert log.segment_count == 1
    log.append(make_batch(1), 0, NOW + 1001)
    assert log.segment_count == 2
    assert (tmp_path / "p" / "00000000000000000002.log").exists()
    assert len(read_all(log)) == 3


def test_roll_when_index_full(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    fill(log, 10, records=1)
    assert log.segment_count >= 3
    assert len(read_all(log)) == 10


def test_retention_by_time(tmp_path):
    config = LogConfig(segment_bytes=1000, retention_ms=10_000)
    log = open_log(tmp_path / "p", config)
    fill(log, 30, ts=NOW - 50_000)  # old timestamps
    fill(log, 30, ts=NOW)
    segments = log.segment_count
    deleted = log.enforce_retention(NOW + 1000)
    assert deleted > 0 and log.segment_count == segments - deleted
    assert log.log_start_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # Every remaining batch is readable and the newest data is intact.
    newest = make_batch([b"rec-029-0", b"rec-029-1"], timestamp=NOW + 29)
    assert without_offset(read_all(log)[-1]) == without_offset(newest)
    # The active segment is never deleted, however old.
    log.enforce_retention(NOW + 10**9)
    assert log.segment_count == 1 and log.log_end_offset == 120


def test_retention_can_leave_its_files_for_unlinking_later(tmp_path):
    config = LogConfig(segment_bytes=1000, retention_ms=10_000)
    log = open_log(tmp_path / "p", config)
    fill(log, 30, ts=NOW - 50_000)
    fill(log, 30, ts=NOW)
    retired: list[Path] = []
    deleted = log.enforce_retention(NOW + 1000, retired)
    assert deleted > 0 and len(retired) >= deleted
    assert all(p.name.endswith(".deleted") and p.exists() for p in retired)
    start, end = log.log_start_offset, log.log_end_offset
    log.close_unclean()  # a crash before they were unlinked: the next open removes them
    log = open_log(tmp_path / "p", config)
    assert not list((tmp_path / "p").glob("*.deleted"))
    assert (log.log_start_offset, log.log_end_offset) == (start, end)
    log.close()


def test_retention_by_size(tmp_path):
    log = open_log(
        tmp_path / "p", LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    )
    fill(log, 60)
    before = log.size_bytes
    assert before > 2500
    deleted = log.enforce_retention(NOW)
    assert deleted > 0
    assert 2500 <= log.size_bytes < 2500 + 1000
    assert log.log_start_offset > 0
    assert batch_base_offset(log.read(log.log_start_offset, 100)) == log.log_start_offset


def test_retention_skipped_for_compact_policy(tmp_path):
    config = LogConfig(segment_bytes=1000, retention_bytes=0, cleanup_policy="compact")
    log = open_log(tmp_path / "p", config)
    fill(log, 30, key=b"k")
    assert log.enforce_retention(NOW) == 0


def test_restart_after_clean_close_reads_identical_bytes(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log, 30)
    before = [log.read(o, 10_000) for o in range(0, log.log_end_offset)]
    end, segments = log.log_end_offset, log.segment_count
    log.close()
    assert (tmp_path / "p" / CLEAN_SHUTDOWN_FILE).exists()
    log = open_log(tmp_path / "p")
    assert not (tmp_path / "p" / CLEAN_SHUTDOWN_FILE).exists()
    assert (log.log_end_offset, log.segment_count) == (end, segments)
    assert [log.read(o, 10_000) for o in range(0, end)] == before
    assert log.append(make_batch(1), 0, NOW).first_offset == end


@pytest.mark.parametrize("tail", ["garbage", "half", "header_only", "bad_crc"])
def test_torn_tail_is_cut_on_unclean_open(tmp_path, tail):
    log = open_log(tmp_path / "p")
    sent = fill(log, 30)
    end = log.log_end_offset
    log.close_unclean()
    last_log = sorted((tmp_path / "p").glob("*.log"))[-1]
    good_size = last_log.stat().st_size
    extra = make_batch(3, base_offset=end)
    junk = {
        "garbage": os.urandom(100),
        "half": extra[: len(extra) // 2],
        "header_only": extra[:61],
        "bad_crc": extra[:-1] + bytes([extra[-1] ^ 1]),
    }[tail]
    with last_log.open("ab") as f:
        f.write(junk)
    log = open_log(tmp_path / "p")
    assert log.recovered_bytes == len(junk)
    assert last_log.stat().st_size == good_size
    assert log.log_end_offset == end
    assert [without_offset(b) for b in read_all(log)] == [without_offset(b) for b in sent]
    info = log.append(make_batch(2), 0, NOW)
    assert info.first_offset == end
    assert batch_base_offset(log.read(end, 1000)) == end


def test_torn_tail_in_an_unflushed_earlier_segment_drops_later_ones(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log, 30)
    log.close_unclean()
    logs = sorted((tmp_path / "p").glob("*.log"))
    assert len(logs) >= 3
    with logs[1].open("r+b") as f:  # corrupt the middle of segment 1
        f.seek(200)
        f.write(b"\xff" * 8)
    log = open_log(tmp_path / "p")
    assert log.segment_count == 2
    assert log.log_end_offset < int(logs[2].name[:20])
    read_all(log)
    assert log.append(make_batch(1), 0, NOW).first_offset == log.log_end_offset - 1


def test_clean_marker_but_bad_tail_is_still_repaired(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log, 5)
    log.close()
    with (tmp_path / "p" / "00000000000000000000.log").open("ab") as f:
        f.write(b"\x00" * 30)
    log = open_log(tmp_path / "p")
    assert log.log_end_offset == 10 and log.recovered_bytes == 30


@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate_odd", "wrong_entry"])
def test_missing_or_corrupt_index_is_rebuilt(tmp_path, damage):
    config = LogConfig(segment_bytes=5000, index_interval_bytes=100)
    log = open_log(tmp_path / "p", config)
    fill(log, 80)
    before = [log.read(o, 300) for o in range(0, log.log_end_offset, 3)]
    log.close()
    indexes = sorted((tmp_path / "p").glob("*.index"))
    assert len(indexes) >= 2
    for index in indexes:
        original = index.read_bytes()
        assert len(original) >= 16
        if damage == "delete":
            index.unlink()
        elif damage == "garbage":
            index.write_bytes(b"\x7f" * len(original))
        elif damage == "truncate_odd":
            index.write_bytes(original[:-3])
        else:
            index.write_bytes(original[:-8] + original[-8:-4] + (12).to_bytes(4, "big"))
    log = open_log(tmp_path / "p", config)
    assert [log.read(o, 300) for o in range(0, log.log_end_offset, 3)] == before
    for index in indexes:
        assert index.exists() and len(index.read_bytes()) % 8 == 0
    log.close()
    # The rebuilt indexes are as good as the originals.
    log = open_log(tmp_path / "p", config)
    assert [log.read(o, 300) for o in range(0, log.log_end_offset, 3)] == before


def test_deleted_time_index_is_rebuilt(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(segment_bytes=2000, index_interval_bytes=100))
    fill(log, 40, ts=10_000)
    expected = [log.offset_for_timestamp(t) for t in range(9_990, 10_050, 3)]
    log.close()
    for p in (tmp_path / "p").glob("*.timeindex"):
        p.unlink()
    log = open_log(tmp_path / "p", LogConfig(segment_bytes=2000, index_interval_bytes=100))
    assert [log.offset_for_timestamp(t) for t in range(9_990, 10_050, 3)] == expected


def test_timestamp_lookups(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(segment_bytes=700, index_interval_bytes=60))
    # batch i (2 records, offsets 2i..2i+1) has maxTimestamp 1000 + 10 * i, with one dip
    stamps = [1000 + 10 * i for i in range(30)]
    stamps[7] = 500
    for ts in stamps:
        log.append(make_batch(2, timestamp=ts), 0, NOW)
    assert log.segment_count > 2
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (2, 1010)
    assert log.offset_for_timestamp(1065) == (16, 1080)  # batch 7 (ts 500) is skipped
    assert log.offset_for_timestamp(1290) == (58, 1290)
    assert log.offset_for_timestamp(1291) is None
    assert log.max_timestamp() == (58, 1290)  # the first record of the batch with it
    for t in range(990, 1300, 7):
        want = next(((2 * i, s) for i, s in enumerate(stamps) if s >= t), None)
        assert log.offset_for_timestamp(t) == want, t
    log.close()
    log = open_log(tmp_path / "p", LogConfig(segment_bytes=700, index_interval_bytes=60))
    assert log.offset_for_timestamp(1065) == (16, 1080)
    assert log.max_timestamp() == (58, 1290)


def test_max_timestamp_picks_first_batch_with_the_largest(tmp_path):
    log = open_log(tmp_path / "p")
    for ts in (5, 50, 20, 50):
        log.append(make_batch(3, timestamp=ts), 0, NOW)
    assert log.max_timestamp() == (3, 50)  # first record of the first batch with 50


def test_flush_policies(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(flush_messages=3, segment_bytes=1000))
    log.append(make_batch(2), 0, NOW)
    assert not (tmp_path / "p" / "recovery-point-offset").exists()
    log.append(make_batch(2), 0, NOW)
    assert (tmp_path / "p" / "recovery-point-offset").read_text().strip() == "4"
    log.close()
    log = open_log(tmp_path / "p", LogConfig(flush_ms=100))
    log.append(make_batch(1), 0, NOW)
    log.maybe_flush(NOW + 99)
    assert (tmp_path / "p" / "recovery-point-offset").read_text().strip() == "4"
    log.maybe_flush(NOW + 100)
    assert (tmp_path / "p" / "recovery-point-offset").read_text().strip() == "5"


def test_update_config_and_delete(tmp_path):
    log = open_log(tmp_path / "p", LogConfig())
    fill(log, 5)
    log.update_config(LogConfig(segment_bytes=100))
    assert log.config.segment_bytes == 100
    fill(log, 2)
    assert log.segment_count == 3
    log.delete()
    assert not (tmp_path / "p").exists()


def test_retention_by_append_time_when_batches_have_no_timestamps(tmp_path):
    log = open_log(tmp_path / "p", LogConfig(segment_bytes=300, retention_ms=1000))
    for i in range(12):
        log.append(make_batch(2, timestamp=-1), 0, NOW + i)
    assert log.segment_count > 2 and log.max_timestamp() is None
    assert log.enforce_retention(NOW + 500) == 0
    before = log.segment_count
    assert log.enforce_retention(NOW + 5000) == before - 1
    assert log.segment_count == 1 and log.log_start_offset > 0


def test_kio_written_batches_round_trip(tmp_path):
    from .test_batch import kio_batch

    log = open_log(tmp_path / "p")
    sent = kio_batch(3) + kio_batch(2)
    assert log.append(sent, 0, NOW).last_offset == 4
    got = log.read(0, 1 << 20)
    assert len(got) == len(sent) and got[8:12] == sent[8:12]
    assert [h.base_offset for h in validate_batches(got)] == [0, 3]
    assert log.offset_for_timestamp(0) == (0, 1704067200000)


def test_delete_records_moves_the_start_durably_and_drops_whole_segments(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log, 40)  # 80 records over several 1000-byte segments
    segments = log.segment_count
    assert segments > 3
    middle = 51  # inside a segment, not on its base
    assert log.delete_records(middle) == middle
    assert log.log_start_offset == middle
    assert log.segment_count < segments  # the segments wholly below went
    with pytest.raises(OffsetOutOfRangeError):
        log.read(middle - 1, 1000)
    assert log.read(middle, 1000)  # the batch holding it is still served
    assert log.delete_records(10) == middle  # below the start: nothing changes
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.log_end_offset + 1)
    log.close_unclean()  # a crash: the start was written before it took effect
    again = open_log(tmp_path / "p")
    assert again.log_start_offset == middle
    assert again.delete_records(again.log_end_offset) == 80  # everything
    assert again.read(80, 1000) == b""
    again.close()
    assert open_log(tmp_path / "p").log_start_offset == 80


def test_timestamp_lookup_starts_at_the_log_start(tmp_path):
    """After DeleteRecords moved the log start into a batch, a lookup by timestamp answers
    with the first record at or above the start, as Kafka does, never one below it."""
    log = open_log(tmp_path / "p")
    stamps = [1000 + i for i in range(10)]
    log.append(make_batch([b"v%d" % i for i in range(10)], timestamps=stamps), 0, NOW)
    assert log.offset_for_timestamp(0) == (0, 1000)
    log.delete_records(5)
    assert log.offset_for_timestamp(0) == (5, 1005)
    assert log.offset_for_timestamp(1007) == (7, 1007)
    assert log.offset_for_timestamp(2000) is None
    log.close()
