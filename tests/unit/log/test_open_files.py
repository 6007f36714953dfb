"""Open segment files are bounded (issue 10): partitions share one LRU set of .log
descriptors, indexes hold none, and reads, writes, flushes and restarts work whatever was
closed to make room. Creation is all-or-nothing."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from coterie.log.config import LogConfig
from coterie.log.errors import InvalidConfigError, StorageError
from coterie.log.manager import LogManager
from coterie.log.open_files import OpenFiles, capacity_from, default_capacity
from coterie.log.partition import PartitionLog

from .batches import make_batch

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def open_paths() -> list[str]:
    """What this process has open, by path."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed since listed
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
    return out


def open_under(directory: Path) -> list[str]:
    return [p for p in open_paths() if p.startswith(str(directory))]


def values_of(log: PartitionLog) -> list[bytes]:
    from kio.records.readers import read_batch

    values: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30)  # one segment at a time
        pos = 0
        while pos < len(data):
            batch, size = read_batch(data, pos)
            values += [r.value for r in batch.records]
            offset = batch.base_offset + batch.last_offset_delta + 1
            pos += size
    return values


def test_partitions_share_a_bounded_set_and_lose_nothing(tmp_path):
    files = OpenFiles(capacity=4)
    logs = [PartitionLog.open(tmp_path / f"t-{i}", SMALL, 0, files) for i in range(20)]
    for round_ in range(3):
        for i, log in enumerate(logs):
            log.append(make_batch([f"{i}:{round_}".encode()]), 0, 1)
        assert len(open_under(tmp_path)) <= 4
        assert sum(log.open_file_count for log in logs) == len(files) <= 4
    assert files.evicted > 0
    for i, log in enumerate(logs):
        assert values_of(log) == [f"{i}:{r}".encode() for r in range(3)]
        log.flush()  # fsync through a reopened descriptor
    assert len(open_under(tmp_path)) <= 4
    for log in logs:
        log.close()
    assert open_under(tmp_path) == []
    assert len(files) == 0


def test_indexes_hold_no_descriptor_and_are_written_on_seal_and_close(tmp_path):
    files = OpenFiles(capacity=64)
    log = PartitionLog.open(tmp_path / "p", SMALL, 0, files)
    for i in range(60):
        log.append(make_batch([b"x" * 50, str(i).encode()]), 0, i)
    assert log.segment_count > 2
    assert not any(p.endswith((".index", ".timeindex")) for p in open_paths())
    # Rolled segments wrote their indexes when sealed; the active one's wait in memory.
    sealed = sorted((tmp_path / "p").glob("*.index"))[: log.segment_count - 1]
    assert sealed and all(p.stat().st_size > 0 for p in sealed)
    log.close()
    # A clean close leaves every index on disk, and a clean open trusts them.
    assert len(list((tmp_path / "p").glob("*.index"))) == log.segment_count
    again = PartitionLog.open(tmp_path / "p", SMALL, 0, files)
    assert again.recovered_bytes == 0
    assert again.log_end_offset == 120
    assert values_of(again) == [v for i in range(60) for v in (b"x" * 50, str(i).encode())]
    again.close()


def test_hot_partition_reopens_nothing(tmp_path):
    files = OpenFiles(capacity=2)
    cold = [PartitionLog.open(tmp_path / f"c-{i}", LogConfig(), 0, files) for i in range(5)]
    hot = PartitionLog.open(tmp_path / "hot", LogConfig(), 0, files)
    hot.append(make_batch([b"first"]), 0, 0)
    opened = files.opened
    for i in range(200):
        hot.append(make_batch([str(i).encode()]), 0, i)
        assert hot.read(hot.log_end_offset - 1, 1000)
    assert files.opened == opened  # produce and fetch on a partition in the set: no open
    for log in [*cold, hot]:
        log.close()


