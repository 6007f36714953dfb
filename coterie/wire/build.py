"""Build kio response entities from plain values, whatever the API version.

A handler describes its answer once, as nested dicts of the newest version's field names
(`{"error_code": 0, "topics": [{"name": ..., "partitions": [...]}]}`), and `build` turns that
into the kio dataclass of the version the client asked for: fields the version lacks are
dropped, fields the caller left out get their schema default (or a zero value), nested lists
become tuples of the version's nested entities, and millisecond ints become the timedeltas
kio expects. This keeps one handler per API instead of one per version, while every byte on
the wire is still written by kio's generated codecs.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

_ZERO: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint8": 0, "uint16": 0, "uint32": 0,
    "uint64": 0, "float64": 0.0, "bool": False, "string": "", "bytes": b"", "records": None,
    "uuid": uuid.UUID(int=0), "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0),
}


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str | None
    nested: type | None
    is_array: bool
    optional: bool
    default: Any
    has_default: bool


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        nested = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        has_default = f.default is not dataclasses.MISSING or (
            f.default_factory is not dataclasses.MISSING
        )
        default = (
            f.default if f.default is not dataclasses.MISSING
            else f.default_factory() if f.default_factory is not dataclasses.MISSING
            else None
        )
        plans.append(_FieldPlan(
            name=f.name,
            kafka_type=f.metadata.get("kafka_type"),
            nested=nested,
            is_array=kind.is_array,
            optional=is_optional(f),
            default=default,
            has_default=has_default,
        ))
    return tuple(plans)


def _convert(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        if plan.optional or plan.nested is not None or plan.kafka_type == "records":
            return None
        # A None for a field this version cannot null (e.g. a string that became nullable
        # in a later version) is written as the type's zero value, as Kafka does.
        return () if plan.is_array else _ZERO.get(plan.kafka_type or "")
    if plan.nested is not None:
        if plan.is_array:
            return tuple(
                v if isinstance(v, plan.nested) else build(plan.nested, v) for v in value
            )
        return value if isinstance(value, plan.nested) else build(plan.nested, value)
    if plan.is_array:
        return tuple(value)
    kt = plan.kafka_type
    if kt == "error_code":
        return value if isinstance(value, ErrorCode) else ErrorCode(value)
    if kt in ("timedelta_i32", "timedelta_i64") and not isinstance(value, datetime.timedelta):
        return datetime.timedelta(milliseconds=value)
    if kt == "datetime_i64" and isinstance(value, int):
        if value < 0:
            return None if plan.optional else datetime.datetime.fromtimestamp(0, datetime.UTC)
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    return value


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Instantiate kio entity `cls` from `data`, ignoring keys the version does not have."""
    kwargs = {}
    for p in _plan(cls):
        if p.name in data:
            kwargs[p.name] = _convert(p, data[p.name])
        elif p.has_default:
            continue
        elif p.is_array:
            kwargs[p.name] = ()
        elif p.optional:
            kwargs[p.name] = None
        elif p.nested is not None:
            kwargs[p.name] = build(p.nested, {})
        else:
            kwargs[p.name] = _ZERO.get(p.kafka_type or "")
    return cls(**kwargs)


def field_names(cls: type) -> frozenset[str]:
    """The field names a kio entity class has (for version-dependent request reading)."""
    return frozenset(p.name for p in _plan(cls))
