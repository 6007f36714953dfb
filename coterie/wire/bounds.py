"""Bounds checks on a request frame before kio decodes it.

Why this exists: kio's native reader reserves memory for an array's declared element count
before it reads a single element. A 25-byte request whose compact-array length is a varint
near 2**32 makes it ask for tens of gigabytes; the allocation fails inside native code and
aborts the whole process, which no `except` can catch. So every frame is walked here first,
following the request's kio schema, and every declared length and count is held against
the bytes actually left in the frame:

- a string or byte string may not be longer than what is left;
- an array of N elements is refused unless N elements of the smallest possible encoded size
  fit in what is left (so kio never reserves more than a few pointers per frame byte);
- a tagged field's size must fit, and a known tagged field is checked inside its own size;
- varints longer than five bytes (more than 32 bits) are refused.

The walk allocates nothing and reads each length once, so a frame of n bytes costs O(n)
work whatever it declares. A frame that fails it is undecodable (`BoundsError`, which the
codec turns into a DecodeError), and that one connection is closed, as Kafka does for a
request it cannot parse.

Every request is walked, the heartbeats of thousands of members included, so the walk must
cost little next to kio's own decoding. It is therefore compiled once per schema class into
straight-line Python (`_Compiler`): runs of fixed-size fields become one addition, arrays of
fixed-size elements one multiplication, and only lengths and counts are read.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from types import NoneType, UnionType
from typing import Union, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
)

# A checker reads one entity from `buf` at `pos`, never past `end`, and returns the position
# after it; it raises BoundsError when a declared size does not fit.
Checker = Callable[[bytes, int, int], int]

_INT16 = struct.Struct(">h")


class BoundsError(Exception):
    """A declared length or count does not fit in the bytes left in the frame."""


_FIXED = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4,
    "timedelta_i32": 4, "uint32": 4, "int64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uint64": 8, "float64": 8, "uuid": 16,
}


def _past_end(pos: int, end: int) -> BoundsError:
    return BoundsError(f"a field runs past the end of the frame ({pos} > {end})")


def _too_long(what: str, length: int, pos: int, end: int) -> BoundsError:
    return BoundsError(f"{what} of {length} bytes at byte {pos} exceeds the {end - pos} "
                       "bytes left in the frame")


def _null(name: str) -> BoundsError:
    return BoundsError(f"non-nullable field {name} was serialized as null")


def _too_many(count: int, pos: int, end: int) -> BoundsError:
    return BoundsError(f"array of {count} elements at byte {pos} cannot fit in the "
                       f"{end - pos} bytes left in the frame")


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most five bytes (32 bits), as Kafka's lengths are."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _past_end(pos, end)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise BoundsError(f"varint longer than five bytes ending at byte {pos}")


def _tagged(buf: bytes, pos: int, end: int, known: dict[int, Checker]) -> int:
    """The tagged-field section of a flexible entity: a count, then (tag, size, data) each;
    a known tag is checked inside its declared size."""
    if pos < end and buf[pos] == 0:  # no tagged fields: nearly every entity
        return pos + 1
    count, pos = _uvarint(buf, pos, end)
    if count * 2 > end - pos:
        raise BoundsError(f"{count} tagged fields at byte {pos} cannot fit in the "
                          f"{end - pos} bytes left in the frame")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise _too_long(f"tagged field {tag}", size, pos, end)
        inner = known.get(tag)
        if inner is not None and inner(buf, pos, stop) > stop:
            raise BoundsError(f"tagged field {tag} overruns its declared size")
        pos = stop
    return pos


def _is_nullable(field: dataclasses.Field) -> bool:
    t = field.type
    return get_origin(t) in (UnionType, Union) and NoneType in get_args(t)


class _Compiler:
    """Writes the checker of one entity class as Python source: a list of lines that move
    `pos` through the frame. `fixed` is the run of fixed-size bytes not yet added to
    `pos`, flushed before anything that reads a length."""

    def __init__(self, cls: type) -> None:
        self.flexible = bool(cls.__flexible__)
        self.lines: list[str] = []
        self.names: dict[str, object] = {}
        self.fixed = 0
        self.smallest = 0
        self._counter = 0

    def _name(self, value: object) -> str:
        self._counter += 1
        name = f"_k{self._counter}"
        self.names[name] = value
        return name

    def flush(self, indent: str) -> None:
        if self.fixed:
            self.lines.append(f"{indent}pos += {self.fixed}")
            self.fixed = 0

    def _uvarint_into(self, var: str, indent: str) -> None:
        """Read an unsigned varint into `var` (the common one-byte case inline)."""
        self.lines += [
            f"{indent}if pos >= end: raise _past_end(pos, end)",
            f"{indent}{var} = buf[pos]",
            f"{indent}if {var} < 0x80: pos += 1",
            f"{indent}else: {var}, pos = _uvarint(buf, pos, end)",
        ]

    def blob(self, what: str, indent: str, null: str | None) -> None:
        """A string or byte string: compact when flexible, else an int16 (strings) or int32
        (bytes) length; a negative length other than -1 is refused, and so is -1 (null)
        unless the field is nullable (`null` is None; else it names the field)."""
        self.flush(indent)
        if self.flexible:
            self._uvarint_into("n", indent)
            self.lines += [
                f"{indent}if n:",
                f"{indent}    if n - 1 > end - pos: raise _too_long({what!r}, n - 1, pos, end)",
                f"{indent}    pos += n - 1",
            ]
            if null is not None:
                self.lines.append(f"{indent}else: raise _null({null!r})")
            return
        width = 2 if what == "string" else 4
        self.lines += [
            f"{indent}if pos + {width} > end: raise _past_end(pos + {width}, end)",
            f"{indent}n = int.from_bytes(buf[pos:pos + {width}], 'big', signed=True)",
            f"{indent}pos += {width}",
            f"{indent}if n > end - pos: raise _too_long({what!r}, n, pos, end)",
            f"{indent}if n >= 0: pos += n",
            f"{indent}elif n != -1: raise BoundsError(f'{what} length {{n}} at byte {{pos}}')",
        ]
        if null is not None:
            self.lines.append(f"{indent}else: raise _null({null!r})")

    def array(self, element: tuple[str, object] | int, least: int, indent: str,
              null: str | None) -> None:
        """An array of `element`s (a checker, or a fixed size in bytes) of which each takes
        at least `least` bytes: the count must fit before anything is read. A null array
        (count -1) is refused unless the field is nullable (`null` None; else its name)."""
        self.flush(indent)
        if self.flexible:
            self._uvarint_into("c", indent)
            if null is not None:
                self.lines.append(f"{indent}if not c: raise _null({null!r})")
            self.lines += [f"{indent}if c:", f"{indent}    c -= 1"]
        else:
            self.lines += [
                f"{indent}if pos + 4 > end: raise _past_end(pos + 4, end)",
                f"{indent}c = int.from_bytes(buf[pos:pos + 4], 'big', signed=True)",
                f"{indent}pos += 4",
                f"{indent}if c < -1: raise BoundsError(f'array count {{c}} at byte {{pos}}')",
            ]
            if null is not None:
                self.lines.append(f"{indent}if c == -1: raise _null({null!r})")
            self.lines.append(f"{indent}if c > 0:")
        body = indent + "    "
        self.lines.append(f"{body}if c * {least} > end - pos: raise _too_many(c, pos, end)")
        if isinstance(element, int):
            self.lines.append(f"{body}pos += c * {element}")
            return
        kind, value = element
        if kind == "string":
            self.lines.append(f"{body}for _ in range(c):")
            self.blob(str(value), body + "    ", "an array element")
        else:
            checker = self._name(value)
            self.lines += [f"{body}for _ in range(c):",
                           f"{body}    pos = {checker}(buf, pos, end)"]

    def field(self, field: dataclasses.Field) -> None:
        kind = classify_field(field)
        # Kafka's parser refuses a null where the schema allows none, which closes the
        # connection; kio would hand the handler a None where it expects a list or a str.
        null = None if _is_nullable(field) else field.name
        if isinstance(kind, EntityField):
            checker, least = compiled(kind.type_)
            name = self._name(checker)
            self.flush("    ")
            if _is_nullable(field):
                self.lines += ["    if pos >= end: raise _past_end(pos, end)",
                               "    pos += 1",
                               f"    if buf[pos - 1] != 0xFF: pos = {name}(buf, pos, end)"]
                self.smallest += 1
            else:
                self.lines.append(f"    pos = {name}(buf, pos, end)")
                self.smallest += least
            return
        fixed_size = None if kind.is_array else _FIXED.get(field.metadata.get("kafka_type", ""))
        if fixed_size is not None:
            self.smallest += fixed_size
        elif self.flexible:
            self.smallest += 1  # a varint length or count
        else:
            self.smallest += 2 if field.metadata.get("kafka_type") == "string" and (
                not kind.is_array) else 4
        if isinstance(kind, EntityTupleField):
            checker, least = compiled(kind.type_)
            self.array(("entity", checker), least, "    ", null)
            return
        kafka_type = field.metadata["kafka_type"]
        fixed = _FIXED.get(kafka_type)
        if isinstance(kind, PrimitiveTupleField):
            if fixed is not None:
                self.array(fixed, fixed, "    ", null)
            else:
                self.array(("string", kafka_type), 1 if self.flexible else 2, "    ", null)
            return
        if fixed is not None:
            self.fixed += fixed
        elif kafka_type in ("string", "bytes", "records"):
            self.blob(kafka_type, "    ", null)
        else:
            raise TypeError(f"no bounds rule for kafka type {kafka_type!r}")

    def finish(self, tagged: dict[int, Checker]) -> Checker:
        if self.flexible:
            self.flush("    ")
            known = self._name(tagged)
            self.lines += ["    if pos >= end: raise _past_end(pos, end)",
                           "    if buf[pos] == 0: pos += 1",
                           f"    else: pos = _tagged(buf, pos, end, {known})"]
            self.smallest += 1
        self.flush("    ")
        self.lines.append("    return pos")
        source = "def check(buf, pos, end):\n" + "\n".join(self.lines) + "\n"
        namespace: dict[str, object] = {
            "_past_end": _past_end, "_too_long": _too_long, "_too_many": _too_many,
            "_uvarint": _uvarint, "_tagged": _tagged, "BoundsError": BoundsError, "_null": _null,
            **self.names,
        }
        exec(compile(source, "<coterie.wire.bounds>", "exec"), namespace)
        return namespace["check"]  # type: ignore[return-value]


@cache
def compiled(cls: type) -> tuple[Checker, int]:
    """(checker, smallest encoded size in bytes, at least 1) of kio entity class `cls`."""
    compiler = _Compiler(cls)
    tagged: dict[int, Checker] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is None:
            compiler.field(field)
        else:
            tagged[int(tag)] = _tagged_checker(field, bool(cls.__flexible__))
    return compiler.finish(tagged), max(1, compiler.smallest)


def _tagged_checker(field: dataclasses.Field, flexible: bool) -> Checker:
    """A checker of one tagged field's value (a one-field entity of its own)."""
    holder = dataclasses.make_dataclass(
        "_Tagged", [(field.name, field.type, dataclasses.field(metadata={
            k: v for k, v in field.metadata.items() if k != "tag"}))])
    holder.__flexible__ = flexible  # type: ignore[attr-defined]
    compiler = _Compiler(holder)
    compiler.field(dataclasses.fields(holder)[0])
    compiler.flexible = False  # the value alone, without a tagged section of its own
    return compiler.finish({})


