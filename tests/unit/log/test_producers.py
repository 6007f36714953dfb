"""Producer state of a partition (coterie.log.producers), through a real PartitionLog on disk:
Kafka's duplicate, epoch and sequence rules, transactions and the last stable offset,
aborted-transaction indexing, expiry, retention, snapshots and recovery after a crash."""

from __future__ import annotations

import datetime
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch

from coterie.log.config import LogConfig
from coterie.log.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from coterie.log.partition import PartitionLog
from coterie.log.producers import SNAPSHOT_SUFFIX, ProducerStates
from coterie.wire.record_batch import TRANSACTIONAL_FLAG
from coterie.wire.txn_markers import control_batch

NOW = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=100)
MAX = 2**31 - 1


def batch(pid: int, epoch: int, seq: int, n: int = 1, txn: bool = False,
          ts: int = NOW) -> bytes:
    stamp = datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC)
    records = tuple(Record(attributes=0, timestamp=stamp, offset=i, key=None,
                           value=b"v%d" % i, headers=()) for i in range(n))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=pid, producer_epoch=epoch,
                                        base_sequence=seq, records=records,
                                        attributes=TRANSACTIONAL_FLAG if txn else 0))
    return buf.getvalue()


def open_log(path: Path) -> PartitionLog:
    return PartitionLog.open(path, SMALL, NOW)


def state(log: PartitionLog) -> dict:
    return {e.producer_id: (e.epoch, e.last_seq, e.txn_first_offset,
                            [(b.first_seq, b.last_seq, b.first_offset) for b in e.batches])
            for e in log.active_producers()}


def test_in_sequence_batches_and_retries_of_the_last_five(tmp_path):
    log = open_log(tmp_path / "p")
    offsets = [log.append(batch(1, 0, seq * 2, n=2), 0, NOW).first_offset for seq in range(7)]
    assert offsets == list(range(0, 14, 2))
    end = log.log_end_offset
    for seq in range(2, 7):  # the last five are recognised
        again = log.append(batch(1, 0, seq * 2, n=2), 0, NOW)
        assert again.duplicate and again.first_offset == seq * 2
        assert again.last_offset == seq * 2 + 1
    assert log.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceError, match="does not follow 13"):
        log.append(batch(1, 0, 2, n=2), 0, NOW)  # older than the last five
    assert log.log_end_offset == end


def test_gaps_stale_epochs_and_new_epochs(tmp_path):
    log = open_log(tmp_path / "p")
    log.append(batch(1, 0, 0), 0, NOW)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, 0, 5), 0, NOW)
    with pytest.raises(OutOfOrderSequenceError, match="sequence 0"):
        log.append(batch(1, 1, 3), 0, NOW)
    assert log.append(batch(1, 1, 0), 0, NOW).first_offset == 1
    with pytest.raises(InvalidProducerEpochError, match="older than its current epoch 1"):
        log.append(batch(1, 0, 1), 0, NOW)
    assert log.log_end_offset == 2


def test_an_unknown_producer_may_start_anywhere_and_sequences_wrap(tmp_path):
    log = open_log(tmp_path / "p")
    log.append(batch(9, 3, MAX - 1, n=2), 0, NOW)  # sequences MAX-1, MAX
    assert log.append(batch(9, 3, 0), 0, NOW).first_offset == 2
    assert state(log)[9][1] == 0


def test_a_batch_running_past_max_wraps_its_last_sequence(tmp_path):
    log = open_log(tmp_path / "p")
    log.append(batch(9, 0, MAX, n=3), 0, NOW)  # MAX, 0, 1
    assert state(log)[9][1] == 1
    assert log.append(batch(9, 0, 2), 0, NOW).first_offset == 3


def test_a_multi_batch_append_is_all_or_nothing(tmp_path):
    log = open_log(tmp_path / "p")
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, 0, 0) + batch(1, 0, 2), 0, NOW)
    assert log.log_end_offset == 0 and state(log) == {}
    info = log.append(batch(1, 0, 0) + batch(1, 0, 1) + batch(2, 0, 7), 0, NOW)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert state(log)[1][1] == 1 and state(log)[2][1] == 7


def test_producers_are_independent_and_plain_batches_untracked(tmp_path):
    log = open_log(tmp_path / "p")
    log.append(batch(-1, -1, -1), 0, NOW)
    log.append(batch(1, 0, 0), 0, NOW)
    log.append(batch(2, 0, 0), 0, NOW)
    assert log.append(batch(-1, -1, -1), 0, NOW).first_offset == 3  # never a duplicate
    assert set(state(log)) == {1, 2}


def test_transactions_set_the_last_stable_offset_and_aborts_are_indexed(tmp_path):
    log = open_log(tmp_path / "p")
    log.append(batch(1, 0, 0), 0, NOW)
    log.append(batch(5, 0, 0, txn=True), 0, NOW)  # offset 1 opens producer 5's txn
    log.append(batch(6, 0, 0, txn=True), 0, NOW)  # offset 2
    log.append(batch(5, 0, 1, txn=True), 0, NOW)  # offset 3
    assert log.last_stable_offset == 1
    with pytest.raises(InvalidTxnStateError):
        log.append(batch(5, 0, 2), 0, NOW)
    log.append(control_batch(5, 0, False, 0, NOW), 0, NOW, coordinator=True)  # abort, 4
    assert log.last_stable_offset == 2
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in log.aborted_transactions(0, 100)] == [(5, 1, 4)]
    log.append(control_batch(6, 0, True, 0, NOW), 0, NOW, coordinator=True)  # commit, 5
    assert log.last_stable_offset == log.log_end_offset == 6
    assert [t.producer_id for t in log.aborted_transactions(0, 100)] == [5]
    # read_committed reading stops before the open transaction's first batch.
    log.append(batch(7, 0, 0, txn=True), 0, NOW)  # offset 6
    log.append(batch(1, 0, 1), 0, NOW)  # offset 7, after it
    span = log.locate(0, 1 << 20, log.last_stable_offset)
    assert span is not None
    assert log.locate(6, 1 << 20, log.last_stable_offset) is None


