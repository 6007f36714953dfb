"""A deterministic simulation of one group coordinator shard under faults (issue 13).

The mixed-groups world of test_mixed_properties.py (consumer-protocol clients and classic
clients, eager or cooperative, joining, leaving, crashing, losing answers, while time passes
and a topic grows) gains the faults of the coordinator's side, in virtual time:

* **a failed append**: the next result whose records the coordinator writes is not
  persisted. As the broker's runtime does (`GroupRuntime.run`), the shard reverts to what
  was durable and every answer of that result carries COORDINATOR_NOT_AVAILABLE; the
  clients retry as their protocol says.
* **a coordinator crash**: the shard is thrown away and a new one loads every persisted
  record (through the bytes) and arms its timers, as after a kill -9. Requests the old one
  had parked are never answered: their clients see the connection drop and retry.
* **offset commits**: a client commits, for the partitions it owns, offsets from one
  increasing counter, with its generation (classic) or member epoch (consumer protocol).
* **transactional offset commits**: a few transactional producers (`TxnProducer`) commit
  offsets from the same counter through TxnOffsetCommit, either as a client's consume-
  transform-produce loop (with its member id and generation or epoch) or with neither (an
  older producer), and later end the transaction: the COMMIT or ABORT marker is a record of
  the simulated log, written and then replayed into the shard as the broker does
  (`GroupRuntime.end_transaction`), so a failed append can hit it (the transaction
  coordinator then retries the same outcome) and a restarted coordinator replays it.

Invariants, checked after every step by the tests that drive it: no partition owned by two
clients (test_mixed_properties.check_safety); every commit the coordinator acknowledged is
still there, after failed appends and crashes (the committed offset of a partition is at
least the highest acknowledged one, and never more than the highest ever sent); and, once
the faults stop, the group comes to rest and replay equals live.

With transactions (`check_transactions`, after every step too): the committed offset of a
partition is exactly the last one the log made visible (offsets come from one increasing
counter and the log is written in the order they are drawn, so "last" is "highest"): a plain
commit when its append succeeded, a transactional one when its COMMIT marker did; an aborted
or still-open transaction's offset is never what OffsetFetch shows; with require_stable a
partition an open transaction wrote (durably) is UNSTABLE_OFFSET_COMMIT and no other is; and
an offset store replayed from the log (records with their producers, and markers) holds the
same committed and pending offsets as the live one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.group_writer import with_error
from coterie.group import codec
from coterie.group.config import ShardConfig
from coterie.group.offsets.messages import (
    CommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from coterie.group.offsets.store import NO_PRODUCER_ID, OffsetStore
from coterie.group.records.offsets import OffsetCommitKey
from coterie.group.records.record import Record
from coterie.group.result import Result
from coterie.group.shard import GroupShard

from .consumer_harness import mid
from .mixed_harness import MixedHarness, mixed
from .test_mixed_properties import ClassicClient, ConsumerClient, World, check_replay, play

E = ErrorCode
PRODUCERS = 3
_Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Marker:
    """A transaction marker in the simulated __consumer_offsets partition."""

    producer_id: int
    commit: bool


# One entry of the simulated partition: a record with the producer id of its batch
# (NO_PRODUCER_ID outside transactions), or a marker.
LogEntry = tuple[Record, int] | Marker


class FaultyHarness(MixedHarness):
    """MixedHarness with persisted-or-failed appends, coordinator restarts, and a log that
    keeps what the broker's does for transactions: each record's producer, and markers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Member ids stay unique across coordinator restarts (a real broker draws UUIDs).
        self._classic_ids = itertools.count(1)
        self._consumer_ids = itertools.count(1)
        self.fail_next = False
        self.failed_appends = 0
        self.crashes = 0
        self.log: list[LogEntry] = []
        super().__init__(*args, **kwargs)

    def _build(self) -> GroupShard:
        return GroupShard(0, ShardConfig(self.classic_config, self.config),
                          lambda client: f"{client or 'member'}-{next(self._classic_ids)}",
                          lambda: mid(f"gen{next(self._consumer_ids)}"))

    def apply(self, result: Result) -> Any:
        if not result.records:
            return super().apply(result)
        if not self.fail_next:
            response = super().apply(result)
            producer_id = NO_PRODUCER_ID if result.producer is None else result.producer[0]
            self.log.extend((record, producer_id) for record in result.records)
            self.shard.committed(result.records, result.producer)
            return response
        self.fail_next = False
        self.failed_appends += 1
        group_id = result.records[0].key.group_id
        assert all(r.key.group_id == group_id for r in result.records)
        revert = self.shard.revert(group_id, list(result.records), self.now, result.producer)
        error = E.coordinator_not_available
        response = with_error(result.response, error)
        super().apply(Result(response, timers=result.timers, completed=[
            (token, with_error(answer, error)) for token, answer in result.completed]))
        if revert.rebuilt:
            for key in [k for k in self.timers if k.group_id == group_id]:
                del self.timers[key]
        super().apply(Result(timers=revert.result.timers, completed=revert.result.completed))
        return response

    def end_transaction(self, producer: tuple[int, int], commit: bool) -> bool:
        """What the broker does when a transaction ends (`GroupRuntime.end_transaction`):
        append the marker, then replay it into the shard. False when the append failed: the
        shard is untouched and the transaction coordinator will write the marker again."""
        if self.fail_next:
            self.fail_next = False
            self.failed_appends += 1
            return False
        self.log.append(Marker(producer[0], commit))
        self.shard.replay_marker(producer[0], commit)
        return True

    def replayed_shard(self) -> GroupShard:
        """A fresh shard that loaded the partition as the broker's loader does: each record
        (through the bytes) with its batch's producer id, and the markers."""
        fresh = self._build()
        fresh.on_topics_changed(
            {n: (self.topic_ids[n], c.partitions) for n, c in
             self.shard.image.by_name.items()}, self.now)
        for entry in self.log:
            if isinstance(entry, Marker):
                fresh.replay_marker(entry.producer_id, entry.commit)
            else:
                record, producer_id = entry
                fresh.replay(codec.decode(*codec.encode(record)), producer_id)
        return fresh

    def replayed_offsets(self) -> OffsetStore:
        """An offset store that loaded the offset records and markers of the log alone: a
        cheap replay, fit for every step."""
        store = OffsetStore()
        for entry in self.log:
            if isinstance(entry, Marker):
                store.replay_marker(entry.producer_id, entry.commit)
            elif isinstance(entry[0].key, OffsetCommitKey):
                store.replay(*entry)
        return store

    def crash_coordinator(self) -> None:
        """kill -9 and restart: a new shard loads the persisted records; parked requests
        are lost with their connections."""
        self.crashes += 1
        topics = {n: info.partitions for n, info in self.shard.image.by_name.items()}
        fresh = self.replayed_shard()  # `replay` also remembers what is durable
        self.shard, self.coordinator = fresh, mixed(fresh)
        self.timers = {}
        super().apply(Result(timers=fresh.timers_after_load(self.now)))
        # As the broker does once loading is done (`GroupRuntime.topics_changed`): the
        # topics as they are now, so groups whose durable epoch predates a change bump it.
        self.set_topics(topics)


