"""ACLs enforced on the data, topic, config and cluster APIs (issue 25, ACLs second part),
with Kafka 4.2's error codes, against one real broker.

The broker runs Kafka's StandardAuthorizer with `super.users=User:admin` and a
SASL_PLAINTEXT listener whose PLAIN users (admin, alice, bob, carol) are the principals;
each test gives its own principal its own ACLs, so the tests are independent of each other.
Raw requests (tests/kafka_raw.py) read the exact codes, since most clients turn them into
exceptions without the code; confluent-kafka's producer is used where it shows the code.
"""

from __future__ import annotations

import datetime
import io
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_client_quotas.v1.request import ComponentData as QuotaComponent
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v13.request import FetchPartition as FetchPartition13
from kio.schema.fetch.v13.request import FetchRequest as Fetch13
from kio.schema.fetch.v13.request import FetchTopic as FetchTopic13
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v10.request import MetadataRequest as Metadata10
from kio.schema.metadata.v10.request import MetadataRequestTopic as MetadataTopic10
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.kafka_raw import RawConnection, make_batch

pytestmark = pytest.mark.timeout(120)

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret",
         "carol": "carol-secret", "dave": "dave-secret", "erin": "erin-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
TIMEOUT = datetime.timedelta(seconds=5)
ZERO = None  # kio's null topic id
# Kafka's codes (ResourceType, PatternType, AclOperation, AclPermissionType).
TOPIC, GROUP, CLUSTER, TXN_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS = 10, 11
DENY, ALLOW = 2, 3
NOT_GIVEN = -(2**31)
TAF = ErrorCode.topic_authorization_failed


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    b = CoterieBroker(tmp_path_factory.mktemp("acl-enforcement") / "data", config={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"})
    b.sasl_port = free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}",  # type: ignore[attr-defined]
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "auto.create.topics.enable": "true",
    })
    b.start()
    with _as(b, "admin") as admin:
        for name in ("data-a", "data-d", "secret", "data-deny", "shared"):
            created = admin.request(CreateTopicsRequest(topics=(CreatableTopic(
                name=name, num_partitions=1, replication_factor=-1, assignments=(),
                configs=()),), timeout=TIMEOUT, validate_only=False)).topics[0]
            assert created.error_code == ErrorCode.none, created
    yield b
    b.stop()


def _as(b: CoterieBroker, user: str) -> RawConnection:
    """A raw connection authenticated (SASL/PLAIN) as `user`."""
    conn = RawConnection("127.0.0.1", b.sasl_port)  # type: ignore[attr-defined]
    assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    token = f"\0{user}\0{USERS[user]}".encode()
    assert conn.request(SaslAuthenticateRequest(auth_bytes=token)).error_code == ErrorCode.none
    return conn


def _allow(b: CoterieBroker, user: str, *acls: tuple[int, str, int, int],
           permission: int = ALLOW) -> None:
    """Give `user` ACLs: (resource type, name, pattern type, operation) each."""
    with _as(b, "admin") as admin:
        got = admin.request(CreateAclsRequest(creations=tuple(
            AclCreation(resource_type=rt, resource_name=name, resource_pattern_type=pt,
                        principal=f"User:{user}", host="*", operation=op,
                        permission_type=permission) for rt, name, pt, op in acls)))
    assert all(r.error_code == ErrorCode.none for r in got.results), got


def _produce(conn: RawConnection, topic: str, records: bytes,
             transactional_id: str | None = None) -> Any:
    return conn.request(ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout=TIMEOUT,
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=records),)),))
    ).responses[0].partition_responses[0]


def _end_offset(conn: RawConnection, topic: str) -> Any:
    return conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    ).topics[0].partitions[0]


def _fetch(conn: RawConnection, topic: str) -> Any:
    return conn.request(FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=0,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id="")).responses[0].partitions[0]


def _metadata(conn: RawConnection, names: tuple[str, ...] | None,
              auto_create: bool = False) -> Any:
    topics = None if names is None else tuple(
        MetadataRequestTopic(topic_id=ZERO, name=n) for n in names)
    return conn.request(MetadataRequest(topics=topics, allow_auto_topic_creation=auto_create,
                                        include_topic_authorized_operations=True))


def _transactional_batch() -> bytes:
    """A one-record batch with the transactional flag (producer 1, epoch 0)."""
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(
        producer_id=1, producer_epoch=0, base_sequence=0, attributes=0x10, records=(
            Record(attributes=0, timestamp=datetime.datetime.now(datetime.UTC), offset=0,
                   key=None, value=b"t", headers=()),)))
    return buf.getvalue()


