"""One group type's view of the shard's one registry of groups.

A shard keeps every group, of any type, in one dict (`GroupShard.groups`): a group id names
one group, whatever its type. A group type's code reads and writes that dict through a
`GroupsOf(registry, ItsGroupClass)`, which sees only the groups of its class: `get` of an id
held by a group of another type is None, iteration skips them, and a store puts a group in
the one dict (replacing whatever held the id: a conversion). So each type's code reads as if
the dict were its own, and no id can be held twice.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
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
