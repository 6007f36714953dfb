"""The settled-heartbeat shortcut of streams groups (`StreamsGroups.settled_heartbeat`) must
answer exactly as the general path does whenever it answers at all.

Under the random interleavings of the streams properties (joins, lost answers, leaves,
crashes, time passing, topic changes; clients that report their tasks only when they changed,
as Kafka Streams does), every heartbeat that sets no field but the endpoint epoch (what the
broker's handler checks on the wire request before it asks the shortcut) is first offered to
the shortcut, then run through the general path on the live coordinator. Where the shortcut
answered, the general path must have written no record and given the same answer and the
same timers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coterie.group.records.tasks import TaskSet
from coterie.group.result import Result
from coterie.group.streams.messages import (
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
    StreamsSettledHeartbeat,
)

from .streams_harness import StreamsHarness
from .test_streams_properties import run
from .topologies import PROPS, wordcount

_taken: list[int] = []


def _sets_no_field(req: StreamsHeartbeatRequest) -> bool:
    """The handler's condition for asking the shortcut, on the core's request value."""
    return (req.member_epoch > 0 and req.topology is None and req.owned is None
            and req.instance_id is None and req.rack_id is None
            and req.rebalance_timeout_ms == -1 and req.process_id is None
            and req.user_endpoint is None and req.client_tags is None
            and req.task_offsets is None and req.task_end_offsets is None
            and not req.shutdown_application)


def _shortcut(h: StreamsHarness, req: StreamsHeartbeatRequest) -> Result | None:
    return h.shard.handle(StreamsSettledHeartbeat(
        req.group_id, req.member_id, req.member_epoch, req.endpoint_information_epoch,
        req.client_id, req.client_host), h.now)


def _checked_request(self: StreamsHarness, req: object) -> object:
    if not isinstance(req, StreamsHeartbeatRequest):
        return self.apply(self.shard.handle(req, self.now))
    fast = _shortcut(self, req) if _sets_no_field(req) else None
    slow = self.shard.handle(req, self.now)
    if fast is not None:
        _taken.append(1)
        assert slow.records == [], (req, slow.records)
        assert fast.response == slow.response, (req, fast.response, slow.response)
        assert fast.timers == slow.timers, (req, fast.timers, slow.timers)
    return self.apply(slow)


# Mostly heartbeats, few of their answers lost, so that groups settle between the events
# that unsettle them.
BEATS = st.lists(st.tuples(st.sampled_from(["beat"] * 12 + ["leave", "crash", "time", "topics"]),
                           st.integers(0, 20), st.sampled_from([False, False, False, True])),
                 max_size=80)


@PROPS
@given(BEATS, st.booleans())
def test_the_shortcut_answers_as_the_general_path(ops, delay) -> None:
    original = StreamsHarness.request
    StreamsHarness.request = _checked_request  # the harness, not the code under test
    try:
        run(ops, delay, report_always=False)
    finally:
        StreamsHarness.request = original


def settled(h: StreamsHarness) -> tuple[str, int, int]:
    """A group of one member, settled: its id, epoch and endpoint epoch."""
    r = h.join("A", wordcount())
    h.create_requested(r)
    r = h.heartbeat("A", r.member_epoch, owned=TaskSet())
    r = h.heartbeat("A", r.member_epoch, owned=r.assignment)
    assert r.assignment is None and not r.status, r
    return "A", r.member_epoch, r.endpoint_information_epoch


def offer(h: StreamsHarness, member: str, epoch: int, endpoint_epoch: int,
          client_host: str = "/127.0.0.1") -> StreamsHeartbeatResponse | None:
    result = h.shard.handle(StreamsSettledHeartbeat(
        "app", member, epoch, endpoint_epoch, f"client-{member}", client_host), h.now)
    return None if result is None else result.response


def test_the_shortcut_is_taken_by_settled_members() -> None:
    """A settled member's plain heartbeat takes the shortcut; one from another client host,
    with another epoch, with a stale endpoint epoch, or once the topics changed, does not."""
    h = StreamsHarness({"lines": 3})
    member, epoch, endpoint_epoch = settled(h)
    answer = offer(h, member, epoch, endpoint_epoch)
    assert answer is not None and answer.member_epoch == epoch and answer.assignment is None
    assert offer(h, member, epoch, endpoint_epoch, client_host="/10.0.0.9") is None
    assert offer(h, member, epoch + 1, endpoint_epoch) is None
    assert offer(h, member, epoch, endpoint_epoch + 1) is None
    assert offer(h, "B", epoch, endpoint_epoch) is None
    h.set_topics({**h.topics, "lines": 4})  # the group epoch moves ahead of the target
    assert offer(h, member, epoch, endpoint_epoch) is None


def test_the_property_run_takes_the_shortcut() -> None:
    """The property above proves something only if its runs reach the shortcut."""
    before = len(_taken)
    original = StreamsHarness.request
    StreamsHarness.request = _checked_request
    try:
        ops = [("beat", 0, False)] * 6 + [("beat", 1, False)] * 6 + [("beat", 0, False)] * 4
        run(ops, delay=False, report_always=False)
    finally:
        StreamsHarness.request = original
    assert len(_taken) > before
