"""KIP-932 share group membership on the broker, over TCP (kio-built requests).

What a share consumer's group membership needs from the coordinator: ApiVersions advertises
ShareGroupHeartbeat and ShareGroupDescribe v1 (with ShareFetch, ShareAcknowledge and the
share offsets APIs in Kafka 4.2's versions),
members join, heartbeat and leave, partitions are shared when members outnumber them, a
silent member is fenced after the share session timeout, ShareGroupDescribe, ListGroups,
DescribeGroups and DeleteGroups see the group as Kafka 4.2 shows it, offsets APIs refuse a
share group id, the group-id namespace is shared with the other types, and the group
survives a kill -9 (its records are replayed). Apache Kafka 4.2.1's own share consumer
joins and leaves, and its `kafka-share-groups` tool lists, describes and deletes share groups
(both skip without java, javac or mvn).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32, i64

from tests.fixtures.coterie_broker import CoterieBroker
from tests.fixtures.reference_broker import (
    kafka_tool,
    load_reference_kafka,
    reference_tools_missing,
    run_kafka_tool,
)
from tests.integration.clients import broker_log_on_failure, create_topics
from tests.integration.test_java_console_consumer_848 import JVM_OPTIONS
from tests.kafka_raw import RawConnection

SESSION_MS = 3_000


@pytest.fixture
def broker(coterie_factory) -> CoterieBroker:
    return coterie_factory(config={"group.share.session.timeout.ms": str(SESSION_MS),
                                   "group.share.heartbeat.interval.ms": "1000"})


def _member() -> str:
    return str(uuid.uuid4())


def _heartbeat(conn: RawConnection, group: str, member: str, epoch: int,
               topics: tuple[str, ...] | None = None) -> Any:
    return conn.request(ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
        subscribed_topic_names=topics))


def _held(response: Any) -> set[tuple[uuid.UUID, int]]:
    assert response.assignment is not None
    return {(t.topic_id, p) for t in response.assignment.topic_partitions
            for p in t.partitions}


def _describe(conn: RawConnection, *groups: str) -> Any:
    return conn.request(ShareGroupDescribeRequest(group_ids=groups,
                                                  include_authorized_operations=False))


def _topic_id(conn: RawConnection, name: str) -> uuid.UUID:
    resp = conn.request(MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=name),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return resp.topics[0].topic_id


def test_share_apis_are_advertised_in_kafka_4_2s_versions(broker: CoterieBroker) -> None:
    with RawConnection(broker.host, broker.port) as conn:
        resp = conn.request(ApiVersionsRequest(client_software_name="test",
                                               client_software_version="1"))
    versions = {int(k.api_key): (int(k.min_version), int(k.max_version))
                for k in resp.api_keys}
    assert versions[76] == (1, 1)  # ShareGroupHeartbeat
    assert versions[77] == (1, 1)  # ShareGroupDescribe
    assert versions[78] == (1, 2)  # ShareFetch
    assert versions[79] == (1, 2)  # ShareAcknowledge
    assert versions[90] == (0, 1)  # DescribeShareGroupOffsets
    assert versions[91] == (0, 0)  # AlterShareGroupOffsets
    assert versions[92] == (0, 0)  # DeleteShareGroupOffsets
    # Kafka's broker-to-share-coordinator APIs are not served: coterie has none (83-87).
    assert not {83, 84, 85, 86, 87} & set(versions)


def test_members_join_share_partitions_and_leave(broker: CoterieBroker) -> None:
    create_topics(broker.bootstrap, {"share-orders": 2})
    m1, m2, m3 = _member(), _member(), _member()
    with broker_log_on_failure(broker.log_text), RawConnection(broker.host, broker.port) as conn:
        topic = _topic_id(conn, "share-orders")
        r1 = _heartbeat(conn, "sg", m1, 0, ("share-orders",))
        assert (r1.error_code, r1.member_id, r1.member_epoch) == (ErrorCode.none, m1, 1)
        assert r1.heartbeat_interval.total_seconds() == 1.0
        assert _held(r1) == {(topic, 0), (topic, 1)}
        r2 = _heartbeat(conn, "sg", m2, 0, ("share-orders",))
        r3 = _heartbeat(conn, "sg", m3, 0, ("share-orders",))
        assert r3.member_epoch == 3
        r1 = _heartbeat(conn, "sg", m1, 1)
        r2 = _heartbeat(conn, "sg", m2, 2)
        assert (r1.member_epoch, r2.member_epoch) == (3, 3)
        # An answer names the partitions only when they changed: read them from the group.
        (d,) = _describe(conn, "sg").groups
        held = [{(t.topic_id, p) for t in m.assignment.topic_partitions for p in t.partitions}
                for m in d.members]
        assert len(held) == 3 and all(held)  # three members, two partitions: they share
        assert set().union(*held) == {(topic, 0), (topic, 1)}
        assert sum(map(len, held)) == 4  # two holders per partition

        (d,) = _describe(conn, "sg").groups
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch,
                d.assignor_name) == (ErrorCode.none, "Stable", 3, 3, "simple")
        assert sorted(m.member_id for m in d.members) == sorted([m1, m2, m3])
        assert all(m.subscribed_topic_names == ("share-orders",) and m.client_id == "raw-test"
                   for m in d.members)
        names = {t.topic_name for m in d.members for t in m.assignment.topic_partitions}
        assert names == {"share-orders"}

        listed = conn.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                for g in listed.groups] == [("sg", "share", "Stable", "share")]
        (classic,) = conn.request(DescribeGroupsRequest(
            groups=("sg",), include_authorized_operations=False)).groups
        assert (classic.error_code, classic.error_message) == (
            ErrorCode.group_id_not_found, "Group sg is not a classic group.")

        (deleted,) = conn.request(DeleteGroupsRequest(groups_names=("sg",))).results
        assert deleted.error_code == ErrorCode.non_empty_group
        for member, epoch in ((m1, r1.member_epoch), (m2, r2.member_epoch), (m3, 3)):
            left = _heartbeat(conn, "sg", member, -1)
            assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
            assert epoch > 0
        listed = conn.request(ListGroupsRequest(states_filter=("Empty",), types_filter=()))
        assert "sg" in {g.group_id for g in listed.groups}
        (deleted,) = conn.request(DeleteGroupsRequest(groups_names=("sg",))).results
        assert deleted.error_code == ErrorCode.none
        (gone,) = _describe(conn, "sg").groups
        assert (gone.error_code, gone.error_message) == (ErrorCode.group_id_not_found,
                                                         "Group sg not found.")


def test_refusals(broker: CoterieBroker) -> None:
    create_topics(broker.bootstrap, {"share-refusals": 1})
    member = _member()
    with broker_log_on_failure(broker.log_text), RawConnection(broker.host, broker.port) as conn:
        r = _heartbeat(conn, "sr", "x" * 37, 0, ("share-refusals",))
        assert (r.error_code, r.error_message) == (ErrorCode.invalid_request, None)
        r = _heartbeat(conn, "sr", member, 0, None)
        assert (r.error_code, r.error_message) == (
            ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request.")
        r = _heartbeat(conn, "sr", member, 4)
        assert (r.error_code, r.error_message) == (ErrorCode.group_id_not_found,
                                                   "Share group sr not found.")
        assert _heartbeat(conn, "sr", member, 0, ("share-refusals",)).member_epoch == 1
        r = _heartbeat(conn, "sr", member, 5)
        assert r.error_code == ErrorCode.fenced_member_epoch
        r = _heartbeat(conn, "sr", _member(), 1)
        assert r.error_code == ErrorCode.unknown_member_id
        commit = conn.request(OffsetCommitRequest(
            group_id="sr", generation_id_or_member_epoch=1, member_id=member,
            group_instance_id=None, topics=(OffsetCommitRequestTopic(
                name="share-refusals", partitions=(OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                    committed_metadata=""),)),)))
        assert commit.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
        # An id with committed offsets is a (simple) classic group: not a share group.
        conn.request(OffsetCommitRequest(
            group_id="simple", generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=(OffsetCommitRequestTopic(
                name="share-refusals", partitions=(OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                    committed_metadata=""),)),)))
        r = _heartbeat(conn, "simple", member, 0, ("share-refusals",))
        assert (r.error_code, r.error_message) == (ErrorCode.group_id_not_found,
                                                   "Group simple is not a share group.")
        (d,) = _describe(conn, "simple").groups
        assert (d.error_code, d.error_message) == (ErrorCode.group_id_not_found,
                                                   "Group simple is not a share group.")


def test_a_silent_member_is_fenced_and_the_group_survives_a_restart(
        broker: CoterieBroker) -> None:
    create_topics(broker.bootstrap, {"share-restart": 3})
    stays, silent = _member(), _member()
    with broker_log_on_failure(broker.log_text):
        with RawConnection(broker.host, broker.port) as conn:
            _heartbeat(conn, "sk", stays, 0, ("share-restart",))
            _heartbeat(conn, "sk", silent, 0, ("share-restart",))
            epoch = 1
            deadline = time.monotonic() + SESSION_MS / 1000 * 4
            while time.monotonic() < deadline:
                r = _heartbeat(conn, "sk", stays, epoch)
                assert r.error_code == ErrorCode.none
                epoch = r.member_epoch
                (d,) = _describe(conn, "sk").groups
                if [m.member_id for m in d.members] == [stays]:
                    break
                time.sleep(0.5)
            (d,) = _describe(conn, "sk").groups
            assert [m.member_id for m in d.members] == [stays]
            r = _heartbeat(conn, "sk", stays, epoch)
            before = (d.group_epoch, r.member_epoch)
        broker.restart_after_kill9()
        with RawConnection(broker.host, broker.port) as conn:
            deadline = time.monotonic() + 20
            while True:
                (d,) = _describe(conn, "sk").groups
                if d.error_code != ErrorCode.coordinator_load_in_progress:
                    break
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert d.error_code == ErrorCode.none
            assert (d.group_epoch, d.members[0].member_epoch) == before
            assert [m.member_id for m in d.members] == [stays]
            r = _heartbeat(conn, "sk", stays, before[1])
            assert r.error_code == ErrorCode.none
            assert len({p for t in d.members[0].assignment.topic_partitions
                        for p in t.partitions}) == 3


# -- Apache Kafka 4.2.1's own clients and tools ------------------------------------------------

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
SHARE_JOIN = Path(__file__).parent / "java" / "ShareJoin.java"


def test_kafka_share_groups_tool_lists_describes_and_deletes(coterie: CoterieBroker) -> None:
    """`kafka-share-groups.sh` (Kafka 4.2.1's ShareGroupCommand) against coterie: --list
    (with --state), --describe --members / --state, --delete of an empty group and its
    refusal of a group with members. A broker with the default session timeout: each run
    of the tool takes a JVM start."""
    broker = coterie
    create_topics(broker.bootstrap, {"share-tool": 2})
    with broker_log_on_failure(broker.log_text), RawConnection(broker.host, broker.port) as conn:
        for member in (_member(), _member()):
            assert _heartbeat(conn, "tool-busy", member, 0, ("share-tool",)).error_code == 0
        idle = _member()
        _heartbeat(conn, "tool-idle", idle, 0, ("share-tool",))
        _heartbeat(conn, "tool-idle", idle, -1)
    listed = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--list", "--state")
    rows = {tuple(line.split()) for line in listed.splitlines()[1:] if line.strip()}
    assert {("tool-busy", "Stable"), ("tool-idle", "Empty")} <= rows
    members = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--describe", "--group",
                         "tool-busy", "--members")
    lines = [line.split() for line in members.splitlines() if line.startswith("tool-busy")]
    assert len(lines) == 2 and all(line[3] == "raw-test" for line in lines)
    state = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--describe", "--group",
                       "tool-busy", "--state")
    assert any(line.split()[-2:] == ["Stable", "2"] for line in state.splitlines())
    refused = run_kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--delete", "--group",
                             "tool-busy")
    assert b"is not EMPTY" in refused.stdout + refused.stderr
    deleted = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--delete", "--group",
                         "tool-idle")
    assert "was successful" in deleted
    listed = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--list")
    assert "tool-idle" not in listed.split() and "tool-busy" in listed.split()


def test_kafka_share_consumer_joins_and_leaves(coterie: CoterieBroker,
                                               tmp_path: Path) -> None:
    """Kafka 4.2.1's KafkaShareConsumer joins a share group on coterie (its heartbeats), is
    assigned every partition, is described by Kafka's Admin, and leaves when closed."""
    broker = coterie
    missing = reference_tools_missing() + [t for t in ("javac",) if shutil.which(t) is None]
    if missing:
        pytest.skip("the share consumer test needs java, javac and mvn on PATH: missing "
                    + ", ".join(missing))
    lib = Path(load_reference_kafka().fetch(
        log=lambda msg: print(msg, file=sys.stderr, flush=True)))
    subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(tmp_path), str(SHARE_JOIN)],
                   check=True, capture_output=True, timeout=120)
    create_topics(broker.bootstrap, {"share-java": 3})
    with broker_log_on_failure(broker.log_text):
        done = subprocess.run(
            ["java", *JVM_OPTIONS, "-cp", f"{tmp_path}:{lib}/*", "ShareJoin", broker.bootstrap,
             "java-share", "share-java", "6"], capture_output=True, timeout=120)
        out = done.stdout.decode(errors="replace")
        assert done.returncode == 0, out + done.stderr.decode(errors="replace")[-3000:]
        assert "STATE Stable" in out
        members = [line.split()[1:] for line in out.splitlines() if line.startswith("MEMBER")]
        assert members == [["consumer-java-share-1", "1", "3"]]
        assert "CLOSED" in out
        with RawConnection(broker.host, broker.port) as conn:
            (d,) = _describe(conn, "java-share").groups
        assert (d.error_code, d.group_state, d.members) == (ErrorCode.none, "Empty", ())