def test_produce_and_fetch_need_write_and_read(broker: CoterieBroker) -> None:
    with _as(broker, "admin") as admin, _as(broker, "alice") as alice:
        # Nothing allowed: refused, and nothing appended; no idempotent producer id either.
        init = InitProducerIdRequest(transactional_id=None, transaction_timeout=TIMEOUT,
                                     producer_id=-1, producer_epoch=-1)
        assert alice.request(init).error_code == ErrorCode.cluster_authorization_failed
        assert _produce(alice, "data-a", make_batch([b"x"])).error_code == TAF
        assert _produce(alice, "no-such-topic", make_batch([b"x"])).error_code == TAF
        assert _end_offset(admin, "data-a").offset == 0
        # WRITE on a PREFIXED pattern: allowed (and implies DESCRIBE: ListOffsets).
        _allow(broker, "alice", (TOPIC, "data-", PREFIXED, WRITE))
        written = _produce(alice, "data-a", make_batch([b"x", b"y"]))
        assert (written.error_code, written.base_offset) == (ErrorCode.none, 0)
        assert _end_offset(alice, "data-a").offset == 2
        assert _end_offset(alice, "secret").error_code == TAF
        assert alice.request(init).error_code == ErrorCode.none  # WRITE on some topic
        assert _produce(alice, "secret", make_batch([b"x"])).error_code == TAF
        # A transactional produce needs WRITE on its transactional id, whatever the topic.
        refused = _produce(alice, "data-a", _transactional_batch(), transactional_id="tx-1")
        assert refused.error_code == ErrorCode.transactional_id_authorization_failed
        assert _end_offset(admin, "data-a").offset == 2
        # No READ: no records, by name or by topic id; with it, the records.
        assert _fetch(alice, "data-a").error_code == TAF
        topic_id = _metadata(admin, ("data-a",)).topics[0].topic_id
        by_id = alice.request(Fetch13(
            replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, topics=(FetchTopic13(
                topic_id=topic_id, partitions=(FetchPartition13(
                    partition=0, current_leader_epoch=-1, fetch_offset=0,
                    last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=(), rack_id="")).responses[0].partitions[0]
        assert by_id.error_code == TAF
        _allow(broker, "alice", (TOPIC, "data-a", LITERAL, READ))
        fetched = _fetch(alice, "data-a")
        assert (fetched.error_code, fetched.high_watermark) == (ErrorCode.none, 2)
        assert fetched.records
        # DescribeProducers needs READ; DeleteRecords DELETE; DescribeLogDirs the cluster.
        described = alice.request(DescribeProducersRequest(topics=(
            TopicRequest(name="data-a", partition_indexes=(0,)),
            TopicRequest(name="secret", partition_indexes=(0,)))))
        assert [t.partitions[0].error_code for t in described.topics] == [ErrorCode.none, TAF]
        purge = DeleteRecordsRequest(topics=(DeleteRecordsTopic(name="data-a", partitions=(
            DeleteRecordsPartition(partition_index=0, offset=1),)),), timeout=TIMEOUT)
        assert alice.request(purge).topics[0].partitions[0].error_code == TAF
        assert _end_offset(admin, "data-a").offset == 2
        dirs = alice.request(DescribeLogDirsRequest(topics=None))
        assert (dirs.error_code, dirs.results) == (ErrorCode.cluster_authorization_failed, ())
        assert admin.request(DescribeLogDirsRequest(topics=None)).error_code == ErrorCode.none


def test_metadata_hides_undescribable_topics_per_principal(broker: CoterieBroker) -> None:
    with _as(broker, "admin") as admin, _as(broker, "bob") as bob:
        # The admin's all-topics answer first: bob's must not be the admin's cached one.
        everything = {t.name for t in _metadata(admin, None).topics}
        assert {"data-a", "secret", "shared"} <= everything
        assert [t.name for t in _metadata(bob, None).topics] == []
        _allow(broker, "bob", (TOPIC, "shared", LITERAL, READ))
        listed = _metadata(bob, None).topics  # the ACL change is seen at once
        assert [(t.name, t.topic_authorized_operations) for t in listed] == [
            ("shared", (1 << READ) | (1 << DESCRIBE))]
        named = _metadata(bob, ("shared", "secret", "absent-topic")).topics
        assert [(t.name, t.error_code, t.topic_authorized_operations) for t in named] == [
            ("shared", ErrorCode.none, (1 << READ) | (1 << DESCRIBE)),
            ("secret", TAF, NOT_GIVEN), ("absent-topic", TAF, NOT_GIVEN)]
        assert named[1].partitions == () and named[1].topic_id is None
        # Auto-creation needs CREATE (on the cluster or the topic) besides DESCRIBE.
        _allow(broker, "bob", (TOPIC, "bob-", PREFIXED, DESCRIBE))
        refused = _metadata(bob, ("bob-auto",), auto_create=True).topics[0]
        assert refused.error_code == TAF
        _allow(broker, "bob", (TOPIC, "bob-", PREFIXED, CREATE))
        created = _metadata(bob, ("bob-auto",), auto_create=True).topics[0]
        assert (created.error_code, len(created.partitions)) == (ErrorCode.none, 1)
        # The super user: every operation, as without an authorizer.
        assert {t.topic_authorized_operations for t in _metadata(admin, None).topics} == {
            3576}
        # The cluster's operations: 0 without DESCRIBE on the cluster (Metadata v10 and
        # DescribeCluster), else what the ACLs allow.
        def cluster_ops(conn: RawConnection) -> tuple[int, int]:
            md = conn.request(Metadata10(
                topics=(MetadataTopic10(topic_id=ZERO, name="shared"),),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=False))
            dc = conn.request(DescribeClusterRequest(
                include_cluster_authorized_operations=True))
            assert dc.error_code == ErrorCode.none
            return md.cluster_authorized_operations, dc.cluster_authorized_operations
        assert cluster_ops(admin) == (8096, 8096)
        assert cluster_ops(bob) == (0, 0)
        _allow(broker, "bob", (CLUSTER, "kafka-cluster", LITERAL, DESCRIBE))
        assert cluster_ops(bob) == (1 << DESCRIBE, 1 << DESCRIBE)


def test_topic_admin_and_configs_need_their_acls(broker: CoterieBroker) -> None:
    def create(conn: RawConnection, name: str) -> Any:
        return conn.request(CreateTopicsRequest(topics=(CreatableTopic(
            name=name, num_partitions=2, replication_factor=-1, assignments=(),
            configs=()),), timeout=TIMEOUT, validate_only=False)).topics[0]

    def delete(conn: RawConnection, name: str | None, topic_id: Any = ZERO) -> Any:
        return conn.request(DeleteTopicsRequest(topics=(DeleteTopicState(
            name=name, topic_id=topic_id),), timeout=TIMEOUT)).responses[0]

    def describe(conn: RawConnection, kind: int, name: str) -> Any:
        return conn.request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
            resource_type=kind, resource_name=name, configuration_keys=None),),
            include_synonyms=False, include_documentation=False)).results[0]

    def alter(conn: RawConnection, name: str) -> Any:
        return conn.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=2, resource_name=name, configs=(AlterableConfig(
                name="retention.ms", config_operation=0, value="60000"),)),),
            validate_only=False)).responses[0]

    with _as(broker, "carol") as carol, _as(broker, "admin") as admin:
        refused = create(carol, "carol-t")
        assert (refused.error_code, refused.error_message) == (TAF, "Authorization failed.")
        assert "carol-t" not in {t.name for t in _metadata(admin, None).topics}
        # CREATE on the topic's prefix: created, but its settings are not shown.
        _allow(broker, "carol", (TOPIC, "carol-", PREFIXED, CREATE))
        made = create(carol, "carol-t")
        assert (made.error_code, made.topic_config_error_code, made.num_partitions) == (
            ErrorCode.none, TAF, -1)
        # Configs: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic; the cluster for a broker.
        assert describe(carol, 2, "carol-t").error_code == TAF
        assert describe(carol, 4, "1").error_code == ErrorCode.cluster_authorization_failed
        assert alter(carol, "carol-t").error_code == TAF
        _allow(broker, "carol", (TOPIC, "carol-", PREFIXED, ALTER_CONFIGS))
        assert alter(carol, "carol-t").error_code == ErrorCode.none
        shown = describe(carol, 2, "carol-t")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
        assert shown.error_code == ErrorCode.none
        assert {c.name: c.value for c in shown.configs}["retention.ms"] == "60000"
        # CreatePartitions needs ALTER.
        grow = CreatePartitionsRequest(topics=(CreatePartitionsTopic(
            name="carol-t", count=3, assignments=None),), timeout=TIMEOUT, validate_only=False)
        assert carol.request(grow).results[0].error_code == TAF
        _allow(broker, "carol", (TOPIC, "carol-t", LITERAL, ALTER))
        assert carol.request(grow).results[0].error_code == ErrorCode.none
        # DeleteTopics: an undescribable name is refused whether it exists or not; a
        # describable unknown one is unknown; DELETE deletes.
        assert delete(carol, "secret").error_code == TAF
        assert delete(carol, "no-such").error_code == TAF
        secret_id = _metadata(admin, ("secret",)).topics[0].topic_id
        by_id = delete(carol, None, secret_id)
        assert (by_id.name, by_id.error_code) == (None, TAF)
        _allow(broker, "carol", (TOPIC, "carol-", PREFIXED, DELETE))  # implies DESCRIBE
        assert delete(carol, "carol-none").error_code == ErrorCode.unknown_topic_or_partition
        assert delete(carol, "carol-t").error_code == ErrorCode.none
        assert "secret" in {t.name for t in _metadata(admin, None).topics}
        # SCRAM credentials: DESCRIBE on the cluster.
        scram = carol.request(DescribeUserScramCredentialsRequest(users=(UserName(name="x"),)))
        assert scram.error_code == ErrorCode.cluster_authorization_failed


