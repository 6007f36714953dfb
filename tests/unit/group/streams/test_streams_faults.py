"""The fault simulation (tests/unit/group/faulty_world.py) for streams groups: the random
interleavings of simulated Kafka Streams clients of test_streams_properties.py (joins,
heartbeats reporting tasks only when they changed, lost answers, leaves, crashes, time
passing, topic changes) gain the coordinator's faults, in virtual time:

* **a failed append**: the next result whose records the coordinator writes is not
  persisted; the shard reverts to what was durable (`GroupShard.revert`, as the broker's
  writer does) and the answer is COORDINATOR_NOT_AVAILABLE, which a Kafka Streams client
  retries as it was (a join as a join);
* **a coordinator crash**: the shard is thrown away and a new one loads every persisted
  record (through the bytes) and arms its timers, as after a kill -9, then sees the topics
  as they are;
* **offset commits**: a client commits, for the source partitions of its active tasks,
  offsets from one increasing counter, with its member id and epoch (OffsetCommit v9).

Invariants, after every step: no active task run by two live clients; every commit the
coordinator acknowledged is still there, after failed appends and crashes; replay of what
was persisted equals the live groups. Once the faults stop, every live client settles on its
target (the group comes to rest) and replay still equals live.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.broker.group_writer import with_error
from coterie.group.offsets.messages import CommitPartition, OffsetCommitRequest
from coterie.group.records.record import Record
from coterie.group.result import Result
from coterie.group.streams.group import StreamsGroup
from coterie.group.streams.member_state import MemberState

from ..faulty_world import check_acked_kept
from .streams_harness import StreamsHarness
from .test_streams_properties import OPS, Client, World
from .topologies import PROPS

E = ErrorCode


class FaultyStreamsHarness(StreamsHarness):
    """StreamsHarness with persisted-or-failed appends and coordinator restarts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.fail_next = False
        self.failed_appends = 0
        self.crashes = 0
        self.log: list[Record] = []
        super().__init__(*args, **kwargs)

    def apply(self, result: Result) -> Any:
        if not result.records:
            return super().apply(result)
        if not self.fail_next:
            response = super().apply(result)
            self.log.extend(result.records)
            self.shard.committed(result.records)
            return response
        self.fail_next = False
        self.failed_appends += 1
        group_id = result.records[0].key.group_id
        revert = self.shard.revert(group_id, list(result.records), self.now)
        response = with_error(result.response, E.coordinator_not_available)
        super().apply(Result(timers=result.timers))
        if revert.rebuilt:
            for key in [k for k in self.timers if k.group_id == group_id]:
                del self.timers[key]
        super().apply(Result(timers=revert.result.timers))
        return response

    def persisted(self) -> list[Record]:
        """Only what was appended: a failed append's records are not there."""
        return self.log

    def crash_coordinator(self) -> None:
        """kill -9 and restart: a new shard loads the persisted records, arms its timers,
        and is told the topics as they are now (as the broker does once loading is done)."""
        self.crashes += 1
        self.fail_next = False
        self.shard = self.coordinator = self.replayed_shard()
        self.timers = {}
        super().apply(Result(timers=self.shard.timers_after_load(self.now)))
        self.set_topics(self.topics)


