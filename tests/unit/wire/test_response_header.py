"""encode_response writes the response header itself (a correlation id, plus an empty tag
section in flexible versions): its bytes must stay exactly what kio's header writer gives."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.index import load_response_schema
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v5.response import MetadataResponse
from kio.serial import entity_writer

from coterie.wire.codec import encode_response


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
