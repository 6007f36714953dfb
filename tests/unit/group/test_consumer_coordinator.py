"""Consumer-group behaviour beyond seed 3's walkthroughs: lost answers, revocation timeouts,
static membership, topic changes, regexes, what an answer carries, describe/list/delete, and a
coordinator restarted mid-reconciliation."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coterie.group.consumer.group import ConsumerGroupState as G
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.member import MemberState as M
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.records.consumer import (
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
)
from coterie.group.timers import TimerKey

from .consumer_harness import ConsumerHarness, change_topics, delete_group, mid

A, B, C, S1, S2 = mid("A"), mid("B"), mid("C"), mid("S1"), mid("S2")
ALL3 = {"foo-0", "foo-1", "foo-2"}


def a_revoking_foo_2(h: ConsumerHarness) -> None:
    """A had foo-0..2 at epoch 1; B joined (epoch 2); A was told to revoke foo-2."""
    h.join(A)
    h.join(B)
    r = h.heartbeat(A, 1)
    assert h.assigned(r) == {"foo-0", "foo-1"}
    assert h.group().members[A].state is M.UNREVOKED_PARTITIONS


# -- a lost answer ---------------------------------------------------------------------------------

def test_lost_answer_previous_epoch_with_a_subset_is_accepted():
    h = ConsumerHarness({"foo": 3})
    a_revoking_foo_2(h)
    lost = h.heartbeat(A, 1, owned=["foo-0", "foo-1"])
    assert lost.member_epoch == 2  # ... but A never sees this answer
    # A retries with what it knows: epoch 1, and (after an error, a full request) its
    # partitions, a subset of its assignment.
    r = h.heartbeat(A, 1, owned=["foo-0", "foo-1"], full=True)
    assert r.error == ErrorCode.none and r.member_epoch == 2
    assert h.assigned(r) == {"foo-0", "foo-1"}
    # Reporting fewer partitions (it lost one meanwhile) is a subset too.
    r = h.heartbeat(A, 1, owned=["foo-0"], full=True)
    assert r.error == ErrorCode.none and r.member_epoch == 2


def test_lost_answer_does_not_excuse_owning_more():
    h = ConsumerHarness({"foo": 3})
    a_revoking_foo_2(h)
    h.heartbeat(A, 1, owned=["foo-0", "foo-1"])
    r = h.heartbeat(A, 1, owned=sorted(ALL3), full=True)
    assert r.error == ErrorCode.fenced_member_epoch


def test_lost_answer_of_a_join_is_repeated_on_rejoin():
    h = ConsumerHarness({"foo": 3})
    h.join(A)  # the answer is lost; the member joins again with the same id
    r = h.join(A)
    assert r.member_epoch == 1 and h.assigned(r) == ALL3
    assert h.group().group_epoch == 1  # nothing changed, no new epoch


# -- revocation timeout ----------------------------------------------------------------------------

def test_member_that_never_revokes_is_fenced_after_its_rebalance_timeout():
    h = ConsumerHarness({"foo": 3})
    a_revoking_foo_2(h)
    g = h.group()
    # A keeps heartbeating but keeps reporting foo-2: that does not extend its deadline.
    for _ in range(5):
        h.advance(5_000)
        r = h.heartbeat(A, 1, owned=sorted(ALL3))
        assert r.member_epoch == 1 and g.members[A].state is M.UNREVOKED_PARTITIONS
        h.heartbeat(B, 2)
    fired = h.advance(5_001)
    assert TimerKey(ConsumerTimer.CONSUMER_REVOCATION, "g", A, 1) in fired
    assert A not in g.members and g.group_epoch == 3
    r = h.heartbeat(B, 2)
    assert r.member_epoch == 3 and h.assigned(r) == ALL3
    # A learns it is gone.
    assert h.heartbeat(A, 1, owned=sorted(ALL3)).error == ErrorCode.unknown_member_id


def test_revoking_in_time_cancels_the_revocation_timer():
    h = ConsumerHarness({"foo": 3})
    a_revoking_foo_2(h)
    assert TimerKey(ConsumerTimer.CONSUMER_REVOCATION, "g", A, 1) in h.timers
    h.heartbeat(A, 1, owned=["foo-0", "foo-1"])
    assert not any(k.kind is ConsumerTimer.CONSUMER_REVOCATION for k in h.timers)
    h.advance(40_000)
    assert A in h.group().members


# -- static membership -----------------------------------------------------------------------------

def static_pair(h: ConsumerHarness) -> None:
    h.join(S1, instance_id="i1")
    h.join(B)
    r = h.heartbeat(S1, 1, instance_id="i1")
    h.heartbeat(S1, 1, owned=sorted(h.assigned(r)))
    h.heartbeat(B, 2)
    assert h.group().state() is G.STABLE


def test_static_member_leaving_temporarily_keeps_its_assignment():
    h = ConsumerHarness({"foo": 4})
    static_pair(h)
    g = h.group()
    kept = g.members[S1].assigned
    r = h.leave(S1, epoch=-2, instance_id="i1")
    assert r.error == ErrorCode.none and r.member_epoch == -2
    assert g.members[S1].member_epoch == -2 and g.members[S1].assigned == kept
    assert g.group_epoch == 2  # no rebalance
    # B does not get S1's partitions while S1 is away.
    r = h.heartbeat(B, 2, full=True)
    assert h.tps(*h.assigned(r)).isdisjoint(kept)
    # The instance comes back under a new member id and takes over S1's assignment.
    r = h.join(S2, instance_id="i1")
    assert r.error == ErrorCode.none and r.member_epoch == 2
    assert h.tps(*h.assigned(r)) == kept
    assert S1 not in g.members and g.static_members == {"i1": S2}
    assert g.members[S2].assigned == kept and g.targets[S2] == kept
    assert g.group_epoch == 2 and g.state() is G.STABLE
    assert h.replayed().groups["g"].snapshot() == g.snapshot()


def test_static_member_away_past_its_session_is_removed():
    h = ConsumerHarness({"foo": 4})
    static_pair(h)
    g = h.group()
    h.leave(S1, epoch=-2, instance_id="i1")
    for _ in range(10):
        h.advance(5_000)
        h.heartbeat(B, g.members[B].member_epoch)
    assert S1 not in g.members and "i1" not in g.static_members
    assert g.group_epoch == 3
    r = h.heartbeat(B, 2, full=True)
    assert h.assigned(r) == {"foo-0", "foo-1", "foo-2", "foo-3"}


def test_static_member_rejoin_while_still_active_is_unreleased():
    h = ConsumerHarness({"foo": 4})
    static_pair(h)
    r = h.join(S2, instance_id="i1")
    assert r.error == ErrorCode.unreleased_instance_id
    # After a real leave (-1) the instance id is free, for a brand-new member.
    assert h.leave(S1, epoch=-1, instance_id="i1").member_epoch == -1
    r = h.join(S2, instance_id="i1")
    assert r.error == ErrorCode.none and S1 not in h.group().members


def test_static_member_fenced_by_its_replacement():
    h = ConsumerHarness({"foo": 4})
    static_pair(h)
    h.leave(S1, epoch=-2, instance_id="i1")
    h.join(S2, instance_id="i1")
    # The old incarnation is still around somewhere and heartbeats.
    r = h.heartbeat(S1, 2, instance_id="i1")
    assert r.error == ErrorCode.fenced_instance_id


def test_static_member_rejoining_with_its_own_id_is_not_unreleased():
    """The same process joining again (e.g. after FENCED_MEMBER_EPOCH) keeps its member."""
    h = ConsumerHarness({"foo": 4})
    static_pair(h)
    r = h.join(S1, instance_id="i1")
    assert r.error == ErrorCode.none and r.member_epoch == 2


# -- topic changes ---------------------------------------------------------------------------------

def test_more_partitions_bump_the_epoch_and_are_assigned():
    h = ConsumerHarness({"foo": 2})
    h.join(A)
    h.join(B)
    h.heartbeat(A, 1)
    h.heartbeat(A, 1, owned=["foo-0"])
    h.heartbeat(B, 2)
    g = h.group()
    assert g.state() is G.STABLE and g.group_epoch == 2
    result = h.set_topics({"foo": 4})
    assert [type(r.key) for r in result.records] == [ConsumerGroupMetadataKey]
    assert g.group_epoch == 3 and g.state() is G.ASSIGNING
    ra = h.heartbeat(A, 2)
    rb = h.heartbeat(B, 2)
    assert ra.member_epoch == rb.member_epoch == 3
    assert len(h.assigned(ra)) == len(h.assigned(rb)) == 2
    assert h.assigned(ra) | h.assigned(rb) == {"foo-0", "foo-1", "foo-2", "foo-3"}


def test_unrelated_topic_changes_do_not_touch_the_group():
    h = ConsumerHarness({"foo": 2})
    h.join(A)
    before = h.group().snapshot()
    assert h.set_topics({"foo": 2, "other": 5}).records == []
    assert h.group().snapshot() == before


def test_subscribed_topic_created_later():
    h = ConsumerHarness({"foo": 2})
    r = h.join(A, topics=["foo", "later"])
    assert h.assigned(r) == {"foo-0", "foo-1"}
    h.set_topics({"foo": 2, "later": 1})
    r = h.heartbeat(A, 1)
    assert r.member_epoch == 2 and h.assigned(r) == {"foo-0", "foo-1", "later-0"}


def test_deleted_topic_is_revoked():
    h = ConsumerHarness({"foo": 2, "bar": 1})
    r = h.join(A, topics=["foo", "bar"])
    assert h.assigned(r) == {"foo-0", "foo-1", "bar-0"}
    h.set_topics({"foo": 2})
    r = h.heartbeat(A, 1)
    assert h.assigned(r) == {"foo-0", "foo-1"}
    assert h.group().members[A].state is M.UNREVOKED_PARTITIONS
    r = h.heartbeat(A, 1, owned=["foo-0", "foo-1"])
    assert r.member_epoch == 2 and h.group().state() is G.STABLE


def test_regex_subscription_follows_topics():
    h = ConsumerHarness({"orders": 1, "orders-eu": 1, "xorders": 1})
    r = h.join(A, topics=None, regex="orders.*")
    assert h.assigned(r) == set()  # the regex is resolved after the answer ...
    h.advance(0)  # ... when the timer the join armed fires
    r = h.heartbeat(A, 1)
    # Whole-name match: "xorders" does not match.
    assert r.member_epoch == 2 and h.assigned(r) == {"orders-0", "orders-eu-0"}
    g = h.group()
    assert g.resolved_regexes["orders.*"].topics == {"orders", "orders-eu"}
    # A new matching topic: nothing at once; the first heartbeat 10 s after the last
    # resolution asks for a new one, which bumps the epoch.
    result = h.set_topics({"orders": 1, "orders-eu": 1, "xorders": 1, "orders-us": 2})
    assert result.records == []
    h.advance(10_001)
    h.heartbeat(A, 2)
    before = len(h.records)
    h.advance(0)
    assert [type(rec.key) for rec in h.records[before:]] == [ConsumerGroupRegularExpressionKey,
                                                             ConsumerGroupMetadataKey]
    r = h.heartbeat(A, 2)
    assert h.assigned(r) == {"orders-0", "orders-eu-0", "orders-us-0", "orders-us-1"}
    # Switching back to names drops the regex record.
    before = len(h.records)
    r = h.heartbeat(A, 3, topics=["xorders"], regex="")
    assert "orders.*" not in g.resolved_regexes
    tombstones = [rec for rec in h.records[before:]
                  if rec.key == ConsumerGroupRegularExpressionKey("g", "orders.*")]
    assert [rec.value for rec in tombstones] == [None]
    assert h.group().members[A].subscribed_topic_regex is None


def test_regex_shared_by_members_is_resolved_once_and_dropped_with_the_last():
    h = ConsumerHarness({"t1": 1, "t2": 1})
    h.join(A, topics=None, regex="t.")
    h.advance(0)
    h.join(B, topics=None, regex="t.")
    regex_records = [r for r in h.records if isinstance(r.key, ConsumerGroupRegularExpressionKey)]
    assert len(regex_records) == 1
    h.leave(A)
    assert "t." in h.group().resolved_regexes
    h.leave(B)
    assert "t." not in h.group().resolved_regexes


# -- what an answer carries ------------------------------------------------------------------------

def test_assignment_only_on_full_requests_and_changes():
    h = ConsumerHarness({"foo": 3})
    r = h.join(A)
    assert h.assigned(r) == ALL3
    assert h.heartbeat(A, 1).assignment is None  # nothing changed
    r = h.heartbeat(A, 1, full=True)
    assert h.assigned(r) == ALL3  # a full request gets it again
    assert r.heartbeat_interval_ms == 5_000


def test_assignment_leaves_out_partitions_others_still_hold():
    h = ConsumerHarness({"foo": 4})
    h.join(A)
    r = h.join(B)
    assert h.assigned(r) == set()  # B's target is 2 partitions, both still A's
    assert len(h.group().targets[B]) == 2


def test_server_assignor_most_asked_for_wins():
    h = ConsumerHarness({"foo": 4, "bar": 4})
    h.join(A, topics=["foo", "bar"], assignor="range")
    assert h.coordinator.describe(["g"])[0].assignor_name == "range"
    h.join(B, topics=["foo", "bar"])
    # range: A (first in order) gets foo-0,1 and bar-0,1.
    assert h.names(h.group().targets[A]) == {"foo-0", "foo-1", "bar-0", "bar-1"}
    h.join(C, topics=["foo", "bar"], assignor="uniform")
    h.join(mid("D"), topics=["foo", "bar"], assignor="uniform")
    assert h.coordinator.describe(["g"])[0].assignor_name == "uniform"


# -- describe, list, delete ------------------------------------------------------------------------

def test_describe_and_list():
    h = ConsumerHarness({"foo": 3})
    a_revoking_foo_2(h)
    (d,) = h.coordinator.describe(["g"])
    assert (d.error, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
        ErrorCode.none, "Reconciling", 2, 2, "uniform")
    members = {m.member_id: m for m in d.members}
    a = members[A]
    assert a.member_epoch == 1 and a.subscribed_topic_names == ("foo",)
    assert [(t.topic_name, t.partitions) for t in a.assignment] == [("foo", (0, 1))]
    assert [(t.topic_name, t.partitions) for t in a.target_assignment] == [("foo", (0, 1))]
    assert [(t.topic_name, t.partitions) for t in members[B].target_assignment] == [
        ("foo", (2,))]
    (missing,) = h.coordinator.describe(["nope"])
    assert missing.error == ErrorCode.group_id_not_found
    assert [(g.group_id, g.state, g.group_type) for g in
            (group.listing() for group in h.coordinator.groups.values())] == [
        ("g", "Reconciling", "consumer")]


def test_delete_only_an_empty_group():
    h = ConsumerHarness({"foo": 3})
    h.join(A, topics=None, regex="f.*")
    assert delete_group(h.coordinator, "g")[0] == ErrorCode.non_empty_group
    h.leave(A)
    assert h.group().state() is G.EMPTY
    code, records = delete_group(h.coordinator, "g")
    assert code == ErrorCode.none and all(r.value is None for r in records)
    h.records.extend(records)
    assert "g" not in h.coordinator.groups
    assert "g" not in h.replayed().groups
    assert delete_group(h.coordinator, "g")[0] == ErrorCode.group_id_not_found


# -- restart ---------------------------------------------------------------------------------------

def test_restart_mid_reconciliation_resumes_it():
    h = ConsumerHarness({"foo": 3})
    a_revoking_foo_2(h)
    # The coordinator restarts: a fresh one loads the records and gets the topics again.
    h2 = ConsumerHarness(now_ms=h.now)
    h2.topic_ids = dict(h.topic_ids)
    h2.load(list(h.records))
    result = change_topics(h2.coordinator, {"foo": (h.topic_ids["foo"], 3)}, h2.now)
    assert result.records == []  # the topics did not change while it was down
    assert h2.group().snapshot() == h.group().snapshot()
    assert TimerKey(ConsumerTimer.CONSUMER_REVOCATION, "g", A, 1) in h2.timers
    assert TimerKey(ConsumerTimer.CONSUMER_SESSION, "g", B) in h2.timers
    r = h2.heartbeat(A, 1, owned=["foo-0", "foo-1"])
    assert r.member_epoch == 2
    r = h2.heartbeat(B, 2)
    assert h2.assigned(r) == {"foo-2"}
    assert h2.group().state() is G.STABLE


def test_v0_member_id_made_up_by_the_coordinator():
    h = ConsumerHarness({"foo": 1})
    r = h.request(ConsumerHeartbeatRequest("g", "", 0, rebalance_timeout_ms=1000,
                                           subscribed_topic_names=("foo",), owned=(), version=0))
    assert r.error == ErrorCode.none and r.member_id == mid("gen1")
    assert r.member_id in h.group().members