def test_deny_wins_over_allow_end_to_end(broker: CoterieBroker) -> None:
    _allow(broker, "dave", (TOPIC, "data-", PREFIXED, ALL))
    _allow(broker, "dave", (TOPIC, "data-deny", LITERAL, WRITE), permission=DENY)
    errors: dict[str, int] = {}
    producer = Producer({
        "bootstrap.servers": f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "dave", "sasl.password": USERS["dave"], "acks": "all",
        "message.timeout.ms": 5000})

    def report(err: KafkaError | None, msg: Any) -> None:
        errors[msg.topic()] = err.code() if err is not None else 0

    for topic in ("data-d", "data-deny"):
        producer.produce(topic, b"v", on_delivery=report)
    deadline = time.monotonic() + 10
    while len(errors) < 2 and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors == {"data-d": 0, "data-deny": KafkaError.TOPIC_AUTHORIZATION_FAILED}
    with _as(broker, "dave") as dave:
        names = {t.name for t in _metadata(dave, None).topics}
        assert {"data-d", "data-deny"} <= names and "secret" not in names
        ops = {t.name: t.topic_authorized_operations
               for t in _metadata(dave, ("data-d", "data-deny")).topics}
        assert ops == {"data-d": 3576, "data-deny": 3576 & ~(1 << WRITE)}


