"""Topic, group and cluster-wide broker configs, and retention, on a three-broker cluster
(issue 24, point 1).

A topic's configs, a group's, and the cluster-wide broker configs live in the database:
AlterConfigs through one broker is what every broker describes and applies. Retention is
decided and done in the database by the partition's leader, so what it deleted stays
deleted when the leader dies and another broker copies the partition from the database; so
is compaction (the leader's cleaner pass is done to the rows before its copy).
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kio.schema.errors import ErrorCode

from coterie.storage import topics as topic_rows
from coterie.storage.database import Database
from tests.cluster.test_cluster_clients import (
    admin,
    coordinator_of,
    create,
    leaders,
    wait_for_leaders,
)
from tests.fixtures.coterie_cluster import LEASE_MS, CoterieCluster, wait_until
from tests.integration.test_describe_configs import (
    GROUP,
    GROUP_SOURCE,
    _by_name,
    _describe,
    _eventually,
    _heartbeat_interval,
    _raw_alter,
    _retried_heartbeat,
)
from tests.integration.test_internal_topics import delete_by_name, grow
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(240)

HOUR_MS = 3_600_000
BROKER = 4  # ConfigResource type
DYNAMIC_DEFAULT = 3  # ConfigSource DYNAMIC_DEFAULT_BROKER_CONFIG


def admin_of(cluster: CoterieCluster, node_id: int) -> AdminClient:
    """An admin client that bootstraps from one broker only."""
    return AdminClient({"bootstrap.servers": cluster.broker(node_id).bootstrap})


def described(cluster: CoterieCluster, node_id: int, topic: str) -> dict[str, str]:
    """A topic's configs as broker `node_id` describes them (non-default ones only)."""
    a = admin_of(cluster, node_id)  # kept until the answer came: a destroyed client cancels
    (future,) = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return {name: e.value for name, e in future.result(30).items() if not e.is_default}


def watermarks(cluster: CoterieCluster, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def _created_quietly(cluster: CoterieCluster, name: str) -> None:
    """A topic created in the database the way another broker would, without the NOTIFY
    that would tell the brokers at once: they learn of it at their next round only."""
    async def create() -> None:
        db = await Database.connect(cluster.uri)
        try:
            await topic_rows.create_topic(db, name, 1)
        finally:
            await db.close()
    asyncio.run(create())


def test_admin_requests_about_a_topic_another_broker_just_created_are_answered(
        coterie_cluster):
    """Kafka's controller knows a topic from the moment its creation is acknowledged, so the
    next AlterConfigs, DescribeConfigs, CreatePartitions or DeleteTopics, whichever broker it
    reaches, finds it. A coterie broker that has not yet heard of the topic reads the
    database's topics before answering UNKNOWN_TOPIC_OR_PARTITION (it did not: a CI run
    failed on it). Each request is sent right after the topic's row is written, well inside
    a round (a third of the lease time)."""
    cluster = coterie_cluster
    one, two, three = (cluster.broker(n) for n in (1, 2, 3))
    with RawConnection(one.host, one.port) as c1, RawConnection(two.host, two.port) as c2, \
            RawConnection(three.host, three.port) as c3:
        _created_quietly(cluster, "quiet-alter")
        altered = _raw_alter(c1, 2, "quiet-alter", ("retention.ms", "7200000", 0))
        assert altered.error_code == ErrorCode.none, altered.error_message

        _created_quietly(cluster, "quiet-describe")
        described_now = _describe(c2, 2, "quiet-describe")
        assert described_now.error_code == ErrorCode.none, described_now.error_message

        _created_quietly(cluster, "quiet-grow")
        grown = grow(c3, "quiet-grow", 3)
        assert grown.error_code == ErrorCode.none, grown.error_message

        _created_quietly(cluster, "quiet-delete")
        deleted = delete_by_name(c1, "quiet-delete")
        assert deleted.error_code == ErrorCode.none, deleted.error_message

        unknown = _raw_alter(c2, 2, "never-created", ("retention.ms", "1", 0))
        assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert described(cluster, 3, "quiet-alter") == {"retention.ms": "7200000"}


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_a_config_altered_on_one_broker_is_the_config_of_every_broker(coterie_cluster):
    cluster = coterie_cluster
    create(cluster, "tuned", 1)
    a = admin_of(cluster, 1)
    (future,) = a.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "tuned",
        incremental_configs=[_set("retention.ms", "7200000")])]).values()
    future.result(30)
    for node in (1, 2, 3):
        wait_until(lambda n=node: described(cluster, n, "tuned").get("retention.ms"), 10,
                   f"broker {node} describing the new retention.ms")
        assert described(cluster, node, "tuned")["retention.ms"] == "7200000"
    # And the whole-set AlterConfigs (legacy) through another broker replaces it everywhere.
    a = admin_of(cluster, 2)
    (future,) = a.alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "tuned", set_config={"segment.ms": "600000"})]).values()
    future.result(30)
    for node in (1, 2, 3):
        wait_until(lambda n=node: "retention.ms" not in described(cluster, n, "tuned"), 10,
                   f"broker {node} forgetting retention.ms")
        assert described(cluster, node, "tuned") == {"segment.ms": "600000"}


