"""Apache Kafka 4.2.1's own tools against a three-broker coterie cluster (issue 24):
kafka-topics --describe shows a topic's partitions led by the three brokers, and
kafka-consumer-groups --describe finds a group's coordinator and its committed offsets
(it asks FindCoordinator, then the coordinator, then each partition's leader for its end);
and the Java client itself produces and consumes through a coordinator's kill -9."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.test_cluster_clients import coordinator_of, create, wait_for_leaders
from tests.fixtures.coterie_cluster import wait_until
from tests.fixtures.reference_broker import kafka_tool
from tests.integration.test_java_console_consumer_848 import (  # noqa: F401 - a fixture
    ConsoleConsumer,
    kafka_lib,
)
from tests.integration.test_java_producer import PERF_TEST_MAIN, _java

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


def test_the_java_client_produces_and_consumes_through_a_coordinator_kill(
        coterie_cluster, kafka_lib, tmp_path):  # noqa: F811 - the imported fixture
    """Kafka 4.2.1's Java producer (idempotent and acks=all, its defaults) and two Java
    console consumers in one consumer-protocol group (KIP-848) on a topic led by the three
    brokers; the group's coordinator is killed (-9) between two rounds of records: the
    members reach the next coordinator, and every stored record is printed."""
    cluster = coterie_cluster
    create(cluster, "javaflow")
    wait_for_leaders(cluster, "javaflow", {1, 2, 3})

    def produce(count: int) -> None:
        done = _java(kafka_lib, tmp_path, PERF_TEST_MAIN,
                     ["--topic", "javaflow", "--num-records", str(count), "--record-size",
                      "50", "--throughput", "-1", "--producer-props",
                      f"bootstrap.servers={cluster.bootstrap}"])
        out = done.stdout.decode(errors="replace")
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:] + out[-2000:]
        assert f"{count} records sent" in out, out[-2000:]

    produce(2000)
    consumers = [ConsoleConsumer(kafka_lib, tmp_path, f"java-member-{i}", cluster.bootstrap,
                                 "javaflow", "javagroup", timeout_ms=20_000)
                 for i in range(2)]
    try:
        def printed() -> set[tuple[int, int]]:
            """(partition, offset) of each whole line printed so far (the last line may be
            half written while the consumers run)."""
            seen = set()
            for c in consumers:
                *lines, _ = c.out_path.read_text(errors="replace").split("\n")
                for line in lines:
                    m = re.match(r"Partition:(\d+)\tOffset:(\d+)\t", line)
                    assert m is not None, f"unexpected output line {line!r}"
                    seen.add((int(m[1]), int(m[2])))
            return seen

        wait_until(lambda: len(printed()) >= 2000, 90, "the first round printed")
        victim = coordinator_of(cluster, "javagroup", 0)
        cluster.broker(victim).kill9()  # the fixture stops the cluster, dead or alive
        produce(2000)
        wait_until(lambda: len(printed()) >= 4000, 90, "the second round printed")
        assert all(c.proc.poll() is None for c in consumers), "a member gave up"
        ends = watermarks_of(cluster, "javaflow")
        assert sum(ends.values()) == 4000
        assert printed() == {(p, o) for p, end in ends.items() for o in range(end)}
        assert coordinator_of(cluster, "javagroup", 0) != victim
    finally:
        for c in consumers:
            c.stop()


def watermarks_of(cluster, topic: str) -> dict[int, int]:
    """Each partition's high watermark."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ends"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(6)}
    finally:
        c.close()
