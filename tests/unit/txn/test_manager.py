"""The transaction coordinator's pure core (coterie.txn), driven directly with virtual time:
the commit and abort flows with their marker jobs, zombie fencing by a second
InitProducerId, timeouts, EndTxn retries and misuse, AddOffsetsToTxn's partition, a restart
mid-transaction (records replayed through their bytes), the undo of a failed append, and the
records in Kafka's __transaction_state layout."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.common.partitioning import partition_for
from coterie.txn import log_codec
from coterie.txn.manager import TxnConfig, TxnManager, TxnResult
from coterie.txn.metadata import TxnMetadata, TxnState

TID = "orders-tx"
T0 = 1_000_000


class Ids:
    def __init__(self) -> None:
        self._next = itertools.count(100)

    def next_id(self) -> int:
        return next(self._next)


class Harness:
    """A manager whose records go to a list (the partition) as the runtime would write."""

    def __init__(self) -> None:
        self.ids = Ids()
        self.m = TxnManager(TxnConfig(offsets_partitions=50), self.ids)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.now = T0

    def run(self, result: TxnResult) -> TxnResult:
        for r in result.records:
            self.log.append(log_codec.encode(None, r) if isinstance(r, str)
                            else log_codec.encode(r))
        self.m.committed(result.records)
        return result

    def init(self, tid: str = TID, pid: int = -1, epoch: int = -1,
             timeout: int = 60_000) -> TxnResult:
        return self.run(self.m.init_producer_id(tid, timeout, pid, epoch, self.now))

    def add(self, pid: int, epoch: int, *parts: tuple[str, int], tid: str = TID) -> TxnResult:
        return self.run(self.m.add_partitions(tid, pid, epoch, parts, self.now))

    def end(self, pid: int, epoch: int, commit: bool, tid: str = TID) -> TxnResult:
        return self.run(self.m.end_txn(tid, pid, epoch, commit, self.now))

    def written(self, tid: str = TID) -> TxnResult:
        return self.run(self.m.markers_written(tid, self.now))

    def replayed(self) -> TxnManager:
        fresh = TxnManager(self.m.config, self.ids)
        for key, value in self.log:
            fresh.replay(*log_codec.decode(key, value))
        return fresh


def test_commit_flow_writes_markers_then_completes():
    h = Harness()
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.none, 100, 0)
    assert h.add(100, 0, ("t", 0), ("t", 1)).error == ErrorCode.none
    assert h.add(100, 0, ("t", 1)).records == []  # already in: nothing to write
    assert h.m.describe(TID).state == TxnState.ONGOING
    end = h.end(100, 0, commit=True)
    assert end.error == ErrorCode.none
    (job,) = end.markers
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (
        100, 0, True, frozenset({("t", 0), ("t", 1)}))
    assert h.m.describe(TID).state == TxnState.PREPARE_COMMIT
    # While the markers are being written, another EndTxn waits.
    assert h.end(100, 0, commit=True).error == ErrorCode.concurrent_transactions
    h.written()
    meta = h.m.describe(TID)
    assert (meta.state, meta.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    # A retry of the same EndTxn after completion is fine; the opposite one is not.
    assert h.end(100, 0, commit=True).error == ErrorCode.none
    assert h.end(100, 0, commit=False).error == ErrorCode.invalid_txn_state


def test_abort_flow_and_a_new_transaction_after_it():
    h = Harness()
    h.init()
    h.add(100, 0, ("t", 0))
    (job,) = h.end(100, 0, commit=False).markers
    assert not job.commit
    h.written()
    assert h.m.describe(TID).state == TxnState.COMPLETE_ABORT
    assert h.add(100, 0, ("t", 3)).error == ErrorCode.none
    assert h.m.describe(TID).partitions == frozenset({("t", 3)})
    assert h.m.describe(TID).txn_start_ms == h.now


def test_a_second_producer_fences_the_first_and_aborts_its_transaction():
    h = Harness()
    h.init()
    h.add(100, 0, ("t", 0))
    retry = h.init()  # the same transactional id, started again elsewhere
    assert retry.error == ErrorCode.concurrent_transactions
    (job,) = retry.markers
    assert (job.commit, job.producer_epoch) == (False, 1)  # aborted with the bumped epoch
    # The zombie is fenced at once.
    assert h.add(100, 0, ("t", 1)).error == ErrorCode.producer_fenced
    assert h.end(100, 0, commit=True).error == ErrorCode.producer_fenced
    assert h.init().error == ErrorCode.concurrent_transactions  # markers still pending
    h.written()
    again = h.init()
    assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.none, 100, 2)
    assert h.m.describe(TID).state == TxnState.EMPTY


def test_fencing_at_the_last_epoch_still_fences_and_then_moves_to_a_new_id():
    h = Harness()
    h.init()
    h.m.replay(TID, h.m.describe(TID).moved(h.now, producer_epoch=32766))
    h.add(100, 32766, ("t", 0))
    retry = h.init()  # a new instance while the old one's transaction is open
    (job,) = retry.markers
    # The abort must carry a higher epoch than the zombie's, or its markers fence nothing.
    assert (job.producer_id, job.producer_epoch, job.commit) == (100, 32767, False)
    assert h.add(100, 32766, ("t", 1)).error == ErrorCode.producer_fenced
    h.written()
    again = h.init()
    assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.none, 101, 0)
    assert h.replayed().txns == h.m.txns


def test_init_checks_the_id_and_epoch_the_producer_claims():
    h = Harness()
    h.init()
    assert h.init(pid=999, epoch=0).error == ErrorCode.invalid_producer_id_mapping
    assert h.init(pid=100, epoch=7).error == ErrorCode.producer_fenced
    assert h.init(pid=100, epoch=0).producer_epoch == 1


def test_timeouts_are_checked_and_abort_with_a_fencing_bump():
    h = Harness()
    assert h.init(timeout=900_001).error == ErrorCode.invalid_transaction_timeout
    assert h.init(timeout=0).error == ErrorCode.invalid_transaction_timeout
    h.init(timeout=10_000)
    h.add(100, 0, ("t", 0))
    h.now += 10_000
    assert h.run(h.m.expire_transactions(h.now)).markers == []
    h.now += 1
    (job,) = h.run(h.m.expire_transactions(h.now)).markers
    assert (job.commit, job.producer_epoch) == (False, 1)
    assert h.end(100, 0, commit=True).error == ErrorCode.producer_fenced
    h.written()
    assert h.m.describe(TID).state == TxnState.COMPLETE_ABORT


def test_end_txn_misuse():
    h = Harness()
    assert h.end(100, 0, commit=True).error == ErrorCode.invalid_producer_id_mapping
    h.init()
    assert h.end(100, 0, commit=True).error == ErrorCode.invalid_txn_state  # nothing open
    assert h.end(101, 0, commit=True).error == ErrorCode.invalid_producer_id_mapping
    assert h.add(101, 0, ("t", 0)).error == ErrorCode.invalid_producer_id_mapping


def test_exhausted_epochs_move_to_a_new_producer_id():
    h = Harness()
    h.init()
    meta = h.m.describe(TID)
    worn = TxnMetadata(TID, meta.producer_id, 32766, meta.timeout_ms)
    h.m.replay(TID, worn)
    r = h.init()
    assert (r.producer_id, r.producer_epoch) == (101, 0)


def test_add_offsets_adds_the_groups_offsets_partition_and_verify_checks_it():
    h = Harness()
    h.init()
    assert h.run(h.m.add_offsets(TID, 100, 0, "my-group", h.now)).error == ErrorCode.none
    part = ("__consumer_offsets", partition_for("my-group", 50))
    assert part in h.m.describe(TID).partitions
    assert h.m.verify(TID, 100, 0, part) is None
    assert h.m.verify(TID, 100, 0, ("t", 0)) == ErrorCode.transaction_abortable
    assert h.m.verify(TID, 100, 1, part) == ErrorCode.producer_fenced


def test_a_restart_mid_transaction_resumes_its_markers():
    h = Harness()
    h.init()
    h.add(100, 0, ("t", 0), ("u", 2))
    h.end(100, 0, commit=True)
    fresh = h.replayed()
    assert fresh.txns == h.m.txns
    (job,) = fresh.pending_marker_jobs()
    assert (job.commit, job.partitions) == (True, frozenset({("t", 0), ("u", 2)}))


def test_revert_restores_the_durable_value():
    h = Harness()
    h.init()
    before = h.m.describe(TID)
    failed = h.m.add_partitions(TID, 100, 0, [("t", 0)], h.now)  # append "fails"
    assert h.m.describe(TID).state == TxnState.ONGOING
    h.m.revert(failed.records)
    assert h.m.describe(TID) == before
    # A brand-new id whose first record failed is gone again.
    lost = h.m.init_producer_id("other", 1000, -1, -1, h.now)
    h.m.revert(lost.records)
    assert h.m.describe("other") is None


def test_idle_ids_expire_with_a_tombstone():
    h = Harness()
    h.init()
    h.init(tid="busy")
    h.add(101, 0, ("t", 0), tid="busy")
    h.now += 7 * 24 * 3_600_000 + 1
    gone = h.run(h.m.expire_transactional_ids(h.now))
    assert gone.records == [TID]
    assert h.m.describe(TID) is None and h.m.describe("busy") is not None
    assert h.replayed().txns == h.m.txns


def test_listing_filters():
    h = Harness()
    h.init(tid="a")
    h.init(tid="b")
    h.add(101, 0, ("t", 0), tid="b")
    h.now += 5_000
    assert [m.transactional_id for m in h.m.listing()] == ["a", "b"]
    assert [m.transactional_id for m in h.m.listing(states=["Ongoing"])] == ["b"]
    assert [m.transactional_id for m in h.m.listing(producer_ids=[100])] == ["a"]
    assert [m.transactional_id for m in h.m.listing(min_duration_ms=5_000, now_ms=h.now)] == ["b"]
    assert h.m.listing(min_duration_ms=5_001, now_ms=h.now) == []


def test_records_are_kafkas_transaction_log_layout():
    meta = TxnMetadata("tx", 7, 2, 60_000, TxnState.ONGOING,
                       frozenset({("t", 1), ("t", 0)}), txn_start_ms=5, last_update_ms=6)
    key, value = log_codec.encode(meta)
    assert key == bytes.fromhex("0000" "0002") + b"tx"
    assert value == bytes.fromhex(
        "0000"                  # version 0
        "0000000000000007"      # producer id
        "0002"                  # epoch
        "0000ea60"              # timeout 60000
        "01"                    # Ongoing
        "00000001" "0001" "74" "00000002" "00000000" "00000001"  # [t: 0, 1]
        "0000000000000006"      # last update
        "0000000000000005")     # start
    assert log_codec.decode(key, value) == ("tx", meta)
    assert log_codec.decode(*log_codec.encode(None, "tx")) == ("tx", None)


def test_a_version_1_value_is_read_with_its_tagged_fields_skipped():
    flexible = bytes.fromhex(
        "0001" "0000000000000007" "0002" "0000ea60" "04"
        "02" "02" "74" "02" "00000003" "00"  # compact array: [t: [3]], no tags
        "0000000000000006" "0000000000000005"
        "01" "00" "08" "ffffffffffffffff")  # one tagged field (tag 0, 8 bytes)
    tid, meta = log_codec.decode(bytes.fromhex("0000" "0002") + b"tx", flexible)
    assert (tid, meta.state, meta.partitions) == ("tx", TxnState.COMPLETE_COMMIT,
                                                  frozenset({("t", 3)}))


_ops = st.lists(st.tuples(
    st.sampled_from(["init", "add", "commit", "abort", "written", "expire", "fail"]),
    st.sampled_from(["a", "b"]), st.integers(0, 3)), max_size=40)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ops)
def test_replaying_the_records_gives_the_live_state(ops):
    h = Harness()
    for op, tid, n in ops:
        h.now += 7_000
        meta = h.m.describe(tid)
        pid, epoch = (meta.producer_id, meta.producer_epoch) if meta else (-1, -1)
        if op == "init":
            h.init(tid=tid, timeout=20_000)
        elif op == "add":
            h.add(pid, epoch, ("t", n), tid=tid)
        elif op in ("commit", "abort"):
            h.end(pid, epoch, op == "commit", tid=tid)
        elif op == "written":
            h.written(tid)
        elif op == "expire":
            h.run(h.m.expire_transactions(h.now))
        else:
            h.m.revert(h.m.add_partitions(tid, pid, epoch, [("t", n)], h.now).records)
    assert h.replayed().txns == h.m.txns


# -- transactions version 2 (KIP-890 part 2) -------------------------------------------------
def _v2_end(h: Harness, pid: int, epoch: int, commit: bool) -> TxnResult:
    return h.run(h.m.end_txn(TID, pid, epoch, commit, h.now, tv2=True))


def _v2_add(h: Harness, pid: int, epoch: int, *parts: tuple[str, int]) -> TxnResult:
    return h.run(h.m.add_partitions(TID, pid, epoch, parts, h.now, tv2=True))


def test_v2_every_end_bumps_the_epoch_and_the_markers_carry_it():
    h = Harness()
    h.init()
    assert _v2_add(h, 100, 0, ("t", 0)).error == ErrorCode.none  # the produce's implicit add
    assert h.m.describe(TID).client_version == 2
    end = _v2_end(h, 100, 0, commit=True)
    assert (end.error, end.producer_id, end.producer_epoch) == (ErrorCode.none, 100, 1)
    (job,) = end.markers
    assert (job.producer_id, job.producer_epoch, job.commit) == (100, 1, True)
    # A retry while the markers are written: the client still holds epoch 0.
    assert _v2_end(h, 100, 0, commit=True).error == ErrorCode.concurrent_transactions
    h.written()
    # A retry after completion is answered with the bumped epoch; a stale one is fenced.
    retry = _v2_end(h, 100, 0, commit=True)
    assert (retry.error, retry.producer_epoch, retry.records) == (ErrorCode.none, 1, [])
    assert _v2_end(h, 100, 0, commit=False).error == ErrorCode.invalid_txn_state
    # The next transaction runs at epoch 1; the old epoch can no longer add partitions.
    assert _v2_add(h, 100, 0, ("t", 1)).error == ErrorCode.producer_fenced
    assert _v2_add(h, 100, 1, ("t", 1)).error == ErrorCode.none
    aborted = _v2_end(h, 100, 1, commit=False)
    assert (aborted.error, aborted.producer_epoch) == (ErrorCode.none, 2)
    assert aborted.markers[0].partitions == frozenset({("t", 1)})
    h.written()
    assert h.replayed().txns == h.m.txns  # through the version-1 records


def test_v2_abort_with_nothing_open_bumps_and_commit_is_refused():
    h = Harness()
    h.init()
    assert _v2_end(h, 100, 0, commit=True).error == ErrorCode.invalid_txn_state
    empty = _v2_end(h, 100, 0, commit=False)
    assert (empty.error, empty.producer_epoch) == (ErrorCode.none, 1)
    assert empty.markers[0].partitions == frozenset()  # nothing to mark
    h.written()
    assert h.m.describe(TID).state == TxnState.COMPLETE_ABORT
    # Epochs that are neither the current one nor a retry's are fenced.
    assert _v2_end(h, 100, 5, commit=False).error == ErrorCode.producer_fenced
    assert _v2_end(h, 999, 1, commit=False).error == ErrorCode.invalid_producer_id_mapping


def test_v2_exhausted_epoch_moves_the_client_to_a_new_producer_id():
    h = Harness()
    h.init()
    h.m.replay(TID, h.m.describe(TID).moved(h.now, producer_epoch=32766))
    _v2_add(h, 100, 32766, ("t", 0))
    end = _v2_end(h, 100, 32766, commit=True)
    assert (end.error, end.producer_id, end.producer_epoch) == (ErrorCode.none, 101, 0)
    assert (end.markers[0].producer_id, end.markers[0].producer_epoch) == (100, 32767)
    h.written()
    meta = h.m.describe(TID)
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (101, 0, 100)
    retry = _v2_end(h, 100, 32766, commit=True)  # the retry names the old id
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (ErrorCode.none, 101, 0)
    assert _v2_add(h, 101, 0, ("t", 2)).error == ErrorCode.none
    assert h.replayed().txns == h.m.txns


def test_version_1_clients_keep_version_1_rules_and_records():
    h = Harness()
    h.init()
    h.add(100, 0, ("t", 0))
    end = h.end(100, 0, commit=True)
    assert end.markers[0].producer_epoch == 0  # no bump
    h.written()
    assert h.m.describe(TID).producer_epoch == 0
    assert all(value is None or value[:2] == b"\x00\x00" for _, value in h.log)  # version 0
