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
from coterie.group.streams.messages import Endpoint, StreamsHeartbeatResponse

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
    sent: TaskSet | None = None  # the tasks it last reported
    endpoint_epoch: int = 0

    @property
    def member_id(self) -> str:
        return f"c{self.index}x{self.incarnation}"


class World:
    """`report_always`: every heartbeat reports the client's tasks; otherwise only when they
    changed since it last reported them (as Kafka Streams does), so settled clients send
    heartbeats that set no field."""

    def __init__(self, delay: bool, report_always: bool = True) -> None:
        self.h = StreamsHarness({"lines": 3}, StreamsGroupConfig(
            initial_rebalance_delay_ms=2_000 if delay else 0))
        self.clients = [Client(i) for i in range(CLIENTS)]
        self.report_always = report_always

    def take(self, c: Client, r: StreamsHeartbeatResponse, lost: bool) -> None:
        if r.error != ErrorCode.none:
            c.joined, c.tasks, c.epoch, c.sent = False, TaskSet(), 0, None
            c.incarnation += 1
            return
        self.h.create_requested(r)
        if lost:
            c.sent = None  # it does not know its report arrived
            return
        c.joined, c.epoch = True, r.member_epoch
        c.endpoint_epoch = r.endpoint_information_epoch
        if r.assignment is not None:
            c.tasks = r.assignment

    def step(self, op: tuple[str, int, bool]) -> None:
        kind, i, flag = op
        c = self.clients[i % CLIENTS]
        h = self.h
        if kind == "beat":
            if not c.joined:
                endpoint = Endpoint("host", 9000 + c.index) if c.index % 2 else None
                self.take(c, h.join(c.member_id, wordcount(), process=f"p{c.index % 3}",
                                    endpoint=endpoint), flag)
                c.sent = None if flag else TaskSet()
            else:
                owned = None if not self.report_always and c.sent == c.tasks else c.tasks
                self.take(c, h.heartbeat(c.member_id, c.epoch, owned=owned,
                                         endpoint_information_epoch=c.endpoint_epoch), flag)
                if owned is not None and not flag:
                    c.sent = owned
        elif kind == "leave" and c.joined:
            h.leave(c.member_id)
            c.joined, c.tasks, c.epoch, c.sent = False, TaskSet(), 0, None
            c.incarnation += 1
        elif kind == "crash" and c.joined:
            # Its process dies: it runs nothing any more and never speaks again.
            c.joined, c.tasks, c.epoch, c.sent = False, TaskSet(), 0, None
            c.incarnation += 1
        elif kind == "time":
            h.advance(1_000 * (i + 1))
            for other in self.clients:  # whoever the coordinator fenced runs nothing
                group = h.shard.groups.get("app")
                if other.joined and (not isinstance(group, StreamsGroup)
                                     or other.member_id not in group.members):
                    other.joined, other.tasks, other.epoch = False, TaskSet(), 0
                    other.sent = None
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


def run(ops: list[tuple[str, int, bool]], delay: bool, report_always: bool) -> None:
    w = World(delay, report_always)
    for n, op in enumerate(ops):
        w.step(op)
        w.check_safety()
        if n % 10 == 0:
            w.check_replay()
    w.check_replay()


@PROPS
@given(OPS, st.booleans(), st.booleans())
def test_replay_equals_live_and_no_task_runs_twice(ops, delay, report_always) -> None:
    run(ops, delay, report_always)