@dataclass
class TxnProducer:
    """A transactional producer as the group coordinator sees it: the offsets its open
    transaction wrote durably, and, once it has ended the transaction, the outcome whose
    marker is still to be written."""

    producer_id: int
    epoch: int = 0
    in_txn: bool = False
    written: dict[_Key, int] = field(default_factory=dict)
    ending: bool | None = None


class FaultyWorld(World):
    def __init__(self, cooperative: bool) -> None:
        super().__init__(cooperative)
        self.h = FaultyHarness({"foo": 3, "bar": 2}, config=self.h.config,
                               classic_config=self.h.classic_config)
        self.offsets = itertools.count(1)
        self.acked: dict[tuple[str, int], int] = {}
        self.sent: dict[tuple[str, int], int] = {}
        self.producers = [TxnProducer(1000 + i) for i in range(PRODUCERS)]
        # Offsets of aborted transactions: never to be seen.
        self.aborted: set[tuple[_Key, int]] = set()
        self.txn_committed = self.txn_aborted = self.txn_offsets = self.unstable_seen = 0

    # -- faults -----------------------------------------------------------------------------
    def fail_next_append(self) -> None:
        self.h.fail_next = True

    def crash_coordinator(self) -> None:
        self.h.fail_next = False
        answered = set(self.h.answers)
        self.h.crash_coordinator()
        for c in self.classics:
            if c.phase in ("joining", "syncing") and c.token not in answered:
                # The connection dropped under the parked request: try again.
                c.phase, c.rejoin = "stable", True

    # -- clients retry what the coordinator could not persist -------------------------------
    def on_join(self, c: ClassicClient, answer: Any) -> None:
        if answer.error == E.coordinator_not_available:
            c.phase, c.rejoin = "stable", True
            return
        super().on_join(c, answer)

    def on_sync(self, c: ClassicClient, answer: Any) -> None:
        if answer.error == E.coordinator_not_available:
            c.phase, c.rejoin = "stable", True
            return
        super().on_sync(c, answer)

    def lost(self, c: ClassicClient, code: ErrorCode) -> None:
        if code == E.coordinator_not_available:
            return
        super().lost(c, code)

    # -- offsets ----------------------------------------------------------------------------
    def commit(self, i: int) -> None:
        """Client i commits the next offset for every partition it owns."""
        c = self.client(i)
        if not c.running or c.silent or not c.owned:
            return
        if isinstance(c, ConsumerClient):
            if not c.joined:
                return
            epoch, names = c.epoch, sorted(self.h.names(c.owned))
        else:
            if c.phase != "stable":
                return
            epoch, names = c.generation, sorted(c.owned)
        partitions = []
        for name in names:
            topic, _, p = name.rpartition("-")
            offset = next(self.offsets)
            self.sent[(topic, int(p))] = offset
            partitions.append(CommitPartition(topic, int(p), offset))
        response = self.h.apply(self.h.shard.offset_commit(OffsetCommitRequest(
            "g", c.member_id, epoch, tuple(partitions),
            instance_id=getattr(c, "instance_id", None)), self.h.now))
        for part, code in zip(partitions, response.codes, strict=True):
            if code == E.none:
                key = (part.topic, part.partition)
                self.acked[key] = max(self.acked.get(key, 0), part.offset)

    # -- transactional offsets ---------------------------------------------------------------
    def txn_commit(self, which: int, mask: int, bound: int | None) -> None:
        """Producer `which` commits the next offset, inside its transaction, for the
        partitions of `mask` (bit i: the i-th partition by name), as client `bound`'s
        consume-transform-produce loop (its member id and generation or epoch), or with
        neither (None). A producer that has ended its transaction waits for the marker."""
        p = self.producers[which]
        if p.ending is not None:
            return
        member_id, generation, instance_id = "", -1, None
        if bound is not None:
            c = self.client(bound)
            if not c.running or c.silent or not c.member_id:
                return
            member_id = c.member_id
            generation = c.epoch if isinstance(c, ConsumerClient) else c.generation
            instance_id = getattr(c, "instance_id", None)
        everything = sorted((t, q) for t, n in self.topics.items() for q in range(n))
        chosen = [tp for i, tp in enumerate(everything) if mask >> i & 1]
        if not chosen:
            return
        partitions = []
        for topic, q in chosen:
            offset = next(self.offsets)
            self.sent[(topic, q)] = offset
            partitions.append(CommitPartition(topic, q, offset))
        p.in_txn = True  # AddOffsetsToTxn: the marker will be written whatever happens next
        response = self.h.apply(self.h.shard.txn_offset_commit(TxnOffsetCommitRequest(
            f"txn-{which}", "g", p.producer_id, p.epoch, tuple(partitions), generation,
            member_id, instance_id), self.h.now))
        for part, code in zip(partitions, response.codes, strict=True):
            if code == E.none:
                p.written[(part.topic, part.partition)] = part.offset
                self.txn_offsets += 1

    def txn_end(self, which: int, commit: bool) -> None:
        """Producer `which` ends its transaction (EndTxn), or the transaction coordinator
        retries a marker that failed: the outcome, once decided, stays. Without a
        transaction of its own, the next producer that has one ends it (random sequences
        would otherwise spend most of these steps on idle producers)."""
        open_ones = [q for q in self.producers[which:] + self.producers[:which] if q.in_txn]
        if not open_ones:
            return
        p = open_ones[0]
        if p.ending is None:
            p.ending = commit
        if not self.h.end_transaction((p.producer_id, p.epoch), p.ending):
            return
        if p.ending:
            self.txn_committed += 1
            for key, offset in p.written.items():
                self.acked[key] = max(self.acked.get(key, 0), offset)
        else:
            self.txn_aborted += 1
            self.aborted.update(p.written.items())
        p.in_txn, p.written, p.ending = False, {}, None
        p.epoch += 1  # the next transaction (KIP-890 bumps the epoch at every EndTxn)

    def check_transactions(self) -> None:
        """The transactional invariants of the module docstring."""
        keys = tuple(sorted(self.sent))
        pending = {key for p in self.producers for key in p.written}
        plain = self.h.shard.offset_fetch(OffsetFetchRequest("g", keys))
        stable = self.h.shard.offset_fetch(OffsetFetchRequest("g", keys, require_stable=True))
        assert plain.error == E.none and stable.error == E.none
        for seen, fenced in zip(plain.offsets, stable.offsets, strict=True):
            key = (seen.topic, seen.partition)
            value = None if seen.value is None else seen.value.offset
            assert value == self.acked.get(key), (
                f"{key} shows {value}, the last visible commit is {self.acked.get(key)}")
            assert (key, value) not in self.aborted, f"{key}@{value} was aborted"
            assert fenced.unstable == (key in pending), (
                f"{key}: unstable={fenced.unstable} with pending {key in pending}")
            if fenced.unstable:
                self.unstable_seen += 1
                assert fenced.value is None
            else:
                assert fenced.value == seen.value
        live, fresh = self.h.shard.offsets, self.h.replayed_offsets()
        assert fresh.fetch_all("g") == live.fetch_all("g"), "replayed offsets differ"
        assert fresh.open_transactions() == live.open_transactions()
        for producer_id in live.open_transactions():
            assert fresh.pending(producer_id) == live.pending(producer_id), (
                f"replayed pending offsets of {producer_id} differ")
        for p in self.producers:
            assert {(t, q): v.offset for (_, t, q), v in live.pending(p.producer_id).items()
                    } == p.written, f"pending offsets of {p.producer_id}"

    def check_commits(self) -> None:
        """Every acknowledged commit survives; nothing is committed that was never sent."""
        committed = check_acked_kept(self.h.shard, "g", self.acked)
        for key, offset in committed.items():
            assert offset <= self.sent.get(key, -1), f"{key}@{offset} was never sent"

    def after_step(self) -> None:
        super().after_step()
        self.check_commits()
        self.check_transactions()


