"""Assignors by protocol name, for the classic leader (which picks the strategy the group chose)
and for the KIP-848 coordinator (which resolves a member's server assignor name).

The registry holds factories, not instances, so an assignor with settings (replicated's
number of copies) can be registered under its own name with its own factory. Built-in
assignors are registered here; other modules add theirs with `register` when imported.
"""

from __future__ import annotations

from collections.abc import Callable

from coterie.assign.cooperative_sticky import CooperativeStickyAssignor
from coterie.assign.copartitioned import CopartitionedAssignor
from coterie.assign.range import RangeAssignor
from coterie.assign.replicated import ReplicatedAssignor
from coterie.assign.roundrobin import RoundRobinAssignor
from coterie.assign.spec import Assignor
from coterie.assign.sticky import StickyAssignor
from coterie.assign.uniform import UniformAssignor

AssignorFactory = Callable[[], Assignor]

_FACTORIES: dict[str, AssignorFactory] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    CopartitionedAssignor.name: CopartitionedAssignor,
    ReplicatedAssignor.name: ReplicatedAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
    UniformAssignor.name: UniformAssignor,
}


class UnknownAssignor(KeyError):
    """No assignor is registered under this name (KIP-848: UNSUPPORTED_ASSIGNOR)."""


def register(name: str, factory: AssignorFactory, *, replace: bool = False) -> None:
    """Make `factory()` the assignor for `name`; refuses to shadow a name unless `replace`."""
    if name in _FACTORIES and not replace:
        raise ValueError(f"an assignor named {name!r} is already registered")
    _FACTORIES[name] = factory


def lookup(name: str) -> Assignor:
    """A fresh assignor registered under `name`."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise UnknownAssignor(name) from None
    return factory()


def names() -> list[str]:
    """Registered assignor names, sorted."""
    return sorted(_FACTORIES)
