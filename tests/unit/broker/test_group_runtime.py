"""The group runtime over its seams: an in-memory `OffsetsLog`, a virtual clock, settings,
and the timer seam (the event loop's `LoopTimers`, or `MemoryTimers` in virtual time). A
failed append answers COORDINATOR_NOT_AVAILABLE and leaves the shard as the log has it; a
second runtime loading the same log has the same state; compaction keeps exactly the live
keys; groups are routed to the shard of their partition; until loading is done, the door
answers every API COORDINATOR_LOAD_IN_PROGRESS."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.group_timers import LoopTimers, MemoryTimers
from coterie.broker.groups import GroupRuntime, group_settings
from coterie.broker.offsets_topic import MemoryOffsetsLog
from coterie.common.partitioning import partition_for
from coterie.group import (
    CommitPartition,
    ConsumerGroupConfig,
    ConsumerGroupDescribeRequest,
    ConsumerHeartbeatRequest,
    DeleteGroupRequest,
    DescribeGroupRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    PrepareAssignmentRequest,
    SettledHeartbeat,
    ShareGroupDescribeRequest,
    ShareHeartbeatRequest,
    SyncGroupRequest,
    TimerKey,
    TimerOp,
    TxnOffsetCommitRequest,
)
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.share.kinds import ShareTimer

TOPIC_ID = uuid.UUID(int=7)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def runtime(log: MemoryOffsetsLog) -> GroupRuntime:
    return GroupRuntime(log, Clock(), group_settings({}, ConsumerGroupConfig()))


def commit(rt: GroupRuntime, group_id: str, offset: int) -> tuple[ErrorCode, ...]:
    return rt.handle(OffsetCommitRequest(group_id, "", -1,
                                         (CommitPartition("t", 0, offset),))).codes


def join(rt: GroupRuntime, group_id: str, member_id: str) -> ErrorCode:
    return rt.handle(ConsumerHeartbeatRequest(
        group_id=group_id, member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",), owned=())).error


def test_failed_appends_answer_the_storage_error_and_change_nothing():
    async def scenario() -> None:
        log = MemoryOffsetsLog(4)
        rt = runtime(log)
        await rt.load()
        rt.topics_changed({"t": (TOPIC_ID, 2)})
        assert commit(rt, "g", 5) == (ErrorCode.none,)
        log.failing = True
        assert commit(rt, "g", 6) == (ErrorCode.coordinator_not_available,)
        shard = rt.shard_for("g")
        assert shard.offsets.fetch("g", "t", 0).offset == 5
        log.failing = False
        assert join(rt, "g", "m1" * 11) == ErrorCode.none
        before = rt.group("g").snapshot()
        log.failing = True
        assert join(rt, "g", "m2" * 11) == ErrorCode.coordinator_not_available
        assert rt.group("g").snapshot() == before
        log.failing = False
        assert join(rt, "g", "m2" * 11) == ErrorCode.none
        rt.close()

    asyncio.run(scenario())


def test_a_second_runtime_loads_the_same_state_and_compaction_keeps_live_keys():
    async def scenario() -> None:
        log = MemoryOffsetsLog(4)
        rt = runtime(log)
        await rt.load()
        rt.topics_changed({"t": (TOPIC_ID, 2)})
        for i in range(5):
            commit(rt, "g", i)
            commit(rt, "h", 10 + i)
        join(rt, "g", "m1" * 11)
        rt.close()
        for reopened in (runtime(log), None):
            if reopened is None:  # after compaction
                assert rt.compact(min_segments=2) >= 1
                reopened = runtime(log)
            await reopened.load()
            for gid, offset in (("g", 4), ("h", 14)):
                assert reopened.shard_for(gid).offsets.fetch(gid, "t", 0).offset == offset
            assert reopened.group("g").snapshot() == rt.group("g").snapshot()
            reopened.close()
        partition = partition_for("g", 4)
        assert len(log.batches[partition]) == 1  # one snapshot batch
        assert rt.shard_for("g").partition == partition

    asyncio.run(scenario())


def test_until_loading_is_done_every_api_answers_load_in_progress():
    """The loading answer is the door's, once for every API (each request value says how
    its answer carries the code)."""
    rt = runtime(MemoryOffsetsLog(2))
    loading = ErrorCode.coordinator_load_in_progress
    partitions = (CommitPartition("t", 0, 1), CommitPartition("t", 1, 1))
    assert rt.handle(OffsetCommitRequest("g", "", -1, partitions)).codes == (loading,) * 2
    assert rt.handle(TxnOffsetCommitRequest("tx", "g", 1, 0, partitions)).codes == (
        loading,) * 2
    assert rt.handle(OffsetFetchRequest("g")).error == loading
    assert rt.handle(OffsetDeleteRequest("g", (("t", 0),))).error == loading
    assert rt.handle(DeleteGroupRequest("g")) == loading
    assert rt.handle(JoinGroupRequest("g", "m", "consumer", (("range", b""),), 10_000,
                                      10_000)).error == loading
    assert rt.handle(SyncGroupRequest("g", 1, "m")).error == loading
    assert rt.handle(HeartbeatRequest("g", 1, "m")) == loading
    assert rt.handle(LeaveGroupRequest("g", ())).error == loading
    assert rt.handle(DescribeGroupRequest("g", 5)).error == loading
    assert rt.handle(ConsumerHeartbeatRequest(group_id="g", member_id="m",
                                              member_epoch=1)).error == loading
    assert rt.settled_heartbeat(SettledHeartbeat("g", "m", 1, "c", "h")).error == loading
    assert rt.handle(ConsumerGroupDescribeRequest("g")).error == loading
    assert rt.handle(PrepareAssignmentRequest("g", "m", 1)).error == loading
    assert rt.list_groups() is None


def test_a_transactional_commit_is_verified_after_its_group_id_and_before_its_group():
    """The order is the shard's (Kafka's): an impossible group id first, then the
    transaction coordinator's verdict (asked through the runtime's seam), then fencing."""
    async def scenario() -> None:
        rt = runtime(MemoryOffsetsLog(2))
        asked: list[Any] = []
        verdict: list[ErrorCode | None] = [ErrorCode.invalid_txn_state]

        def verify(v: Any) -> ErrorCode | None:
            asked.append(v)
            return verdict[0]

        rt.verify_transaction = verify
        await rt.load()
        rt.topics_changed({"t": (TOPIC_ID, 2)})
        part = (CommitPartition("t", 0, 5),)
        req = TxnOffsetCommitRequest("tx", "", 7, 0, part, verify=True)
        assert rt.handle(req).codes == (ErrorCode.invalid_group_id,)
        assert asked == []  # never asked for a group id no record can hold
        req = TxnOffsetCommitRequest("tx", "g", 7, 0, part, generation=3, member_id="m",
                                     verify=True)
        assert rt.handle(req).codes == (ErrorCode.invalid_txn_state,)
        assert [(v.transactional_id, v.producer_id, v.partition) for v in asked] == [
            ("tx", 7, rt.partition_of("g"))]
        verdict[0] = None
        # Verified: now the group's fencing (no group, a generation claimed).
        assert rt.handle(req).codes == (ErrorCode.illegal_generation,)
        ok = TxnOffsetCommitRequest("tx", "g", 7, 0, part, verify=True)
        assert rt.handle(ok).codes == (ErrorCode.none,)
        assert set(rt.shard_for("g").offsets.pending(7)) == {("g", "t", 0)}
        rt.close()

    asyncio.run(scenario())


def test_the_timer_seam_in_virtual_time_expires_a_member():
    """The runtime over `MemoryTimers`: a consumer member that stops heartbeating is fenced
    when virtual time passes its session timeout, through the shard's timer path."""
    async def scenario() -> None:
        clock = Clock()
        timers: list[MemoryTimers] = []

        def make(fire: Any) -> MemoryTimers:
            timers.append(MemoryTimers(fire))
            return timers[0]

        rt = GroupRuntime(MemoryOffsetsLog(1), clock,
                          group_settings({}, ConsumerGroupConfig()), timers=make)
        await rt.load()
        rt.topics_changed({"t": (TOPIC_ID, 2)})
        assert join(rt, "g", "m1" * 11) == ErrorCode.none
        key = TimerKey(ConsumerTimer.CONSUMER_SESSION, "g", "m1" * 11)
        assert key in rt.timers.armed()
        clock.now += 44_000
        assert timers[0].advance(clock.now) == []
        clock.now += 2_000
        assert key in timers[0].advance(clock.now)
        assert not rt.group("g").members
        rt.close()

    asyncio.run(scenario())


