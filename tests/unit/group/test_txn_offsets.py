"""TxnOffsetCommit in the group shard (issue 12, build item 4), driven directly with virtual
time: fencing as Kafka 4.2 does it for each group type, pending offsets invisible until the
transaction's marker (UNSTABLE_OFFSET_COMMIT for a stable fetch), dropped on abort, the
later of a plain and a transactional commit winning, the undo of a failed append, and a shard
rebuilt from its log (records, transactional records and markers in log order) equal to the
live one."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.broker.offsets_topic import TxnMarker, TxnRecord
from coterie.group import codec
from coterie.group.offsets.messages import (
    CommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from coterie.group.records.offsets import OffsetCommitKey
from coterie.group.shard import GroupShard

from .mixed_harness import MixedHarness, mid
from .test_mixed_groups import classic_group, harness

PRODUCER = 1000


class TxnLog:
    """The shard's partition as the runtime would write it: plain records, transactional
    records of a producer, and markers, in order, through the record codec."""

    def __init__(self, h: MixedHarness) -> None:
        self.h = h
        self.items: list[object] = []
        self._seen = 0

    def sync(self) -> None:
        """Take the harness's plain records written since last time (they are durable)."""
        new = self.h.records[self._seen:]
        self._seen = len(self.h.records)
        self.items += new
        self.h.shard.committed(new)

    def txn_commit(self, *parts: tuple[str, int, int], producer: int = PRODUCER,
                   group_id: str = "g", generation: int = -1, member_id: str = "",
                   durable: bool = True) -> tuple[ErrorCode, ...]:
        self.sync()
        req = TxnOffsetCommitRequest("txn", group_id, producer, 0, tuple(
            CommitPartition(t, p, o) for t, p, o in parts), generation, member_id)
        result = self.h.shard.txn_offset_commit(req, self.h.now)
        if result.records:
            assert result.producer == (producer, 0)
            if durable:
                self.items += [TxnRecord(r, producer) for r in result.records]
                self.h.shard.committed(result.records, result.producer)
            else:
                self.h.shard.revert(group_id, result.records, self.h.now, result.producer)
        return result.response.codes

    def marker(self, commit: bool, producer: int = PRODUCER) -> None:
        self.sync()
        self.items.append(TxnMarker(producer, commit))
        self.h.shard.replay_marker(producer, commit)

    def replayed(self) -> GroupShard:
        self.sync()
        fresh = self.h.replayed_shard.__func__(_EmptyLog(self.h))  # topics only
        for item in self.items:
            if isinstance(item, TxnMarker):
                fresh.replay_marker(item.producer_id, item.commit)
            elif isinstance(item, TxnRecord):
                fresh.replay(codec.decode(*codec.encode(item.record)), item.producer_id)
            else:
                fresh.replay(codec.decode(*codec.encode(item)))
        return fresh


class _EmptyLog:
    """Lets MixedHarness.replayed_shard build a fresh shard with the topics and no records."""

    def __init__(self, h: MixedHarness) -> None:
        self._h = h
        self.records: list = []

    def __getattr__(self, name: str):
        return getattr(self._h, name)


def commit(h: MixedHarness, *parts: tuple[str, int, int], group_id: str = "g") -> None:
    h.apply(h.shard.offset_commit(OffsetCommitRequest(group_id, "", -1, tuple(
        CommitPartition(t, p, o) for t, p, o in parts)), h.now))


def fetched(h: MixedHarness, *parts: tuple[str, int], stable: bool = False,
            group_id: str = "g") -> list[tuple[int | None, bool]]:
    answer = h.shard.offset_fetch(OffsetFetchRequest(group_id, tuple(parts),
                                                     require_stable=stable))
    return [(o.value.offset if o.value else None, o.unstable) for o in answer.offsets]


