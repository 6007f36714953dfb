"""coterie.client's Consumer against a real broker: every record exactly once with manual
commits and a restart that resumes from them, auto commit on an interval and on close, a
pattern subscription that picks up a topic created later, batches from real producers in
every codec, a commit from a generation the group left (CommitFailedError, then the
partitions are lost and come back), and an assignment the member cannot decode (an error
from poll(), not a crash loop).

Each test runs against coterie and, marked `reference`, against Apache Kafka (the codec test
only against coterie: the reference broker stores the same bytes).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from coterie.client import Consumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from coterie.client.errors import AssignmentError, ClientError, CommitFailedError
from coterie.wire.consumer_protocol import Subscription, encode_subscription
from tests.integration import member_helpers
from tests.integration.clients import (
    CODECS,
    Record,
    assert_same_records,
    create_topics,
    make_records,
    produce,
)
from tests.integration.group_clients import RawMember
from tests.integration.member_helpers import Target, eventually, raw_impersonate, run

group_broker = member_helpers.group_broker

FAST = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500,
        "rebalance_timeout_ms": 15_000, "retry_backoff_ms": 50, "retry_backoff_max_ms": 500}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consumer(target: Target, group: str, **options: Any) -> Consumer:
    options.setdefault("topics", None if "pattern" in options else [])
    return Consumer(target.bootstrap, group, **{"auto_offset_reset": "earliest", **FAST,
                                                **options})


def as_record(r: ConsumerRecord) -> Record:
    return Record(topic=r.topic, partition=r.partition, key=r.key or b"",
                  value=r.value or b"", headers=tuple((k, v or b"") for k, v in r.headers),
                  timestamp=r.timestamp, timestamp_type=r.timestamp_type, offset=r.offset)


async def drain(c: Consumer, count: int, timeout: float = 30.0,
                settle: float = 0.0) -> list[ConsumerRecord]:
    """Poll until `count` records arrived (then `settle` more seconds, to catch extras)."""
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        assert time.monotonic() < deadline, f"{len(out)}/{count} records after {timeout}s"
        out += await c.poll(timeout_ms=200)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        out += await c.poll(timeout_ms=100)
    return out


def ends(records: Sequence[Record]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for r in records:
        tp = TopicPartition(r.topic, r.partition)
        out[tp] = max(out.get(tp, 0), r.offset + 1)
    return out


def test_every_record_once_with_manual_commits_and_a_restart_resumes(
        group_broker: Target) -> None:
    topic, group = name("manual"), name("manual")
    create_topics(group_broker.bootstrap, {topic: 3})
    first = produce("confluent", group_broker.bootstrap, make_records(topic, 240, 3, seed=1))
    tps = [TopicPartition(topic, p) for p in range(3)]

    async def scenario() -> None:
        async with consumer(group_broker, group, topics=[topic], auto_commit=False) as c:
            got = await drain(c, len(first), settle=0.5)
            assert_same_records(first, [as_record(r) for r in got], "first run")
            assert await c.committed(tps) == dict.fromkeys(tps)  # nothing committed yet
            await c.commit()
            assert await c.committed(tps) == ends(first)
            assert {tp: await c.position(tp) for tp in tps} == ends(first)
        second = await asyncio.to_thread(
            produce, "kafka_python", group_broker.bootstrap, make_records(topic, 90, 3, seed=2))
        async with consumer(group_broker, group, topics=[topic], auto_commit=False) as c:
            got = await drain(c, len(second), settle=0.5)
            assert_same_records(second, [as_record(r) for r in got], "after the restart")
            await c.commit({(topic, 0): 1})  # explicit offsets: rewind partition 0
            assert (await c.committed([(topic, 0)]))[TopicPartition(topic, 0)] == 1

    run(scenario(), timeout=90)


def test_auto_commit_on_the_interval_and_on_close(group_broker: Target) -> None:
    topic, group = name("auto"), name("auto")
    create_topics(group_broker.bootstrap, {topic: 2})
    first = produce("confluent", group_broker.bootstrap, make_records(topic, 100, 2, seed=3))
    tps = [TopicPartition(topic, p) for p in range(2)]

    async def scenario() -> None:
        async with consumer(group_broker, group, topics=[topic],
                            auto_commit_interval_ms=300) as c:
            await drain(c, len(first))
            # No commit() call: the interval commits the positions.
            deadline = time.monotonic() + 15
            while await c.committed(tps) != ends(first):
                assert time.monotonic() < deadline, await c.committed(tps)
                await asyncio.sleep(0.1)
        more = await asyncio.to_thread(produce, "confluent", group_broker.bootstrap,
                                       make_records(topic, 20, 2, seed=4))
        # An interval that never fires here: closing commits.
        async with consumer(group_broker, group, topics=[topic],
                            auto_commit_interval_ms=600_000) as c:
            got = await drain(c, len(more), settle=0.3)
            assert_same_records(more, [as_record(r) for r in got], "after the first close")
        async with consumer(group_broker, group, topics=[topic]) as c:
            assert await c.committed(tps) == ends(first + more)

    run(scenario(), timeout=90)


def test_a_pattern_subscription_picks_up_a_topic_created_later(group_broker: Target) -> None:
    base = name("pat")
    early, late, outside = f"{base}-early", f"{base}-late", f"x-{base}-late"
    create_topics(group_broker.bootstrap, {early: 1, outside: 1})
    produce("confluent", group_broker.bootstrap,
            make_records(early, 10, 1, seed=5) + make_records(outside, 10, 1, seed=6))

    async def scenario() -> None:
        async with consumer(group_broker, name("pat"), pattern=f"{base}-.*",
                            metadata_max_age_ms=500) as c:
            got = await drain(c, 10, settle=0.3)
            assert {r.topic for r in got} == {early}
            assert c.subscription() == {early}
            await asyncio.to_thread(create_topics, group_broker.bootstrap, {late: 2})
            records = await asyncio.to_thread(produce, "confluent", group_broker.bootstrap,
                                              make_records(late, 30, 2, seed=7))
            got = await drain(c, 30, settle=0.3)
            assert_same_records(records, [as_record(r) for r in got], "the late topic")
            assert c.subscription() == {early, late}
            assert c.assignment() == {TopicPartition(early, 0), TopicPartition(late, 0),
                                      TopicPartition(late, 1)}

    run(scenario(), timeout=90)


def test_the_leader_rebalances_when_a_subscribed_topic_grows(group_broker: Target) -> None:
    topic, group = name("grow"), name("grow")
    create_topics(group_broker.bootstrap, {topic: 2})

    async def scenario() -> None:
        members = [consumer(group_broker, group, topics=[topic], metadata_max_age_ms=300)
                   for _ in range(2)]
        for c in members:
            await c.start()
        try:
            def owned() -> list[TopicPartition]:
                return sorted(tp for c in members for tp in c.assignment())

            await eventually(lambda: len(owned()) == 2 and all(
                c.assignment() for c in members), "2 partitions on 2 consumers", 30)
            generation = members[0].generation_id
            admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
            await asyncio.to_thread(lambda: admin.create_partitions(
                [NewPartitions(topic, 4)])[topic].result(30))
            await eventually(lambda: owned() == [TopicPartition(topic, p) for p in range(4)],
                             "the new partitions to be assigned", 30)
            assert members[0].generation_id > generation
            assert sorted(len(c.assignment()) for c in members) == [2, 2]
        finally:
            for c in members:
                await c.close()

    run(scenario(), timeout=60)


def test_batches_of_every_codec_from_real_producers(coterie_factory: Callable[..., Any]) -> None:
    broker = coterie_factory()
    topic = name("codecs")
    create_topics(broker.bootstrap, {topic: 2})
    sent: list[Record] = []
    for i, codec in enumerate(CODECS):
        batch = make_records(topic, 40, 2, seed=10 + i, compressible=True)
        sent += produce("confluent", broker.bootstrap, batch, {"compression.type": codec})
        batch = make_records(topic, 40, 2, seed=20 + i, compressible=True)
        sent += produce("kafka_python", broker.bootstrap, batch, {"compression_type": codec})
    target = Target("coterie", broker.host, broker.port, broker)

    async def scenario() -> None:
        async with consumer(target, name("codecs"), topics=[topic], auto_commit=False,
                            max_poll_records=7) as c:
            got = await drain(c, len(sent), settle=0.3)
            assert_same_records(sent, [as_record(r) for r in got], "codecs")
            assert len(got) == len(sent)

    run(scenario(), timeout=90)


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("lost", partitions))


def test_a_commit_from_a_generation_the_group_left_fails_then_partitions_are_lost(
        group_broker: Target) -> None:
    topic, group = name("fenced"), name("fenced")
    create_topics(group_broker.bootstrap, {topic: 2})
    records = produce("confluent", group_broker.bootstrap, make_records(topic, 20, 2, seed=8))
    listener = Recorder()
    tps = frozenset(TopicPartition(topic, p) for p in range(2))

    async def scenario() -> None:
        async with consumer(group_broker, group, topics=[topic], auto_commit=False,
                            listener=listener, session_timeout_ms=10_000,
                            heartbeat_interval_ms=3_000) as c:
            await drain(c, 20)
            old = c.generation_id
            # The group moves on without this consumer noticing yet: another JoinGroup +
            # SyncGroup under its member id completes generation old + 1.
            sub = encode_subscription(Subscription((topic,)))
            error, new = await asyncio.to_thread(raw_impersonate, group_broker, group,
                                                 c.member_id, "consumer", [("range", sub)])
            assert (error, new) == (0, old + 1)
            with pytest.raises(CommitFailedError, match="ILLEGAL_GENERATION"):
                await c.commit()
            # The next heartbeat says ILLEGAL_GENERATION: partitions lost, rejoin, regained.
            await eventually(lambda: c.generation_id > new, "a new generation", 20)
            assert listener.calls == [("assigned", tps), ("lost", tps), ("assigned", tps)]
            # Nothing was committed: the regained partitions start over from the beginning.
            again = await drain(c, len(records), settle=0.3)
            assert_same_records(records, [as_record(r) for r in again], "after the loss")
            await c.commit()
            assert await c.committed(tps) == ends(records)

    run(scenario(), timeout=60)


def test_an_undecodable_assignment_is_an_error_not_a_crash_loop(group_broker: Target) -> None:
    topic, group = name("garbage"), name("garbage")
    create_topics(group_broker.bootstrap, {topic: 2})
    sub = encode_subscription(Subscription((topic,)))
    leader = RawMember(group_broker.host, group_broker.port, group, "consumer",
                       [("range", sub)], lambda me, members: {
                           m: b"\x00\x03 not an assignment" for m, _ in members},
                       label="garbage-leader")
    leader.start()

    async def scenario() -> None:
        await eventually(lambda: leader.current is not None, "the raw leader's generation", 30)
        c = consumer(group_broker, group, topics=[topic])
        await c.start()
        try:
            with pytest.raises(AssignmentError, match="could not be used") as failed:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    await c.poll(timeout_ms=200)
            with pytest.raises(AssignmentError):  # reported again, not retried
                await c.poll(timeout_ms=0)
            found = re.search(r"generation (\d+)", str(failed.value))
            assert found, str(failed.value)
            failing = int(found.group(1))
            await asyncio.sleep(2.0)
            # The consumer left once (one more generation, for the leader alone); it did
            # not rejoin to fail again and again. Counted by generation number, not by how
            # many the raw leader has recorded so far: its own record of the failing
            # generation may still be on its way.
            assert max(g.generation for g in leader.generations) <= failing + 1
            assert c.member.state.value == "failed"
        finally:
            await c.close()
        with pytest.raises(ClientError):
            await c.poll(timeout_ms=0)

    try:
        run(scenario(), timeout=60)
    finally:
        leader.stop()
