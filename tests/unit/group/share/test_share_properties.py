"""Properties of share groups under random joins, heartbeats, leaves, session expiries and
topic changes, in virtual time:

(1) replaying the records written (through the byte codec) into a fresh shard rebuilds
    every share group exactly as it is live (replay equals live);
(2) whenever the group's target is at its epoch, every partition of a subscribed topic is in
    some member's target, each member's target holds only topics it subscribes to, and
    members with the same subscription have targets within one of each other;
(3) a member that heartbeats at its epoch is answered without error.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from .share_harness import ShareHarness

MEMBERS = ["m1", "m2", "m3", "m4", "m5"]
TOPIC_SETS = [("a",), ("b",), ("a", "b")]

ops = st.lists(st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS), st.sampled_from(TOPIC_SETS)),
    st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("resubscribe"), st.sampled_from(MEMBERS), st.sampled_from(TOPIC_SETS)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("advance"), st.integers(1_000, 50_000)),
    st.tuples(st.just("topics"), st.integers(0, 4), st.integers(0, 3)),
), max_size=30)


def check_targets(h: ShareHarness) -> None:
    group = h.shard.groups.get("g")
    if group is None or group.assignment_epoch != group.group_epoch:
        return
    by_id = {tid: name for name, tid in h.topic_ids.items()}
    targets = {mid: {(by_id[t], p) for t, p in group.target_of(mid)} for mid in group.members}
    wanted = {(t, p) for m in group.members.values() for t in m.subscribed
              for p in range(h.topics.get(t, 0))}
    assert set().union(*targets.values()) == wanted
    for mid, parts in targets.items():
        assert {t for t, _ in parts} <= group.members[mid].subscribed
    by_subscription: dict[frozenset[str], list[int]] = {}
    for mid, parts in targets.items():
        by_subscription.setdefault(group.members[mid].subscribed, []).append(len(parts))
    for subs, sizes in by_subscription.items():
        if len(subs) == 1:
            assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(ops)
def test_replay_equals_live_and_targets_cover_every_partition(steps) -> None:
    h = ShareHarness({"a": 2, "b": 1})
    for step in steps:
        match step:
            case ("join", mid, topics):
                group = h.shard.groups.get("g")
                if group is None or mid not in group.members:
                    assert h.join(mid, topics).error == ErrorCode.none
            case ("heartbeat", mid):
                group = h.shard.groups.get("g")
                if group is not None and mid in group.members:
                    r = h.heartbeat(mid, group.members[mid].member_epoch)
                    assert r.error == ErrorCode.none
            case ("resubscribe", mid, topics):
                group = h.shard.groups.get("g")
                if group is not None and mid in group.members:
                    r = h.heartbeat(mid, group.members[mid].member_epoch,
                                    subscribed_topic_names=topics)
                    assert r.error == ErrorCode.none and r.assignment is not None
            case ("leave", mid):
                group = h.shard.groups.get("g")
                if group is not None and mid in group.members:
                    assert h.leave(mid).error == ErrorCode.none
            case ("advance", ms):
                h.advance(ms)
            case ("topics", a, b):
                h.set_topics({"a": max(a, h.topics.get("a", 0)), "b": b} if b else
                             {"a": max(a, h.topics.get("a", 0))})
        check_targets(h)
        h.check_replay()