def check_acked_kept(shard: GroupShard, group_id: str,
                     acked: dict[_Key, int]) -> dict[_Key, int]:
    """Every commit the coordinator acknowledged is still there (a partition's committed
    offset is at least the highest acknowledged one); returns the committed offsets."""
    fetched = shard.offset_fetch(OffsetFetchRequest(group_id))
    committed = {(o.topic, o.partition): o.value.offset for o in fetched.offsets
                 if o.value is not None}
    for key, offset in acked.items():
        assert committed.get(key, -1) >= offset, (
            f"acknowledged commit {key}@{offset} lost: committed {committed.get(key)}")
    return committed


def check_replayed_offsets(w: FaultyWorld) -> None:
    """A whole shard loaded from the log through the bytes (records with their producers,
    and markers) has the live committed and pending offsets, and remembers the same durable
    ones (what the next failed append is undone to). Replay positions are compared by value
    only: live ones also counted the records whose append failed."""
    live, fresh = w.h.shard, w.h.replayed_shard()
    assert fresh.offsets.fetch_all("g") == live.offsets.fetch_all("g")
    assert fresh.offsets.open_transactions() == live.offsets.open_transactions()
    for producer_id in live.offsets.open_transactions():
        assert fresh.offsets.pending(producer_id) == live.offsets.pending(producer_id)
    assert fresh.durable.offsets.state() == live.durable.offsets.state()


