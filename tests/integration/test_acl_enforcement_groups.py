"""ACLs enforced on the group and transaction APIs (coterie.broker.group_acls), with Kafka
4.2's error codes, against one broker with Kafka's StandardAuthorizer, `super.users=User:admin`
and a SASL_PLAINTEXT listener whose PLAIN users are the principals: confluent-kafka
consumers and producers for what clients see, raw requests where a client hides the code.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.list_transactions.v0.request import ListTransactionsRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.streams_group_heartbeat.v0.request import StreamsGroupHeartbeatRequest
from kio.schema.streams_group_heartbeat.v0.request import Subtopology as SgSubtopology
from kio.schema.streams_group_heartbeat.v0.request import TopicInfo as SgTopicInfo
from kio.schema.streams_group_heartbeat.v0.request import Topology as SgTopology
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from coterie.wire.build import build
from coterie.wire.codec import request_schema
from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(120)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = ("admin", "alice", "bob", "carol", "dave")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")
RT, PT, OP, PERM = ResourceType, ResourcePatternType, AclOperation, AclPermissionType
TOPIC, SECRET = "orders", "payments"
_MS = i32Timedelta.parse


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    b = CoterieBroker(tmp_path_factory.mktemp("acl-groups") / "data", config={
        "authorizer.class.name": STANDARD, "super.users": "User:admin"})
    b.sasl_port = free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": "0",
    })
    b.start()
    admin = _admin(b)
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(SECRET, 1, 1)],
                                 request_timeout=10).values():
        f.result(10)
    _allow(admin, [
        # alice: team-a's consumer; bob: team-b's; both read `orders`.
        _acl("User:alice", RT.TOPIC, TOPIC, OP.READ), _acl("User:bob", RT.TOPIC, TOPIC, OP.READ),
        _acl("User:alice", RT.GROUP, "team-a-", OP.READ, PT.PREFIXED),
        _acl("User:bob", RT.GROUP, "team-b-", OP.READ, PT.PREFIXED),
        # bob may see (DESCRIBE) the KIP-848 group but not READ it.
        _acl("User:bob", RT.GROUP, "k848", OP.DESCRIBE),
        # carol reads `orders` and may DESCRIBE one group: no READ on any group.
        _acl("User:carol", RT.TOPIC, TOPIC, OP.READ),
        _acl("User:carol", RT.GROUP, "carols", OP.DESCRIBE),
        # dave: transactions on `dave-` ids, writes `orders` (not `payments`), group dave-g.
        _acl("User:dave", RT.TRANSACTIONAL_ID, "dave-", OP.WRITE, PT.PREFIXED),
        _acl("User:dave", RT.TOPIC, TOPIC, OP.WRITE), _acl("User:dave", RT.TOPIC, TOPIC, OP.READ),
        _acl("User:dave", RT.GROUP, "dave-g", OP.READ),
    ])
    yield b
    b.stop()


def _acl(principal: str, rtype: ResourceType, name: str, op: AclOperation,
         pattern: ResourcePatternType = PT.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, PERM.ALLOW)


def _allow(admin: AdminClient, acls: list[AclBinding]) -> None:
    for f in admin.create_acls(acls, request_timeout=10).values():
        f.result(10)


def _conf(b: CoterieBroker, user: str, **more: str) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}",  # type: ignore[attr-defined]
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret", **more}


def _admin(b: CoterieBroker) -> AdminClient:
    return AdminClient(_conf(b, "admin"))


def _raw(b: CoterieBroker, user: str) -> RawConnection:
    conn = RawConnection("127.0.0.1", b.sasl_port)  # type: ignore[attr-defined]
    assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    done = conn.request(SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{user}-secret".encode()))
    assert done.error_code == ErrorCode.none
    return conn


def _consumer(b: CoterieBroker, user: str, group: str, **more: str) -> Consumer:
    return Consumer(_conf(b, user, **{"group.id": group, "auto.offset.reset": "earliest",
                                      "enable.auto.commit": "false", **more}))


def _first_error(c: Consumer, seconds: float = 10.0) -> KafkaError | None:
    """The first error poll() reports (None if none within `seconds`)."""
    for _ in range(int(seconds / 0.5)):
        m = c.poll(0.5)
        if m is not None and m.error() is not None:
            return m.error()
    return None


def _members(b: CoterieBroker, group: str) -> list[str]:
    with _raw(b, "admin") as admin:
        described = admin.request(DescribeGroupsRequest(groups=(group,),
                                                        include_authorized_operations=False))
    assert described.groups[0].error_code == ErrorCode.none
    return sorted(m.client_id for m in described.groups[0].members)


def _commit(group: str, topics: dict[str, int], epoch: int = -1,
            member: str = "") -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=i32(epoch), member_id=member,
        group_instance_id=None, topics=tuple(OffsetCommitRequestTopic(name=t, partitions=(
            OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(o),
                                         committed_leader_epoch=i32(-1),
                                         committed_metadata=""),)) for t, o in topics.items()))


def _codes(answer: object) -> dict[str, int]:
    return {t.name: p.error_code for t in answer.topics  # type: ignore[attr-defined]
            for p in t.partitions}


# -- classic consumers (confluent-kafka) --------------------------------------------------
def test_prefixed_acls_let_a_teams_consumers_join_and_commit_and_not_another_teams(
        broker: CoterieBroker) -> None:
    group = "team-a-app"
    alice = _consumer(broker, "alice", group, **{"client.id": "alice-consumer"})
    try:
        alice.subscribe([TOPIC])
        for _ in range(40):
            alice.poll(0.25)
            if alice.assignment():
                break
        assert alice.assignment() == [TopicPartition(TOPIC, 0)]
        alice.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
        # bob (team-b, who may read the topic) cannot join team-a's group: refused, and
        # the group still has only alice (described as admin).
        bob = _consumer(broker, "bob", group, **{"client.id": "bob-consumer"})
        try:
            bob.subscribe([TOPIC])
            error = _first_error(bob)
            assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        finally:
            bob.close()
        assert _members(broker, group) == ["alice-consumer"]
    finally:
        alice.close()


def test_a_principal_that_reads_the_topic_but_not_the_group_cannot_commit(
        broker: CoterieBroker) -> None:
    with _raw(broker, "carol") as carol:
        answer = carol.request(_commit("carols", {TOPIC: 5}))
        assert _codes(answer) == {TOPIC: ErrorCode.group_authorization_failed}
        join = carol.request(JoinGroupRequest(
            group_id="carols", session_timeout=_MS(datetime.timedelta(seconds=10)),
            rebalance_timeout=_MS(datetime.timedelta(seconds=10)), member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),)))
        assert join.error_code == ErrorCode.group_authorization_failed
        beat = carol.request(HeartbeatRequest(group_id="carols", generation_id=i32(1),
                                              member_id="m", group_instance_id=None))
        assert beat.error_code == ErrorCode.group_authorization_failed
        # DESCRIBE on the group lets carol find its coordinator and fetch its offsets: none.
        found = carol.request(FindCoordinatorRequest(key_type=i8(0),
                                                     coordinator_keys=("carols", "team-a-x")))
        assert [c.error_code for c in found.coordinators] == [
            ErrorCode.none, ErrorCode.group_authorization_failed]
    with _raw(broker, "admin") as admin:
        fetched = admin.request(OffsetFetchRequest(groups=(
            OffsetFetchRequestGroup(group_id="carols", topics=None),), require_stable=False))
        assert fetched.groups[0].error_code == ErrorCode.none
        assert fetched.groups[0].topics == ()


def test_commits_and_fetches_are_filtered_by_topic(broker: CoterieBroker) -> None:
    with _raw(broker, "alice") as alice, _raw(broker, "admin") as admin:
        # alice may READ team-a groups and `orders`, not `payments`: orders is committed.
        answer = alice.request(_commit("team-a-mixed", {TOPIC: 7, SECRET: 9}))
        assert _codes(answer) == {TOPIC: ErrorCode.none,
                                  SECRET: ErrorCode.topic_authorization_failed}
        admin.request(_commit("team-a-mixed", {SECRET: 3}))
        named = alice.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
            group_id="team-a-mixed", topics=(
                OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(i32(0),)),
                OffsetFetchRequestTopics(name=SECRET, partition_indexes=(i32(0),)))),),
            require_stable=False))
        got = {t.name: (p.error_code, p.committed_offset)
               for t in named.groups[0].topics for p in t.partitions}
        assert got == {TOPIC: (ErrorCode.none, 7),
                       SECRET: (ErrorCode.topic_authorization_failed, -1)}
        whole = alice.request(OffsetFetchRequest(groups=(
            OffsetFetchRequestGroup(group_id="team-a-mixed", topics=None),
            OffsetFetchRequestGroup(group_id="team-b-x", topics=None)), require_stable=False))
        assert [t.name for t in whole.groups[0].topics] == [TOPIC]
        assert whole.groups[1].error_code == ErrorCode.group_authorization_failed
        as_admin = admin.request(OffsetFetchRequest(groups=(
            OffsetFetchRequestGroup(group_id="team-a-mixed", topics=None),),
            require_stable=False))
        assert sorted(t.name for t in as_admin.groups[0].topics) == [TOPIC, SECRET]
        # OffsetDelete needs DELETE on the group, which READ does not give.
        deleted = alice.request(OffsetDeleteRequest(group_id="team-a-mixed", topics=(
            OffsetDeleteRequestTopic(name=TOPIC, partitions=(
                OffsetDeleteRequestPartition(partition_index=i32(0)),)),)))
        assert deleted.error_code == ErrorCode.group_authorization_failed


def test_list_describe_and_delete_groups_are_filtered(broker: CoterieBroker) -> None:
    with _raw(broker, "admin") as admin:
        admin.request(_commit("carols", {TOPIC: 1}))
        admin.request(_commit("team-b-listed", {TOPIC: 1}))
        everything = {g.group_id for g in admin.request(ListGroupsRequest(
            states_filter=())).groups}
        assert {"carols", "team-b-listed"} <= everything
    with _raw(broker, "carol") as carol:
        listed = carol.request(ListGroupsRequest(states_filter=()))
        assert [g.group_id for g in listed.groups] == ["carols"]
        described = carol.request(DescribeGroupsRequest(
            groups=("carols", "team-b-listed"), include_authorized_operations=True))
        by_id = {g.group_id: g for g in described.groups}
        assert by_id["carols"].error_code == ErrorCode.none
        assert by_id["carols"].authorized_operations == 1 << 8  # DESCRIBE only
        assert by_id["team-b-listed"].error_code == ErrorCode.group_authorization_failed
        refused = carol.request(DeleteGroupsRequest(groups_names=("carols",)))
        assert refused.results[0].error_code == ErrorCode.group_authorization_failed
    with _raw(broker, "bob") as bob:
        ops = bob.request(DescribeGroupsRequest(groups=("team-b-listed",),
                                                include_authorized_operations=True))
        assert ops.groups[0].authorized_operations == (1 << 3) | (1 << 8)  # READ, DESCRIBE


# -- KIP-848 consumers ----------------------------------------------------------------------
def test_a_kip848_consumer_without_read_on_the_group_is_refused(broker: CoterieBroker) -> None:
    bob = _consumer(broker, "bob", "k848", **{"group.protocol": "consumer"})
    try:
        bob.subscribe([TOPIC])
        error = _first_error(bob)
        # librdkafka makes GROUP_AUTHORIZATION_FAILED of a KIP-848 heartbeat fatal, as the
        # Java client does, and says which error it was.
        assert error is not None and error.code() == KafkaError._FATAL
        assert "ConsumerGroupHeartbeat fatal error: Broker: Group authorization failed" in \
            error.str()
    finally:
        bob.close()
    with _raw(broker, "bob") as raw_bob:
        beat = raw_bob.request(ConsumerGroupHeartbeatRequest(
            group_id="k848", member_id=str(uuid.uuid4()), member_epoch=i32(0),
            instance_id=None, rack_id=None, rebalance_timeout=_MS(datetime.timedelta(
                seconds=30)), subscribed_topic_names=(TOPIC,), server_assignor=None,
            topic_partitions=()))
        assert beat.error_code == ErrorCode.group_authorization_failed
    with _raw(broker, "alice") as alice:
        beat = alice.request(ConsumerGroupHeartbeatRequest(
            group_id="team-a-848", member_id=str(uuid.uuid4()), member_epoch=i32(0),
            instance_id=None, rack_id=None, rebalance_timeout=_MS(datetime.timedelta(
                seconds=30)), subscribed_topic_names=(TOPIC, SECRET), server_assignor=None,
            topic_partitions=()))
        assert beat.error_code == ErrorCode.topic_authorization_failed
        assert beat.error_message == f"Not authorized to access topics: [{SECRET}]"


def _assigned_topics(c: Consumer, seconds: float = 20.0) -> set[str]:
    """The topics of the consumer's assignment once it has one (polling meanwhile)."""
    for _ in range(int(seconds / 0.25)):
        c.poll(0.25)
        topics = {tp.topic for tp in c.assignment()}
        if topics:
            return topics
    return set()