def test_timers_fire_in_deadline_order_once_each_and_pushed_back_ones_later():
    async def scenario() -> None:
        def clock() -> int:
            return time.monotonic_ns() // 1_000_000

        fired: list[tuple[TimerKey, int]] = []
        timers = LoopTimers(clock, lambda key, now: fired.append((key, now)))
        start = clock()
        keys = [TimerKey(ConsumerTimer.CONSUMER_SESSION, "g", f"m{i}") for i in range(5)]
        timers.apply([TimerOp(keys[0], start + 60), TimerOp(keys[1], start + 20),
                      TimerOp(keys[2], start + 40), TimerOp(keys[3], start)])
        timers.apply([TimerOp(keys[1], start + 80),  # pushed back: fires later
                      TimerOp(keys[2], None),  # cancelled: never fires
                      TimerOp(keys[4], start + 30)])
        timers.apply([TimerOp(keys[4], start + 10)])  # brought forward
        assert fired == []  # even the one due already waits for a later turn
        await asyncio.sleep(0.2)
        assert [key for key, _ in fired] == [keys[3], keys[4], keys[0], keys[1]]
        wanted = {keys[3]: start, keys[4]: start + 10, keys[0]: start + 60,
                  keys[1]: start + 80}
        assert all(at >= wanted[key] for key, at in fired)
        assert not timers.armed() and not timers.pending_entries()
        timers.close()

    asyncio.run(scenario())


