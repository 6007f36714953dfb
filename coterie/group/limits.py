"""Limits that come from the record formats of `__consumer_offsets`.

Kafka's group records write every string (group id, member id, instance id, rack id, client
id, assignor and protocol names, subscribed topic names and regular expressions) with an int16
length (`coterie.common.limits`), so requests naming a longer one are refused up front, before
anything is applied, with a non-retriable error that names the field (issue 10, item 5).
"""

from __future__ import annotations

from collections.abc import Iterable

from coterie.common.limits import MAX_STRING_BYTES, too_long

__all__ = ["MAX_STRING_BYTES", "first_too_long", "invalid_group_id", "too_long"]


def first_too_long(fields: Iterable[tuple[str, str | None]]) -> str | None:
    """The error message for the first (name, value) whose value cannot be stored, or None."""
    for name, value in fields:
        if too_long(value):
            return f"{name} is longer than {MAX_STRING_BYTES} bytes."
    return None


def invalid_group_id(group_id: str) -> bool:
    """A group id no record can hold: empty, or too long (INVALID_GROUP_ID)."""
    return not group_id or too_long(group_id)
