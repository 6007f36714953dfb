"""Ids too long for a group record, sent over TCP to a real broker (issue 10, item 5).

Flexible requests carry compact strings of any length, but `__consumer_offsets` records hold
strings of at most 32,767 bytes. Before the fix such a request was accepted, its append
failed, and the client got a retriable error forever (and a 40,000-byte group id made every
OffsetCommit fail the same way). Now each is refused up front with a non-retriable error, the
INVALID_REQUEST reasons are in the broker's log, and the broker carries on for everyone else.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

from tests.fixtures.coterie_broker import CoterieBroker
from tests.integration.clients import create_topics
from tests.kafka_raw import RawConnection

LONG = "g" * 40_000


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    root: Path = tmp_path_factory.mktemp("long-ids")
    b = CoterieBroker(root / "data")
    b.start()
    yield b
    b.stop()


def _join(conn: RawConnection, group: str, member_id: str = "", instance: str | None = None,
          protocol: str = "range") -> ErrorCode:
    answer = conn.request(JoinGroupRequest(
        group_id=group, session_timeout=_ms(10_000), rebalance_timeout=_ms(10_000),
        member_id=member_id, group_instance_id=instance, protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name=protocol, metadata=b""),), reason=None))
    return answer.error_code


def _heartbeat(conn: RawConnection, **fields: object) -> tuple[ErrorCode, str | None]:
    request = {"group_id": "long-ids-848", "member_id": "AAAAAAAAAAAAAAAAAAAAAA",
               "member_epoch": 0, "instance_id": None, "rack_id": None,
               "rebalance_timeout": _ms(30_000), "subscribed_topic_names": ("t",),
               "subscribed_topic_regex": None, "server_assignor": None,
               "topic_partitions": ()}
    request.update(fields)
    answer = conn.request(ConsumerGroupHeartbeatRequest(**request))  # type: ignore[arg-type]
    return answer.error_code, answer.error_message


def _commit(conn: RawConnection, group: str) -> list[ErrorCode]:
    answer = conn.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name="long-ids-topic", partitions=(
            OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                         committed_leader_epoch=-1, committed_metadata=""),)),)))
    return [p.error_code for t in answer.topics for p in t.partitions]


def test_classic_join_with_ids_no_record_can_hold(broker):
    with RawConnection(broker.host, broker.port) as conn:
        assert _join(conn, LONG) == ErrorCode.invalid_group_id
        assert _join(conn, "long-ids-classic", member_id=LONG) == ErrorCode.invalid_request
        assert _join(conn, "long-ids-classic", instance=LONG) == ErrorCode.invalid_request
        assert _join(conn, "long-ids-classic", protocol=LONG) == ErrorCode.invalid_request
        # The same connection and group then work as usual.
        assert _join(conn, "long-ids-classic") == ErrorCode.member_id_required
    log = broker.log_text()
    assert "JoinGroup v9 answered INVALID_REQUEST: The member id is longer than 32767" in log
    assert "answered INVALID_REQUEST: The group instance id is longer than 32767" in log


def test_consumer_heartbeat_with_ids_no_record_can_hold(broker):
    with RawConnection(broker.host, broker.port) as conn:
        code, message = _heartbeat(conn, group_id=LONG)
        assert (code, message) == (ErrorCode.invalid_group_id,
                                   "GroupId is longer than 32767 bytes.")
        for field, name in (("rack_id", "RackId"), ("instance_id", "InstanceId"),
                            ("server_assignor", "ServerAssignor")):
            assert _heartbeat(conn, **{field: LONG}) == (
                ErrorCode.invalid_request, f"{name} is longer than 32767 bytes.")
        assert _heartbeat(conn, subscribed_topic_names=None, subscribed_topic_regex=LONG) == (
            ErrorCode.invalid_request, "SubscribedTopicRegex is longer than 32767 bytes.")
        # A well-formed join of the same group is accepted afterwards.
        code, _ = _heartbeat(conn, member_id=str(uuid.uuid4()))
        assert code == ErrorCode.none
    log = broker.log_text()
    assert ("ConsumerGroupHeartbeat v1 answered INVALID_REQUEST: RackId is longer than 32767 "
            "bytes.") in log


def test_commit_under_a_group_id_no_record_can_hold(broker):
    create_topics(f"{broker.host}:{broker.port}", {"long-ids-topic": 1})
    with RawConnection(broker.host, broker.port) as conn:
        assert _commit(conn, LONG) == [ErrorCode.invalid_group_id]
        assert _commit(conn, "long-ids-commits") == [ErrorCode.none]
