import io

import pytest
from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from coterie.wire.build import build
from coterie.wire.codec import DecodeError, decode_request, encode_request, peek_header


def test_request_roundtrip_through_kio():
    data = encode_request(42, ApiVersionsRequest(client_software_name="t",
                                                 client_software_version="1"))
    head = peek_header(data[4:])
    assert (head.api_key, head.api_version, head.correlation_id) == (18, 3, 42)
    req = decode_request(data[4:], 18, 3)
    assert req.client_software_name == "t"


def test_trailing_bytes_are_tolerated_like_kafka():
    data = encode_request(1, ApiVersionsRequest(client_software_name="t",
                                                client_software_version="1"))
    assert decode_request(data[4:] + b"junk", 18, 3).client_software_name == "t"


def test_garbage_header_is_a_decode_error():
    with pytest.raises(DecodeError):
        peek_header(b"\x00")


@pytest.mark.parametrize("version", [0, 1, 9, 13])
def test_build_fits_every_metadata_version(version):
    cls = load_response_schema(3, version)
    data = {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "controller_id": 1,
            "topics": [{"error_code": 3, "name": "t", "partitions": []}]}
    entity = build(cls, data)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    back, _ = entity_reader(cls)(buf.getvalue(), 0)
    assert back.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert back.brokers[0].port == 1