def test_a_regex_subscription_resolves_only_to_topics_the_member_may_describe(
        broker: CoterieBroker) -> None:
    """Kafka 4.2 resolves a KIP-848 group's regex for the member that asked and leaves out
    the topics it may not DESCRIBE: alice (READ on `orders` only) subscribing to both topics
    by regex is given `orders`; the super user, the same regex, both."""
    regex = f"^({TOPIC}|{SECRET})$"
    alice = _consumer(broker, "alice", "team-a-regex", **{"group.protocol": "consumer"})
    admin = _consumer(broker, "admin", "regex-admin", **{"group.protocol": "consumer"})
    try:
        alice.subscribe([regex])
        admin.subscribe([regex])
        assert _assigned_topics(admin) == {TOPIC, SECRET}
        assert _assigned_topics(alice) == {TOPIC}
        for _ in range(8):  # and it stays so
            m = alice.poll(0.25)
            assert m is None or m.error() is None, m.error()
        # What the coordinator assigned (librdkafka would hide a topic alice cannot see in
        # Metadata): ConsumerGroupDescribe, as the super user.
        operator = _admin(broker)
        described = operator.describe_consumer_groups(["team-a-regex", "regex-admin"],
                                                      request_timeout=10)
        for group, wanted in (("team-a-regex", {TOPIC}), ("regex-admin", {TOPIC, SECRET})):
            (member,) = described[group].result(10).members
            assert {tp.topic for tp in member.assignment.topic_partitions} == wanted, group
    finally:
        alice.close()
        admin.close()


