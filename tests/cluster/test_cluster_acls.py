"""ACLs on a two-broker cluster (issue 25, ACLs first part): created through one broker,
they are in the database, and the other broker describes them promptly (it adopts the
database's ACLs at its next round, which the first broker's NOTIFY starts); deleted through
the other, they are gone from both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.fixtures.coterie_cluster import CoterieCluster, running_cluster, wait_until
from tests.fixtures.postgres import PostgresServer
from tests.integration.test_acls import ACL_SETTINGS, OP, PT, RT, _acl, _create, _filter

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def acl_cluster(tmp_path: Path, postgres_server: PostgresServer) -> Iterator[CoterieCluster]:
    with running_cluster(tmp_path, postgres_server, size=2, config=ACL_SETTINGS) as cluster:
        yield cluster


def test_acls_created_through_one_broker_are_described_through_the_other(
        acl_cluster: CoterieCluster) -> None:
    one = AdminClient({"bootstrap.servers": acl_cluster.broker(1).bootstrap})
    two = AdminClient({"bootstrap.servers": acl_cluster.broker(2).bootstrap})

    def names(admin: AdminClient) -> set[tuple[str, object, object]]:
        return {(a.name, a.resource_pattern_type, a.operation)
                for a in admin.describe_acls(_filter(), request_timeout=10).result(10)}

    _create(one, [_acl("shared"), _acl("shared-", PT.PREFIXED, op=OP.WRITE),
                  _acl("app", rtype=RT.GROUP)])
    expected = {("shared", PT.LITERAL, OP.READ), ("shared-", PT.PREFIXED, OP.WRITE),
                ("app", PT.LITERAL, OP.READ)}
    assert names(one) == expected  # in force on the broker that created them at once
    wait_until(lambda: names(two) == expected, 10, "broker 2 describes broker 1's ACLs")

    for future in two.delete_acls([_filter(RT.TOPIC)], request_timeout=10).values():
        assert {a.name for a in future.result(10)} == {"shared", "shared-"}
    wait_until(lambda: names(one) == {("app", PT.LITERAL, OP.READ)}, 10,
               "broker 1 no longer describes the ACLs deleted through broker 2")


def test_a_transaction_across_brokers_commits_with_an_authorizer(
        acl_cluster: CoterieCluster) -> None:
    """WriteTxnMarkers needs CLUSTER_ACTION on the cluster: brokers send them to each other
    as `User:ANONYMOUS` (PLAINTEXT), in `super.users` here as docs/security.md asks, so a
    transaction over partitions both brokers lead commits."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": acl_cluster.bootstrap})
    for future in admin.create_topics([NewTopic("txn-acl", 4, 1)], request_timeout=10).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": acl_cluster.bootstrap,
                         "transactional.id": "acl-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(4):
        producer.produce("txn-acl", b"v", partition=p)
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": acl_cluster.bootstrap, "group.id": "acl-txn-g",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["txn-acl"])
        got: list[object] = []
        wait_until(lambda: got.extend(m for m in consumer.consume(10, 0.5) if not m.error())
                   or len(got) >= 4, 20, "the committed transaction's four records")
    finally:
        consumer.close()
