"""Mixed groups with real clients: an online upgrade and downgrade (seed 3, KIP-848).

kafka-python consumers (classic protocol, JoinGroup/SyncGroup/Heartbeat) form a classic
group; librdkafka consumers with `group.protocol=consumer` then join it one by one, the first
converting it into a consumer group in which the classic members live on; when the
consumer-protocol members close, the group converts back to a classic group of the
kafka-python members. Ownership is observed through each client's rebalance callbacks.

Runs against coterie and (marked `reference`) the reference Apache Kafka 4.2.1 broker, whose
default group.consumer.migration.policy is bidirectional, with the same group settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupType
from kio.schema.errors import ErrorCode

from coterie.broker.config import BrokerConfig
from coterie.broker.server import Broker
from coterie.group import ConsumerHeartbeatRequest, DescribeGroupRequest
from coterie.group import JoinGroupRequest as ClassicJoin
from coterie.group import SyncGroupRequest as ClassicSync
from coterie.wire.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from tests.integration import member_helpers
from tests.integration.clients import broker_log_on_failure, create_topics, make_records, produce
from tests.integration.failing_log import FullDiskSwitch, ask
from tests.integration.group_clients import (
    GroupMember,
    ThreadedConsumer,
    all_partitions,
    confluent_describe,
    wait_until_settled,
)
from tests.integration.member_helpers import Target, raw_describe
from tests.integration.test_consumer_groups_848 import SETTINGS, NextGenConsumer, _member_id

group_broker = member_helpers.group_broker

PARTITIONS = 6
SETTLE_S = 60.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wait(what: str, probe: Any, timeout: float = 30.0) -> Any:
    """Poll `probe()` (returns (ok, detail)) until ok; fail with the last detail."""
    deadline = time.monotonic() + timeout
    detail: Any = None
    while time.monotonic() < deadline:
        try:
            ok, detail = probe()
        except Exception as e:  # a describe refused while the group converts: try again
            ok, detail = False, repr(e)
        if ok:
            return detail
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout}s; last seen {detail}")


def _described_as_consumer(target: Target, group: str, labels: set[str]) -> Any:
    """Wait until ConsumerGroupDescribe (confluent's AdminClient) shows a consumer group
    whose members are exactly `labels` (by client.id)."""
    def probe() -> tuple[bool, Any]:
        d = confluent_describe(target.bootstrap, group)
        seen = (d.type, sorted(m.client_id for m in d.members))
        return d.type == ConsumerGroupType.CONSUMER and set(seen[1]) == labels, seen
    return _wait(f"{group} described as a consumer group of {sorted(labels)}", probe)


def _delivered(members: Sequence[GroupMember]) -> Counter[tuple[int, int]]:
    return Counter((d.partition, d.offset) for m in members for d in m.deliveries())


@pytest.mark.parametrize("strategy", ["cooperative-sticky"])
def test_online_upgrade_and_downgrade(group_broker: Target, strategy: str) -> None:
    """Two kafka-python classic consumers; two librdkafka consumer-protocol members join one
    by one (the first upgrades the group): after each step every partition is owned exactly
    once, and ConsumerGroupDescribe shows a consumer group with every member, classic ones
    included. No record produced along the way is lost, and records produced once the
    four-member group has settled are each consumed exactly once, by the owner of their
    partition. Then the consumer-protocol members close: the group is classic again
    (DescribeGroups: Stable, protocol type consumer, the kafka-python members), and keeps
    every partition owned exactly once."""
    target = group_broker
    topic, group = _name("mixed-up"), _name("g")
    create_topics(target.bootstrap, {topic: PARTITIONS})
    partitions = all_partitions(topic, PARTITIONS)
    classic = [ThreadedConsumer("kafka_python", target.bootstrap, group, [topic], f"kp{i}",
                                strategy) for i in (1, 2)]
    nextgen = [NextGenConsumer(target.bootstrap, group, [topic], f"ng{i}") for i in (1, 2)]
    started: list[Any] = []
    acked: list[Any] = []
    log_text = getattr(target.handle, "log_text", lambda: "")
    with broker_log_on_failure(log_text):
        try:
            # One after the other: when two kafka-python 3.0.12 consumers join an empty group
            # within milliseconds, one of them now and then (about 1 run in 7, on coterie as at
            # the landed commit before issue 10) never leaves `ensure_coordinator_ready` after
            # a successful SyncGroup: its consumer thread waits for a coroutine its IO thread
            # never runs, and it sends nothing but Metadata until its session expires. This
            # scenario is about the upgrade and downgrade, not that client race.
            for m in classic:
                m.start()
                started.append(m)
                wait_until_settled(started, partitions, timeout=SETTLE_S)
            d = raw_describe(target, group)
            assert (d.error_code, d.group_state, d.protocol_type) == (
                ErrorCode.none, "Stable", "consumer")
            acked += produce("kafka_python", target.bootstrap,
                             make_records(topic, 300, PARTITIONS, seed=1))

            # Online upgrade, one consumer-protocol member at a time.
            for i, member in enumerate(nextgen):
                member.start()
                started.append(member)
                everyone = classic + nextgen[:i + 1]
                wait_until_settled(everyone, partitions, timeout=SETTLE_S)
                _described_as_consumer(target, group, {m.label for m in everyone})
                acked += produce("kafka_python", target.bootstrap,
                                 make_records(topic, 300, PARTITIONS, seed=2 + i))

            everyone = classic + nextgen
            wait_until_settled(everyone, partitions, timeout=SETTLE_S)
            owner = {tp[1]: m.label for m in everyone for tp in m.assignment}
            late = produce("kafka_python", target.bootstrap,
                           make_records(topic, 600, PARTITIONS, seed=9))
            acked += late
            wanted = Counter((r.partition, r.offset) for r in acked)
            _wait("every acknowledged record consumed",
                  lambda: (not (wanted.keys() - _delivered(everyone).keys()),
                           len(wanted.keys() - _delivered(everyone).keys())))
            lost = wanted.keys() - _delivered(everyone).keys()
            assert not lost, f"{len(lost)} records never consumed"
            # Settled group, no rebalance meanwhile: the late records exactly once each, by
            # the member that owns the partition.
            assert {tp[1]: m.label for m in everyone for tp in m.assignment} == owner
            late_keys = {(r.partition, r.offset) for r in late}
            by_member = [(d.member, d.partition, d.offset) for m in everyone
                         for d in m.deliveries() if (d.partition, d.offset) in late_keys]
            counts = Counter((p, o) for _, p, o in by_member)
            assert set(counts) == late_keys and set(counts.values()) == {1}, (
                f"late records consumed more than once: "
                f"{sorted(k for k, n in counts.items() if n > 1)[:10]}")
            assert all(owner[p] == who for who, p, _ in by_member)

            # Online downgrade: the consumer-protocol members close.
            for member in nextgen:
                member.stop()
                started.remove(member)
            wait_until_settled(classic, partitions, timeout=SETTLE_S)
            ids = {m.member_id() for m in classic}

            def classic_again() -> tuple[bool, Any]:
                d = raw_describe(target, group)
                seen = (d.error_code, d.group_state, d.protocol_type,
                        sorted(x.member_id for x in d.members))
                return seen == (ErrorCode.none, "Stable", "consumer", sorted(ids)), seen
            _wait(f"{group} a Stable classic group of the kafka-python members", classic_again)
            desc = confluent_describe(target.bootstrap, group)
            assert desc.type == ConsumerGroupType.CLASSIC
            assert sorted(m.client_id for m in desc.members) == ["kp1", "kp2"]
            wait_until_settled(classic, partitions, timeout=SETTLE_S)
        finally:
            for m in started:
                with contextlib.suppress(AssertionError):
                    m.stop()


def test_conversions_that_cannot_be_written_change_nothing(tmp_path: Any) -> None:
    """In-process broker, appends to __consumer_offsets failing for a moment: an online
    upgrade whose records cannot be written is answered COORDINATOR_NOT_AVAILABLE and the
    classic group is back as the log holds it (no consumer group); an online downgrade that
    cannot be written leaves the consumer group as the log holds it (no classic group). Once
    writes work again, both conversions go through."""
    async def scenario() -> None:
        broker = Broker(BrokerConfig.load("127.0.0.1", 0, tmp_path / "d", overrides=SETTINGS))
        runtime = broker.groups
        runtime.log = disk = FullDiskSwitch(runtime.log)

        def group_type() -> str | None:
            group = runtime.group("g")
            return None if group is None else group.group_type

        def described() -> Any:
            return runtime.handle(DescribeGroupRequest("g", 5))

        def beat(member_id: str, epoch: int) -> Any:
            req = ConsumerHeartbeatRequest(
                group_id="g", member_id=member_id, member_epoch=epoch,
                rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned=(),
            ) if epoch == 0 else ConsumerHeartbeatRequest(
                group_id="g", member_id=member_id, member_epoch=epoch)
            return runtime.handle(req)

        try:
            await runtime.load()
            broker.create_topic("t", 4, {})
            meta = encode_subscription(Subscription(topics=("t",)))
            joined = await ask(runtime, ClassicJoin(
                group_id="g", member_id="", protocol_type="consumer",
                protocols=(("range", meta),), session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000, require_known_member_id=False))
            assert joined.error == ErrorCode.none
            classic_id = joined.member_id
            everything = encode_assignment(Assignment(frozenset(("t", p) for p in range(4))))
            synced = await ask(runtime, ClassicSync(
                group_id="g", generation_id=joined.generation_id, member_id=classic_id,
                assignments=((classic_id, everything),)))
            assert synced.error == ErrorCode.none
            classic_before = described()

            nextgen = _member_id()
            disk.full = True
            assert beat(nextgen, 0).error == ErrorCode.coordinator_not_available
            assert group_type() == "classic"
            assert group_type() != "consumer"
            assert described() == classic_before
            disk.full = False
            upgraded = beat(nextgen, 0)
            assert upgraded.error == ErrorCode.none
            assert group_type() == "consumer"
            assert set(runtime.group("g").members) == {classic_id, nextgen}

            consumer_before = runtime.group("g").snapshot()
            disk.full = True
            assert beat(nextgen, -1).error == ErrorCode.coordinator_not_available
            assert group_type() == "consumer"
            assert group_type() != "classic"
            assert runtime.group("g").snapshot() == consumer_before
            disk.full = False
            assert beat(nextgen, -1).error == ErrorCode.none
            assert group_type() == "classic"
            assert set(runtime.group("g").members) == {classic_id}
        finally:
            runtime.close()
            broker.logs.close()

    asyncio.run(scenario())
