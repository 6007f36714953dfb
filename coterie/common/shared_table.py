"""One string object for values many group members repeat, so each member keeps a reference.

A member's client id, client host, rack, server assignor and regex are decoded afresh from
every request (and every loaded record) that carries them: a new string object per member,
about 50 to 100 bytes each, although most members of a broker send the same few values
(one host per machine, one assignor, a handful of client ids and racks). `shared_str`
returns the first equal string seen instead.

The table is bounded in both directions a hostile client could push it: it stops taking new
values at `SHARED_MAX` entries (later values are kept as they come, unshared) and never takes
a string longer than `SHARED_MAX_CHARS`. Not `sys.intern`: interned strings are immortal in
newer Pythons, and nothing would bound how many a client could create.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

SHARED_MAX = 4096
SHARED_MAX_CHARS = 128

V = TypeVar("V", bound=Hashable)


class SharedTable(Generic[V]):
    """First-seen objects by value, up to `capacity` of them: `share(v)` returns the equal
    object seen first, or `v` itself (kept for later when there is room). For the other
    immutable values members repeat (subscriptions, timeouts); bounded for the same reason
    as the strings."""

    __slots__ = ("_capacity", "_seen")

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._seen: dict[V, V] = {}

    def share(self, value: V) -> V:
        found = self._seen.get(value)
        if found is not None:
            return found
        if len(self._seen) < self._capacity:
            self._seen[value] = value
        return value

    def __len__(self) -> int:
        return len(self._seen)


_SHARED: SharedTable[str] = SharedTable(SHARED_MAX)


def shared_str(value: str) -> str:
    """`value`, as the same object as every equal value seen before (module docstring)."""
    if len(value) > SHARED_MAX_CHARS:
        return value
    return _SHARED.share(value)


def shared_opt(value: str | None) -> str | None:
    """`shared_str` for an optional value (None stays None)."""
    return None if value is None else shared_str(value)
