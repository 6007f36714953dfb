"""How long a string Kafka's record formats can hold, and how one is shown in a message.

Kafka's records (`__consumer_offsets`, `__transaction_state`) write every string with an
int16 length, so no id longer than 32,767 bytes of UTF-8 can be stored. Requests are not so
bounded: flexible versions carry compact strings of any length. An id that cannot be stored
would fail when its record is written (a crash of the handler, or a retriable error the
client retries forever), so requests naming one are refused up front with a non-retriable
error (issue 10 for group, instance, member and rack ids; issue 23 for transactional ids).

Such a string is never echoed whole in an error message either: a message that names it
would not fit in the int16-length `error_message` of a non-flexible response (issue 23).
"""

from __future__ import annotations

MAX_STRING_BYTES = 32_767
# Characters of a name quoted in an error message before it is cut short.
SHOWN_CHARS = 200


def too_long(value: str | None) -> bool:
    """Whether `value` cannot be written as an int16-length string. UTF-8 takes at most
    four bytes per character, so only long strings are encoded to be measured."""
    if value is None or len(value) <= MAX_STRING_BYTES // 4:
        return False
    return len(value.encode("utf-8", "surrogatepass")) > MAX_STRING_BYTES


def shown(value: str | None) -> str:
    """`value` as an error message quotes it: whole when short, else its first
    `SHOWN_CHARS` characters and how long it was."""
    if value is None:
        return "null"
    if len(value) <= SHOWN_CHARS:
        return value
    return f"{value[:SHOWN_CHARS]}... ({len(value)} characters)"