def _header_end(frame: bytes, flexible: bool) -> int:
    """Where the request header ends: api key, version and correlation id (8 bytes), a
    nullable client id with an int16 length (even in flexible header v2), then header v2's
    tagged fields."""
    end = len(frame)
    if end < 10:
        raise _past_end(10, end)
    (n,) = _INT16.unpack_from(frame, 8)
    pos = 10 + max(n, 0)
    if n < -1 or pos > end:
        raise _too_long("client id", n, 10, end)
    if flexible:
        pos = _tagged(frame, pos, end, {})
    return pos


def check_request(frame: bytes, schema: type) -> None:
    """Raise BoundsError unless every length and count that `frame` (a request of `schema`,
    header included, size prefix not) declares fits in the frame."""
    end = len(frame)
    checker, _ = compiled(schema)
    pos = checker(frame, _header_end(frame, bool(schema.__flexible__)), end)
    if pos > end:
        raise _past_end(pos, end)


def check_entity(data: bytes, pos: int, schema: type) -> None:
    """Raise BoundsError unless every length and count that the `schema` entity at `pos`
    declares fits in `data` (a record's key or value, after its version)."""
    end = len(data)
    checker, _ = compiled(schema)
    if checker(data, pos, end) > end:
        raise _past_end(pos, end)