# -- the same exchange as Kafka 4.2.1 answers it ------------------------------------------------

def answers(host: str, port: int, topic: str = "share-same") -> list[tuple[Any, ...]]:
    """One scripted exchange of raw requests about share group ids, and what each answer
    says (codes, messages, states): tests/reference/test_reference_share_groups.py runs it
    against Kafka 4.2.1, and both brokers must give `SAME_ANSWERS` (but for the first
    assignment, docs/share-groups.md). The topic must exist with 2 partitions."""
    m1, m2 = "share-member-one", "share-member-two"
    out: list[tuple[Any, ...]] = []
    with RawConnection(host, port) as conn:
        # A broker's group coordinator may still be loading (Kafka creates
        # __consumer_offsets on the first FindCoordinator): wait until it answers.
        deadline = time.monotonic() + 60
        while True:
            conn.request(FindCoordinatorRequest(key_type=i8(0),
                                                coordinator_keys=("same", "same-simple")))
            groups = _describe(conn, "same", "same-simple").groups
            if all(g.error_code not in _NOT_YET for g in groups):
                break
            assert time.monotonic() < deadline, groups
            time.sleep(0.5)

        def record(name: str, r: Any) -> None:
            out.append((name, r.error_code, r.error_message))

        versions = conn.request(ApiVersionsRequest(client_software_name="t",
                                                   client_software_version="1"))
        out.append(("share.version finalized", *sorted(
            (f.min_version_level, f.max_version_level)
            for f in versions.finalized_features if f.name == "share.version")))

        record("member id too long", _heartbeat(conn, "same", "x" * 37, 0, (topic,)))
        record("no subscription", _heartbeat(conn, "same", m1, 0, None))
        record("empty rack", conn.request(ShareGroupHeartbeatRequest(
            group_id="same", member_id=m1, member_epoch=i32(0), rack_id="",
            subscribed_topic_names=(topic,))))
        record("epoch -2", _heartbeat(conn, "same", m1, -2))
        record("unknown group", _heartbeat(conn, "same", m1, 3))
        record("unknown group leave", _heartbeat(conn, "same", m1, -1))
        joined = _heartbeat(conn, "same", m1, 0, (topic,))
        out.append(("join", joined.error_code, joined.member_epoch,
                    joined.heartbeat_interval.total_seconds()))
        again = _heartbeat(conn, "same", m1, 1)
        out.append(("heartbeat", again.error_code, again.member_epoch))
        record("epoch ahead", _heartbeat(conn, "same", m1, 6))
        record("unknown member", _heartbeat(conn, "same", m2, 1))
        for g in (*_describe(conn, "same").groups, *_describe(conn, "same-nobody").groups):
            out.append(("describe", g.group_id, g.error_code, g.error_message, g.group_state,
                        g.group_epoch, g.assignor_name,
                        [(m.member_id, m.member_epoch) for m in g.members]))
        (classic,) = conn.request(DescribeGroupsRequest(
            groups=("same",), include_authorized_operations=False)).groups
        out.append(("describe groups", classic.error_code, classic.error_message,
                    classic.group_state))
        listed = conn.request(ListGroupsRequest(states_filter=(), types_filter=()))
        out.append(("list", [(g.protocol_type, g.group_state, g.group_type)
                             for g in listed.groups if g.group_id == "same"]))
        commit = conn.request(_commit("same", topic))
        out.append(("offset commit", commit.topics[0].partitions[0].error_code))
        fetched = conn.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
            group_id="same", topics=(OffsetFetchRequestTopics(
                name=topic, partition_indexes=(i32(0),)),)),), require_stable=False))
        out.append(("offset fetch", fetched.groups[0].error_code,
                    [(p.partition_index, p.committed_offset, p.error_code)
                     for t in fetched.groups[0].topics for p in t.partitions]))
        deleted = conn.request(OffsetDeleteRequest(group_id="same", topics=(
            OffsetDeleteRequestTopic(name=topic, partitions=(
                OffsetDeleteRequestPartition(partition_index=i32(0)),)),)))
        out.append(("offset delete", deleted.error_code))
        (busy,) = conn.request(DeleteGroupsRequest(groups_names=("same",))).results
        out.append(("delete with members", busy.error_code))
        left = _heartbeat(conn, "same", m1, -1)
        out.append(("leave", left.error_code, left.member_epoch))
        record("leave again", _heartbeat(conn, "same", m1, -1))
        (gone,) = conn.request(DeleteGroupsRequest(groups_names=("same",))).results
        out.append(("delete empty", gone.error_code))
        conn.request(_commit("same-simple", topic))
        record("join an id with offsets", _heartbeat(conn, "same-simple", m1, 0, (topic,)))
        (simple,) = _describe(conn, "same-simple").groups
        out.append(("describe an id with offsets", simple.error_code, simple.error_message))
    return out