# -- transactions ---------------------------------------------------------------------------
def test_a_transactional_producer_without_write_on_its_id_is_refused(
        broker: CoterieBroker) -> None:
    p = Producer(_conf(broker, "alice", **{"transactional.id": "alice-txn"}))
    with pytest.raises(KafkaException) as refused:
        p.init_transactions(10)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_transaction_with_its_acls_commits(broker: CoterieBroker) -> None:
    p = Producer(_conf(broker, "dave", **{"transactional.id": "dave-1"}))
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(TOPIC, b"paid")
    c = _consumer(broker, "dave", "dave-g")
    try:
        p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 1)],
                                      c.consumer_group_metadata(), 10)
        p.commit_transaction(10)
        got = c.committed([TopicPartition(TOPIC, 0)], 10)
        assert got[0].offset == 1
    finally:
        c.close()


def test_transaction_apis_refuse_with_kafkas_codes(broker: CoterieBroker) -> None:
    with _raw(broker, "dave") as dave:
        init = dave.request(InitProducerIdRequest(
            transactional_id="other", transaction_timeout=_MS(datetime.timedelta(seconds=60)),
            producer_id=i64(-1), producer_epoch=i16(-1)))
        assert init.error_code == ErrorCode.transactional_id_authorization_failed
        found = dave.request(FindCoordinatorRequest(key_type=i8(1),
                                                    coordinator_keys=("dave-2", "other")))
        assert [c.error_code for c in found.coordinators] == [
            ErrorCode.none, ErrorCode.transactional_id_authorization_failed]
        ok = dave.request(InitProducerIdRequest(
            transactional_id="dave-2", transaction_timeout=_MS(datetime.timedelta(seconds=60)),
            producer_id=i64(-1), producer_epoch=i16(-1)))
        assert ok.error_code == ErrorCode.none
        added = dave.request(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="dave-2", v3_and_below_producer_id=ok.producer_id,
            v3_and_below_producer_epoch=ok.producer_epoch, v3_and_below_topics=(
                AddPartitionsToTxnTopic(name=TOPIC, partitions=(i32(0),)),
                AddPartitionsToTxnTopic(name=SECRET, partitions=(i32(0),)))))
        assert {t.name: t.results_by_partition[0].partition_error_code
                for t in added.results_by_topic_v3_and_below} == {
            TOPIC: ErrorCode.operation_not_attempted,
            SECRET: ErrorCode.topic_authorization_failed}
        ended = dave.request(EndTxnRequest(transactional_id="other", producer_id=i64(1),
                                           producer_epoch=i16(0), committed=True))
        assert ended.error_code == ErrorCode.transactional_id_authorization_failed
        listed = dave.request(ListTransactionsRequest(state_filters=(), producer_id_filters=()))
        assert {s.transactional_id for s in listed.transaction_states} == {"dave-1", "dave-2"}
        described = dave.request(DescribeTransactionsRequest(transactional_ids=("dave-2",
                                                                                "alice-txn")))
        assert [s.error_code for s in described.transaction_states] == [
            ErrorCode.none, ErrorCode.transactional_id_authorization_failed]
        # WriteTxnMarkers is the brokers' own request: CLUSTER_ACTION on the cluster.
        markers = dave.request(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=ok.producer_id, producer_epoch=ok.producer_epoch,
            transaction_result=False, coordinator_epoch=i32(0),
            topics=(WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(i32(0),)),)),)))
        assert markers.markers[0].topics[0].partitions[0].error_code == \
            ErrorCode.cluster_authorization_failed


