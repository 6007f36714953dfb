"""Apache Kafka 4.2.1's own tools against a three-broker coterie cluster (issue 24):
kafka-topics --describe shows a topic's partitions led by the three brokers, and
kafka-consumer-groups --describe finds a group's coordinator and its committed offsets
(it asks FindCoordinator, then the coordinator, then each partition's leader for its end)."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.cluster.test_cluster_clients import create, wait_for_leaders
from tests.fixtures.reference_broker import kafka_tool

pytestmark = pytest.mark.timeout(300)


def test_kafka_tools_describe_the_cluster_topics_and_groups(coterie_cluster):
    cluster = coterie_cluster
    create(cluster, "described")
    wait_for_leaders(cluster, "described", {1, 2, 3})
    out = kafka_tool("org.apache.kafka.tools.TopicCommand", cluster.brokers[0].bootstrap,
                     "--describe", "--topic", "described")
    leaders = set(re.findall(r"Leader: (\d+)", out))
    assert leaders == {"1", "2", "3"}, out
    assert "PartitionCount: 6" in out, out

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(120):
        p.produce("described", key=str(i).encode(), value=b"x")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "tooling",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["described"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 120 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            read += 1
    assert read == 120
    c.commit(asynchronous=False)
    c.close()
    out = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                     cluster.brokers[1].bootstrap, "--describe", "--group", "tooling")
    rows = [line.split() for line in out.splitlines() if line.startswith("tooling ")]
    assert len(rows) == 6, out
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert sum(int(r[3]) for r in rows) == 120, out
    assert all(r[3] == r[4] and r[5] == "0" for r in rows), out
