"""Client-side assignors through a real coterie broker (coterie's KIP-848 extension APIs,
ConsumerGroupPrepareAssignment 32000 and ConsumerGroupInstallAssignment 32001).

coterie.client consumers with `group_client_assignor` ask for "client:<name>"; the coordinator
has one of them compute the target and install it. A deliberately lopsided assignor (every
subscriber but the first by member id gets one partition, the first gets the rest: neither
uniform nor range does that) makes the client's work recognisable in what librdkafka's
AdminClient describes. An assignor that answers garbage, or raises, makes the coordinator
fall back to its server-side assignor and the group still converges. A raw install that is
invalid is answered INVALID_REQUEST with a message naming the problem. A librdkafka member
(group.protocol=consumer, no assignor of its own) in such a group is assigned by the client
like anyone else, which also shows that ApiVersions with the extension keys does not upset it.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer as RdKafkaConsumer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v0.response import ConsumerGroupDescribeResponse
from kio.schema.consumer_group_heartbeat.v1.request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from coterie.assign.spec import AssignmentSpec, GroupAssignment, MemberAssignment
from coterie.client import Consumer, ConsumerRecord
from coterie.client.heartbeat_fields import new_member_id
from coterie.wire.extensions import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
    InstalledMember,
    InstalledTopicPartitions,
)
from tests.fixtures.reference_broker import REFERENCE_GROUP_SETTINGS
from tests.integration.clients import create_topics, make_records, produce
from tests.integration.group_clients import confluent_describe
from tests.integration.member_helpers import run
from tests.kafka_raw import RawConnection

SETTINGS = {**REFERENCE_GROUP_SETTINGS, "group.consumer.client.assignment.timeout.ms": "5000"}
FAST = {"retry_backoff_ms": 50, "retry_backoff_max_ms": 500, "request_timeout_ms": 15_000}
TP = tuple[str, int]


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Lopsided:
    """Valid but unlike any server assignor: per topic, every subscriber but the first (by
    member id) gets one partition, the first gets the rest."""

    name = "lopsided"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        out: dict[str, set[TP]] = {m: set() for m in spec.members}
        for topic, t in sorted(spec.topics.items()):
            subs = sorted(m for m, s in spec.members.items() if topic in s.subscribed_topics)
            if subs:
                out.update(lopsided(subs, topic, t.partitions, out))
        return GroupAssignment({m: MemberAssignment(frozenset(p)) for m, p in out.items()})


def lopsided(members: Sequence[str], topic: str, partitions: int,
             into: dict[str, set[TP]] | None = None) -> dict[str, set[TP]]:
    out = into if into is not None else {m: set() for m in members}
    left = list(range(partitions))
    for m in members[1:]:
        if left:
            out[m].add((topic, left.pop()))
    out[members[0]].update((topic, p) for p in left)
    return out


class Garbage:
    """Gives every partition to every member (each partition assigned many times)."""

    name = "garbage"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        every = frozenset((t, p) for t, ts in spec.topics.items() for p in range(ts.partitions))
        return GroupAssignment({m: MemberAssignment(every) for m in spec.members})


class Raising:
    name = "raising"
    cooperative = False

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        raise RuntimeError("this assignor always fails")


def ours(bootstrap: str, group: str, topics: Iterable[str], assignor: Any,
         label: str) -> Consumer:
    return Consumer(bootstrap, group, topics=list(topics), group_protocol="consumer",
                    group_client_assignor=assignor, auto_offset_reset="earliest",
                    client_id=label, metadata_max_age_ms=2000, **FAST)


async def consume_until(consumers: Sequence[Consumer], done: Any,
                        timeout: float = 60.0) -> set[tuple[str, int, int]]:
    """Poll every consumer until `done(seen)` holds; `seen` holds (topic, partition, offset)."""
    seen: set[tuple[str, int, int]] = set()
    deadline = time.monotonic() + timeout

    async def poll(c: Consumer) -> list[ConsumerRecord]:
        return await c.poll(timeout_ms=100)

    while not done(seen):
        assert time.monotonic() < deadline, (
            f"timed out: {len(seen)} records, assignments "
            f"{[sorted(c.assignment()) for c in consumers]}")
        for batch in await asyncio.gather(*(poll(c) for c in consumers)):
            seen.update((r.topic, r.partition, r.offset) for r in batch)
    return seen


def assignments(consumers: Sequence[Consumer]) -> dict[str, set[TP]]:
    return {c.member_id: {(tp.topic, tp.partition) for tp in c.assignment()} for c in consumers}


def described(bootstrap: str, group: str) -> tuple[str, str, dict[str, set[TP]]]:
    """(state, assignor, member id -> assigned partitions) as librdkafka's admin sees it."""
    d = confluent_describe(bootstrap, group)
    return d.state.name, d.partition_assignor, {
        m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        for m in d.members}


