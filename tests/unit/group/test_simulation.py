"""The bounded run of the fault simulation (tests/unit/group/faulty_world.py): random
interleavings of clients of both protocols (classic eager or cooperative) with failed
appends, coordinator crashes, offset commits and transactional offset commits ended by
COMMIT or ABORT markers, checked after every step (no partition owned twice, no
acknowledged commit lost, the committed offsets exactly those the log made visible, open
transactions' partitions unstable to require_stable, replayed offsets equal to live), then
brought to rest (the group converges and replay equals live). `scripts/simulate.py` runs
the same world for as many steps as asked.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .faulty_world import PRODUCERS, check_replay_after_faults, run_faulty
from .test_mixed_properties import CONSUMERS, check_safety, converge, ops

client_index = st.integers(0, CONSUMERS + 2)
producer = st.integers(0, PRODUCERS - 1)
txn_commit = st.tuples(st.just("txn_commit"), st.tuples(producer, st.integers(1, 127)),
                       st.one_of(st.none(), client_index))
txn_end = st.tuples(st.just("txn_end"), producer, st.booleans())
fault = st.one_of(
    st.tuples(st.just("commit"), client_index, st.none()),
    st.tuples(st.just("commit"), client_index, st.none()),
    st.tuples(st.just("fail"), st.none(), st.none()),
    st.tuples(st.just("coordinator_crash"), st.none(), st.none()),
    txn_commit, txn_commit, txn_end, txn_end,
)


# A failed append aimed at an offset commit: spliced in as a pair, since a "fail" alone is
# mostly taken by the next heartbeat's records.
failed_commit = st.tuples(st.just(("fail", None, None)), st.one_of(
    st.tuples(st.just("commit"), client_index, st.none()), txn_commit, txn_end))


@st.composite
def faulty_sequences(draw: st.DrawFn) -> list:
    """The mixed-groups operations with the fault and commit operations spliced in."""
    base = draw(ops)
    extra = draw(st.lists(st.tuples(st.integers(0, 10_000),
                                    st.one_of(fault.map(lambda f: [f]), failed_commit)),
                          min_size=5, max_size=40))
    out = list(base)
    for where, items in extra:
        at = where % (len(out) + 1)
        out[at:at] = list(items)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(faulty_sequences(), st.booleans())
def test_faults_lose_no_commit_and_the_group_still_comes_to_rest(sequence, cooperative):
    w = run_faulty(sequence, cooperative)
    assert w.h.failed_appends + w.h.crashes >= 0
    converge(w)
    check_safety(w)
    w.check_commits()
    check_replay_after_faults(w)


def test_a_crash_loses_parked_joins_and_clients_rejoin():
    """Three classic clients are mid-rebalance when the coordinator restarts: their parked
    JoinGroups die with it, they rejoin, and the group comes to rest with every commit
    acknowledged before the crash still there."""
    start = [("start", i, None) for i in range(3, 6)]
    rounds = [("round", (0, 0), [3, 4, 5]), ("advance", 1000, None)] * 4
    # Client 3 leaves: the others' heartbeats learn of the rebalance and they rejoin;
    # the coordinator dies with their JoinGroups parked.
    sequence = [*start, *rounds, ("commit", 3, None), ("commit", 4, None),
                ("leave", 3, None), ("round", (0, 0), [4]), ("round", (0, 0), [4]),
                ("coordinator_crash", None, None), ("fail", None, None),
                ("round", (0, 0), [3, 4, 5])]
    w = run_faulty(sequence[:-3], cooperative=True)
    parked = w.classics[1]
    assert parked.phase == "joining" and parked.token not in w.h.answers
    w = run_faulty(sequence, cooperative=True)
    assert w.h.crashes == 1 and len(w.acked) == 4
    converge(w)
    check_safety(w)
    w.check_commits()
    check_replay_after_faults(w)


def test_a_failed_epoch_bump_for_a_topic_change_is_redone_at_the_next_heartbeat():
    """Found by the simulation: topic foo grows, and the group-epoch bump that tells the
    consumer group so fails to persist. The shard puts the group back to its durable state
    (the old epoch, the old metadata hash); nothing would ever bump it again, so foo's new
    partition stayed unassigned until the next topic change. Now the group's next
    heartbeat compares its hash with the topics and bumps the epoch."""
    one_round = ("round", (0, 0), [0, 1, 2, 3, 4, 5])
    w = run_faulty([("start", 0, None), one_round, one_round, ("ack", 0, None),
                    ("fail", None, None), ("grow", None, None)], cooperative=False)
    assert w.h.failed_appends == 1
    assert w.h.group().group_epoch == 1  # reverted: the bump was not persisted
    converge(w)
    assert w.h.group().group_epoch == 2
    assert w.h.names(w.consumers[0].owned) == {
        "foo-0", "foo-1", "foo-2", "foo-3", "bar-0", "bar-1"}


def test_a_marker_that_fails_is_written_again_across_coordinator_restarts():
    """Producer 0 commits bar-0 and bar-1 in a transaction; the coordinator restarts with
    them pending; the COMMIT marker's append fails and the coordinator restarts again: the
    offsets are still pending (UNSTABLE_OFFSET_COMMIT), and the retried marker keeps the
    decided outcome (commit, though the retry step asks for an abort) and shows them.
    Producer 1's aborted offset for bar-0 never shows."""
    sequence = [("txn_commit", (0, 0b11), None), ("coordinator_crash", None, None),
                ("fail", None, None), ("txn_end", 0, True), ("coordinator_crash", None, None)]
    w = run_faulty(sequence, cooperative=False)
    assert w.h.failed_appends == 1 and w.txn_committed == 0
    assert w.h.shard.offsets.pending(1000) and w.unstable_seen
    w = run_faulty([*sequence, ("txn_end", 0, False), ("txn_commit", (1, 0b1), None),
                    ("coordinator_crash", None, None), ("txn_end", 1, False)], False)
    assert (w.txn_committed, w.txn_aborted) == (1, 1)
    assert w.acked == {("bar", 0): 1, ("bar", 1): 2}
    assert not w.h.shard.has_open_transactions()
    check_replay_after_faults(w)
