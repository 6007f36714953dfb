"""coterie.client's Consumer on the consumer group protocol (KIP-848, group_protocol="consumer")
against a real broker: alone it consumes every record and commits with its member epoch; in
one group with librdkafka (group.protocol=consumer) every partition has exactly one owner,
no partition is ever owned by two members at once (revocation before reassignment, measured
on one clock), members that leave are replaced promptly; close sends the leave heartbeat (the
coordinator drops the member at once, not after the session timeout); a member removed by
the coordinator loses its partitions and rejoins with the same member id; a commit with a
stale member epoch is retried with the current one; a static member
that closes keeps its place for a restart; a pattern is resolved by the coordinator
(SubscribedTopicRegex); an unknown server assignor is a typed error from poll().

Every test runs against the reference Kafka broker (marked `reference`; Kafka 4.2 speaks the
protocol out of the box) and against coterie once its broker advertises ConsumerGroupHeartbeat.
Timing assertions are relative to the broker's group.consumer.session.timeout.ms and
heartbeat interval (read from the test broker's settings; Kafka's defaults are 45 s and 5 s),
and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer as RdKafkaConsumer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode

from coterie.client import Consumer, ConsumerRecord, TopicPartition
from coterie.client.errors import CommitFailedError, UnsupportedAssignorError
from tests.integration import member_helpers
from tests.integration.clients import (
    Record,
    assert_same_records,
    create_topics,
    make_records,
    produce,
)
from tests.integration.group_clients import (
    TP,
    PollingThread,
    all_partitions,
    confluent_describe,
    wait_until_settled,
)
from tests.integration.member_helpers import Target, eventually, run
from tests.integration.rebalance_timeline import SteadyProducer, overlaps, ownership
from tests.kafka_raw import RawConnection

group_broker = member_helpers.group_broker

CONSUMER_GROUP_HEARTBEAT = 68
FAST = {"retry_backoff_ms": 50, "retry_backoff_max_ms": 500, "request_timeout_ms": 15_000}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def supports_consumer_protocol(target: Target) -> bool:
    with RawConnection(target.host, target.port) as conn:
        response = conn.request(ApiVersionsRequest(client_software_name="coterie-test",
                                                   client_software_version="0"))
    return any(int(k.api_key) == CONSUMER_GROUP_HEARTBEAT for k in response.api_keys)


def group_setting_s(target: Target, key: str, default_ms: int) -> float:
    """A group.consumer.* setting of the test broker, in seconds (Kafka's default if unset)."""
    config = getattr(target.handle, "config", None) or {}
    return int(config.get(key, default_ms)) / 1000


def session_timeout_s(target: Target) -> float:
    return group_setting_s(target, "group.consumer.session.timeout.ms", 45_000)


def heartbeat_interval_s(target: Target) -> float:
    return group_setting_s(target, "group.consumer.heartbeat.interval.ms", 5_000)


@pytest.fixture
def broker(group_broker: Target) -> Target:
    if group_broker.kind == "coterie" and not supports_consumer_protocol(group_broker):
        pytest.skip("coterie broker does not support ConsumerGroupHeartbeat yet")
    return group_broker


def ours(target: Target, group: str, **options: Any) -> Consumer:
    return Consumer(target.bootstrap, group, **{"group_protocol": "consumer",
                                                "auto_offset_reset": "earliest", **FAST,
                                                **options})


class Recorder:
    """A rebalance listener that stamps every callback on the monotonic clock."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, frozenset[TopicPartition]]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "assigned", partitions))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "revoked", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "lost", partitions))

    def kinds(self) -> list[str]:
        return [kind for _, kind, tps in self.events if tps or kind == "assigned"]


async def drain(c: Consumer, count: int, timeout: float = 60.0,
                settle: float = 0.0) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        assert time.monotonic() < deadline, f"{len(out)}/{count} records after {timeout}s"
        out += await c.poll(timeout_ms=200)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        out += await c.poll(timeout_ms=100)
    return out


def as_records(got: Iterable[ConsumerRecord]) -> list[Record]:
    return [Record(topic=r.topic, partition=r.partition, key=r.key or b"", value=r.value or b"",
                   headers=tuple((k, v or b"") for k, v in r.headers), timestamp=r.timestamp,
                   timestamp_type=r.timestamp_type, offset=r.offset) for r in got]


def ends(records: Sequence[Record]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for r in records:
        tp = TopicPartition(r.topic, r.partition)
        out[tp] = max(out.get(tp, 0), r.offset + 1)
    return out


# -- members in threads, on one clock -----------------------------------------------------------


class ThreadedMember(PollingThread):
    """A consumer-protocol member polling in its own thread: ours ("coterie") or librdkafka
    ("confluent"). Callbacks are incremental under this protocol (only what was added or
    revoked). `stop()` closes the client, which sends the leave heartbeat."""

    def __init__(self, kind: str, target: Target, group: str, topics: Sequence[str],
                 label: str, **options: Any) -> None:
        super().__init__(kind, label, incremental=True)
        self.target, self.group, self.topics = target, group, list(topics)
        self.options = options
        self.member_id = ""

    def _body(self) -> None:
        if self.kind == "coterie":
            asyncio.run(self._run_ours())
        else:
            self._run_rdkafka()

    async def _run_ours(self) -> None:
        state = self.state

        class Listener:
            def on_partitions_assigned(self, partitions: Any) -> None:
                state.assigned(partitions)

            def on_partitions_revoked(self, partitions: Any) -> None:
                state.revoked(partitions)

            on_partitions_lost = on_partitions_revoked

        consumer = ours(self.target, self.group, topics=self.topics, listener=Listener(),
                        client_id=self.label, metadata_max_age_ms=2000, **self.options)
        await consumer.start()
        self.member_id = consumer.member_id
        try:
            while not self._stop_event.is_set():
                batch = await consumer.poll(timeout_ms=200)
                # No await between poll() returning and the stamp: a revocation callback
                # (same event loop) cannot slip in between.
                self._record((r.topic, r.partition, r.offset, r.value or b"") for r in batch)
        finally:
            await consumer.close()

    def _run_rdkafka(self) -> None:
        consumer = RdKafkaConsumer({
            "bootstrap.servers": self.target.bootstrap, "group.id": self.group,
            "client.id": self.label, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 2000, **self.options})

        def on_assign(_c: Any, parts: list[Any]) -> None:
            self.state.assigned((p.topic, p.partition) for p in parts)

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            self.state.revoked((p.topic, p.partition) for p in parts)

        consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_revoke)
        try:
            while not self._stop_event.is_set():
                msgs = consumer.consume(num_messages=500, timeout=0.2)
                for m in msgs:
                    if m.error() is not None:
                        raise RuntimeError(f"librdkafka consumer error: {m.error()}")
                self._record((m.topic(), m.partition(), m.offset(), m.value() or b"")
                             for m in msgs)
        finally:
            consumer.close()


def deliveries_outside_ownership(member: ThreadedMember,
                                 owned: dict[TP, list[tuple[float, float, str]]]) -> list[str]:
    """Records `member` delivered at an instant it did not own their partition."""
    bad = []
    for d in member.deliveries():
        spans = [(s, e) for s, e, label in owned.get((d.topic, d.partition), [])
                 if label == member.label]
        if not any(s <= d.at <= e for s, e in spans):
            bad.append(f"{d.topic}-{d.partition}@{d.offset} at {d.at:.3f}")
    return bad


# -- tests ----------------------------------------------------------------------------------------


def test_alone_it_consumes_every_record_and_commits_with_its_member_epoch(
        broker: Target) -> None:
    topic, group = name("k848-alone"), name("k848-alone")
    create_topics(broker.bootstrap, {topic: 3})
    first = produce("confluent", broker.bootstrap, make_records(topic, 240, 3, seed=1))
    tps = [TopicPartition(topic, p) for p in range(3)]

    async def scenario() -> None:
        listener = Recorder()
        async with ours(broker, group, topics=[topic], auto_commit=False,
                        listener=listener) as c:
            got = await drain(c, len(first), settle=0.5)
            assert_same_records(first, as_records(got), "first run")
            assert c.assignment() == set(tps)
            assert c.generation_id > 0  # the member epoch the coordinator gave it
            assert len(c.member_id) == 22  # a client-generated base64url uuid
            # The interval is the broker's (group.consumer.heartbeat.interval.ms).
            assert c.member.heartbeat_interval_ms == heartbeat_interval_s(broker) * 1000
            assert await c.committed(tps) == dict.fromkeys(tps)
            await c.commit()  # OffsetCommit v9 with the member epoch
            assert await c.committed(tps) == ends(first)
        # Callbacks named exactly the partitions, revoked on close (after the commit).
        assert listener.kinds() == ["assigned", "revoked"]
        assert listener.events[0][2] == set(tps) == listener.events[-1][2]
        second = await asyncio.to_thread(
            produce, "confluent", broker.bootstrap, make_records(topic, 60, 3, seed=2))
        # Auto commit: a restart resumes after the commit, then commits on close.
        async with ours(broker, group, topics=[topic]) as c:
            got = await drain(c, len(second), settle=0.5)
            assert_same_records(second, as_records(got), "after the restart")
        async with ours(broker, group, topics=[topic], auto_commit=False) as c:
            assert await c.committed(tps) == ends(first + second)

    run(scenario(), timeout=120)


def test_with_librdkafka_one_owner_per_partition_revocation_first_prompt_takeover(
        broker: Target, capsys: Any) -> None:
    topic, group = name("k848-mixed"), name("k848-mixed")
    partitions = all_partitions(topic, 6)
    create_topics(broker.bootstrap, {topic: 6})
    producer = SteadyProducer(broker.bootstrap, topic, 6, interval=0.05)
    a = ThreadedMember("coterie", broker, group, [topic], "ours-a")
    b = ThreadedMember("coterie", broker, group, [topic], "ours-b")
    c = ThreadedMember("confluent", broker, group, [topic], "rdkafka-c")
    everyone = [a, b, c]
    producer.start()
    try:
        for m in everyone:
            m.start()
        settled = wait_until_settled(everyone, partitions, timeout=90, quiet=2.0)
        assert sorted(len(m.assignment) for m in everyone) == [2, 2, 2]  # uniform
        # Ours leaves: the leave heartbeat lets the coordinator reassign at once; the others
        # pick up the partitions at their next heartbeat (broker interval), long before the
        # session timeout would have expired.
        t_leave = time.monotonic()
        a.stop()
        wait_until_settled([b, c], partitions, timeout=40, quiet=1.0)
        takeover = max(m.last_change for m in (b, c)) - t_leave
        assert takeover < 0.75 * session_timeout_s(broker), takeover
        # librdkafka leaves: ours takes everything.
        c.stop()
        wait_until_settled([b], partitions, timeout=40, quiet=1.0)
        time.sleep(0.5)
    finally:
        for m in everyone:
            if m.is_alive():
                m.stop()
        producer.stop()
    owned = ownership(everyone, until=time.monotonic())
    # No instant at which two members owned one partition: revocation (callback) always
    # came before the partition's assignment elsewhere, across clients, on one clock.
    assert overlaps(owned) == []
    moved = {tp for tp in partitions if len({label for _, _, label in owned[tp]}) > 1}
    assert moved  # the leaves did move partitions, so the check above saw handovers
    # Ours never delivered a record of a partition it did not own at that instant.
    assert deliveries_outside_ownership(a, owned) == []
    assert deliveries_outside_ownership(b, owned) == []
    assert b.deliveries() and a.deliveries()
    with capsys.disabled():
        print(f"\n[{broker.kind}] consumer protocol, 2 x coterie.client + librdkafka, "
              f"6 partitions: settled in {settled:.1f} s; after ours left, the rest covered "
              f"every partition in {takeover:.1f} s")


def test_close_sends_the_leave_heartbeat(broker: Target) -> None:
    topic, group = name("k848-leave"), name("k848-leave")
    create_topics(broker.bootstrap, {topic: 4})

    async def scenario() -> None:
        a = ours(broker, group, topics=[topic], client_id="leaver")
        b = ours(broker, group, topics=[topic], client_id="stayer")
        await a.start()
        await b.start()
        try:
            await eventually(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2,
                             "2 + 2 partitions", 60)
            described = await asyncio.to_thread(confluent_describe, broker.bootstrap, group)
            assert sorted(m.client_id for m in described.members) == ["leaver", "stayer"]
            await a.close()
            t_closed = time.monotonic()
            # The coordinator dropped the member on the leave heartbeat, not on a timeout.
            described = await asyncio.to_thread(confluent_describe, broker.bootstrap, group)
            assert [m.client_id for m in described.members] == ["stayer"]
            assert time.monotonic() - t_closed < 5.0
            took = await eventually(lambda: len(b.assignment()) == 4, "the stayer takes all",
                                    30)
            assert took < 0.75 * session_timeout_s(broker)
        finally:
            await a.close()
            await b.close()

    run(scenario(), timeout=120)


def test_a_commit_with_a_stale_member_epoch_is_retried_with_the_current_one(
        broker: Target) -> None:
    topic, group = name("k848-stale"), name("k848-stale")
    create_topics(broker.bootstrap, {topic: 1})
    sent = produce("confluent", broker.bootstrap, make_records(topic, 10, 1, seed=8))
    tp = TopicPartition(topic, 0)

    async def scenario() -> None:
        async with ours(broker, group, topics=[topic], auto_commit=False) as c:
            await drain(c, len(sent))
            epoch = c.generation_id
            wrong = {"generation_id": epoch + 1, "member_id": c.member_id,
                     "group_instance_id": None}
            # The coordinator refuses an epoch other than the member's current one...
            with pytest.raises(CommitFailedError, match="STALE_MEMBER_EPOCH"):
                await c._offsets.commit({tp: 3}, **wrong)
            assert (await c.committed([tp]))[tp] is None
            # ...and the consumer's own commits retry with the epoch the member holds (as
            # after a heartbeat answer it had not seen yet when it committed).
            await c._offsets.commit({tp: 7}, **wrong, renew=c.member.renewed_identity)
            assert (await c.committed([tp]))[tp] == 7
            assert c.generation_id == epoch

    run(scenario(), timeout=60)


def raw_leave_for(target: Target, group: str, member_id: str) -> int:
    """A leave heartbeat on another member's behalf (the coordinator does not check who
    asks): the member is removed from the group, as if its session had expired."""
    with RawConnection(target.host, target.port) as conn:
        response = conn.request(ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=-1, instance_id=None,
            rack_id=None, rebalance_timeout=datetime.timedelta(milliseconds=-1),
            subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=None))
        return int(response.error_code)


def test_a_removed_member_loses_its_partitions_and_rejoins_with_the_same_id(
        broker: Target) -> None:
    topic, group = name("k848-fenced"), name("k848-fenced")
    create_topics(broker.bootstrap, {topic: 2})
    first = produce("confluent", broker.bootstrap, make_records(topic, 40, 2, seed=3))

    async def scenario() -> None:
        listener = Recorder()
        async with ours(broker, group, topics=[topic], listener=listener) as c:
            await drain(c, len(first))
            member_id, epoch = c.member_id, c.generation_id
            assert epoch > 0
            assert await asyncio.to_thread(raw_leave_for, broker, group, member_id) == \
                ErrorCode.none
            # Its next heartbeat answers UNKNOWN_MEMBER_ID: partitions lost, then a rejoin
            # with epoch 0 and the same member id gets them back.
            await eventually(lambda: "lost" in listener.kinds(), "the partitions lost", 30)
            await eventually(lambda: listener.kinds()[-1] == "assigned" and len(
                c.assignment()) == 2 and c.generation_id > 0, "the rejoin", 30)
            assert c.member_id == member_id
            assert listener.kinds() == ["assigned", "lost", "assigned"]
            assert c.error is None
            more = await asyncio.to_thread(produce, "confluent", broker.bootstrap,
                                           make_records(topic, 20, 2, seed=4))
            # Positions restart from the last commit (the lost partitions were not committed
            # on the way out), so older records may come again before the new ones.
            wanted = {(r.topic, r.partition, r.offset) for r in more}
            seen: set[tuple[str, int, int]] = set()
            deadline = time.monotonic() + 30
            while not wanted <= seen:
                assert time.monotonic() < deadline, sorted(wanted - seen)[:5]
                seen |= {(r.topic, r.partition, r.offset) for r in await c.poll(200)}

    run(scenario(), timeout=120)


def test_a_static_member_keeps_its_partitions_across_a_quick_restart(broker: Target) -> None:
    topic, group = name("k848-static"), name("k848-static")
    create_topics(broker.bootstrap, {topic: 4})

    async def scenario() -> None:
        other = ours(broker, group, topics=[topic])
        static = ours(broker, group, topics=[topic], group_instance_id="static-1")
        await other.start()
        await static.start()
        try:
            await eventually(lambda: len(other.assignment()) == 2 and len(
                static.assignment()) == 2, "2 + 2 partitions", 60)
            held, first_id = static.assignment(), static.member_id
            await static.close()  # epoch -2: the coordinator keeps its place and partitions
            t_closed = time.monotonic()
            # Several heartbeats of the other member, well within the session timeout: had
            # the static member left for good, its partitions would have moved by now.
            await asyncio.sleep(min(session_timeout_s(broker) / 3,
                                    3 * heartbeat_interval_s(broker) + 0.5))
            assert len(other.assignment()) == 2
            static = ours(broker, group, topics=[topic], group_instance_id="static-1")
            await static.start()
            await eventually(lambda: static.assignment() == held, "the same partitions", 30)
            assert time.monotonic() - t_closed < session_timeout_s(broker)
            assert static.member_id != first_id  # a new process, a new member id
            assert len(other.assignment()) == 2
        finally:
            await static.close()
            await other.close()

    run(scenario(), timeout=120)


def test_a_pattern_is_resolved_by_the_coordinator(broker: Target) -> None:
    base = name("k848-pat")
    early, other, outside = f"{base}-a", f"{base}-b", f"x-{base}-a"
    create_topics(broker.bootstrap, {early: 1, other: 2, outside: 1})
    sent = produce("confluent", broker.bootstrap,
                   make_records(early, 10, 1, seed=5) + make_records(other, 20, 2, seed=6))
    produce("confluent", broker.bootstrap, make_records(outside, 10, 1, seed=7))

    async def scenario() -> None:
        async with ours(broker, name("k848-pat"), pattern=f"{base}-.*") as c:
            got = await drain(c, len(sent), settle=0.5)
            assert_same_records(sent, as_records(got), "the matching topics")
            assert c.assignment() == {TopicPartition(early, 0), TopicPartition(other, 0),
                                      TopicPartition(other, 1)}

    run(scenario(), timeout=90)


def test_a_literal_topic_is_assigned_before_the_topics_a_regex_matches(broker: Target) -> None:
    """librdkafka subscribing to a literal topic and a regex: the coordinator resolves a
    regex after answering the heartbeat that brings it (asynchronously, as Kafka does), so
    the literal topic's partitions come first and the matched topics' in a later epoch, in a
    second assignment callback. librdkafka's own tests count on that order."""
    base = name("k848-rx")
    literal, first, second = f"{base}-lit", f"{base}-pfx-a", f"{base}-pfx-b"
    create_topics(broker.bootstrap, {literal: 2, first: 1, second: 2})
    want_literal = {(literal, 0), (literal, 1)}
    want_regex = {(first, 0), (second, 0), (second, 1)}
    steps: list[set[TP]] = []
    consumer = RdKafkaConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": name("k848-rx"),
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
        "enable.auto.commit": False})

    def on_assign(_c: Any, parts: list[Any]) -> None:
        steps.append({(p.topic, p.partition) for p in parts})

    consumer.subscribe([literal, f"^{base}-pfx-.*"], on_assign=on_assign)
    try:
        deadline = time.monotonic() + 60
        while set().union(*steps) != want_literal | want_regex:
            assert time.monotonic() < deadline, steps
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert steps[0] == want_literal, steps
    assert set().union(*steps[1:]) == want_regex, steps


def test_the_server_assignor_is_asked_for_and_an_unknown_one_is_fatal(broker: Target) -> None:
    topic = name("k848-assignor")
    create_topics(broker.bootstrap, {topic: 2})

    async def scenario() -> None:
        async with ours(broker, name("k848-range"), topics=[topic],
                        group_remote_assignor="range") as c:
            await eventually(lambda: len(c.assignment()) == 2, "range assigned both", 30)
        async with ours(broker, name("k848-nope"), topics=[topic],
                        group_remote_assignor="no-such-assignor") as c:
            with pytest.raises(UnsupportedAssignorError, match="UNSUPPORTED_ASSIGNOR"):
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    await c.poll(timeout_ms=200)
            assert c.assignment() == set()

    run(scenario(), timeout=60)