# -- streams groups (KIP-1071) ------------------------------------------------------------------

def _streams_join(conn: RawConnection, group: str, *topics: str) -> Any:
    """A StreamsGroupHeartbeat joining `group` with a WordCount-like topology: `orders` (or
    the first of `topics`) split into a repartition topic, counted into a changelog."""
    source = topics[0] if topics else TOPIC
    rep, log = f"{group}-rep", f"{group}-store-changelog"
    topology = SgTopology(epoch=i32(0), subtopologies=(
        SgSubtopology(subtopology_id="0", source_topics=(source,), source_topic_regex=(),
                      state_changelog_topics=(), repartition_sink_topics=(rep,),
                      repartition_source_topics=(), copartition_groups=()),
        SgSubtopology(subtopology_id="1", source_topics=(), source_topic_regex=(),
                      state_changelog_topics=(SgTopicInfo(
                          name=log, partitions=i32(0), replication_factor=i16(0),
                          topic_configs=()),),
                      repartition_sink_topics=(),
                      repartition_source_topics=(SgTopicInfo(
                          name=rep, partitions=i32(0), replication_factor=i16(0),
                          topic_configs=()),),
                      copartition_groups=())))
    return conn.request(StreamsGroupHeartbeatRequest(
        group_id=group, member_id=uuid.uuid4().hex, member_epoch=i32(0),
        endpoint_information_epoch=i32(0), rebalance_timeout=_MS(datetime.timedelta(
            seconds=30)), topology=topology, active_tasks=(), standby_tasks=(),
        warmup_tasks=(), process_id=uuid.uuid4().hex, client_tags=(), task_offsets=None,
        task_end_offsets=None))