def wait_described(bootstrap: str, group: str, want: dict[str, set[TP]],
                   timeout: float = 30.0) -> tuple[str, str, dict[str, set[TP]]]:
    deadline = time.monotonic() + timeout
    seen: Any = None
    while time.monotonic() < deadline:
        seen = described(bootstrap, group)
        if seen[0] == "STABLE" and seen[2] == want:
            return seen
        time.sleep(0.25)
    raise AssertionError(f"describe shows {seen}, want STABLE with {want}")


def setup_topic(bootstrap: str, partitions: int, records: int) -> tuple[str, int]:
    topic = name("ca")
    create_topics(bootstrap, {topic: partitions})
    produce("confluent", bootstrap, make_records(topic, records, partitions, seed=7))
    return topic, records


# -- a client-side assignor assigns the group ------------------------------------------------------

def test_the_client_assignor_assigns_the_group_and_every_partition_is_consumed(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    topic, count = setup_topic(broker.bootstrap, 6, 60)
    group = name("g")

    async def body() -> None:
        consumers = [ours(broker.bootstrap, group, [topic], Lopsided(), f"c{i}")
                     for i in range(3)]
        for c in consumers:
            await c.start()
        try:
            ids = sorted(c.member_id for c in consumers)
            want = lopsided(ids, topic, 6)
            seen = await consume_until(
                consumers, lambda s: len(s) >= count and assignments(consumers) == want)
            assert {(t, p) for t, p, _ in seen} == {(topic, p) for p in range(6)}
            assert len(seen) == count
            _, assignor, _ = await asyncio.to_thread(
                wait_described, broker.bootstrap, group, want)
            assert assignor == "client:lopsided"
            installed = {c.member_id: c.member.assigner.installed for c in consumers}
            assert installed[ids[0]] >= 1  # the first by member id computed it
            assert all(n == 0 for mid, n in installed.items() if mid != ids[0])
        finally:
            for c in consumers:
                await c.close()

    run(body())


def test_a_librdkafka_member_is_assigned_by_the_client_assignor(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    topic, count = setup_topic(broker.bootstrap, 4, 40)
    group = name("g")
    rd_seen: set[tuple[str, int, int]] = set()
    rd_error: list[BaseException] = []
    stop = threading.Event()

    def rdkafka() -> None:
        c = RdKafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                             "client.id": "rdkafka", "group.protocol": "consumer",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            c.subscribe([topic])
            while not stop.is_set():
                for m in c.consume(num_messages=100, timeout=0.2):
                    if m.error() is not None:
                        raise RuntimeError(str(m.error()))
                    rd_seen.add((m.topic(), m.partition(), m.offset()))
        except BaseException as e:
            rd_error.append(e)
        finally:
            c.close()

    async def body() -> None:
        thread = threading.Thread(target=rdkafka, daemon=True)
        thread.start()
        consumers = [ours(broker.bootstrap, group, [topic], Lopsided(), f"c{i}")
                     for i in range(2)]
        for c in consumers:
            await c.start()
        try:
            def settled(seen: set[tuple[str, int, int]]) -> bool:
                return len(seen | rd_seen) >= count and not rd_error

            await consume_until(consumers, settled)
            members = (await asyncio.to_thread(described, broker.bootstrap, group))[2]
            assert len(members) == 3, members
            want = lopsided(sorted(members), topic, 4)
            _, assignor, _ = await asyncio.to_thread(
                wait_described, broker.bootstrap, group, want)
            assert assignor == "client:lopsided"
            assert not rd_error, rd_error
        finally:
            stop.set()
            for c in consumers:
                await c.close()
            await asyncio.to_thread(thread.join, 30)

    run(body())


# -- fallbacks ---------------------------------------------------------------------------------

def _balanced(view: dict[str, set[TP]], topic: str, partitions: int) -> bool:
    owned = [tp for parts in view.values() for tp in parts]
    sizes = sorted(len(p) for p in view.values())
    return (sorted(owned) == [(topic, p) for p in range(partitions)]
            and sizes[-1] - sizes[0] <= 1)


def test_an_assignor_that_answers_garbage_or_raises_leaves_the_group_to_the_fallback(
        coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    topic, count = setup_topic(broker.bootstrap, 6, 30)

    async def one(assignor: Any) -> None:
        group = name("g")
        consumers = [ours(broker.bootstrap, group, [topic], assignor, f"c{i}")
                     for i in range(2)]
        for c in consumers:
            await c.start()
        try:
            await consume_until(consumers, lambda s: len(s) >= count and _balanced(
                assignments(consumers), topic, 6))
            state, chosen, view = await asyncio.to_thread(described, broker.bootstrap, group)
            assert state == "STABLE" and _balanced(view, topic, 6)
            assert chosen == f"client:{assignor.name}"
            assert all(c.member.assigner.installed == 0 for c in consumers)
        finally:
            for c in consumers:
                await c.close()

    async def body() -> None:
        await one(Garbage())
        await one(Raising())

    run(body())


# -- the raw APIs ---------------------------------------------------------------------------------

def _heartbeat(conn: RawConnection, group: str, member_id: str, epoch: int,
               topic: str | None = None) -> Any:
    joining = epoch == 0
    conn.send(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=i32(epoch),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(
            milliseconds=30_000 if joining else -1)),
        subscribed_topic_names=(topic,) if joining else None,
        server_assignor="client:raw" if joining else None,
        topic_partitions=() if joining else None))
    return conn.recv(ConsumerGroupHeartbeatResponse)[1]


def _extension(conn: RawConnection, request: Any, response_cls: type) -> Any:
    corr = conn.send(request)
    got, body = conn.recv(response_cls)
    assert got == corr
    return body


def test_a_raw_invalid_install_is_answered_with_the_problem_and_the_group_falls_back(coterie):
    topic = name("raw")
    create_topics(coterie.bootstrap, {topic: 2})
    group = name("g")
    a, b = sorted(new_member_id() for _ in range(2))
    with RawConnection(coterie.host, coterie.port) as conn:
        keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in conn.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="0")).api_keys}
        assert keys[32000] == (0, 0) and keys[32001] == (0, 0)
        r = _heartbeat(conn, group, a, 0, topic)
        assert r.error_code == ErrorCode.none and r.member_epoch == 1  # bootstrap target
        r = _heartbeat(conn, group, b, 0, topic)
        assert r.error_code == ErrorCode.none and r.member_epoch == 1
        # B is not the chosen member (A is first by member id).
        p = _extension(conn, ConsumerGroupPrepareAssignmentRequest(
            group_id=group, member_id=b, member_epoch=i32(1)),
            ConsumerGroupPrepareAssignmentResponse)
        assert p.error_code == ErrorCode.unknown_member_id
        p = _extension(conn, ConsumerGroupPrepareAssignmentRequest(
            group_id=group, member_id=a, member_epoch=i32(1)),
            ConsumerGroupPrepareAssignmentResponse)
        assert p.error_code == ErrorCode.none and p.group_epoch == 2
        assert p.assignor_name == "raw"
        assert [(t.topic_name, t.num_partitions) for t in p.topics] == [(topic, 2)]
        topic_id = p.topics[0].topic_id
        assert sorted(m.member_id for m in p.members) == [a, b]
        both = (InstalledTopicPartitions(topic_id=topic_id, partitions=(i32(0), i32(1))),)
        i = _extension(conn, ConsumerGroupInstallAssignmentRequest(
            group_id=group, member_id=a, member_epoch=i32(1), group_epoch=i32(2), error=i8(0),
            members=(InstalledMember(member_id=a, partitions=both),
                     InstalledMember(member_id=b, partitions=both))),
            ConsumerGroupInstallAssignmentResponse)
        assert i.error_code == ErrorCode.invalid_request
        assert f"partition {topic}-0 is assigned twice" in i.error_message
        assert "falls back to the server-side assignor uniform" in i.error_message
        # The fallback's target is in place at once: the group is no longer assigning.
        conn.send(ConsumerGroupDescribeRequest(group_ids=(group,),
                                               include_authorized_operations=False))
        d = conn.recv(ConsumerGroupDescribeResponse)[1].groups[0]
        assert d.group_epoch == 2 and d.assignment_epoch == 2
        targets = {m.member_id: [(tp.topic_name, tuple(tp.partitions))
                                 for tp in m.target_assignment.topic_partitions]
                   for m in d.members}
        assert sorted(p for parts in targets.values() for _, ps in parts for p in ps) == [0, 1]
        assert all(len(parts) == 1 for parts in targets.values())
        # A is still a member in good standing: its heartbeat moves it to epoch 2.
        conn.send(ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=a, member_epoch=i32(1),
            topic_partitions=(TopicPartitions(topic_id=topic_id,
                                              partitions=(i32(0), i32(1))),)))
        r = conn.recv(ConsumerGroupHeartbeatResponse)[1]
        assert r.error_code == ErrorCode.none