class FaultyStreamsWorld(World):
    def __init__(self, delay: bool) -> None:
        super().__init__(delay, report_always=False)
        self.h = FaultyStreamsHarness({"lines": 3}, self.h.config)
        self.offsets = itertools.count(1)
        self.acked: dict[tuple[str, int], int] = {}

    def take(self, c: Client, r: Any, lost: bool) -> None:
        if r.error == E.coordinator_not_available:
            c.sent = None  # retried as it was: a join as a join, a report again
            return
        super().take(c, r, lost)

    def commit(self, i: int) -> None:
        """Client i commits the next offset of the source partition of each of its active
        tasks of the first subtopology (reading `lines`)."""
        c = self.clients[i % len(self.clients)]
        partitions = sorted(c.tasks.active.get("0", ()))
        if not c.joined or not partitions:
            return
        commits = tuple(CommitPartition("lines", p, next(self.offsets)) for p in partitions)
        response = self.h.apply(self.h.shard.offset_commit(OffsetCommitRequest(
            "app", c.member_id, c.epoch, commits, version=9), self.h.now))
        for part, code in zip(commits, response.codes, strict=True):
            if code == E.none:
                key = (part.topic, part.partition)
                self.acked[key] = max(self.acked.get(key, 0), part.offset)

    def fault(self, op: tuple[str, int, bool]) -> None:
        kind, i, _ = op
        if kind == "fail":
            self.h.fail_next = True
        elif kind == "coordinator_crash":
            self.h.crash_coordinator()
        elif kind == "commit":
            self.commit(i)
        else:
            self.step(op)

    def check_commits(self) -> None:
        """No acknowledged commit lost: each partition's committed offset is at least the
        highest one acknowledged."""
        check_acked_kept(self.h.shard, "app", self.acked)

    def converge(self) -> None:
        """The faults stop: every live client heartbeats until nothing changes; each then
        holds exactly its target, at the group's epoch."""
        for n in range(35):
            if n < 30:
                # Time passes (150 s; the live clients heartbeat every 5 s): an initial
                # rebalance delay runs out; a member that lost the answer telling it to
                # revoke is fenced at its rebalance timeout (30 s), as in Kafka, and
                # rejoins; a crashed client's member is fenced at its session timeout
                # (45 s), twice over if the first fencing's append failed. The last rounds
                # take no time.
                self.h.advance(5_000)
            for c in self.clients:
                self.step(("beat", c.index, False))
            self.check_safety()
        group = self.h.shard.groups.get("app")
        if not isinstance(group, StreamsGroup) or not group.members:
            return
        assert group.group_epoch == group.assignment_epoch
        for c in self.clients:
            if c.joined:
                member = group.members[c.member_id]
                assert member.assignment.state is MemberState.STABLE, member
                assert c.tasks == member.assignment.assigned == group.target_of(c.member_id)


FAULTS = st.tuples(st.sampled_from(["fail", "fail", "coordinator_crash", "commit", "commit"]),
                   st.integers(0, 20), st.booleans())


@st.composite
def faulty_sequences(draw: st.DrawFn) -> list[tuple[str, int, bool]]:
    """The streams clients' operations with the faults and commits spliced in."""
    out = list(draw(OPS))
    for where, fault in draw(st.lists(st.tuples(st.integers(0, 10_000), FAULTS),
                                      min_size=5, max_size=30)):
        at = where % (len(out) + 1)
        out[at:at] = [fault]
    return out


@PROPS
@given(faulty_sequences(), st.booleans())
def test_faults_lose_no_commit_and_the_group_still_comes_to_rest(ops, delay) -> None:
    w = FaultyStreamsWorld(delay)
    for n, op in enumerate(ops):
        w.fault(op)
        w.check_safety()
        w.check_commits()
        if n % 10 == 0:
            w.check_replay()
    w.converge()
    w.check_commits()
    w.check_replay()


def test_a_failed_join_is_retried_and_a_crash_loses_nothing_persisted() -> None:
    """A fixed interleaving: the first join's append fails (the group is not created),
    the retried join works; two clients commit; a crash; the restarted coordinator holds
    the same groups and commits, and the clients carry on."""
    w = FaultyStreamsWorld(delay=False)
    w.fault(("fail", 0, False))
    w.fault(("beat", 0, False))
    assert "app" not in w.h.shard.groups and w.h.failed_appends == 1
    for op in [("beat", 0, False)] * 4 + [("beat", 1, False)] * 4 + [("beat", 0, False)] * 3:
        w.fault(op)
    w.fault(("commit", 0, False))
    w.fault(("commit", 1, False))
    assert w.acked
    before = {g: v.snapshot() for g, v in w.h.shard.groups.items()}
    w.fault(("coordinator_crash", 0, False))
    assert {g: v.snapshot() for g, v in w.h.shard.groups.items()} == before
    w.check_commits()
    w.converge()  # every client heartbeats: the other two join too
    assert len(w.h.group().members) == 4
    w.check_commits()