def test_retention_deletes_in_the_database_and_stays_deleted_after_a_failover(
        coterie_cluster):
    cluster = coterie_cluster
    create(cluster, "aging", 1)
    wait_until(lambda: leaders(cluster, "aging").get(0, -1) != -1, 30, "a leader")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    old = int(time.time() * 1000) - 2 * HOUR_MS
    for i in range(100):
        p.produce("aging", value=f"old{i}".encode(), partition=0, timestamp=old + i)
        p.flush(10)  # one batch each: retention goes by batch
    for i in range(10):
        p.produce("aging", value=f"new{i}".encode(), partition=0)
    assert p.flush(30) == 0
    assert watermarks(cluster, "aging") == (0, 110)

    leader = leaders(cluster, "aging")[0]
    elsewhere = next(n for n in (1, 2, 3) if n != leader)
    a = admin_of(cluster, elsewhere)
    (future,) = a.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "aging",
        incremental_configs=[_set("retention.ms", str(HOUR_MS))])]).values()
    future.result(30)
    wait_until(lambda: watermarks(cluster, "aging")[0] == 100, 30,
               "retention applied by the leader")

    cluster.broker(leader).kill9()
    wait_until(lambda: leaders(cluster, "aging").get(0, leader) not in (leader, -1),
               LEASE_MS / 1000 * 10, "a new leader")
    assert watermarks(cluster, "aging") == (100, 110)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "after",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition("aging", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [f"new{i}".encode() for i in range(10)]
    cluster.broker(leader).start(timeout=60)


def _read_whole(cluster: CoterieCluster, topic: str) -> list[tuple[bytes, bytes]] | None:
    """(key, value) of every record of partition 0 from its log start to its high
    watermark, as a consumer reads it now; None if the partition did not answer."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "whole",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        try:
            low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        except Exception:
            return None
        c.assign([TopicPartition(topic, 0, low)])
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append((m.key(), m.value()))
            if m.offset() >= high - 1:
                return got
        return None
    finally:
        c.close()


def test_compaction_is_done_in_the_database_and_stays_done_after_a_failover(coterie_cluster):
    """The leader compacts its copy and the database's rows alike: once consumers read the
    compacted log, a kill -9 of the leader and a new copy from the database give the same
    compacted log back, every key's last value in it (without compaction in the database
    the new leader would serve all 400 records again)."""
    cluster = coterie_cluster
    a = admin(cluster)
    a.create_topics([NewTopic("compacted", 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01"})])["compacted"].result(30)
    wait_until(lambda: leaders(cluster, "compacted").get(0, -1) != -1, 30, "a leader")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    latest = {}
    for i in range(400):
        key, value = f"k{i % 10}".encode(), f"v{i}".encode()
        p.produce("compacted", key=key, value=value, partition=0)
        latest[key] = value
        if i % 4 == 3:
            p.flush(10)  # batches of four: the cleaner drops some and thins others
    assert p.flush(30) == 0
    wait_until(lambda: (lambda got: got is not None and len(got) < 200)(
        _read_whole(cluster, "compacted")), 60, "the leader's cleaner compacting")

    leader = leaders(cluster, "compacted")[0]
    cluster.broker(leader).kill9()
    wait_until(lambda: leaders(cluster, "compacted").get(0, leader) not in (leader, -1),
               LEASE_MS / 1000 * 10, "a new leader")
    after = wait_until(lambda: _read_whole(cluster, "compacted"), 30, "the new leader's log")
    assert len(after) < 200, f"{len(after)} records: the database was not compacted"
    assert dict(after) == latest
    assert watermarks(cluster, "compacted")[1] == 400
    cluster.broker(leader).start(timeout=60)


def test_a_groups_configs_altered_anywhere_apply_on_its_coordinator_and_the_next(
        coterie_cluster):
    """KIP-848's GROUP configs live in the database: altered through a broker that does
    not coordinate the group, they are what its coordinator describes and puts in a
    member's heartbeat answer, and what the next coordinator applies after a kill -9."""
    cluster = coterie_cluster
    create(cluster, "grouped", 1)
    # Every broker has its share of the coordinators (the last one started may still be
    # taking it), so that the group's coordinator stays where it is until the kill.
    wait_for_leaders(cluster, "__consumer_offsets", {1, 2, 3})
    group = "tuned-on-a-cluster"
    coordinator = coordinator_of(cluster, group, 0)
    other = next(n for n in (1, 2, 3) if n != coordinator)
    b, o = cluster.broker(coordinator), cluster.broker(other)
    with RawConnection(b.host, b.port) as conn, RawConnection(o.host, o.port) as elsewhere:
        member = str(uuid.uuid4())
        joined = _retried_heartbeat(conn, group, member, 0)
        assert joined.heartbeat_interval == datetime.timedelta(seconds=5)
        assert _raw_alter(elsewhere, GROUP, group,
                          ("consumer.heartbeat.interval.ms", "6000", 0)).error_code == (
            ErrorCode.none)
        described = _eventually(lambda: _by_name(_describe(conn, GROUP, group)),
                                lambda d: d["consumer.heartbeat.interval.ms"][0] == "6000")
        assert described["consumer.heartbeat.interval.ms"][:2] == ("6000", GROUP_SOURCE)
        again = _eventually(
            lambda: _heartbeat_interval(conn, group, member, joined.member_epoch),
            lambda a: a.heartbeat_interval == datetime.timedelta(seconds=6))
        assert again.error_code == ErrorCode.none
    cluster.broker(coordinator).kill9()
    survivors = {1, 2, 3} - {coordinator}
    wait_for_leaders(cluster, "__consumer_offsets", survivors, timeout=LEASE_MS / 1000 * 10)
    successor = cluster.broker(_coordinator_or_none(cluster, group))
    with RawConnection(successor.host, successor.port) as conn:
        rejoined = _retried_heartbeat(conn, group, str(uuid.uuid4()), 0)
        assert rejoined.heartbeat_interval == datetime.timedelta(seconds=6)
        assert _by_name(_describe(conn, GROUP, group))["consumer.heartbeat.interval.ms"][
            :2] == ("6000", GROUP_SOURCE)