def check_replay_after_faults(w: FaultyWorld) -> None:
    """Replay equals live, whatever failed: a failed append is undone by rebuilding from what
    reached the log, so live is what a replay of the log gives, classic groups included (a
    classic group whose Empty record failed is put back as its last record says, and its
    members time out, as after a restart)."""
    check_replayed_offsets(w)
    check_replay(w)


def run_faulty(sequence: list[tuple[str, Any, Any]], cooperative: bool) -> FaultyWorld:
    """Play `sequence`: the operations of test_mixed_properties.run plus "commit",
    "fail" (the next append fails), "coordinator_crash" (the coordinator restarts),
    "txn_commit" ((producer, partition mask), bound client or None) and "txn_end"
    (producer, commit or abort)."""
    w = FaultyWorld(cooperative)
    for op, arg, extra in sequence:
        if op == "commit":
            w.commit(arg)
            w.after_step()
        elif op == "fail":
            w.fail_next_append()
            w.after_step()
        elif op == "coordinator_crash":
            w.crash_coordinator()
            w.after_step()
        elif op == "txn_commit":
            w.txn_commit(arg[0], arg[1], extra)
            w.after_step()
        elif op == "txn_end":
            w.txn_end(arg, extra)
            w.after_step()
        else:
            play(w, op, arg, extra)
    w.h.fail_next = False
    return w
