"""Request decoding and response encoding, all through kio's generated codecs.

A frame is `request header + request body`. The header's first fields (api key, api version,
correlation id, client id) are laid out identically in header v1 and v2, so they are read with
kio's v1 header reader before we know whether this (api key, version) pair is one we speak;
only then is the full header (v2 for flexible versions, with tagged fields) and the body read.

Schemas come from kio, except coterie's own extension APIs (`coterie.wire.extensions`, API
keys outside Kafka's range), which are declared as kio entities and found here first.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import get_field_tag

from coterie.wire.extensions import EXTENSION_SCHEMAS

_read_header_v1 = entity_reader(RequestHeaderV1)
_SIZE = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")


class DecodeError(Exception):
    """The frame could not be decoded as a request of the version it claims."""


@dataclass(frozen=True, slots=True)
class RequestHeaderInfo:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> RequestHeaderInfo:
    """Read the version-independent part of a request header."""
    try:
        header, _ = _read_header_v1(frame, 0)
    except Exception as e:  # kio raises several error types on short or bad buffers
        raise DecodeError(f"undecodable request header: {e}") from e
    return RequestHeaderInfo(
        int(header.request_api_key), int(header.request_api_version),
        int(header.correlation_id), header.client_id,
    )


def request_schema(api_key: int, version: int) -> type:
    """The request class of (api key, version): a coterie extension's, else kio's."""
    extension = EXTENSION_SCHEMAS.get((api_key, version))
    if extension is not None:
        return extension[0]
    return load_request_schema(api_key, version)


@cache
def _request_codec(api_key: int, version: int) -> tuple[Any, Any, type]:
    schema = request_schema(api_key, version)
    return entity_reader(schema.__header_schema__), entity_reader(schema), schema


@cache
def response_schema(api_key: int, version: int) -> type:
    """The response class of (api key, version): a coterie extension's, else kio's."""
    extension = EXTENSION_SCHEMAS.get((api_key, version))
    if extension is not None:
        return extension[1]
    return load_response_schema(api_key, version)


def _header_tail(header_cls: type) -> bytes | None:
    """What follows the correlation id in a response header of `header_cls`, when that is
    fixed: response headers v0 and v1 hold only the correlation id, and v1 (flexible) adds
    the count of its tagged fields, of which it declares none: always uvarint 0. None for
    any other shape (kio then writes the header). Writing these few bytes directly saves a
    kio entity and its writer, about 2 us, on every response."""
    fields = dataclasses.fields(header_cls)
    if [f.name for f in fields] != ["correlation_id"] or get_field_tag(fields[0]) is not None:
        return None
    return b"\0" if header_cls.__flexible__ else b""


@cache
def _response_codec(cls: type) -> tuple[Any, Any, bytes | None]:
    header_cls = cls.__header_schema__
    return entity_writer(header_cls), entity_writer(cls), _header_tail(header_cls)


def decode_request(frame: bytes, api_key: int, version: int) -> Any:
    """Decode the body of a request whose header was already peeked."""
    read_header, read_body, _ = _request_codec(api_key, version)
    try:
        _, header_size = read_header(frame, 0)
        body, _ = read_body(frame, header_size)
    except Exception as e:
        raise DecodeError(f"undecodable api_key={api_key} v{version} request: {e}") from e
    # Trailing bytes are tolerated, as Apache Kafka does: librdkafka, for one, sends a few
    # extra bytes in some Metadata v13 requests, and refusing them breaks real clients.
    return body


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Serialise header + body with the size prefix, ready for the socket."""
    cls = type(response)
    write_header, write_body, header_tail = _response_codec(cls)
    buf = io.BytesIO()
    if header_tail is None:
        buf.write(b"\0\0\0\0")
        write_header(buf, cls.__header_schema__(correlation_id=correlation_id))
    else:
        buf.write(_SIZE_AND_CORRELATION.pack(0, correlation_id))
        buf.write(header_tail)
    write_body(buf, response)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()


def encode_request(correlation_id: int, request: Any, client_id: str | None = "coterie") -> bytes:
    """Serialise a request (used by tests and tools that speak to a broker directly)."""
    cls = type(request)
    write_header, write_body = entity_writer(cls.__header_schema__), entity_writer(cls)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    write_header(buf, cls.__header_schema__(
        request_api_key=cls.__api_key__, request_api_version=cls.__version__,
        correlation_id=correlation_id, client_id=client_id,
    ))
    write_body(buf, request)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()