def _coordinator_or_none(cluster: CoterieCluster, group: str) -> int | None:
    try:
        return coordinator_of(cluster, group, 0)
    except AssertionError:
        return None


def test_cluster_wide_broker_configs_altered_on_one_broker_are_every_brokers(coterie_cluster):
    """The BROKER resource named "" (Kafka's cluster-wide dynamic default) lives in the
    database: altered through one broker, every broker describes it and has it in effect
    (its own resource shows the value from DYNAMIC_DEFAULT_BROKER_CONFIG)."""
    cluster = coterie_cluster
    one = cluster.broker(1)
    with RawConnection(one.host, one.port) as conn:
        answer = _raw_alter(conn, BROKER, "", ("log.retention.ms", "7200000", 0))
        assert answer.error_code == ErrorCode.none, answer
    for node in (1, 2, 3):
        b = cluster.broker(node)
        with RawConnection(b.host, b.port) as conn:
            shared = _eventually(lambda c=conn: _by_name(_describe(c, BROKER, "")),
                                 lambda d: "log.retention.ms" in d)
            assert shared["log.retention.ms"][:2] == ("7200000", DYNAMIC_DEFAULT)
            own = _by_name(_describe(conn, BROKER, str(node)))
            assert own["log.retention.ms"][:2] == ("7200000", DYNAMIC_DEFAULT)
