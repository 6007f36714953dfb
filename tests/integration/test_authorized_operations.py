"""Authorized operations in Metadata and DescribeCluster (issue 22), as Kafka 4.2 answers them
without an authorizer: every operation a topic (bitfield 3576) or the cluster (8096)
supports. The same scenario passes against Apache Kafka 4.2.1
(tests/reference/test_reference_authorized_operations.py).

Read by confluent-kafka's AdminClient (librdkafka's DescribeTopics reads the topic's
operations from a Metadata answer) and request by request for Metadata v8-v13: which entries
carry the field (every topic entry but an unknown topic id's), the cluster's field in v8-v10,
and "not given" when the client does not ask, also for the all-topics answer, which the
broker keeps encoded between requests.
"""

from __future__ import annotations

import importlib
import time
import uuid
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.kafka_raw import RawConnection

# Written out, not taken from coterie.broker.authorized, so the test checks its arithmetic:
# bit n is ACL operation code n. A topic: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
# DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11. The cluster: CREATE 5, ALTER 7,
# DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
NOT_GIVEN = -(2**31)
TOPIC_OPERATIONS = 3576
CLUSTER_OPERATIONS = 8096
TOPIC_NAMES = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
               "ALTER_CONFIGS"}
CLUSTER_NAMES = {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                 "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}
VERSIONS = range(8, 14)


def _request(version: int, topics: Any, *, ops: bool, auto: bool = False) -> Any:
    """A Metadata request of `version` asking for the operations (both kinds, where the
    version has the cluster's flag) or not; `topics` is None (all), or names and ids."""
    module = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    if topics is not None:
        topics = tuple(
            module.MetadataRequestTopic(name=t, topic_id=None) if isinstance(t, str)
            else module.MetadataRequestTopic(name=None, topic_id=t)
            for t in topics) if version >= 10 else tuple(
            module.MetadataRequestTopic(name=t) for t in topics)
    flags: dict[str, Any] = {"include_topic_authorized_operations": ops}
    if version <= 10:
        flags["include_cluster_authorized_operations"] = ops
    return module.MetadataRequest(topics=topics, allow_auto_topic_creation=auto, **flags)


def _cluster_ops(version: int, answer: Any) -> int | None:
    """The answer's cluster field, or None where the version has none (v11+)."""
    if version >= 11:
        assert not hasattr(answer, "cluster_authorized_operations")
        return None
    return answer.cluster_authorized_operations


def _wait_for_topic(conn: RawConnection, topic: str) -> uuid.UUID:
    """The topic's id once the broker lists it with a leader (Kafka needs a moment after
    CreateTopics; coterie has it at once)."""
    deadline = time.monotonic() + 30
    while True:
        md = conn.request(_request(12, [topic], ops=False))
        entry = md.topics[0]
        if entry.error_code == ErrorCode.none and entry.partitions and all(
                p.leader_id >= 0 for p in entry.partitions):
            return entry.topic_id
        assert time.monotonic() < deadline, f"{topic} never became ready: {entry}"
        time.sleep(0.2)


def wire_scenario(conn: RawConnection, topic: str, topic_id: uuid.UUID, tag: str) -> None:
    """Metadata v8-v13 by hand: the bitfields, which entries carry them, and not given."""
    missing, invalid = f"authz-missing-{tag}", "not a valid name!"
    for version in VERSIONS:
        named = conn.request(_request(version, [topic, missing, invalid], ops=True))
        by_name = {t.name: (t.error_code, t.topic_authorized_operations) for t in named.topics}
        assert by_name == {
            topic: (ErrorCode.none, TOPIC_OPERATIONS),
            missing: (ErrorCode.unknown_topic_or_partition, TOPIC_OPERATIONS),
            invalid: (ErrorCode.invalid_topic_exception, TOPIC_OPERATIONS),
        }, version
        assert _cluster_ops(version, named) in (CLUSTER_OPERATIONS, None), version

        plain = conn.request(_request(version, [topic, missing], ops=False))
        assert {t.topic_authorized_operations for t in plain.topics} == {NOT_GIVEN}, version
        assert _cluster_ops(version, plain) in (NOT_GIVEN, None), version

        # The all-topics answer, asked without, with and again without the operations: the
        # broker's encoded copy of one must never answer the other.
        for ops in (False, True, False, True):
            everything = conn.request(_request(version, None, ops=ops))
            fields = {t.name: t.topic_authorized_operations for t in everything.topics}
            assert fields[topic] == (TOPIC_OPERATIONS if ops else NOT_GIVEN), (version, ops)
            assert set(fields.values()) == {TOPIC_OPERATIONS if ops else NOT_GIVEN}
            assert _cluster_ops(version, everything) in (
                CLUSTER_OPERATIONS if ops else NOT_GIVEN, None), (version, ops)

        if version >= 12:
            unknown_id = uuid.uuid4()
            by_id = conn.request(_request(version, [topic_id, unknown_id], ops=True))
            entries = {t.topic_id: (t.name, t.error_code, t.topic_authorized_operations)
                       for t in by_id.topics}
            assert entries == {
                topic_id: (topic, ErrorCode.none, TOPIC_OPERATIONS),
                # Names no topic, so Kafka gives no operations for it.
                unknown_id: (None, ErrorCode.unknown_topic_id, NOT_GIVEN),
            }, version

    # A topic the request creates carries its operations too, whatever error the broker
    # answers for it the first time (coterie: none; Kafka: not yet available).
    created = f"authz-created-{tag}"
    answer = conn.request(_request(12, [created], ops=True, auto=True))
    assert [(t.name, t.topic_authorized_operations) for t in answer.topics] == [
        (created, TOPIC_OPERATIONS)]


def scenario(bootstrap: str) -> None:
    tag = uuid.uuid4().hex[:8]
    topic = f"authz-{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[
        topic].result(30)
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        topic_id = _wait_for_topic(conn, topic)
        wire_scenario(conn, topic, topic_id, tag)

    described = admin.describe_topics(TopicCollection([topic]),
                                      include_authorized_operations=True)[topic].result(30)
    assert described.name == topic and len(described.partitions) == 2
    assert {op.name for op in described.authorized_operations} == TOPIC_NAMES
    without = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    assert not without.authorized_operations

    cluster = admin.describe_cluster(include_authorized_operations=True,
                                     request_timeout=30).result(30)
    assert {op.name for op in cluster.authorized_operations} == CLUSTER_NAMES


def test_authorized_operations(coterie):
    scenario(coterie.bootstrap)
