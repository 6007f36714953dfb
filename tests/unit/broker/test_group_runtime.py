"""The group runtime over its seams (issue 11): an in-memory `OffsetsLog`, a virtual clock,
settings. A failed append answers COORDINATOR_NOT_AVAILABLE and leaves the shard as the log
has it; a second runtime loading the same log has the same state; compaction keeps exactly
the live keys; groups are routed to the shard of their partition."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.groups import GroupRuntime, group_settings
from coterie.broker.offsets_topic import MemoryOffsetsLog
from coterie.common.partitioning import partition_for
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.offsets.messages import CommitPartition, OffsetCommitRequest
from coterie.group.result import TimerOp
from coterie.group.timers import TimerKey, TimerKind

TOPIC_ID = uuid.UUID(int=7)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def runtime(log: MemoryOffsetsLog) -> GroupRuntime:
    return GroupRuntime(log, Clock(), group_settings({}, ConsumerGroupConfig()))


def commit(rt: GroupRuntime, group_id: str, offset: int) -> tuple[ErrorCode, ...]:
    shard = rt.shard_for(group_id)
    req = OffsetCommitRequest(group_id, "", -1, (CommitPartition("t", 0, offset),))
    return rt.run(group_id, shard.offset_commit(req, rt.now_ms())).codes


def join(rt: GroupRuntime, group_id: str, member_id: str) -> ErrorCode:
    req = ConsumerHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=0,
                                   rebalance_timeout_ms=30_000, subscribed_topic_names=("t",),
                                   owned=())
    shard = rt.shard_for(group_id)
    return rt.run(group_id, shard.coordinator.consumer_heartbeat(req, rt.now_ms())).error


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
        before = shard.consumer.groups["g"].snapshot()
        log.failing = True
        assert join(rt, "g", "m2" * 11) == ErrorCode.coordinator_not_available
        assert shard.consumer.groups["g"].snapshot() == before
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
            assert (reopened.shard_for("g").consumer.groups["g"].snapshot()
                    == rt.shard_for("g").consumer.groups["g"].snapshot())
            reopened.close()
        partition = partition_for("g", 4)
        assert len(log.batches[partition]) == 1  # one snapshot batch
        assert rt.shard_for("g").partition == partition

    asyncio.run(scenario())


class _RecordingRuntime(GroupRuntime):
    """The runtime with its timer handler replaced by a log of what fired when: what is
    under test is the timer heap (`_apply_timers`, `_fire_due`), not the coordinator."""

    def __init__(self, log: MemoryOffsetsLog, clock: Any) -> None:
        super().__init__(log, clock, group_settings({}, ConsumerGroupConfig()))
        self.fired: list[tuple[TimerKey, int]] = []

    def _fire(self, key: TimerKey, now: int) -> None:
        self.fired.append((key, now))


def test_timers_fire_in_deadline_order_once_each_and_pushed_back_ones_later():
    async def scenario() -> None:
        def clock() -> int:
            return time.monotonic_ns() // 1_000_000

        rt = _RecordingRuntime(MemoryOffsetsLog(1), clock)
        start = clock()
        keys = [TimerKey(TimerKind.CONSUMER_SESSION, "g", f"m{i}") for i in range(5)]
        rt._apply_timers([TimerOp(keys[0], start + 60), TimerOp(keys[1], start + 20),
                          TimerOp(keys[2], start + 40), TimerOp(keys[3], start)])
        rt._apply_timers([TimerOp(keys[1], start + 80),  # pushed back: fires later
                          TimerOp(keys[2], None),  # cancelled: never fires
                          TimerOp(keys[4], start + 30)])
        rt._apply_timers([TimerOp(keys[4], start + 10)])  # brought forward
        assert rt.fired == []  # even the one due already waits for a later turn
        await asyncio.sleep(0.2)
        assert [key for key, _ in rt.fired] == [keys[3], keys[4], keys[0], keys[1]]
        wanted = {keys[3]: start, keys[4]: start + 10, keys[0]: start + 60,
                  keys[1]: start + 80}
        assert all(at >= wanted[key] for key, at in rt.fired)
        assert not rt._timers and not rt._heap
        rt.close()

    asyncio.run(scenario())


def test_the_timer_heap_stays_bounded_when_members_come_and_go():
    async def scenario() -> None:
        rt = _RecordingRuntime(MemoryOffsetsLog(1), Clock())
        far = rt.now_ms() + 3_600_000
        for i in range(20_000):
            key = TimerKey(TimerKind.CONSUMER_SESSION, "g", f"m{i}")
            rt._apply_timers([TimerOp(key, far - i)])  # each earlier than the last
            rt._apply_timers([TimerOp(key, None)])
        assert len(rt._timers) == 0
        assert len(rt._heap) <= 1024 + 1
        rt.close()

    asyncio.run(scenario())