def test_streams_group_heartbeats_need_their_acls(broker: CoterieBroker) -> None:
    """Kafka 4.2's checks: READ on the group; DESCRIBE on every topic the topology names;
    internal topics created only with CREATE (else named in the MISSING_INTERNAL_TOPICS
    status); Kafka's internal topics refused in a topology."""
    admin = _admin(broker)
    group = "team-a-streams"
    rep, log = f"{group}-rep", f"{group}-store-changelog"
    with _raw(broker, "carol") as carol:
        assert _streams_join(carol, "carols").error_code == \
            ErrorCode.group_authorization_failed
    with _raw(broker, "alice") as alice:
        # READ on the group and `orders`, but nothing on the internal topics.
        assert _streams_join(alice, group).error_code == ErrorCode.topic_authorization_failed
        _allow(admin, [_acl("User:alice", RT.TOPIC, f"{group}-", OP.DESCRIBE, PT.PREFIXED)])
        joined = _streams_join(alice, group)
        assert joined.error_code == ErrorCode.none, joined.error_message
        missing = [s.status_detail for s in joined.status if s.status_code == 3]
        assert missing and f"Unauthorized to CREATE on topics {rep}, {log}." in missing[0]
        assert not {rep, log} & set(admin.list_topics(timeout=10).topics)
        _allow(admin, [_acl("User:alice", RT.TOPIC, f"{group}-", OP.CREATE, PT.PREFIXED)])
        again = _streams_join(alice, group)
        assert again.error_code == ErrorCode.none, again.error_message
        assert not any("Unauthorized" in s.status_detail for s in again.status)
        assert {rep, log} <= set(admin.list_topics(timeout=10).topics)
    with _raw(broker, "admin") as root:
        refused = _streams_join(root, "any-streams", "__consumer_offsets")
        assert refused.error_code == ErrorCode.streams_invalid_topology
        assert refused.error_message == ("Use of Kafka internal topics __consumer_offsets in a "
                                         "Kafka Streams topology is prohibited.")