def test_the_timer_heap_stays_bounded_when_members_come_and_go():
    async def scenario() -> None:
        clock = Clock()
        timers = LoopTimers(clock, lambda key, now: None)
        far = clock() + 3_600_000
        for i in range(20_000):
            key = TimerKey(ConsumerTimer.CONSUMER_SESSION, "g", f"m{i}")
            timers.apply([TimerOp(key, far - i)])  # each earlier than the last
            timers.apply([TimerOp(key, None)])
        assert len(timers.armed()) == 0
        assert timers.pending_entries() <= 1024 + 1
        timers.close()

    asyncio.run(scenario())


def test_a_share_group_through_the_runtime_survives_a_restart_and_compaction():
    """Share groups over the runtime's seams: the broker's group.share.* properties reach
    the shard, the loading answer is the door's, a second runtime loading the same log (and
    after compaction) has the same share group, and a silent member is fenced on the
    timer seam at the configured session timeout."""
    async def scenario() -> None:
        clock = Clock()
        timers: list[MemoryTimers] = []

        def make(fire: Any) -> MemoryTimers:
            timers.append(MemoryTimers(fire))
            return timers[0]

        log = MemoryOffsetsLog(3)
        props = {"group.share.session.timeout.ms": "50000",
                 "group.share.heartbeat.interval.ms": "7000", "group.share.max.size": "5"}
        rt = GroupRuntime(log, clock, group_settings(props, ConsumerGroupConfig()),
                          timers=make)
        assert rt.handle(ShareHeartbeatRequest("s", "m1", 0, None, ("t",))).error == \
            ErrorCode.coordinator_load_in_progress
        assert rt.handle(ShareGroupDescribeRequest("s")).error == \
            ErrorCode.coordinator_load_in_progress
        await rt.load()
        rt.topics_changed({"t": (TOPIC_ID, 3)})
        joined = rt.handle(ShareHeartbeatRequest("s", "m1", 0, None, ("t",)))
        assert (joined.error, joined.member_epoch, joined.heartbeat_interval_ms) == (
            ErrorCode.none, 1, 7000)
        assert rt.handle(ShareHeartbeatRequest("s", "m2", 0, None, ("t",))).member_epoch == 2
        rt.handle(ShareHeartbeatRequest("s", "m1", 1))
        for reopened in (runtime(log), None):
            if reopened is None:
                assert rt.compact(min_segments=2) >= 0
                reopened = runtime(log)
            await reopened.load()
            assert reopened.group("s").snapshot() == rt.group("s").snapshot()
            reopened.close()
        clock.now += 40_000
        rt.handle(ShareHeartbeatRequest("s", "m1", 2))
        clock.now += 11_000
        fired = timers[0].advance(clock.now)
        assert TimerKey(ShareTimer.SHARE_SESSION, "s", "m2") in fired
        assert set(rt.group("s").members) == {"m1"}
        rt.close()

    asyncio.run(scenario())
