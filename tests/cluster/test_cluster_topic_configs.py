"""Topic configs and retention on a three-broker cluster (issue 24, point 1).

A topic's configs live in the database: AlterConfigs through one broker is what every
broker describes and applies. Retention is decided and done in the database by the
partition's leader, so what it deleted stays deleted when the leader dies and another
broker copies the partition from the database.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.cluster.test_cluster_clients import create, leaders
from tests.fixtures.coterie_cluster import LEASE_MS, CoterieCluster, wait_until

pytestmark = pytest.mark.timeout(240)

HOUR_MS = 3_600_000


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
