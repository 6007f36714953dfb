"""One group type's view of the shard's one registry of groups.

A shard keeps every group, of any type, in one dict (`GroupShard.groups`): a group id names
one group, whatever its type. A group type's code reads and writes that dict through a
`GroupsOf(registry, ItsGroupClass)`, which sees only the groups of its class: `get` of an id
held by a group of another type is None, iteration skips them, and a store puts a group in
the one dict (replacing whatever held the id: a conversion). So each type's code reads as if
the dict were its own, and no id can be held twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Generic, TypeVar, overload

G = TypeVar("G")
_MISSING: Any = object()


class GroupsOf(MutableMapping[str, G], Generic[G]):
    """The groups of class `kind` in `registry` (module docstring)."""

    __slots__ = ("_kind", "_registry")

    def __init__(self, registry: dict[str, Any], kind: type[G]) -> None:
        self._registry = registry
        self._kind = kind

    @overload
    def get(self, group_id: str) -> G | None: ...

    @overload
    def get(self, group_id: str, default: Any) -> Any: ...

    def get(self, group_id: str, default: Any = None) -> Any:
        group = self._registry.get(group_id)
        return group if isinstance(group, self._kind) else default

    def __getitem__(self, group_id: str) -> G:
        group = self._registry.get(group_id)
        if not isinstance(group, self._kind):
            raise KeyError(group_id)
        return group

    def __contains__(self, group_id: object) -> bool:
        return isinstance(self._registry.get(group_id), self._kind)  # type: ignore[arg-type]

    def __setitem__(self, group_id: str, group: G) -> None:
        self._registry[group_id] = group

    def __delitem__(self, group_id: str) -> None:
        if group_id not in self:
            raise KeyError(group_id)
        del self._registry[group_id]

    def pop(self, group_id: str, default: Any = _MISSING) -> Any:
        if group_id in self:
            return self._registry.pop(group_id)
        if default is _MISSING:
            raise KeyError(group_id)
        return default

    def __iter__(self) -> Iterator[str]:
        kind = self._kind
        return (gid for gid, g in self._registry.items() if isinstance(g, kind))

    def __len__(self) -> int:
        kind = self._kind
        return sum(1 for g in self._registry.values() if isinstance(g, kind))

    def for_record(self, record: Any, ender: type, make: Callable[[str], G],
                   error: type[Exception], kind: str) -> G | None:
        """The group of this class a record of its type applies to, the one replay prologue
        of the KIP-848-era types: None when there is nothing to apply it to (a tombstone for
        a group not held) or when the record ended the group (a tombstone of its `ender`
        key, the group's metadata, which finds it without members); a new group for the
        first record of an id. `error` for a group ended with members, or for a record of an
        id a group of another type holds."""
        key, value = record.key, record.value
        group_id = key.group_id
        group = self.get(group_id)
        if value is None and group is None:
            return None
        if isinstance(key, ender) and value is None:
            if group.members or group.targets:  # type: ignore[union-attr]
                raise error(f"group {group_id} deleted while it still has members")
            del self[group_id]
            return None
        if group is None:
            if group_id in self._registry:
                raise error(f"{kind} record for {group_id}, held by a group of another type")
            group = self[group_id] = make(group_id)
        return group
