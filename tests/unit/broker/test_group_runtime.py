"""The group runtime over its seams (issue 11): an in-memory `OffsetsLog`, a virtual clock,
settings. A failed append answers COORDINATOR_NOT_AVAILABLE and leaves the shard as the log
has it; a second runtime loading the same log has the same state; compaction keeps exactly
the live keys; groups are routed to the shard of their partition."""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from coterie.broker.groups import GroupRuntime, group_settings
from coterie.broker.offsets_topic import MemoryOffsetsLog
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.offsets.messages import CommitPartition, OffsetCommitRequest
from coterie.group.partitioning import partition_for

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