def test_pending_offsets_show_after_the_commit_marker_only():
    h = harness(foo=2)
    log = TxnLog(h)
    assert log.txn_commit(("foo", 0, 10), ("foo", 1, 20)) == (ErrorCode.none,) * 2
    assert fetched(h, ("foo", 0), ("foo", 1)) == [(None, False), (None, False)]
    assert fetched(h, ("foo", 0), ("foo", 1), stable=True) == [(None, True), (None, True)]
    # The group exists (a simple group, as in Kafka) while the transaction is open.
    assert h.describe("g", 5).state == "Empty"
    log.marker(commit=True)
    assert fetched(h, ("foo", 0), ("foo", 1), stable=True) == [(10, False), (20, False)]
    assert h.shard.durable[OffsetCommitKey("g", "foo", 0)].value.offset == 10


def test_an_abort_drops_the_pending_offsets_and_keeps_the_old_ones():
    h = harness(foo=2)
    log = TxnLog(h)
    commit(h, ("foo", 0, 5))
    log.txn_commit(("foo", 0, 10))
    assert fetched(h, ("foo", 0)) == [(5, False)]  # not stable: the last committed
    assert fetched(h, ("foo", 0), stable=True) == [(None, True)]
    log.marker(commit=False)
    assert fetched(h, ("foo", 0), stable=True) == [(5, False)]
    assert not h.shard.has_open_transactions()


def test_the_later_of_a_plain_and_a_transactional_commit_wins():
    h = harness(foo=2)
    log = TxnLog(h)
    log.txn_commit(("foo", 0, 10), ("foo", 1, 10))
    commit(h, ("foo", 0, 99))  # written after the transactional one
    log.marker(commit=True)
    assert fetched(h, ("foo", 0), ("foo", 1)) == [(99, False), (10, False)]
    fresh = log.replayed()
    assert fresh.offsets.fetch_all("g") == h.shard.offsets.fetch_all("g")


def test_two_producers_commit_independently():
    h = harness(foo=2)
    log = TxnLog(h)
    log.txn_commit(("foo", 0, 1), producer=1)
    log.txn_commit(("foo", 1, 2), producer=2)
    log.marker(commit=False, producer=1)
    assert fetched(h, ("foo", 0), ("foo", 1), stable=True) == [(None, False), (None, True)]
    log.marker(commit=True, producer=2)
    assert fetched(h, ("foo", 0), ("foo", 1), stable=True) == [(None, False), (2, False)]


def test_a_marker_without_pending_offsets_changes_nothing():
    h = harness(foo=1)
    log = TxnLog(h)
    commit(h, ("foo", 0, 3))
    log.marker(commit=True, producer=77)
    assert fetched(h, ("foo", 0)) == [(3, False)]


def test_unknown_partitions_and_large_metadata_are_refused_per_partition():
    h = harness(foo=1)
    req = TxnOffsetCommitRequest("txn", "g", PRODUCER, 0, (
        CommitPartition("foo", 0, 1), CommitPartition("nope", 0, 1),
        CommitPartition("foo", 0, 1, metadata="x" * 5000)))
    result = h.shard.txn_offset_commit(req, h.now)
    assert result.response.codes == (ErrorCode.none, ErrorCode.unknown_topic_or_partition,
                                     ErrorCode.offset_metadata_too_large)
    assert len(result.records) == 1


def test_without_a_group_only_a_negative_generation_may_commit():
    h = harness(foo=1)
    log = TxnLog(h)
    assert log.txn_commit(("foo", 0, 1), generation=3, member_id="m") == (
        ErrorCode.illegal_generation,)
    assert log.txn_commit(("foo", 0, 1)) == (ErrorCode.none,)