def test_a_fetch_range_survives_eviction(tmp_path):
    """Fetch duplicates `segment.fd` for sendfile; the copy stays valid when the set closes
    the segment's own descriptor, and `fd` reopens the file when it was closed."""
    files = OpenFiles(capacity=1)
    log = PartitionLog.open(tmp_path / "a", LogConfig(), 0, files)
    log.append(make_batch([b"a" * 1000]), 0, 0)
    other = PartitionLog.open(tmp_path / "b", LogConfig(), 0, files)
    span = log.locate(0, 1 << 20)
    assert span is not None
    seg, start, end = span
    assert seg.is_open and not other.open_file_count  # locate read it: it has the place
    files.shrink()
    assert not seg.is_open
    dup = os.dup(seg.fd)  # reopened on demand
    assert seg.is_open
    try:
        other.append(make_batch([b"b"]), 0, 0)  # evicts `log` again
        assert not seg.is_open
        assert os.pread(dup, end - start, start) == log.read(0, 1 << 20)
    finally:
        os.close(dup)
    log.close()
    other.close()


def test_a_closed_or_deleted_segment_is_not_recreated(tmp_path):
    files = OpenFiles(capacity=8)
    log = PartitionLog.open(tmp_path / "d", SMALL, 0, files)
    log.append(make_batch([b"x" * 1500]), 0, 0)
    log.append(make_batch([b"y" * 1500]), 0, 0)
    oldest = log.locate(0, 10)[0]  # type: ignore[index]
    log.delete_segments_before(1)
    with pytest.raises(StorageError):
        _ = oldest.fd
    assert not oldest.log_path.exists()
    log.close()


def test_capacity_setting():
    assert capacity_from({}) == default_capacity()
    assert capacity_from({"log.max.open.files": "-1"}) == default_capacity()
    assert capacity_from({"log.max.open.files": "300"}) == 300
    for bad in ("0", "-2", "many"):
        with pytest.raises(InvalidConfigError, match=r"log\.max\.open\.files"):
            capacity_from({"log.max.open.files": bad})


def test_manager_uses_the_setting(tmp_path):
    manager = LogManager.open(tmp_path / "data", {"log.max.open.files": "3"}, 0)
    try:
        manager.create_topic("t", 10, {}, 0)
        # New partitions give their files back at once.
        assert len(manager.open_files) == 0
        for i in range(10):
            manager.partition("t", i).append(make_batch([b"v"]), 0, 0)  # type: ignore[union-attr]
        assert manager.open_files.capacity == 3
        assert len(manager.open_files) == 3
        assert len(open_under(tmp_path / "data")) == 3 + 1  # and the lock file
    finally:
        manager.close()


_LOW_LIMIT_SCRIPT = textwrap.dedent("""
    import json, os, resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    from coterie.log.manager import LogManager
    from coterie.log.open_files import OpenFiles
    sys.path.insert(0, sys.argv[2])
    from batches import make_batch

    data = Path(sys.argv[1])
    hold = []
    if sys.argv[3] == "crowded":
        # Something else (sockets, say) takes most descriptors, and the log was told it
        # may keep more than are left: opens hit EMFILE and the set must give way.
        while len(os.listdir("/proc/self/fd")) < 48:
            hold.append(os.open("/dev/null", os.O_RDONLY))
    props = {"log.max.open.files": "1000"} if hold else {}
    m = LogManager.open(data, props, 0)
    if "t" not in m.topics:
        m.create_topic("t", 300, {}, 0)
    for i in range(300):
        m.partition("t", i).append(make_batch([f"{i}".encode()]), 0, 0)
    ends = [m.partition("t", i).log_end_offset for i in range(300)]
    print(json.dumps({"capacity": m.open_files.capacity, "open": len(m.open_files),
                      "evicted": m.open_files.evicted, "ends": ends}))
    if sys.argv[4] == "crash":
        os._exit(0)  # no close: the next start recovers
    m.close()
""")


