"""A Kafka Streams 4.2.1 application on the streams protocol (KIP-1071) on a three-broker
cluster over PostgreSQL (issues 24 and 26): its group's coordinator is killed (-9) and
another broker takes the group over from the database, tasks and all.

The WordCount of tests/integration/test_kafka_streams_protocol.py, at_least_once, two
instances bootstrapping from every broker: exact counts first, then the broker coordinating
the group dies while input keeps coming, and every count still reaches its input (nothing
lost); the group is then Stable again on another broker with both members and every task
active on exactly one of them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.cluster.test_cluster_clients import coordinator_of
from tests.fixtures.coterie_cluster import running_cluster, wait_until
from tests.integration.clients import broker_log_on_failure
from tests.integration.test_kafka_streams import (
    _await_counts,
    _await_running,
    _produce_lines,
    _setup,
    nothing_lost,
    wordcount_classpath,  # noqa: F401  (the module's fixture)
)
from tests.integration.test_kafka_streams_protocol import (
    BROKER_SETTINGS,
    STREAMS_PROTOCOL,
    settled,
)

pytestmark = pytest.mark.timeout(300)


def test_a_streams_application_goes_on_through_its_coordinators_kill(
        tmp_path: Path, postgres_server, wordcount_classpath: str) -> None:  # noqa: F811
    with running_cluster(tmp_path / "cluster", postgres_server,
                         config=BROKER_SETTINGS) as cluster:
        source, a, b, output = _setup(cluster, wordcount_classpath, "at_least_once",
                                      tmp_path, STREAMS_PROTOCOL)
        app = source.replace("wc-in", "wordcount")
        expected: Counter = Counter()
        with broker_log_on_failure(cluster.logs):
            try:
                a.start()
                b.start()
                _await_running([a, b])
                _produce_lines(cluster.bootstrap, source, 200, 31, expected)
                _await_counts(output, expected, [a, b])

                coordinator = coordinator_of(cluster, app, 0)
                cluster.broker(coordinator).kill9()
                _produce_lines(cluster.bootstrap, source, 200, 32, expected)
                nothing_lost(output, expected)

                def new_coordinator() -> int | None:
                    node = coordinator_of(cluster, app, 0)
                    return node if node != coordinator else None
                now = wait_until(new_coordinator, 30, "another broker coordinates the group")
                d = settled(cluster.broker(now), app, 2)
                assert len(d.members) == 2
            finally:
                for inst in (a, b):
                    inst.stop()
                output.close()
