"""Properties of streams groups under random interleavings of simulated Kafka Streams
clients (join, heartbeat reporting their tasks, lost answers, leave, crash), time passing
(session and revocation timeouts, the initial rebalance delay) and topic changes (internal
topics created on request, source topics growing or missing):

(1) replaying the records written (through the byte codec) into a fresh shard rebuilds the
    live streams groups exactly, at every point of the run;
(2) no active task is ever run by two live clients at once (revoke before assign).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.group.records.tasks import TaskSet
from coterie.group.streams.config import StreamsGroupConfig
from coterie.group.streams.group import StreamsGroup
from coterie.group.streams.messages import StreamsHeartbeatResponse

from .streams_harness import StreamsHarness
from .topologies import PROPS, wordcount

CLIENTS = 4


@dataclass
class Client:
    index: int
    incarnation: int = 0
    joined: bool = False
    epoch: int = 0
    tasks: TaskSet = field(default_factory=TaskSet)

    @property
    def member_id(self) -> str:
        return f"c{self.index}x{self.incarnation}"


class World:
    def __init__(self, delay: bool) -> None:
        self.h = StreamsHarness({"lines": 3}, StreamsGroupConfig(
            initial_rebalance_delay_ms=2_000 if delay else 0))
        self.clients = [Client(i) for i in range(CLIENTS)]

    def take(self, c: Client, r: StreamsHeartbeatResponse, lost: bool) -> None:
        if r.error != ErrorCode.none:
            c.joined, c.tasks, c.epoch = False, TaskSet(), 0
            c.incarnation += 1
            return
        self.h.create_requested(r)
        if lost:
            return
        c.joined, c.epoch = True, r.member_epoch
        if r.assignment is not None:
            c.tasks = r.assignment

    def step(self, op: tuple[str, int, bool]) -> None:
        kind, i, flag = op
        c = self.clients[i % CLIENTS]
        h = self.h
        if kind == "beat":
            if not c.joined:
                self.take(c, h.join(c.member_id, wordcount(), process=f"p{c.index % 3}"),
                          flag)
            else:
                self.take(c, h.heartbeat(c.member_id, c.epoch, owned=c.tasks), flag)
        elif kind == "leave" and c.joined:
            h.leave(c.member_id)
            c.joined, c.tasks, c.epoch = False, TaskSet(), 0
            c.incarnation += 1
        elif kind == "crash" and c.joined:
            # Its process dies: it runs nothing any more and never speaks again.
            c.joined, c.tasks, c.epoch = False, TaskSet(), 0
            c.incarnation += 1
        elif kind == "time":
            h.advance(1_000 * (i + 1))
            for other in self.clients:  # whoever the coordinator fenced runs nothing
                group = h.shard.groups.get("app")
                if other.joined and (not isinstance(group, StreamsGroup)
                                     or other.member_id not in group.members):
                    other.joined, other.tasks, other.epoch = False, TaskSet(), 0
                    other.incarnation += 1
        elif kind == "topics":
            h.set_topics({**h.topics, "lines": 3 + (i % 2)} if flag
                         else {k: v for k, v in h.topics.items() if k != "lines"})

    def check_safety(self) -> None:
        seen: set[tuple[str, int]] = set()
        for c in self.clients:
            mine = {(s, p) for s, ps in c.tasks.active.items() for p in ps}
            assert not mine & seen
            seen |= mine

    def check_replay(self) -> None:
        fresh = self.h.replayed_shard()
        live = {g: v.snapshot() for g, v in self.h.shard.groups.items()}
        again = {g: v.snapshot() for g, v in fresh.groups.items()}
        assert again == live


OPS = st.lists(st.tuples(st.sampled_from(["beat", "beat", "beat", "leave", "crash", "time",
                                          "topics"]),
                         st.integers(0, 20), st.booleans()), max_size=60)


@PROPS
@given(OPS, st.booleans())
def test_replay_equals_live_and_no_task_runs_twice(ops, delay) -> None:
    w = World(delay)
    for n, op in enumerate(ops):
        w.step(op)
        w.check_safety()
        if n % 10 == 0:
            w.check_replay()
    w.check_replay()