_NOT_YET = (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
            ErrorCode.not_coordinator)
E = ErrorCode
SAME_ANSWERS: list[tuple[Any, ...]] = [
    ("share.version finalized", (1, 1)),
    ("member id too long", E.invalid_request, None),
    ("no subscription", E.invalid_request, "SubscribedTopicNames must be set in first request."),
    ("empty rack", E.invalid_request, "RackId can't be empty."),
    ("epoch -2", E.invalid_request, "MemberEpoch is invalid."),
    ("unknown group", E.group_id_not_found, "Share group same not found."),
    ("unknown group leave", E.group_id_not_found, "Group same not found."),
    ("join", E.none, 1, 5.0),
    ("heartbeat", E.none, 1),
    ("epoch ahead", E.fenced_member_epoch,
     "The share group member has a greater member epoch (6) than the one known by the "
     "group coordinator (1). The member must abandon all its partitions and rejoin."),
    ("unknown member", E.unknown_member_id,
     "Member share-member-two is not a member of group same."),
    ("describe", "same", E.none, None, "Stable", 1, "simple", [("share-member-one", 1)]),
    ("describe", "same-nobody", E.group_id_not_found, "Group same-nobody not found.", "", 0,
     "", []),
    ("describe groups", E.group_id_not_found, "Group same is not a classic group.", "Dead"),
    ("list", [("share", "Stable", "share")]),
    ("offset commit", E.group_id_not_found),
    ("offset fetch", E.none, [(0, -1, E.none)]),
    ("offset delete", E.group_id_not_found),
    ("delete with members", E.non_empty_group),
    ("leave", E.none, -1),
    ("leave again", E.unknown_member_id,
     "Member share-member-one is not a member of group same."),
    ("delete empty", E.none),
    ("join an id with offsets", E.group_id_not_found, "Group same-simple is not a share group."),
    ("describe an id with offsets", E.group_id_not_found,
     "Group same-simple is not a share group."),
]


def _commit(group: str, topic: str) -> Any:
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=i32(-1), member_id="",
        group_instance_id=None, topics=(OffsetCommitRequestTopic(
            name=topic, partitions=(OffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(1),
                committed_leader_epoch=i32(-1), committed_metadata=""),)),))


def test_the_answers_kafka_gives(coterie: CoterieBroker) -> None:
    """The exchange Kafka 4.2.1 answers with SAME_ANSWERS (tests/reference)."""
    create_topics(coterie.bootstrap, {"share-same": 2})
    with broker_log_on_failure(coterie.log_text):
        assert answers(coterie.host, coterie.port) == SAME_ANSWERS