def test_classic_group_fencing_is_kafkas_transactional_variant():
    h = harness(foo=2)
    log = TxnLog(h)
    members = classic_group(h, n=2)
    generation = h.classic_group().generation
    # No member id and no generation (older TxnOffsetCommit): accepted into a live group,
    # where a plain OffsetCommit would be UNKNOWN_MEMBER_ID.
    assert log.txn_commit(("foo", 0, 1)) == (ErrorCode.none,)
    assert log.txn_commit(("foo", 0, 1), generation=generation + 1,
                          member_id=members[0]) == (ErrorCode.illegal_generation,)
    assert log.txn_commit(("foo", 0, 1), generation=generation,
                          member_id="stranger") == (ErrorCode.unknown_member_id,)
    assert log.txn_commit(("foo", 1, 2), generation=generation,
                          member_id=members[0]) == (ErrorCode.none,)


def test_consumer_group_fencing_turns_a_stale_epoch_into_illegal_generation():
    h = harness(foo=2)
    log = TxnLog(h)
    member = mid("a")
    h.join(member)
    epoch = h.group().members[member].member_epoch
    assert log.txn_commit(("foo", 0, 1), generation=epoch + 1, member_id=member) == (
        ErrorCode.illegal_generation,)
    assert log.txn_commit(("foo", 0, 1), generation=epoch, member_id="nobody") == (
        ErrorCode.unknown_member_id,)
    assert log.txn_commit(("foo", 0, 1), generation=epoch, member_id=member) == (
        ErrorCode.none,)


def test_a_failed_append_is_undone_to_what_was_durable():
    h = harness(foo=2)
    log = TxnLog(h)
    log.txn_commit(("foo", 0, 1))
    log.txn_commit(("foo", 0, 7), ("foo", 1, 7), durable=False)
    assert h.shard.offsets.pending(PRODUCER) == {
        ("g", "foo", 0): h.shard.offsets.pending(PRODUCER)[("g", "foo", 0)]}
    assert h.shard.offsets.pending(PRODUCER)[("g", "foo", 0)].offset == 1
    log.marker(commit=True)
    assert fetched(h, ("foo", 0), ("foo", 1)) == [(1, False), (None, False)]


def failed_commit(h: MixedHarness, *parts: tuple[str, int, int]) -> None:
    """A plain OffsetCommit whose append fails: the shard reverts it, as the runtime does."""
    result = h.shard.offset_commit(OffsetCommitRequest("g", "", -1, tuple(
        CommitPartition(t, p, o) for t, p, o in parts)), h.now)
    h.shard.revert("g", list(result.records), h.now, result.producer)


def test_a_failed_plain_commit_keeps_the_pending_offsets_of_its_partitions():
    """Found by the fault simulation: the undo of a failed plain commit tombstoned every
    committed offset of the group and replayed the durable ones, and a tombstone also drops
    the partition's pending transactional offsets. foo-0's pending offset vanished live
    (require_stable no longer saw an open transaction, and the COMMIT marker made nothing
    visible) while the log still had it."""
    h = harness(foo=2)
    log = TxnLog(h)
    commit(h, ("foo", 0, 1))
    log.txn_commit(("foo", 0, 5))
    log.sync()
    failed_commit(h, ("foo", 1, 9))
    assert fetched(h, ("foo", 0), stable=True) == [(None, True)]
    log.marker(commit=True)
    assert fetched(h, ("foo", 0), ("foo", 1)) == [(5, False), (None, False)]
    assert log.replayed().offsets.fetch_all("g") == h.shard.offsets.fetch_all("g")


def test_a_failed_plain_commit_keeps_the_log_order_of_the_durable_ones():
    """The undo of a failed plain commit must put the durable offsets back where the log
    has them, not replay them again (which the old undo did, after the tombstones of the
    test above): replayed again, foo-0's plain offset would come after the pending
    transactional offset the log has after it, and the COMMIT marker would lose to it."""
    h = harness(foo=2)
    log = TxnLog(h)
    commit(h, ("foo", 0, 1))
    log.txn_commit(("foo", 1, 5))
    log.sync()
    log.txn_commit(("foo", 0, 6), producer=PRODUCER + 1)
    log.sync()
    failed_commit(h, ("foo", 0, 9))
    log.marker(commit=True, producer=PRODUCER + 1)
    assert fetched(h, ("foo", 0), ("foo", 1)) == [(6, False), (None, False)]
    assert log.replayed().offsets.fetch_all("g") == h.shard.offsets.fetch_all("g")


