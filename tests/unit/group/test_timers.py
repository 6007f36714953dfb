"""Timer keys (coterie.group.timers): kinds read as the strings logs and events show, and a
key carries exactly what its kind needs."""

from __future__ import annotations

import pytest

from coterie.group.events import FENCE_REASONS
from coterie.group.timers import SHAPES, TimerKey, TimerKind


def test_kinds_read_as_their_names():
    assert str(TimerKind.SESSION) == f"{TimerKind.SESSION}" == "session"
    assert TimerKind.CONSUMER_CLIENT_ASSIGNMENT == "consumer-client-assignment"
    assert TimerKind("consumer-revocation") is TimerKind.CONSUMER_REVOCATION
    assert set(SHAPES) == set(TimerKind)
    assert FENCE_REASONS["session"] == FENCE_REASONS[TimerKind.SESSION] == "session timeout"


def test_keys_are_values():
    key = TimerKey(TimerKind.CONSUMER_REVOCATION, "g", "m", 3)
    assert key == TimerKey(TimerKind.CONSUMER_REVOCATION, "g", "m", 3)
    assert {key: 1}[TimerKey(TimerKind.CONSUMER_REVOCATION, "g", "m", 3)] == 1
    assert key != TimerKey(TimerKind.CONSUMER_REVOCATION, "g", "m", 4)
    with pytest.raises(AttributeError):
        key.epoch = 4  # type: ignore[misc]


def test_flat_form():
    assert TimerKey(TimerKind.SESSION, "g", "m").astuple() == ("session", "g", "m")
    assert TimerKey(TimerKind.JOIN, "g").astuple() == ("join", "g")
    assert TimerKey(TimerKind.CONSUMER_CLIENT_ASSIGNMENT, "g", epoch=2).astuple() == (
        "consumer-client-assignment", "g", 2)
    assert str(TimerKey(TimerKind.CONSUMER_REGEX, "g")) == "('consumer-regex', 'g')"


@pytest.mark.parametrize("args", [
    (TimerKind.SESSION, "g"),  # no member
    (TimerKind.JOIN, "g", "m"),  # a member JOIN does not take
    (TimerKind.CONSUMER_REVOCATION, "g", "m"),  # no epoch
    (TimerKind.CONSUMER_CLIENT_ASSIGNMENT, "g"),  # no epoch
    (TimerKind.CONSUMER_SYNC, "g", "m", 1),  # an epoch CONSUMER_SYNC does not take
    ("session", "g", "m"),  # a plain string, not a kind
])
def test_a_key_that_does_not_fit_its_kind_is_refused(args):
    with pytest.raises(ValueError, match="not a timer key"):
        TimerKey(*args).check()


def test_a_key_that_fits_its_kind_passes_the_check():
    for kind, (member, epoch) in SHAPES.items():
        key = TimerKey(kind, "g", "m" if member else None, 1 if epoch else None)
        assert key.check() is key
