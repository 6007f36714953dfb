"""DescribeCluster (issue 14): this broker as the cluster, as Kafka 4.2 answers it (the
scenario passes against Apache Kafka 4.2.1 in tests/reference), read request by request and
by confluent-kafka's AdminClient."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest as DescribeClusterV0
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode

from tests.kafka_raw import RawConnection


def scenario(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        plain = conn.request(DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=1,
            include_fenced_brokers=False))
        assert plain.error_code == ErrorCode.none
        assert plain.controller_id == 1 and plain.endpoint_type == 1
        assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in plain.brokers] == [
            (1, host, int(port), None, False)]
        assert plain.cluster_authorized_operations == -(2**31)  # not asked
        assert len(plain.cluster_id) == 22  # a base64 UUID
        asked = conn.request(DescribeClusterRequest(
            include_cluster_authorized_operations=True, endpoint_type=1,
            include_fenced_brokers=True))
        assert asked.cluster_authorized_operations == 8096
        controllers = conn.request(DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=2,
            include_fenced_brokers=False))
        assert controllers.error_code == ErrorCode.mismatched_endpoint_type
        assert controllers.brokers == ()
        old = conn.request(DescribeClusterV0(include_cluster_authorized_operations=False))
        assert (old.error_code, old.cluster_id) == (ErrorCode.none, plain.cluster_id)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster(request_timeout=30).result(30)
    assert described.cluster_id == plain.cluster_id
    assert described.controller.id == 1
    assert [n.id for n in described.nodes] == [1]


def test_describe_cluster(coterie):
    scenario(coterie.bootstrap)