def test_a_failed_first_append_leaves_no_open_transaction():
    h = harness(foo=1)
    log = TxnLog(h)
    log.txn_commit(("foo", 0, 1), durable=False)
    assert not h.shard.has_open_transactions()
    assert not h.shard.offsets.has_offsets("g")


def test_tombstones_remove_pending_offsets_too():
    h = harness(foo=2)
    log = TxnLog(h)
    commit(h, ("foo", 0, 1))
    log.txn_commit(("foo", 0, 5), ("foo", 1, 5))
    # OffsetDelete writes a tombstone for a partition with only a pending offset, too.
    answer = h.apply(h.shard.offset_delete(OffsetDeleteRequest("g", (("foo", 0), ("foo", 1)))))
    assert answer.codes == (ErrorCode.none, ErrorCode.none)
    log.marker(commit=True)
    assert fetched(h, ("foo", 0), ("foo", 1)) == [(None, False), (None, False)]


def test_delete_group_covers_pending_only_partitions():
    h = harness(foo=2)
    log = TxnLog(h)
    commit(h, ("foo", 0, 1))
    log.txn_commit(("foo", 0, 2), ("foo", 1, 2))
    result = h.shard.delete_group("g", h.now)
    assert result.response == ErrorCode.none
    assert sorted((r.key.topic, r.key.partition) for r in result.records) == [
        ("foo", 0), ("foo", 1)]


def test_expiry_waits_for_the_open_transaction():
    h = harness(foo=1)
    log = TxnLog(h)
    commit(h, ("foo", 0, 1))
    log.txn_commit(("foo", 0, 2))
    h.now += h.shard.config.offsets_retention_ms + 1
    assert h.shard.expire_offsets(h.now) == []
    log.marker(commit=False)
    assert [r.key for r in h.shard.expire_offsets(h.now)] == [OffsetCommitKey("g", "foo", 0)]


def test_a_restart_mid_transaction_keeps_the_offsets_pending():
    h = harness(foo=2)
    log = TxnLog(h)
    commit(h, ("foo", 0, 1))
    log.txn_commit(("foo", 0, 2), ("foo", 1, 2))
    fresh = log.replayed()
    assert fresh.offsets.fetch_all("g") == h.shard.offsets.fetch_all("g")
    assert fresh.offsets.pending(PRODUCER) == h.shard.offsets.pending(PRODUCER)
    assert fresh.durable.offsets.state() == h.shard.durable.offsets.state()
    log.marker(commit=True)
    fresh.replay_marker(PRODUCER, True)
    assert fresh.offsets.fetch_all("g") == h.shard.offsets.fetch_all("g")
    assert fresh.durable == h.shard.durable


_steps = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 50)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.integers(0, 1), st.integers(0, 50),
              st.booleans()),
    st.tuples(st.just("marker"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 1)),
), max_size=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps)
def test_replaying_the_log_gives_the_live_offsets(steps):
    h = harness(foo=2)
    log = TxnLog(h)
    for step in steps:
        if step[0] == "commit":
            commit(h, ("foo", step[1], step[2]))
        elif step[0] == "txn":
            _, producer, partition, offset, durable = step
            log.txn_commit(("foo", partition, offset), producer=producer, durable=durable)
        elif step[0] == "marker":
            log.marker(commit=step[2], producer=step[1])
        else:
            h.apply(h.shard.offset_delete(OffsetDeleteRequest("g", (("foo", step[1]),))))
    fresh = log.replayed()
    assert fresh.offsets.fetch_all("g") == h.shard.offsets.fetch_all("g")
    for producer in (1, 2, 3):
        assert fresh.offsets.pending(producer) == h.shard.offsets.pending(producer)
    assert fresh.durable == h.shard.durable
    assert fresh.durable.offsets.state() == h.shard.durable.offsets.state()

