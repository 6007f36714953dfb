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
    kept = encode_body_once(_heartbeat_answer(7))
    for correlation_id in (1, 2, 2**31 - 1):
        assert encode_response(correlation_id, kept) == _kio_frame(correlation_id, kept)
    # An equal entity that was not marked is encoded afresh, with the same bytes.
    assert encode_response(5, _heartbeat_answer(7)) == encode_response(5, kept)
    non_flexible = encode_body_once(MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id="c", controller_id=1,
        topics=()))
    assert encode_response(9, non_flexible) == _kio_frame(9, non_flexible)


def test_kept_bodies_belong_to_their_entity() -> None:
    """Bodies are found by the entity's identity: another entity (here another epoch,
    created after the kept one) is encoded afresh."""
    encode_body_once(_heartbeat_answer(1))
    other = _heartbeat_answer(2)
    assert encode_response(3, other) == _kio_frame(3, other)


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
