"""Timer keys (coterie.group.timers): kinds read as the strings logs and events show, each
group type names its own kinds, and a key carries exactly what its kind needs."""

from __future__ import annotations

import pytest

from coterie.group.classic.events import FENCE_REASONS as CLASSIC_REASONS
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.consumer.events import FENCE_REASONS as CONSUMER_REASONS
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.timers import TimerKey, TimerKind

KINDS = [*ClassicTimer, *ConsumerTimer]


def test_kinds_read_as_their_names():
    assert str(ClassicTimer.SESSION) == f"{ClassicTimer.SESSION}" == "session"
    assert ConsumerTimer.CONSUMER_CLIENT_ASSIGNMENT == "consumer-client-assignment"
    assert ConsumerTimer("consumer-revocation") is ConsumerTimer.CONSUMER_REVOCATION
    assert all(isinstance(kind, TimerKind) for kind in KINDS)
    assert len({str(kind) for kind in KINDS}) == len(KINDS)  # no name is two kinds'
    assert CLASSIC_REASONS["session"] == CLASSIC_REASONS[ClassicTimer.SESSION] == (
        "session timeout")
    assert CONSUMER_REASONS[ConsumerTimer.CONSUMER_SESSION] == "session timeout"


def test_keys_are_values():
    key = TimerKey(ConsumerTimer.CONSUMER_REVOCATION, "g", "m", 3)
    assert key == TimerKey(ConsumerTimer.CONSUMER_REVOCATION, "g", "m", 3)
    assert {key: 1}[TimerKey(ConsumerTimer.CONSUMER_REVOCATION, "g", "m", 3)] == 1
    assert key != TimerKey(ConsumerTimer.CONSUMER_REVOCATION, "g", "m", 4)
    with pytest.raises(AttributeError):
        key.epoch = 4  # type: ignore[misc]


def test_flat_form():
    assert TimerKey(ClassicTimer.SESSION, "g", "m").astuple() == ("session", "g", "m")
    assert TimerKey(ClassicTimer.JOIN, "g").astuple() == ("join", "g")
    assert TimerKey(ConsumerTimer.CONSUMER_CLIENT_ASSIGNMENT, "g", epoch=2).astuple() == (
        "consumer-client-assignment", "g", 2)
    assert str(TimerKey(ConsumerTimer.CONSUMER_REGEX, "g")) == "('consumer-regex', 'g')"


@pytest.mark.parametrize("args", [
    (ClassicTimer.SESSION, "g"),  # no member
    (ClassicTimer.JOIN, "g", "m"),  # a member JOIN does not take
    (ConsumerTimer.CONSUMER_REVOCATION, "g", "m"),  # no epoch
    (ConsumerTimer.CONSUMER_CLIENT_ASSIGNMENT, "g"),  # no epoch
    (ConsumerTimer.CONSUMER_SYNC, "g", "m", 1),  # an epoch CONSUMER_SYNC does not take
    ("session", "g", "m"),  # a plain string, not a kind
])
def test_a_key_that_does_not_fit_its_kind_is_refused(args):
    with pytest.raises(ValueError, match="not a timer key"):
        TimerKey(*args).check()


def test_a_key_that_fits_its_kind_passes_the_check():
    for kind in KINDS:
        key = TimerKey(kind, "g", "m" if kind.names_member else None,
                       1 if kind.names_epoch else None)
        assert key.check() is key