def test_describe_client_quotas_needs_describe_configs_and_a_sound_filter(
        broker: CoterieBroker) -> None:
    """DescribeClientQuotas (which kafka-configs asks before describing users): no quotas
    (coterie keeps none), DESCRIBE_CONFIGS on the cluster needed, the filter checked as a
    Kafka broker checks it."""
    exact, default, any_ = 0, 1, 2

    def ask(conn: RawConnection, *components: tuple[str, int, str | None]) -> Any:
        return conn.request(DescribeClientQuotasRequest(components=tuple(
            QuotaComponent(entity_type=t, match_type=m, match=name)
            for t, m, name in components), strict=False))

    with _as(broker, "erin") as erin:
        refused = ask(erin, ("user", any_, None))
        assert (refused.error_code, refused.entries) == \
            (ErrorCode.cluster_authorization_failed, None)
        _allow(broker, "erin", (CLUSTER, "kafka-cluster", LITERAL, ALTER_CONFIGS))  # implies
        answer = ask(erin, ("user", exact, "alice"), ("client-id", default, None))
        assert (answer.error_code, answer.entries) == (ErrorCode.none, ())
        for components, code in [
                ((("user", any_, None), ("user", exact, "x")), ErrorCode.invalid_request),
                ((("", any_, None),), ErrorCode.invalid_request),
                ((("team", any_, None),), ErrorCode.unsupported_version),
                ((("ip", any_, None), ("user", any_, None)), ErrorCode.invalid_request),
                ((("user", exact, None),), ErrorCode.invalid_request),
                ((("user", 7, None),), ErrorCode.invalid_request)]:
            got = ask(erin, *components)
            assert (got.error_code, got.entries) == (code, None), components
            assert got.error_message
