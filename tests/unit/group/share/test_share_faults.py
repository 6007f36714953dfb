"""Share groups under the coordinator's faults, in virtual time: the random operations of
test_share_properties.py gain

* **a failed append**: the next result whose records the coordinator writes is not
  persisted; the shard reverts to what was durable (`GroupShard.revert`, as the broker's
  writer does) and the answer is COORDINATOR_NOT_AVAILABLE;
* **a coordinator crash**: the shard is thrown away and a new one loads every persisted
  record (through the bytes), arms its timers and sees the topics, as after a kill -9.

After every step, replaying what was persisted gives the live share groups back (the undo
leaves nothing of a failed append behind), and every live member's session timer is armed.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.broker.group_writer import with_error
from coterie.group import codec
from coterie.group.records.record import Record
from coterie.group.result import Result
from coterie.group.share.group import ShareGroup
from coterie.group.share.kinds import ShareTimer
from coterie.group.timers import TimerKey

from .share_harness import ShareHarness
from .test_share_properties import MEMBERS, TOPIC_SETS


class FaultyShareHarness(ShareHarness):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.fail_next = False
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
        group_id = result.records[0].key.group_id
        revert = self.shard.revert(group_id, list(result.records), self.now)
        super().apply(Result(timers=result.timers))
        if revert.rebuilt:
            for key in [k for k in self.timers if k.group_id == group_id]:
                del self.timers[key]
        super().apply(Result(timers=revert.result.timers))
        return with_error(result.response, ErrorCode.coordinator_not_available)

    def crash(self) -> None:
        self.shard = self.coordinator = self._build()
        self.timers.clear()
        for record in self.log:
            self.shard.replay(codec.decode(*codec.encode(record)))
        super().apply(Result(timers=self.shard.timers_after_load(self.now)))
        self.set_topics(self.topics)

    def check(self) -> None:
        fresh = self._build()
        fresh.on_topics_changed(self._picture(), self.now)
        for record in self.log:
            fresh.replay(codec.decode(*codec.encode(record)))
        live = {g: v.snapshot() for g, v in self.shard.groups.items()
                if isinstance(v, ShareGroup)}
        replayed = {g: v.snapshot() for g, v in fresh.groups.items()
                    if isinstance(v, ShareGroup)}
        assert replayed == live
        for gid, group in self.shard.groups.items():
            if isinstance(group, ShareGroup):
                for mid in group.members:
                    assert TimerKey(ShareTimer.SHARE_SESSION, gid, mid) in self.timers


ops = st.lists(st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS), st.sampled_from(TOPIC_SETS)),
    st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("advance"), st.integers(1_000, 50_000)),
    st.tuples(st.just("topics"), st.integers(0, 4)),
    st.tuples(st.just("fail")),
    st.tuples(st.just("crash")),
), max_size=30)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_failed_appends_and_crashes_leave_replay_equal_to_live(steps) -> None:
    h = FaultyShareHarness({"a": 2, "b": 1})
    for step in steps:
        group = h.shard.groups.get("g")
        members = group.members if isinstance(group, ShareGroup) else {}
        match step:
            case ("join", mid, topics) if mid not in members:
                assert h.join(mid, topics).error in (ErrorCode.none,
                                                     ErrorCode.coordinator_not_available)
            case ("heartbeat", mid) if mid in members:
                r = h.heartbeat(mid, members[mid].member_epoch)
                assert r.error in (ErrorCode.none, ErrorCode.coordinator_not_available)
            case ("leave", mid) if mid in members:
                assert h.leave(mid).error in (ErrorCode.none,
                                              ErrorCode.coordinator_not_available)
            case ("advance", ms):
                h.advance(ms)
            case ("topics", a):
                h.set_topics({"a": max(a, h.topics.get("a", 0)), "b": 1})
            case ("fail",):
                h.fail_next = True
            case ("crash",):
                h.crash()
        h.check()
