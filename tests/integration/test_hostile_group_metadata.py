"""Group metadata a client makes up: the consumer protocol's subscription and assignment
bytes are opaque to the wire codec, and the broker decodes them itself (a classic group's
events read the leader's assignments; a classic member joining a consumer group is read
for its subscription). Bytes declaring an array of 2**31 - 1 elements made kio's native
reader reserve it and aborted the whole broker, which no `except` catches. Sent here over
TCP to a real broker whose address space is capped at 4 GiB (as on a smaller machine; on
this one the 16 GB reservation would succeed and hide the abort): it must answer, and go
on answering other clients."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from tests.fixtures.coterie_broker import CoterieBroker
from tests.integration.clients import create_topics
from tests.kafka_raw import RawConnection
from tests.unit.wire.test_consumer_protocol import HUGE_ASSIGNMENT, HUGE_SUBSCRIPTION

_MS = datetime.timedelta(milliseconds=1)
RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
             ErrorCode.coordinator_not_available}


def _join(conn: RawConnection, group: str, member_id: str, metadata: bytes) -> object:
    request = JoinGroupRequest(
        group_id=group, session_timeout=10_000 * _MS, rebalance_timeout=10_000 * _MS,
        member_id=member_id, group_instance_id=None, protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=metadata),), reason=None)
    for _ in range(100):
        answer = conn.request(request)
        if answer.error_code not in RETRIABLE:
            return answer
    raise AssertionError(f"coordinator never ready: {answer}")


@pytest.fixture
def capped(coterie_factory: Any) -> CoterieBroker:
    broker = coterie_factory(start=False)
    broker.address_space = 4 << 30
    broker.start()
    return broker


def _alive(broker: CoterieBroker) -> None:
    with RawConnection(broker.host, broker.port) as other:
        answer = other.request(ApiVersionsRequest(client_software_name="t",
                                                  client_software_version="1"))
        assert answer.error_code == ErrorCode.none


def test_a_leaders_assignment_declaring_2_to_the_31_partitions(capped: CoterieBroker) -> None:
    """A classic consumer group whose leader hands out such an assignment: the SyncGroup is
    answered (the events of the group do not read it) and the broker lives on."""
    group = f"huge-{uuid.uuid4().hex[:8]}"
    with RawConnection(capped.host, capped.port, timeout=30.0) as conn:
        first = _join(conn, group, "", HUGE_SUBSCRIPTION)
        assert first.error_code == ErrorCode.member_id_required
        join = _join(conn, group, first.member_id, HUGE_SUBSCRIPTION)
        assert join.error_code == ErrorCode.none, join
        sync = conn.request(SyncGroupRequest(
            group_id=group, generation_id=join.generation_id, member_id=join.member_id,
            group_instance_id=None, protocol_type="consumer", protocol_name="range",
            assignments=(SyncGroupRequestAssignment(member_id=join.member_id,
                                                    assignment=HUGE_ASSIGNMENT),)))
        assert sync.error_code == ErrorCode.none
        assert sync.assignment == HUGE_ASSIGNMENT  # handed back as the leader wrote it
    _alive(capped)


def test_a_classic_member_joining_a_consumer_group_with_such_a_subscription(
        capped: CoterieBroker) -> None:
    """A consumer (KIP-848) group, then a classic member joining it with a subscription
    declaring 2**31 - 1 topics: refused with an error, and the broker lives on."""
    group, topic = f"huge-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topics(capped.bootstrap, {topic: 2})
    with RawConnection(capped.host, capped.port, timeout=30.0) as conn:
        beat = ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None,
            rack_id=None, rebalance_timeout=30_000 * _MS, subscribed_topic_names=(topic,),
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=())
        for _ in range(100):
            answer = conn.request(beat)
            if answer.error_code not in RETRIABLE:
                break
        assert answer.error_code == ErrorCode.none, answer
        first = _join(conn, group, "", HUGE_SUBSCRIPTION)
        join = (first if first.error_code != ErrorCode.member_id_required
                else _join(conn, group, first.member_id, HUGE_SUBSCRIPTION))
        assert join.error_code != ErrorCode.none, join
    _alive(capped)