# -- share groups (KIP-932) ---------------------------------------------------------------------

def _share_heartbeat(conn: RawConnection, group: str, member: str, epoch: int,
                     topics: tuple[str, ...] | None) -> Any:
    return conn.request(ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=i32(epoch), rack_id=None,
        subscribed_topic_names=topics))


def _share_describe(conn: RawConnection, group: str) -> Any:
    (described,) = conn.request(ShareGroupDescribeRequest(
        group_ids=(group,), include_authorized_operations=True)).groups
    return described


def test_share_group_apis_need_their_acls(broker: CoterieBroker) -> None:
    """Kafka 4.2's checks: a heartbeat needs READ on the group, then DESCRIBE on every
    subscribed topic; ShareGroupDescribe needs DESCRIBE on the group and on the topics of
    its members' assignments."""
    group = "team-a-share"
    with _raw(broker, "carol") as carol:
        refused = _share_heartbeat(carol, "carols", str(uuid.uuid4()), 0, (TOPIC,))
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.group_authorization_failed, "Group authorization failed.")
    with _raw(broker, "alice") as alice:
        refused = _share_heartbeat(alice, group, str(uuid.uuid4()), 0, (TOPIC, SECRET))
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.topic_authorization_failed, None)
        joined = _share_heartbeat(alice, group, str(uuid.uuid4()), 0, (TOPIC,))
        assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
        described = _share_describe(alice, group)
        assert described.error_code == ErrorCode.none
        assert described.authorized_operations != -(2**31)
    with _raw(broker, "admin") as root:
        assert _share_heartbeat(root, group, str(uuid.uuid4()), 0,
                                (SECRET,)).error_code == ErrorCode.none
    with _raw(broker, "alice") as alice:
        hidden = _share_describe(alice, group)
        assert (hidden.error_code, hidden.error_message, hidden.members) == (
            ErrorCode.topic_authorization_failed,
            "The group has described topic(s) that the client is not authorized to describe.",
            ())
    with _raw(broker, "carol") as carol:
        assert _share_describe(carol, group).error_code == ErrorCode.group_authorization_failed


def _topic_id_of(conn: RawConnection, name: str) -> uuid.UUID:
    md = conn.request(build(request_schema(3, 12), {"topics": [{"name": name}]}))
    return md.topics[0].topic_id


def _share_fetch(conn: RawConnection, group: str, member: str, topic_id: uuid.UUID) -> Any:
    return conn.request(build(request_schema(78, 1), {
        "group_id": group, "member_id": member, "share_session_epoch": 0, "max_wait": 0,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}],
        "forgotten_topics_data": []}))


def test_share_fetch_and_acknowledge_need_read_on_the_group_and_the_topic(
        broker: CoterieBroker) -> None:
    """Kafka 4.2's checks: ShareFetch and ShareAcknowledge need READ on the group (else the
    whole answer is GROUP_AUTHORIZATION_FAILED), and a ShareFetch READ on each topic (else
    that topic's partitions are TOPIC_AUTHORIZATION_FAILED)."""
    with _raw(broker, "admin") as root:
        orders, payments = _topic_id_of(root, TOPIC), _topic_id_of(root, SECRET)
    with _raw(broker, "carol") as carol:  # reads orders, no READ on any group
        refused = _share_fetch(carol, "carols", str(uuid.uuid4()), orders)
        assert refused.error_code == ErrorCode.group_authorization_failed
        acked = carol.request(build(request_schema(79, 1), {
            "group_id": "carols", "member_id": str(uuid.uuid4()), "share_session_epoch": 1,
            "topics": []}))
        assert acked.error_code == ErrorCode.group_authorization_failed
    with _raw(broker, "alice") as alice:  # READ on team-a-* and on orders, not payments
        member = str(uuid.uuid4())
        assert _share_heartbeat(alice, "team-a-queue", member, 0, (TOPIC,)).error_code == \
            ErrorCode.none
        allowed = _share_fetch(alice, "team-a-queue", member, orders)
        assert allowed.error_code == ErrorCode.none
        assert allowed.responses[0].partitions[0].error_code == ErrorCode.none
        hidden = _share_fetch(alice, "team-a-queue", str(uuid.uuid4()), payments)
        assert hidden.error_code == ErrorCode.none
        assert hidden.responses[0].partitions[0].error_code == \
            ErrorCode.topic_authorization_failed
