"""coterie's extension APIs (ConsumerGroupPrepareAssignment 32000, ConsumerGroupInstallAssignment
32001) are written and read by kio's generic entity codecs, found through coterie.wire.codec
like any Kafka API, and built from plain dicts like any response."""

import io
import struct
import uuid

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32

from coterie.wire.build import build
from coterie.wire.codec import (
    decode_request,
    encode_request,
    encode_response,
    peek_header,
    request_schema,
    response_schema,
)
from coterie.wire.extensions import (
    CONSUMER_GROUP_INSTALL_ASSIGNMENT,
    CONSUMER_GROUP_PREPARE_ASSIGNMENT,
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
    InstalledMember,
    InstalledTopicPartitions,
)

TOPIC = uuid.UUID("0b7f3c2e-9d1a-4c55-8e61-2f4b9a7d0c13")


def test_the_keys_are_outside_kafkas_range_and_found_by_the_codec():
    assert CONSUMER_GROUP_PREPARE_ASSIGNMENT == 32000
    assert CONSUMER_GROUP_INSTALL_ASSIGNMENT == 32001
    assert request_schema(32000, 0) is ConsumerGroupPrepareAssignmentRequest
    assert response_schema(32001, 0) is ConsumerGroupInstallAssignmentResponse
    assert request_schema(18, 3).__name__ == "ApiVersionsRequest"  # kio's, as before


def test_an_install_request_round_trips_through_the_broker_decoder():
    req = ConsumerGroupInstallAssignmentRequest(
        group_id="g", member_id="m", member_epoch=i32(3), group_epoch=i32(4), error=i8(0),
        members=(InstalledMember(member_id="m", partitions=(
            InstalledTopicPartitions(topic_id=TOPIC, partitions=(i32(0), i32(2))),)),
            InstalledMember(member_id="n", partitions=())))
    frame = encode_request(7, req, client_id="c")[4:]
    head = peek_header(frame)
    assert (head.api_key, head.api_version, head.correlation_id) == (32001, 0, 7)
    assert decode_request(frame, 32001, 0) == req


def test_a_prepare_request_round_trips():
    req = ConsumerGroupPrepareAssignmentRequest(group_id="g", member_id="m",
                                                member_epoch=i32(5))
    assert decode_request(encode_request(1, req)[4:], 32000, 0) == req


def test_a_prepare_response_is_built_from_plain_data_and_read_back():
    cls = response_schema(32000, 0)
    data = {"error_code": ErrorCode.none, "group_epoch": 9, "assignor_name": "odd",
            "members": [{"member_id": "m", "member_epoch": 8, "instance_id": None,
                         "rack_id": "r1", "subscribed_topic_ids": [TOPIC],
                         "topic_partitions": [{"topic_id": TOPIC, "partitions": [1, 0]}]}],
            "topics": [{"topic_id": TOPIC, "topic_name": "foo", "num_partitions": 2}]}
    body = build(cls, data)
    wire = encode_response(11, body)
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    header, offset = entity_reader(cls.__header_schema__)(wire[4:], 0)
    back, _ = entity_reader(ConsumerGroupPrepareAssignmentResponse)(wire[4:], offset)
    assert header.correlation_id == 11 and back == body
    assert back.members[0].subscribed_topic_ids == (TOPIC,)
    assert back.members[0].rack_id == "r1" and back.members[0].instance_id is None
    assert (back.topics[0].topic_name, back.topics[0].num_partitions) == ("foo", 2)


def test_an_error_answer_needs_only_the_error():
    body = build(ConsumerGroupInstallAssignmentResponse,
                 {"error_code": ErrorCode.invalid_request, "error_message": "why"})
    buf = io.BytesIO()
    entity_writer(ConsumerGroupInstallAssignmentResponse)(buf, body)
    back, _ = entity_reader(ConsumerGroupInstallAssignmentResponse)(buf.getvalue(), 0)
    assert back.error_code == ErrorCode.invalid_request and back.error_message == "why"