def _run_low_limit(data: Path, crowded: bool, crash: bool) -> dict:
    script = [sys.executable, "-c", _LOW_LIMIT_SCRIPT, str(data),
              str(Path(__file__).parent), "crowded" if crowded else "plain",
              "crash" if crash else "close"]
    done = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_hundreds_of_partitions_under_a_64_descriptor_limit(tmp_path):
    """300 partitions, 64 descriptors: the default set is 32 wide; it runs, survives a crash
    and restarts (three descriptors per partition, as before, needed 900)."""
    data = tmp_path / "data"
    first = _run_low_limit(data, crowded=False, crash=True)
    assert first["capacity"] == 32 and first["open"] <= 32 and first["evicted"] > 0
    assert first["ends"] == [1] * 300
    second = _run_low_limit(data, crowded=False, crash=False)
    assert second["ends"] == [2] * 300


def test_the_set_gives_way_when_the_process_runs_out(tmp_path):
    """With the cap above what is left, opens fail with EMFILE; the set closes half its
    descriptors and retries instead of failing the append."""
    out = _run_low_limit(tmp_path / "data", crowded=True, crash=False)
    assert out["ends"] == [1] * 300
    assert out["evicted"] > 0 and out["open"] <= 16
    assert out["capacity"] <= 16  # it learnt how many the process can spare


# ------------------------------------------------------------------ all-or-nothing creation


@pytest.fixture
def manager(tmp_path):
    m = LogManager.open(tmp_path / "data", {}, 0)
    yield m
    m.close()


def partition_dirs(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data.glob(f"{topic}-*") if p.is_dir())


def test_failed_create_topic_leaves_nothing(manager, tmp_path):
    data = tmp_path / "data"
    (data / "half-3").write_bytes(b"in the way")  # partition 3's directory cannot be made
    with pytest.raises(StorageError, match="cannot create topic 'half'"):
        manager.create_topic("half", 6, {}, 0)
    assert "half" not in manager.topics
    assert all(manager.partition("half", i) is None for i in range(6))
    assert partition_dirs(data, "half") == []
    assert not (data / "topics" / "half.json").exists()
    assert open_under(data / "half-0") == []
    (data / "half-3").unlink()
    info = manager.create_topic("half", 6, {}, 0)
    assert info.partitions == 6 and len(partition_dirs(data, "half")) == 6


def test_failed_create_partitions_leaves_nothing(manager, tmp_path):
    data = tmp_path / "data"
    manager.create_topic("grow", 2, {}, 0)
    manager.partition("grow", 1).append(make_batch([b"kept"]), 0, 0)  # type: ignore[union-attr]
    (data / "grow-4").write_bytes(b"in the way")
    with pytest.raises(StorageError, match="cannot add partitions to topic 'grow'"):
        manager.create_partitions("grow", 6, 0)
    assert manager.topics["grow"].partitions == 2
    assert manager.partition("grow", 2) is None and manager.partition("grow", 3) is None
    assert partition_dirs(data, "grow") == ["grow-0", "grow-1"]
    assert json.loads((data / "topics" / "grow.json").read_text())["partitions"] == 2
    assert manager.partition("grow", 1).log_end_offset == 1  # type: ignore[union-attr]


def test_failed_create_rolls_back_on_emfile(manager, tmp_path, monkeypatch):
    """An OSError from deep inside (here EMFILE on the fourth partition) is reported as
    StorageError naming the cause, and the partitions made before it are gone."""
    real_open = PartitionLog.open
    calls = {"n": 0}

    def failing_open(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(*args, **kwargs)

    monkeypatch.setattr(PartitionLog, "open", failing_open)
    with pytest.raises(StorageError, match="Too many open files"):
        manager.create_topic("many", 10, {}, 0)
    assert partition_dirs(tmp_path / "data", "many") == []
    assert "many" not in manager.topics


def test_rolled_back_topic_is_absent_after_restart(tmp_path):
    data = tmp_path / "data"
    m = LogManager.open(data, {}, 0)
    (data / "gone-1").write_bytes(b"x")
    with pytest.raises(StorageError):
        m.create_topic("gone", 3, {}, 0)
    m.close()
    again = LogManager.open(data, {}, 0)
    try:
        assert "gone" not in again.topics
    finally:
        again.close()
