"""A member's assignment follows its subscription at once (Kafka 4.2's CurrentAssignmentBuilder
with a changed subscription), not only when a new target has been computed.

When a member changes its topic names or its regex, the partitions of topics it no longer
subscribes to are taken away in the same heartbeat: to be revoked if it may still hold them
(UNREVOKED_PARTITIONS at its current epoch), simply dropped if it has already let them go.
And a target that still names such topics (computed before the change: a regex not resolved
yet, a client-side assignor's round still running) never hands them back.
"""

from __future__ import annotations

from coterie.group.consumer.member import MemberState as M

from .consumer_harness import ConsumerHarness, mid

A, B = mid("A"), mid("B")
TOPICS = {"orders": 2, "prefix-a": 1, "prefix-b": 1, "other": 1}


def state(h: ConsumerHarness, member_id: str) -> tuple[int, M, set[str], set[str]]:
    m = h.group().members[member_id]
    return m.member_epoch, m.state, h.names(m.assigned), h.names(m.pending_revocation)


def _on_prefix_regex(h: ConsumerHarness) -> None:
    """A subscribes to orders and to prefix.*, resolved: it holds all four partitions."""
    h.join(A, topics=["orders"], regex="prefix.*")
    h.advance(0)
    r = h.heartbeat(A, 1)
    assert r.member_epoch == 2
    assert state(h, A) == (2, M.STABLE, {"orders-0", "orders-1", "prefix-a-0", "prefix-b-0"},
                           set())


def test_switching_to_an_unresolved_regex_revokes_the_old_regex_topics_at_once():
    h = ConsumerHarness(TOPICS)
    _on_prefix_regex(h)
    g = h.group()
    held = ["orders-0", "orders-1", "prefix-a-0", "prefix-b-0"]
    # A moves to other.*, not resolved yet (the resolution is asked for, due at once). Its
    # old regex's topics go to revocation in this very heartbeat, at its current epoch.
    r = h.heartbeat(A, 2, owned=held, topics=["orders"], regex="other.*")
    assert r.member_epoch == 2
    assert h.assigned(r) == {"orders-0", "orders-1"}
    assert state(h, A) == (2, M.UNREVOKED_PARTITIONS, {"orders-0", "orders-1"},
                           {"prefix-a-0", "prefix-b-0"})
    # A lets them go. The group's target (epoch 2) still names them, but A is not
    # subscribed to them any more: they are not handed back.
    r = h.heartbeat(A, 2, owned=["orders-0", "orders-1"])
    assert state(h, A)[2:] == ({"orders-0", "orders-1"}, set())
    assert r.assignment is None or h.assigned(r) == {"orders-0", "orders-1"}
    # The resolution runs: a new epoch, and the new regex's topic comes.
    h.advance(0)
    assert g.resolved_regexes["other.*"].topics == {"other"}
    r = h.heartbeat(A, g.members[A].member_epoch, owned=["orders-0", "orders-1"])
    assert r.member_epoch == g.group_epoch
    assert h.assigned(r) == {"orders-0", "orders-1", "other-0"}
    assert state(h, A)[1:] == (M.STABLE, {"orders-0", "orders-1", "other-0"}, set())


def test_partitions_already_given_up_are_dropped_without_a_revocation():
    h = ConsumerHarness(TOPICS)
    _on_prefix_regex(h)
    # A stopped using the prefix topics before telling the coordinator (it reports only
    # orders): nothing to wait for, the assignment just shrinks.
    r = h.heartbeat(A, 2, owned=["orders-0", "orders-1"], topics=["orders"], regex="other.*")
    assert r.member_epoch == 2
    assert h.assigned(r) == {"orders-0", "orders-1"}
    assert state(h, A) == (2, M.STABLE, {"orders-0", "orders-1"}, set())


def test_a_member_revoking_also_gives_up_a_topic_it_unsubscribes_from():
    h = ConsumerHarness({"foo": 4, "bar": 2})
    everything = ["foo-0", "foo-1", "foo-2", "foo-3", "bar-0", "bar-1"]
    r = h.join(A, topics=["foo", "bar"])
    assert h.assigned(r) == set(everything)
    h.join(B, topics=["foo"])
    # A must give some of foo to B: it revokes at epoch 1, still holding everything.
    r = h.heartbeat(A, 1, owned=everything)
    epoch, st, assigned, pending = state(h, A)
    assert (epoch, st) == (1, M.UNREVOKED_PARTITIONS) and pending
    assert {"bar-0", "bar-1"} <= assigned
    # Still holding them, A drops bar from its subscription: bar joins what it must revoke
    # in the same heartbeat (before, it stayed assigned until the revocation was done).
    r = h.heartbeat(A, 1, owned=everything, topics=["foo"])
    assert r.member_epoch == 1
    assert h.names(h.group().members[A].assigned).isdisjoint({"bar-0", "bar-1"})
    assert h.assigned(r) is not None and not {"bar-0", "bar-1"} & h.assigned(r)
    epoch, st, assigned, new_pending = state(h, A)
    assert (epoch, st) == (1, M.UNREVOKED_PARTITIONS)
    assert new_pending == pending | {"bar-0", "bar-1"}
    # Once A lets go of all of it, it reaches the new target, without bar.
    kept = sorted(assigned)
    r = h.heartbeat(A, 1, owned=kept)
    g = h.group()
    assert state(h, A)[:2] == (g.assignment_epoch, M.STABLE)
    assert "bar" not in {name.rsplit("-", 1)[0] for name in state(h, A)[2]}


def test_an_unchanged_subscription_changes_nothing_at_the_target_epoch():
    h = ConsumerHarness(TOPICS)
    _on_prefix_regex(h)
    before = len(h.records)
    r = h.heartbeat(A, 2, owned=["orders-0", "orders-1", "prefix-a-0", "prefix-b-0"],
                    topics=["orders"], regex="prefix.*")
    assert r.member_epoch == 2
    assert state(h, A) == (2, M.STABLE, {"orders-0", "orders-1", "prefix-a-0", "prefix-b-0"},
                           set())
    assert h.records[before:] == []


def test_replay_equals_live_after_a_subscription_cut():
    h = ConsumerHarness(TOPICS)
    _on_prefix_regex(h)
    h.heartbeat(A, 2, owned=["orders-0", "orders-1", "prefix-a-0", "prefix-b-0"],
                topics=["orders"], regex="other.*")
    replayed = h.replayed().groups["g"].members[A]
    assert replayed == h.group().members[A]
