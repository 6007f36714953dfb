"""Hypothesis strategies for requests of every API and version coterie advertises.

Values are built from kio's schema classes field by field, so a new API or version in
`coterie.broker.apis.APIS` is covered as soon as it is advertised. Nullable fields are null
often (that is where handlers that assume lists break), numbers range over the whole width
of their type (negative counts, sizes and ids included), and strings and arrays stay short so
that many requests fit in one test run, but for a rare string too long for an int16 length.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from coterie.broker.apis import APIS
from coterie.wire.codec import encode_request, request_schema


def advertised() -> list[tuple[int, int]]:
    """Every (api key, version) in coterie's ApiVersions answer."""
    return [(api.key, v) for api in APIS.values()
            for v in range(api.min_version, api.max_version + 1)]


def _ms(lo: int, hi: int) -> st.SearchStrategy[datetime.timedelta]:
    return st.one_of(st.sampled_from([-1, 0, 1, 10, 1000, 30_000]),
                     st.integers(lo, hi)).map(lambda ms: datetime.timedelta(milliseconds=ms))


_NAMES = st.one_of(st.sampled_from(["", "t", "topic", "g", "__consumer_offsets"]),
                   st.text(max_size=8))
# Now and then a string around and past what an int16 length holds, and far past it (issue
# 23: long transactional ids crashed handlers and held the event loop; long names echoed in
# a non-flexible answer closed the connection). One string in forty, so runs stay quick.
_LONG = st.sampled_from(["L" * 32_760, "L" * 32_800, "L" * 100_000])
_STRINGS = st.integers(0, 39).flatmap(lambda n: _LONG if n == 39 else _NAMES)

_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.one_of(st.sampled_from([-1, 0, 1]), st.integers(-(2**15), 2**15 - 1)),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.one_of(st.sampled_from([-2, -1, 0, 1, 3]), st.integers(-(2**31), 2**31 - 1)),
    "int64": st.one_of(st.sampled_from([-2, -1, 0, 1, 5]), st.integers(-(2**63), 2**63 - 1)),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "uuid": st.one_of(st.just(uuid.UUID(int=0)), st.uuids()),
    "string": _STRINGS,
    "bytes": st.binary(max_size=16),
    "records": st.binary(max_size=32),
    "error_code": st.sampled_from(list(ErrorCode)),
    "timedelta_i32": _ms(-(2**31), 2**31 - 1),
    "timedelta_i64": _ms(-(2**40), 2**40),
    "datetime_i64": st.integers(0, 2**41).map(
        lambda ms: datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)),
}


def _primitive(kafka_type: str, flexible: bool) -> st.SearchStrategy[Any]:
    # A non-flexible version writes strings with an int16 length: no long ones there.
    if kafka_type == "string" and not flexible:
        return _NAMES
    return _PRIMITIVES[kafka_type]


def _field(f: dataclasses.Field, flexible: bool) -> st.SearchStrategy[Any]:
    kind = classify_field(f)
    if isinstance(kind, EntityField):
        inner = entity(kind.type_)
    elif isinstance(kind, EntityTupleField):
        inner = st.lists(entity(kind.type_), max_size=3).map(tuple)
    elif isinstance(kind, PrimitiveTupleField):
        inner = st.lists(_primitive(f.metadata["kafka_type"], flexible), max_size=3).map(tuple)
    else:
        inner = _primitive(f.metadata["kafka_type"], flexible)
    return st.one_of(st.none(), inner) if is_optional(f) else inner


@cache
def entity(cls: type) -> st.SearchStrategy[Any]:
    """Instances of kio entity `cls`, every field drawn."""
    flexible = getattr(cls, "__flexible__", True)
    return st.builds(cls, **{f.name: _field(f, flexible) for f in dataclasses.fields(cls)})


def requests() -> st.SearchStrategy[tuple[int, int, Any]]:
    """(api key, version, request entity) for any advertised API and version."""
    return st.sampled_from(advertised()).flatmap(
        lambda kv: entity(request_schema(*kv)).map(lambda r: (kv[0], kv[1], r)))


def frame_of(request: Any, correlation_id: int = 1) -> bytes:
    """The size-prefixed wire frame of `request`."""
    return encode_request(correlation_id, request, client_id="fuzz")


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid frame of an advertised request, then damaged: bytes overwritten (often with a
    huge varint or int32 count), inserted, or cut off. The size prefix is fixed up, so the
    damage is in what the frame declares, not in its framing."""
    _, _, request = draw(requests())
    body = bytearray(frame_of(request)[4:])
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(8, max(8, len(body))))
        kind = draw(st.sampled_from(["huge_varint", "huge_int32", "byte", "cut", "insert"]))
        if kind == "huge_varint":
            body[at:at + 5] = draw(st.sampled_from(
                [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x10", b"\xfe\xff\xff\x7f"]))
        elif kind == "huge_int32":
            body[at:at + 4] = draw(st.sampled_from(
                [b"\x7f\xff\xff\xff", b"\x10\x00\x00\x00", b"\xff\xff\xff\xfe"]))
        elif kind == "byte":
            body[at:at + 1] = bytes([draw(st.integers(0, 255))])
        elif kind == "cut":
            del body[at:]
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=6))
    return len(body).to_bytes(4, "big") + bytes(body)