def test_producers_cannot_write_control_batches(tmp_path):
    log = open_log(tmp_path / "p")
    with pytest.raises(CorruptRecordError, match="written by the broker"):
        log.append(control_batch(5, 0, True, 0, NOW), 0, NOW)


def test_coordinator_writes_skip_sequences_but_not_epochs(tmp_path):
    log = open_log(tmp_path / "p")
    log.append(batch(5, 3, -1, txn=True), 0, NOW, coordinator=True)
    log.append(batch(5, 3, -1, txn=True), 0, NOW, coordinator=True)  # no duplicate check
    with pytest.raises(InvalidProducerEpochError):
        log.append(control_batch(5, 2, True, 0, NOW), 0, NOW, coordinator=True)
    assert log.log_end_offset == 2


def test_idle_producers_expire_but_not_with_an_open_transaction(tmp_path):
    log = open_log(tmp_path / "p")
    log.append(batch(1, 0, 0, ts=NOW), 0, NOW)
    log.append(batch(2, 0, 0, txn=True, ts=NOW), 0, NOW)
    assert log.expire_producers(NOW + 999, 1000) == 0
    assert log.expire_producers(NOW + 1000, 1000) == 1
    assert set(state(log)) == {2}
    # Expired: its next batch may start at any sequence, as a new producer's.
    assert log.append(batch(1, 0, 40, ts=NOW + 1000), 0, NOW).first_offset == 2


def test_retention_drops_producers_below_the_log_start(tmp_path):
    log = open_log(tmp_path / "p")
    for i in range(5):
        log.append(batch(1, 0, i * 3, n=3), 0, NOW)
    for i in range(60):
        log.append(batch(2, 0, i * 3, n=3), 0, NOW)
    assert log.segment_count > 2
    log.delete_segments_before(log.log_end_offset)
    assert set(state(log)) == {2}
    assert not [p for p in (tmp_path / "p").glob(f"*{SNAPSHOT_SUFFIX}")
                if int(p.name.split(".")[0]) < log.log_start_offset]


@pytest.mark.parametrize("how", ["clean", "kill", "torn"])
def test_a_retry_is_still_a_duplicate_after_a_restart(tmp_path, how):
    log = open_log(tmp_path / "p")
    for i in range(25):  # several segments: snapshots at the rolls
        log.append(batch(1, 0, i * 3, n=3), 0, NOW)
    log.append(batch(4, 0, 0, txn=True), 0, NOW)
    assert list((tmp_path / "p").glob(f"*{SNAPSHOT_SUFFIX}"))
    before = state(log)
    end = log.log_end_offset
    if how == "clean":
        log.close()
    else:
        log.close_unclean()
        if how == "torn":
            active = sorted((tmp_path / "p").glob("*.log"))[-1]
            with open(active, "ab") as f:
                f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01")
    again = open_log(tmp_path / "p")
    assert state(again) == before
    assert again.last_stable_offset == end - 1
    retry = again.append(batch(1, 0, 72, n=3), 0, NOW)
    assert retry.duplicate and retry.first_offset == 72
    assert again.append(batch(1, 0, 75), 0, NOW).first_offset == end


def test_a_snapshot_beyond_the_log_end_is_dropped(tmp_path):
    log = open_log(tmp_path / "p")
    for seq in range(3):
        log.append(batch(1, 0, seq), 0, NOW)
    log.close()
    stale = tmp_path / "p" / f"{999:020d}{SNAPSHOT_SUFFIX}"
    stale.write_bytes(ProducerStates().encode())
    again = open_log(tmp_path / "p")
    assert not stale.exists()
    assert state(again)[1][1] == 2


def test_a_damaged_snapshot_is_rebuilt_from_the_log(tmp_path):
    log = open_log(tmp_path / "p")
    for seq in range(3):
        log.append(batch(1, 0, seq), 0, NOW)
    log.close()
    (snapshot,) = (tmp_path / "p").glob(f"*{SNAPSHOT_SUFFIX}")
    snapshot.write_bytes(snapshot.read_bytes()[:-3] + b"xyz")
    assert state(open_log(tmp_path / "p"))[1][1] == 2


_appends = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 1), st.booleans(),
                              st.integers(1, 3)), max_size=40)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(_appends, st.sampled_from(["clean", "kill"]))
def test_reopened_state_equals_the_live_state(tmp_path_factory, appends, how):
    path = tmp_path_factory.mktemp("prop") / "p"
    log = open_log(path)
    next_seq: dict[tuple[int, int], int] = {}
    sent: list[bytes] = []
    for pid, epoch, retry, n in appends:
        if retry and sent:
            log.append(sent[-1], 0, NOW)
            continue
        seq = next_seq.get((pid, epoch), 0)
        b = batch(pid, epoch, seq, n=n)
        try:
            log.append(b, 0, NOW)
        except (OutOfOrderSequenceError, InvalidProducerEpochError):
            continue
        next_seq[(pid, epoch)] = seq + n
        sent.append(b)
    before = state(log)
    if how == "clean":
        log.close()
    else:
        log.close_unclean()
    again = open_log(path)
    assert state(again) == before
    again.close()
