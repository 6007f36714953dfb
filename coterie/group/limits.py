"""Limits that come from the record formats of `__consumer_offsets`.

Kafka's group records write every string (group id, member id, instance id, rack id, client
id, assignor and protocol names, subscribed topic names and regular expressions) with an int16
length, so no string longer than 32,767 bytes of UTF-8 can be stored. Requests are not so
bounded: flexible versions carry compact strings of any length. A string that cannot be
stored would fail when its record is written, and the client would see a retriable error and
retry forever; so such requests are refused up front, before anything is applied, with a
non-retriable error that names the field (issue 10, item 5).
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_STRING_BYTES = 32_767


def too_long(value: str | None) -> bool:
    """Whether `value` cannot be written as an int16-length string. UTF-8 takes at most
    four bytes per character, so only long strings are encoded to be measured."""
    if value is None or len(value) <= MAX_STRING_BYTES // 4:
        return False
    return len(value.encode("utf-8", "surrogatepass")) > MAX_STRING_BYTES


def first_too_long(fields: Iterable[tuple[str, str | None]]) -> str | None:
    """The error message for the first (name, value) whose value cannot be stored, or None."""
    for name, value in fields:
        if too_long(value):
            return f"{name} is longer than {MAX_STRING_BYTES} bytes."
    return None


def invalid_group_id(group_id: str) -> bool:
    """A group id no record can hold: empty, or too long (INVALID_GROUP_ID)."""
    return not group_id or too_long(group_id)
