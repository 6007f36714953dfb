"""The settled-heartbeat shortcut (`ConsumerGroups.settled_heartbeat`) must answer
exactly as the general path does whenever it answers at all.

Under the same random interleavings the safety property uses (joins, lost answers, acks,
leaves, crashes, static restarts, subscription and topic changes, timeouts), every heartbeat
that sets no field (what the broker's handler checks on the wire request before it asks the
shortcut) is first offered to the shortcut, then run through the general path on the live
coordinator.
Where the shortcut answered, the general path must have written no record and given the same
answer and the same timers."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from coterie.group.consumer.messages import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    SettledHeartbeat,
)
from coterie.group.result import Result

from .consumer_harness import ConsumerHarness, mid
from .test_consumer_properties import ops, run

_taken: list[int] = []


def _sets_no_field(req: ConsumerHeartbeatRequest) -> bool:
    """The handler's condition for asking the shortcut, on the core's request value."""
    return (req.member_epoch > 0 and req.owned is None and req.subscribed_topic_names is None
            and req.subscribed_topic_regex is None and req.instance_id is None
            and req.rack_id is None and req.rebalance_timeout_ms == -1
            and req.server_assignor is None)


def _shortcut(h: ConsumerHarness, req: ConsumerHeartbeatRequest) -> Result | None:
    return h.coordinator.settled_heartbeat(SettledHeartbeat(
        req.group_id, req.member_id, req.member_epoch, req.client_id, req.client_host), h.now)


def _checked_request(self: ConsumerHarness,
                     req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
    fast = _shortcut(self, req) if _sets_no_field(req) else None
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
    """A settled member's plain heartbeat takes the shortcut; one from another client host,
    or with another epoch, does not."""
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
    assert _sets_no_field(plain)
    taken = _shortcut(h, plain)
    assert taken is not None and taken.records == []
    assert taken.response.member_epoch == member.member_epoch
    assert taken.response.assignment is None
    for changed in (dict(client_host="/10.0.0.1"), dict(client_id="other"),
                    dict(member_epoch=member.member_epoch - 1),
                    dict(member_epoch=member.member_epoch + 1)):
        assert _shortcut(h, replace(plain, **changed)) is None, changed


def test_the_property_exercises_the_shortcut():
    """Guard against a vacuous property: the random runs do take the shortcut."""
    _taken.clear()
    test_the_shortcut_answers_as_the_general_path()
    assert len(_taken) > 100
