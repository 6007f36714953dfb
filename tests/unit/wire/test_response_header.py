"""encode_response writes the response header itself (a correlation id, plus an empty tag
section in flexible versions), and reuses the body bytes of entities marked with
encode_body_once: the frames must stay exactly what kio's writers give."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.index import load_response_schema
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v5.response import MetadataResponse
from kio.serial import entity_writer

from coterie.wire.codec import encode_body_once, encode_response


def _kio_frame(correlation_id: int, response: object) -> bytes:
    cls = type(response)
    header = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header)(buf, header(correlation_id=correlation_id))
    entity_writer(cls)(buf, response)
    body = buf.getvalue()
    return len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize("correlation_id", [0, 1, 2**31 - 1, -1])
def test_flexible_header_matches_kio(correlation_id: int) -> None:
    response = ConsumerGroupHeartbeatResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
        member_id="AAAAAAAAAAAAAAAAAAAAAA", member_epoch=7,
        heartbeat_interval=datetime.timedelta(seconds=5), assignment=None)
    out = encode_response(correlation_id, response)
    assert out == _kio_frame(correlation_id, response)
    assert out[8] == 0  # header v1: no tagged fields


def _heartbeat_answer(epoch: int) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
        member_id="AAAAAAAAAAAAAAAAAAAAAA", member_epoch=epoch,
        heartbeat_interval=datetime.timedelta(seconds=5), assignment=None)


def test_a_body_encoded_once_gives_kios_frame_for_every_correlation_id() -> None:
    answer = _heartbeat_answer(7)
    kept = encode_body_once(answer)
    for correlation_id in (1, 2, 2**31 - 1):
        assert encode_response(correlation_id, kept) == _kio_frame(correlation_id, answer)
    # The entity itself is encoded afresh, with the same bytes.
    assert encode_response(5, answer) == encode_response(5, kept)
    metadata = MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id="c", controller_id=1,
        topics=())
    non_flexible = encode_body_once(metadata)  # a header of its own kind
    assert encode_response(9, non_flexible) == _kio_frame(9, metadata)


def test_a_kept_body_is_its_own_entitys() -> None:
    """Each kept body answers with its own entity's bytes: another epoch, kept later,
    does not replace or disturb the first."""
    first = encode_body_once(_heartbeat_answer(1))
    other = encode_body_once(_heartbeat_answer(2))
    assert encode_response(3, first) == _kio_frame(3, _heartbeat_answer(1))
    assert encode_response(3, other) == _kio_frame(3, _heartbeat_answer(2))


def test_non_flexible_header_matches_kio() -> None:
    response = MetadataResponse(throttle_time=datetime.timedelta(0), brokers=(),
                                cluster_id=None, controller_id=1, topics=())
    assert encode_response(42, response) == _kio_frame(42, response)


def test_every_response_header_kind_is_covered() -> None:
    """The two header schemas kio has (v0 and v1) are the two tested above; a new one would
    go through kio's own writer, but should get a test here."""
    headers = set()
    for api_key in range(100):
        for version in range(20):
            try:
                headers.add(load_response_schema(api_key, version).__header_schema__.__module__)
            except Exception:
                continue
    assert headers == {"kio.schema.response_header.v0.header",
                       "kio.schema.response_header.v1.header"}


def test_a_message_too_long_for_a_legacy_string_is_sent_cut_short():
    """Issue 23: a message quoting a 32,760-character name does not fit in DescribeConfigs
    v1's int16-length string; the answer goes out with the message cut short (it closed
    the connection before), every other field as it was."""
    from kio.schema.describe_configs.v1.response import (
        DescribeConfigsResponse,
        DescribeConfigsResult,
    )

    name = "t" * 32_760
    response = DescribeConfigsResponse(throttle_time=datetime.timedelta(0), results=(
        DescribeConfigsResult(error_code=ErrorCode.unknown_topic_or_partition,
                              error_message=f"Topic {name} does not exist.",
                              resource_type=2, resource_name=name, configs=()),))
    frame = encode_response(7, response)
    cls = load_response_schema(32, 1)
    from kio.serial import entity_reader
    decoded, _ = entity_reader(cls)(frame, 8)
    result = decoded.results[0]
    assert result.resource_name == name
    assert result.error_code == ErrorCode.unknown_topic_or_partition
    assert result.error_message.startswith("Topic ttt") and len(result.error_message) < 300
