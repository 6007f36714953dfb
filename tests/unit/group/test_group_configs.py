"""A group's own session timeout and heartbeat interval (KIP-848 group configs), driven on
the pure consumer coordinator in virtual time: they apply from the next heartbeat (its
answer's interval, the session deadline it arms), to that group only, and clearing them
restores the broker's values."""

from __future__ import annotations

from .consumer_harness import ConsumerHarness, mid


def test_a_groups_own_timeouts_apply_from_its_next_heartbeat():
    h = ConsumerHarness(topics={"foo": 2})
    a = h.join(mid("a"))
    other = h.join(mid("b"), group_id="other")
    assert a.heartbeat_interval_ms == 5_000
    h.coordinator.set_group_config("g", 50_000, 6_000)
    again = h.heartbeat(mid("a"), a.member_epoch)
    assert again.heartbeat_interval_ms == 6_000
    assert h.heartbeat(mid("b"), other.member_epoch,
                       group_id="other").heartbeat_interval_ms == 5_000
    # The session deadline armed by that heartbeat is the group's: 50 s, not the 45 s
    # that expires the other group's member.
    expired = h.advance(46_000)
    assert mid("b") in {k.member_id for k in expired}
    assert mid("a") in h.group("g").members
    assert mid("a") not in {k.member_id for k in h.advance(3_000)}
    h.coordinator.set_group_config("g", None, None)
    assert h.heartbeat(mid("a"), a.member_epoch).heartbeat_interval_ms == 5_000
