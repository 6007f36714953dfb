"""The log cleaner (coterie.log.cleaner) on real partition logs in temporary directories.

Each test writes keyed batches to a PartitionLog with small segments, runs a pass the way the
broker does (plan on the log, clean into files, install), and reads the log back through
its ordinary read path. Time is virtual: `now` is passed in.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.log.cleaner import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    run_cleaning,
)
from coterie.log.config import LogConfig
from coterie.log.partition import PartitionLog
from coterie.log.segment import LOG_SUFFIX
from coterie.wire.compression import GZIP, LZ4, ZSTD, compress, decompress
from coterie.wire.record_batch import HEADER, HEADER_SIZE, LOG_OVERHEAD
from coterie.wire.records import iter_keys
from coterie.wire.txn_markers import control_batch

from .batches import varint as _varint

NOW = 1_700_000_000_000
DAY = 86_400_000
COMPACT = LogConfig(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact",
                    min_cleanable_dirty_ratio=0.01)
BUDGET = 64 * 1024 * 1024
_TAIL = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiibI")


def _record(delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = b"\x00" + _varint(0) + _varint(delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(-1) if value is None else _varint(len(value)) + value
    body += _varint(0)
    return _varint(len(body)) + body


def keyed_batch(pairs: list[tuple[bytes | None, bytes | None]], *, codec: int = 0,
                producer: tuple[int, int] = (-1, -1), transactional: bool = False,
                sequence: int = -1, timestamp: int = NOW) -> bytes:
    """One v2 batch of (key, value) records; a None value is a tombstone."""
    records = b"".join(_record(i, k, v) for i, (k, v) in enumerate(pairs))
    payload = compress(codec, records) if codec else records
    assert payload is not None
    attrs = codec | (0x10 if transactional else 0)
    tail = _TAIL.pack(attrs, len(pairs) - 1, timestamp, timestamp, producer[0], producer[1],
                      sequence, len(pairs)) + payload
    return _PREFIX.pack(0, len(tail) + 9, -1, 2, crc32c.crc32c(tail)) + tail


def records_of(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record, reading the log as a consumer does."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        pos = 0
        while pos < len(data):
            f = HEADER.unpack_from(data, pos)
            size = f[1] + LOG_OVERHEAD
            batch = data[pos:pos + size]
            assert crc32c.crc32c(batch[21:]) == f[4], "a cleaned batch must keep a valid CRC"
            if not f[5] & 0x20:
                body = decompress(f[5] & 7, batch[HEADER_SIZE:])
                for start, end, delta, _, key, tombstone in iter_keys(body, f[12]):
                    value = None
                    if not tombstone:
                        value = _value_of(body[start:end])
                    out.append((f[0] + delta, key, value))
            offset = max(offset, f[0] + f[6] + 1)
            pos += size
    return out


def _value_of(record: bytes) -> bytes:
    from coterie.wire.records import iter_records
    # iter_records wants a records section: the record bytes are one.
    return next(iter_records(record, 1))[3] or b""


def clean(log: PartitionLog, now: int = NOW) -> bool:
    job = log.cleaning_job(now, BUDGET)
    if job is None:
        return False
    return log.install_cleaned(run_cleaning(job))


def write(log: PartitionLog, pairs: list[tuple[bytes | None, bytes | None]], **kw) -> int:
    return log.append(keyed_batch(pairs, **kw), 0, NOW).first_offset


def last_values(history: list[tuple[int, bytes | None, bytes | None]]) -> dict:
    latest: dict[bytes, bytes | None] = {}
    for _, k, v in history:
        if k is not None:
            latest[k] = v
    return latest


@pytest.fixture
def log(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0", COMPACT, NOW)
    yield log
    log.close()


def test_keeps_the_last_value_of_each_key_at_its_offset(log):
    history = []
    for i in range(60):
        key, value = b"k%d" % (i % 7), b"v%03d" % i
        history.append((write(log, [(key, value)]), key, value))
    assert log.segment_count > 3
    before = {o: (k, v) for o, k, v in history}
    assert clean(log)
    after = records_of(log)
    assert {k: v for _, k, v in after} == last_values(history)
    # Every survivor keeps its offset and its record; the active segment is untouched.
    for offset, k, v in after:
        assert before[offset] == (k, v)
    active_base = history[-1][0] - (history[-1][0] - log._segments[-1].base_offset)
    assert [o for o, _, _ in after if o >= active_base] == \
        [o for o, _, _ in history if o >= active_base]
    assert len(after) < len(history)
    assert log.log_end_offset == history[-1][0] + 1


def test_nothing_to_do_below_the_dirty_ratio_or_within_the_min_lag(tmp_path):
    lazy = LogConfig(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact",
                     min_cleanable_dirty_ratio=0.99)
    log = PartitionLog.open(tmp_path / "t-0", lazy, NOW)
    for i in range(40):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    assert clean(log)  # all dirty: ratio 1
    for i in range(3):
        write(log, [(b"k%d" % i, b"w%d" % i)])
    assert log.cleaning_job(NOW, BUDGET) is None  # a little dirt on a clean log: not due
    log.close()
    lagged = LogConfig(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.01, min_compaction_lag_ms=DAY)
    log = PartitionLog.open(tmp_path / "t-1", lagged, NOW)
    for i in range(40):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    assert log.cleaning_job(NOW + DAY // 2, BUDGET) is None  # records younger than the lag
    assert log.cleaning_job(NOW + 2 * DAY, BUDGET) is not None
    log.close()
    deleting = LogConfig(segment_bytes=600, index_interval_bytes=100)
    log = PartitionLog.open(tmp_path / "t-2", deleting, NOW)
    for i in range(40):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    assert log.cleaning_job(NOW, BUDGET) is None  # cleanup.policy=delete: never cleaned
    log.close()


def test_max_compaction_lag_forces_a_pass_and_rolls_the_active_segment(tmp_path):
    config = LogConfig(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW)
    for i in range(40):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    assert clean(log)
    log.roll()
    log.append(keyed_batch([(b"k0", b"late")]), 0, NOW)
    # The active segment rolls once it is older than the lag, though it is small.
    later = log.append(keyed_batch([(b"k1", b"later")], timestamp=NOW + 61_000), 0,
                       NOW + 61_000).first_offset
    assert log._segments[-1].base_offset == later
    # Dirty well below the ratio, but older than the lag: due.
    assert log.cleaning_job(NOW + 200_000, BUDGET) is not None


def test_tombstones_go_only_after_delete_retention_once_clean(log):
    for i in range(30):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    write(log, [(b"k0", None)])
    for i in range(30):
        write(log, [(b"x%d" % (i % 3), b"v%d" % i)])
    assert clean(log)
    assert (b"k0", None) in [(k, v) for _, k, v in records_of(log)]  # dirty: kept
    assert not any(k == b"k0" and v is not None for _, k, v in records_of(log))
    for i in range(30):
        write(log, [(b"y%d" % (i % 3), b"v%d" % i)])
    assert clean(log, NOW + 1000)  # within delete.retention.ms: still there
    assert (b"k0", None) in [(k, v) for _, k, v in records_of(log)]
    for i in range(30):
        write(log, [(b"z%d" % (i % 3), b"v%d" % i)])
    assert clean(log, NOW + 2 * DAY)
    assert all(k != b"k0" for _, k, _ in records_of(log))


def test_a_tombstone_first_cleaned_long_after_it_was_written_survives_that_pass(log):
    for i in range(30):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    write(log, [(b"k0", None)])
    for i in range(30):
        write(log, [(b"x%d" % (i % 3), b"v%d" % i)])
    assert clean(log, NOW + 3 * DAY)  # the older values go now; the delete stays for a pass
    assert (b"k0", None) in [(k, v) for _, k, v in records_of(log)]
    for i in range(30):
        write(log, [(b"y%d" % (i % 3), b"v%d" % i)])
    assert clean(log, NOW + 3 * DAY)
    assert all(k != b"k0" for _, k, _ in records_of(log))


def test_aborted_records_go_and_empty_transactions_lose_their_markers(log):
    pid = 7
    write(log, [(b"a", b"committed")], producer=(pid, 0), transactional=True, sequence=0)
    log.append(control_batch(pid, 0, True, 0, NOW), 0, NOW, coordinator=True)
    write(log, [(b"a", b"aborted")], producer=(pid, 0), transactional=True, sequence=1)
    log.append(control_batch(pid, 0, False, 0, NOW), 0, NOW, coordinator=True)
    for i in range(40):
        write(log, [(b"x%d" % (i % 3), b"v%d" % i)])
    assert clean(log)
    values = {k: v for _, k, v in records_of(log)}
    assert values[b"a"] == b"committed"  # the aborted value is no key's last value
    markers = sum(1 for seg in log._segments for _, f in seg.headers_from(0) if f[5] & 0x20)
    assert markers == 2  # kept until delete.retention.ms has passed
    for i in range(40):
        write(log, [(b"y%d" % (i % 3), b"v%d" % i)])
    assert clean(log, NOW + 2 * DAY)
    markers = sum(1 for seg in log._segments for _, f in seg.headers_from(0) if f[5] & 0x20)
    assert markers == 1  # the commit whose record is still there stays
    assert {k: v for _, k, v in records_of(log)}[b"a"] == b"committed"


def test_the_open_transaction_bounds_the_cleanable_range(log):
    for i in range(30):
        write(log, [(b"a", b"u%d" % i)])
    pid = 9
    first = write(log, [(b"a", b"pending")], producer=(pid, 0), transactional=True, sequence=0)
    for i in range(40):
        write(log, [(b"a", b"v%d" % i)])
    job = log.cleaning_job(NOW, BUDGET)
    assert job is not None and job.end <= first
    log.install_cleaned(run_cleaning(job))
    assert first in [o for o, _, _ in records_of(log)]


def test_compressed_batches_are_thinned_in_their_codec(log):
    for codec in (GZIP, LZ4, ZSTD):
        write(log, [(b"c%d" % i, b"old-%d" % codec) for i in range(5)], codec=codec)
    for i in range(40):
        write(log, [(b"c%d" % (i % 3), b"new")])
    assert clean(log)
    got = {k: v for _, k, v in records_of(log)}
    assert got[b"c3"] == got[b"c4"] == b"old-4"
    codecs = {f[5] & 7 for seg in log._segments[:-1] for _, f in seg.headers_from(0)}
    assert ZSTD in codecs


def test_keyless_records_are_refused_and_those_from_before_compaction_removed(log):
    from coterie.log.errors import InvalidRecordError
    with pytest.raises(InvalidRecordError, match="without key"):
        write(log, [(b"k", b"keyed"), (None, b"no key")])
    assert log.log_end_offset == 0  # nothing written
    log.update_config(LogConfig(segment_bytes=600, index_interval_bytes=100))
    write(log, [(None, b"no key"), (b"k", b"keyed")])  # written while the topic deleted
    log.update_config(COMPACT)
    for i in range(40):
        write(log, [(b"x%d" % (i % 3), b"v")])
    assert clean(log)
    assert [v for _, k, v in records_of(log) if k is None] == []
    assert (b"k", b"keyed") in [(k, v) for _, k, v in records_of(log)]


def test_segments_are_merged_and_the_log_reopens_the_same(tmp_path):
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.01)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW)
    for i in range(300):
        write(log, [(b"k%d" % (i % 4), b"v%04d" % i)])
    segments = log.segment_count
    assert clean(log)  # full segments do not fit together: cleaned one by one
    write(log, [(b"k0", b"last")])
    log.roll()
    assert clean(log)  # now small, they are merged
    assert log.segment_count <= 3 < segments
    seen = records_of(log)
    log.close()
    for clean_close in (True, False):
        log = PartitionLog.open(tmp_path / "t-0", config, NOW)
        assert records_of(log) == seen
        assert log.first_dirty_offset > 0
        if clean_close:
            log.close()
        else:
            log.close_unclean()
            (tmp_path / "t-0" / "recovery-point-offset").unlink()


@pytest.mark.parametrize("stop", ["cleaned", "swapped", "old-deleted"])
def test_a_crash_during_a_swap_keeps_every_last_value(tmp_path, stop):
    """Stop the install after one of its steps (as a kill -9 would) and reopen."""
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, COMPACT, NOW)
    history = []
    for i in range(80):
        key, value = b"k%d" % (i % 5), b"v%03d" % i
        history.append((write(log, [(key, value)]), key, value))
    result = run_cleaning(log.cleaning_job(NOW, BUDGET))
    group = max(result.groups, key=lambda g: len(g.replaced))
    first = group.replaced[0]
    if stop != "cleaned":
        os.replace(group.path, first.path.with_name(first.path.name + SWAP_SUFFIX))
    if stop == "old-deleted":
        for view in group.replaced[:1]:
            view.path.unlink()
    log.close_unclean()
    log = PartitionLog.open(directory, COMPACT, NOW)
    assert not list(directory.glob(f"*{CLEANED_SUFFIX}"))
    assert not list(directory.glob(f"*{SWAP_SUFFIX}"))
    after = records_of(log)
    assert {k: v for _, k, v in after} == last_values(history)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    before = {o: (k, v) for o, k, v in history}
    assert all(before[o] == (k, v) for o, k, v in after)
    assert clean(log)  # and the next pass works on what the crash left
    assert {k: v for _, k, v in records_of(log)} == last_values(history)
    log.close()
    assert not list(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}"))


def test_replaced_segments_can_be_retired_for_unlinking_later(tmp_path):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, COMPACT, NOW)
    for i in range(60):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    retired: list[Path] = []
    assert log.install_cleaned(run_cleaning(log.cleaning_job(NOW, BUDGET)), retired)
    assert retired and all(p.name.endswith(".deleted") and p.exists() for p in retired)
    seen = records_of(log)
    log.close_unclean()  # a crash before they were unlinked: the next open removes them
    log = PartitionLog.open(directory, COMPACT, NOW)
    assert not list(directory.glob("*.deleted"))
    assert records_of(log) == seen
    log.close()


def test_a_stopped_pass_leaves_nothing_behind(log):
    import threading

    from coterie.log.cleaner import CleaningStopped
    for i in range(60):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    stop = threading.Event()
    stop.set()
    with pytest.raises(CleaningStopped):
        run_cleaning(log.cleaning_job(NOW, BUDGET), stop)
    assert not list(log.directory.glob(f"*{CLEANED_SUFFIX}"))


def test_a_pass_is_thrown_away_when_retention_deleted_its_segments(log):
    for i in range(60):
        write(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    result = run_cleaning(log.cleaning_job(NOW, BUDGET))
    log.delete_records(log._segments[2].base_offset)
    assert not log.install_cleaned(result)
    assert not list(log.directory.glob(f"*{CLEANED_SUFFIX}"))


def test_the_key_budget_cleans_in_several_passes(log):
    history = []
    for i in range(120):
        key, value = b"key-%03d" % (i % 40), b"v%d" % i
        history.append((write(log, [(key, value)]), key, value))
    job = log.cleaning_job(NOW, 1)  # room for about one segment's keys per pass
    result = run_cleaning(job)
    assert result.cleaned_to < job.end
    assert log.install_cleaned(result)
    passes = 1
    while (job := log.cleaning_job(NOW, 1)) is not None:
        assert log.install_cleaned(run_cleaning(job))
        passes += 1
        assert passes < 50
    assert {k: v for _, k, v in records_of(log)} == last_values(history)


# -- property --------------------------------------------------------------------------

_keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])
_op = st.one_of(
    st.tuples(st.just("put"), st.lists(st.tuples(_keys, st.one_of(st.none(),
                                                              st.binary(max_size=20))),
                                       min_size=1, max_size=4)),
    st.tuples(st.just("roll"), st.none()),
    st.tuples(st.just("clean"), st.integers(min_value=0, max_value=3 * DAY)),
    st.tuples(st.just("reopen"), st.booleans()),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, max_size=40))
def test_property_reading_a_cleaned_log_gives_each_keys_last_value(tmp_path_factory, ops):
    """Whatever is written, rolled, cleaned and reopened: per key, reading gives its last
    value (a tombstone may be gone only as a key with no value), and every record that
    survives sits at its original offset."""
    directory = tmp_path_factory.mktemp("prop") / "t-0"
    log = PartitionLog.open(directory, COMPACT, NOW)
    history: dict[int, tuple[bytes, bytes | None]] = {}
    try:
        for kind, arg in ops:
            if kind == "put":
                first = write(log, arg)
                for i, (k, v) in enumerate(arg):
                    history[first + i] = (k, v)
            elif kind == "roll":
                log.roll()
            elif kind == "clean":
                job = log.cleaning_job(NOW + arg, BUDGET)
                if job is not None:
                    assert log.install_cleaned(run_cleaning(job))
            else:
                if arg:
                    log.close()
                else:
                    log.close_unclean()
                log = PartitionLog.open(directory, COMPACT, NOW)
            got = records_of(log)
            for offset, k, v in got:
                assert history[offset] == (k, v)
            latest = last_values([(o, k, v) for o, (k, v) in sorted(history.items())])
            seen = {k: v for _, k, v in got}
            for k, v in latest.items():
                if v is None:
                    assert seen.get(k) is None
                else:
                    assert seen.get(k) == v
    finally:
        log.close()
