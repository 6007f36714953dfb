"""Request decoding and response encoding, all through kio's generated codecs.

A frame is `request header + request body`. The header's first fields (api key, api version,
correlation id, client id) are laid out identically in header v1 and v2, so they are read with
kio's v1 header reader before we know whether this (api key, version) pair is one we speak;
only then is the full header (v2 for flexible versions, with tagged fields) and the body read.

Schemas come from kio, except coterie's own extension APIs (`coterie.wire.extensions`, API
keys outside Kafka's range), which are declared as kio entities and found here first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import struct
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import get_field_tag
from kio.serial.errors import OutOfBoundValue

from coterie.common.limits import shown
from coterie.wire.bounds import BoundsError, check_request
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


_KEY_AND_VERSION = struct.Struct(">hh")


def peek_api(frame: bytes) -> tuple[int, int]:
    """The api key and version of a request: its first two int16s in every request header
    version, which is what says how to read the rest. (The full header is then read once,
    by kio, in `decode_request_and_header`; `peek_header` is for requests coterie will not
    decode.)"""
    if len(frame) < _KEY_AND_VERSION.size:
        raise DecodeError(f"a {len(frame)}-byte request has no api key and version")
    key, version = _KEY_AND_VERSION.unpack_from(frame, 0)
    return key, version


def decode_request_and_header(frame: bytes, api_key: int, version: int) -> tuple[Any, Any]:
    """The request header (kio's v1 or v2 entity: correlation id, client id) and body of a
    request of (api key, version)."""
    read_header, read_body, schema = _request_codec(api_key, version)
    try:
        # Declared sizes first: kio's native reader trusts them (see coterie.wire.bounds).
        check_request(frame, schema)
    except BoundsError as e:
        raise DecodeError(f"api_key={api_key} v{version} request: {e}") from e
    try:
        header, header_size = read_header(frame, 0)
        body, _ = read_body(frame, header_size)
    except Exception as e:
        raise DecodeError(f"undecodable api_key={api_key} v{version} request: {e}") from e
    # Trailing bytes are tolerated, as Apache Kafka does: librdkafka, for one, sends a few
    # extra bytes in some Metadata v13 requests, and refusing them breaks real clients.
    return header, body


def decode_request(frame: bytes, api_key: int, version: int) -> Any:
    """Decode the body of a request of (api key, version)."""
    return decode_request_and_header(frame, api_key, version)[1]


class Preencoded:
    """A response whose body is already bytes (`encode_body_once`): encode_response only
    writes the header in front of it. The entity itself is not kept."""

    __slots__ = ("body", "schema")
    # Kept bodies are answers without an error (the server looks for INVALID_REQUEST
    # answers to log; a missing attribute would cost an exception on every answer).
    error_code = None

    def __init__(self, schema: type, body: bytes) -> None:
        self.schema = schema
        self.body = body


def encode_body_once(response: Any) -> Preencoded:
    """Encode the body of `response`, a kio response entity its handler answers with again
    and again, once: what comes back is answered by encode_response with only the header
    written in front. (A settled consumer's heartbeat answer is the same every time, and
    writing its body with kio costs more than the rest of the answer; keeping the bytes and
    not the entity costs a third of the memory.)"""
    buf = io.BytesIO()
    _response_codec(type(response))[1](buf, response)
    return Preencoded(type(response), buf.getvalue())


@dataclass(slots=True)
class FileRange:
    """`count` bytes of the open file `fd` from `offset`, sent to the socket by sendfile (the
    kernel copies page cache to socket; Python never sees the bytes). The one who sends or
    drops the response closes `fd` (`RawResponse.close`)."""

    fd: int
    offset: int
    count: int
    mode: ClassVar[str] = "rb"  # what asyncio's sendfile checks

    def fileno(self) -> int:
        return self.fd

    def seek(self, *_: int) -> None:
        """asyncio's sendfile repositions the file afterwards; a range never moves."""


@dataclass(slots=True)
class RawResponse:
    """A response body its handler wrote itself, for answers where kio's writer costs too
    much (Fetch answers carry megabytes of stored batches, which kio would copy through a
    BytesIO). `buffer` starts with `response_header_room(...)` spare bytes, which
    encode_response fills with the size prefix and response header in place, so the body is
    never copied again on its way to the socket. `rest`, if any, follows `buffer` on the
    wire: encoded bytes and file ranges to send with sendfile (the server streams it)."""

    buffer: bytearray
    rest: list[bytes | bytearray | FileRange] = field(default_factory=list)

    def close(self) -> None:
        """Release the file descriptors of `rest` (idempotent)."""
        for piece in self.rest:
            if type(piece) is FileRange and piece.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(piece.fd)
                piece.fd = -1


def response_header_room(api_key: int, version: int) -> int:
    """Bytes a RawResponse of (api key, version) leaves at its start: size prefix,
    correlation id and the fixed header tail (only fixed-shape headers are supported)."""
    tail = _response_codec(response_schema(api_key, version))[2]
    if tail is None:
        raise ValueError(f"api_key={api_key} v{version} has no fixed response header")
    return _SIZE_AND_CORRELATION.size + len(tail)


def _finish_raw(correlation_id: int, api_key: int, version: int,
                raw: RawResponse) -> bytearray | RawResponse:
    tail = _response_codec(response_schema(api_key, version))[2]
    assert tail is not None
    buf = raw.buffer
    size = len(buf) - 4 + sum(p.count if type(p) is FileRange else len(p) for p in raw.rest)
    _SIZE_AND_CORRELATION.pack_into(buf, 0, size, correlation_id)
    buf[_SIZE_AND_CORRELATION.size : _SIZE_AND_CORRELATION.size + len(tail)] = tail
    return raw if raw.rest else buf


def encode_response(correlation_id: int, response: Any, api_key: int = -1,
                    version: int = -1) -> bytes | bytearray | RawResponse:
    """Serialise header + body with the size prefix, ready for the socket. A RawResponse
    (whose api key and version must then be given) gets only its header written; it comes
    back as its buffer, or, when it has a `rest` to stream, as itself."""
    cls = type(response)
    if cls is RawResponse:
        return _finish_raw(correlation_id, api_key, version, response)
    if cls is Preencoded:
        write_header, _, header_tail = _response_codec(response.schema)
        body = response.body
        if header_tail is not None:
            return b"".join((_SIZE_AND_CORRELATION.pack(4 + len(header_tail) + len(body),
                                                         correlation_id), header_tail, body))
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        write_header(buf, response.schema.__header_schema__(correlation_id=correlation_id))
        buf.write(body)
        out = buf.getbuffer()
        _SIZE.pack_into(out, 0, len(out) - 4)
        del out
        return buf.getvalue()
    write_header, write_body, header_tail = _response_codec(cls)
    buf = io.BytesIO()
    if header_tail is None:
        buf.write(b"\0\0\0\0")
        write_header(buf, cls.__header_schema__(correlation_id=correlation_id))
    else:
        buf.write(_SIZE_AND_CORRELATION.pack(0, correlation_id))
        buf.write(header_tail)
    start = buf.tell()
    try:
        write_body(buf, response)
    except OutOfBoundValue:
        # A message quoting a name too long for this version's int16-length string
        # (issue 23): sent cut short rather than closing the connection.
        clipped = _clip_messages(response)
        if clipped is response:
            raise
        buf.seek(start)
        buf.truncate()
        write_body(buf, clipped)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()


def _clip_messages(entity: Any) -> Any:
    """`entity` with every error message longer than SHOWN_CHARS cut short (`shown`), or
    `entity` itself when none is."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if type(value) is str and f.name.endswith("message") and value != shown(value):
            changes[f.name] = shown(value)
        elif type(value) is tuple and value and dataclasses.is_dataclass(value[0]):
            items = tuple(_clip_messages(item) for item in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
        elif dataclasses.is_dataclass(value):
            item = _clip_messages(value)
            if item is not value:
                changes[f.name] = item
    return dataclasses.replace(entity, **changes) if changes else entity


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
