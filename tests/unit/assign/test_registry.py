"""Assignors by name."""

from __future__ import annotations

import pytest

from coterie.assign import registry
from coterie.assign.range import RangeAssignor
from coterie.assign.replicated import ReplicatedAssignor
from coterie.assign.spec import Assignor


def test_builtins_by_name():
    assert registry.names() == ["cooperative-sticky", "copartitioned", "range", "replicated",
                                "roundrobin", "sticky", "uniform"]
    for name in registry.names():
        assignor = registry.lookup(name)
        assert isinstance(assignor, Assignor)
        assert assignor.name == name


def test_unknown_name():
    with pytest.raises(registry.UnknownAssignor):
        registry.lookup("no-such-assignor")


def test_register_refuses_to_shadow_unless_asked():
    with pytest.raises(ValueError):
        registry.register("range", RangeAssignor)
    registry.register("replicated-3", lambda: ReplicatedAssignor(3))
    try:
        got = registry.lookup("replicated-3")
        assert isinstance(got, ReplicatedAssignor) and got.replicas == 3
        registry.register("replicated-3", lambda: ReplicatedAssignor(4), replace=True)
        assert registry.lookup("replicated-3").replicas == 4
    finally:
        registry._FACTORIES.pop("replicated-3")
