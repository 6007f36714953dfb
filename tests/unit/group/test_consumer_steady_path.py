"""The steady-heartbeat shortcut (`ConsumerCoordinator.steady_heartbeat`) must answer exactly
as the general path does whenever it answers at all.

Under the same random interleavings the safety property uses (joins, lost answers, acks,
leaves, crashes, static restarts, subscription and topic changes, timeouts), every heartbeat
is first offered to the shortcut, then run through the general path on the live coordinator.
Where the shortcut answered, the general path must have written no record and given the same
answer and the same timers."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from coterie.group.consumer_messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from coterie.group.results import Result

from .consumer_harness import ConsumerHarness, mid
from .test_consumer_properties import ops, run

_taken: list[int] = []


def _checked_request(self: ConsumerHarness,
                     req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
    fast: Result | None = self.coordinator.steady_heartbeat(req, self.now)
    slow = self.coordinator.heartbeat(req, self.now)
    if fast is not None:
        _taken.append(1)
        assert slow.records == [], (req, slow.records)
        assert fast.response == slow.response, (req, fast.response, slow.response)
        assert fast.timers == slow.timers, (req, fast.timers, slow.timers)
        assert fast.completed == slow.completed == []
    return self.apply(slow)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_the_shortcut_answers_as_the_general_path(sequence):
    original = ConsumerHarness.request
    ConsumerHarness.request = _checked_request  # the harness, not the code under test
    try:
        run(sequence)
    finally:
        ConsumerHarness.request = original


def test_the_shortcut_is_taken_by_settled_members():
    """A settled member's plain heartbeat takes the shortcut; one that reports partitions,
    changes its subscription, or comes from another client host does not."""
    h = ConsumerHarness({"foo": 2})
    a = mid("A")
    h.join(a)
    h.heartbeat(a, 1)
    member = h.group().members[a]
    plain = ConsumerHeartbeatRequest(
        group_id="g", member_id=a, member_epoch=member.member_epoch, instance_id=None,
        rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
        server_assignor=None, owned=None, version=1, client_id="client",
        client_host="/127.0.0.1")
    taken = h.coordinator.steady_heartbeat(plain, h.now)
    assert taken is not None and taken.records == []
    assert taken.response.member_epoch == member.member_epoch
    assert taken.response.assignment is None
    for changed in (
        dict(owned=()), dict(subscribed_topic_names=("foo",)), dict(client_host="/10.0.0.1"),
        dict(member_epoch=member.member_epoch - 1), dict(rebalance_timeout_ms=5000),
    ):
        other = replace(plain, **changed)
        assert h.coordinator.steady_heartbeat(other, h.now) is None, changed


def test_the_property_exercises_the_shortcut():
    """Guard against a vacuous property: the random runs do take the shortcut."""
    _taken.clear()
    test_the_shortcut_answers_as_the_general_path()
    assert len(_taken) > 100
