"""Hostile and odd requests against a real broker: it must survive and keep answering.

Issue 10: a 25-byte flexible request declaring an array of ~2**32 elements aborted the whole
broker inside kio; requests with null arrays crashed handlers (a TypeError logged as "handler
failed" and the connection dropped) where Kafka answers with an error code. Two properties
over every advertised API and version:

- damaged frames (huge counts, cut, overwritten bytes) never take the process down, and the
  broker answers the next client;
- well-formed requests with any field values, nulls included, never make a handler raise.

Issue 23's three input shapes are fixed cases of both (`ISSUE_23`): a Produce v10 whose
transactional id is 100,000 bytes long, an InitProducerId v4 with a 40,000-byte one, and a
DescribeConfigs v1 (int16 strings) of a 32,760-character topic name. Their regression tests
with what they must answer are in test_wire_fuzz_findings.py.
"""

from __future__ import annotations

import datetime
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_configs.v1.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v10.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)

from tests.fixtures.coterie_broker import CoterieBroker
from tests.kafka_raw import RawConnection
from tests.wire_requests import frame_of, mutated_frames, requests

ISSUE_FRAMES = [
    "000000150003000c000000010005637261736800ffffffff0f",  # Metadata v12
    "00000023000b000900000001000563726173680002670000271000002710010002"
    "638080808010",  # JoinGroup v9
]

ISSUE_23 = [
    (0, 10, ProduceRequest(transactional_id="x" * 100_000, acks=-1,
                           timeout=datetime.timedelta(seconds=5), topic_data=(TopicProduceData(
                               name="t", partition_data=(PartitionProduceData(
                                   index=0, records=b"\x00" * 10_000),)),))),
    (22, 4, InitProducerIdRequest(transactional_id="z" * 40_000,
                                  transaction_timeout=datetime.timedelta(seconds=60),
                                  producer_id=-1, producer_epoch=-1)),
    (32, 1, DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=2, resource_name="t" * 32_760, configuration_keys=None),),
        include_synonyms=False)),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    root: Path = tmp_path_factory.mktemp("hostile")
    # Short group timers so parked JoinGroups end quickly; no auto-created topics beyond what
    # requests ask for.
    b = CoterieBroker(root / "data", config={
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1",
        "group.max.session.timeout.ms": "2000",
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.session.timeout.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "100",
        "group.consumer.heartbeat.interval.ms": "500",
    })
    b.start()
    yield b
    b.stop()


def _alive(b: CoterieBroker) -> None:
    assert b.proc is not None and b.proc.poll() is None, \
        f"broker died:\n{b.log_text()[-3000:]}"
    with RawConnection(b.host, b.port) as c:
        answer = c.request(ApiVersionsRequest(client_software_name="t",
                                              client_software_version="1"))
    assert answer.error_code == ErrorCode.none


def _exchange(b: CoterieBroker, frame: bytes, wait: float = 0.3) -> bytes | None:
    """Send one frame on a new connection; the answer's bytes, or None if the broker closed
    the connection or is still holding the request (a parked JoinGroup or Fetch)."""
    with socket.create_connection((b.host, b.port), timeout=5) as s:
        s.sendall(frame)
        s.settimeout(wait)
        try:
            head = s.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                return None
            s.settimeout(5)
            return s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
        except (TimeoutError, ConnectionError):
            return None


def test_issue_frames_close_only_their_connection(broker):
    for hex_frame in ISSUE_FRAMES:
        with RawConnection(broker.host, broker.port) as c:
            c.send_bytes(bytes.fromhex(hex_frame))
            assert c.is_closed_by_peer()
        _alive(broker)
    assert "cannot fit in the 0 bytes left" in broker.log_text()


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frame=mutated_frames())
@example(frame=frame_of(ISSUE_23[0][2]))
@example(frame=frame_of(ISSUE_23[1][2]))
@example(frame=frame_of(ISSUE_23[2][2]))
def test_damaged_frames_of_every_api_never_stop_the_broker(broker, frame):
    _exchange(broker, frame, wait=0.05)
    assert broker.proc.poll() is None, f"broker died on {frame.hex()}:\n" \
                                       f"{broker.log_text()[-3000:]}"


def test_broker_answers_after_the_damaged_frames(broker):
    _alive(broker)


@settings(max_examples=700, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(drawn=requests())
@example(drawn=ISSUE_23[0])
@example(drawn=ISSUE_23[1])
@example(drawn=ISSUE_23[2])
def test_no_handler_raises_on_any_well_formed_request(broker, drawn):
    key, version, request = drawn
    before = len(broker.log_text())
    _exchange(broker, frame_of(request))
    new = broker.log_text()[before:]
    assert "handler failed" not in new, f"api {key} v{version}: {request!r}\n{new[-3000:]}"
    assert "serving it failed" not in new, f"api {key} v{version}: {request!r}\n{new[-3000:]}"
    assert broker.proc.poll() is None


def test_broker_answers_after_the_well_formed_requests(broker):
    _alive(broker)
