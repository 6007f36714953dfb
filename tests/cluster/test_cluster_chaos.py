"""A short chaos run on a three-broker cluster (issue 24's tests): each broker in turn is
killed (-9) while an idempotent producer writes and two groups, one of each protocol,
read and commit; after each kill every group is Stable again on the survivors, and then
the broker comes back. At the end: no acknowledged record lost or stored twice, and no
acknowledged commit lost. The long run (20 kills and more) is benchmarks/cluster.py's.
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, TopicPartition

from tests.cluster.test_cluster_clients import (
    Produced,
    admin,
    check_nothing_lost_or_doubled,
    consume_all,
    create,
    wait_for_leaders,
)
from tests.fixtures.coterie_cluster import LEASE_MS, CoterieCluster, wait_until

pytestmark = pytest.mark.timeout(300)


class Committer:
    """One consumer alone in its group, in a thread: it reads and commits synchronously
    every 100 records, keeping the highest offset each acknowledged commit stored."""

    def __init__(self, cluster: CoterieCluster, topic: str, group: str, protocol: str) -> None:
        config = {"bootstrap.servers": cluster.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "group.protocol": protocol}
        if protocol == "classic":
            config["session.timeout.ms"] = 10_000
        self.consumer = Consumer(config)
        self.topic = topic
        self.group = group
        self.acked: dict[int, int] = {}
        self.read = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.consumer.subscribe([self.topic])
        since = 0
        while not self._stop.is_set():
            m = self.consumer.poll(0.2)
            if m is None or m.error():
                continue
            self.read += 1
            since += 1
            if since >= 100:
                since = 0
                try:
                    done = self.consumer.commit(asynchronous=False)
                except KafkaException:
                    continue  # not acknowledged: nothing to keep
                for tp in done or []:
                    if tp.error is None and tp.offset >= 0:
                        self.acked[tp.partition] = max(self.acked.get(tp.partition, 0),
                                                       tp.offset)

    def finish(self) -> dict[int, int]:
        """Stop reading; the group's committed offsets, as the coordinator has them (asked
        once the thread is done with the consumer: librdkafka's committed() beside a poll in
        another thread can wait past its timeout)."""
        self._stop.set()
        self._thread.join(30)
        found = self.consumer.committed([TopicPartition(self.topic, p) for p in range(6)],
                                        timeout=30)
        return {tp.partition: tp.offset for tp in found}

    def __enter__(self) -> Committer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def stable(cluster: CoterieCluster, group: str) -> bool:
    a = admin(cluster)
    try:
        found = a.describe_consumer_groups([group])[group].result(10)
    except KafkaException:
        return False
    return found.state == ConsumerGroupState.STABLE and len(found.members) == 1


def test_a_short_chaos_run_loses_nothing_and_every_group_settles(coterie_cluster):
    cluster = coterie_cluster
    create(cluster, "chaos-run")
    wait_for_leaders(cluster, "chaos-run", {1, 2, 3})
    with Produced(cluster, "chaos-run", pause=0.05) as produced, \
            Committer(cluster, "chaos-run", "chaos-classic", "classic") as classic, \
            Committer(cluster, "chaos-run", "chaos-848", "consumer") as modern:
        groups = (classic, modern)
        wait_until(lambda: all(g.read >= 300 for g in groups), 60, "the groups reading")
        for victim in (1, 2, 3):
            cluster.broker(victim).kill9()
            survivors = {1, 2, 3} - {victim}
            wait_for_leaders(cluster, "chaos-run", survivors, timeout=LEASE_MS / 1000 * 10)
            for g in groups:
                wait_until(lambda g=g: stable(cluster, g.group), 60,
                           f"{g.group} Stable after broker {victim}'s kill")
            reads = [g.read for g in groups]
            wait_until(lambda r=reads: all(g.read >= n + 100 for g, n in zip(groups, r,
                                                                              strict=True)),
                       60, f"the groups reading after broker {victim}'s kill")
            cluster.broker(victim).start(timeout=60)
            wait_for_leaders(cluster, "chaos-run", {1, 2, 3}, timeout=30)
        for g in groups:
            committed = g.finish()
            lost = {p: (o, committed.get(p)) for p, o in g.acked.items()
                    if committed.get(p, -1) < o}
            assert not lost, f"{g.group}: acknowledged commits lost {lost}"
            assert g.acked, f"{g.group} committed nothing"
    assert not produced.errors
    got = consume_all(cluster, "chaos-run", len(produced.acked), "after-chaos-run")
    check_nothing_lost_or_doubled(produced, got)
