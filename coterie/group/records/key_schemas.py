"""The two key schemas of the KIP-848-era record families (consumer, streams and share
groups): every key is version 0, non-flexible, and holds the group id alone or the group id
and a member id; the int16 before it (`classic_codec.prefixed`) is the record type.

Deliberately no ``from __future__ import annotations``: kio reads the field types at runtime.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16

from coterie.group.records.classic_codec import RecordEncodeError, schema_field


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupKey:
    """A key of a record about the whole group."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = schema_field("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberKey:
    """A key of a record about one member of the group."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = schema_field("string")
    member_id: str = schema_field("string")


def key_entity(key: object, record_types: Mapping[type, int],
               family: str) -> tuple[int, type, object]:
    """(record type, schema, entity) of a key of a family whose keys are all a group id,
    or a group id and a member id: `record_types` maps the family's key classes to their
    record types."""
    record_type = record_types.get(type(key))
    if record_type is None:
        raise RecordEncodeError(f"not a {family} record key: {key!r}")
    group_id = key.group_id  # type: ignore[attr-defined]
    if hasattr(key, "member_id"):
        return record_type, MemberKey, MemberKey(group_id=group_id, member_id=key.member_id)
    return record_type, GroupKey, GroupKey(group_id=group_id)
