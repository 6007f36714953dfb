"""Backoff: exponential growth, a hard cap, bounded jitter, reset, and a reproducible
sequence when the random source is fixed."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.client.backoff import Backoff


def test_grows_exponentially_then_stays_at_the_cap_without_jitter() -> None:
    b = Backoff(initial_ms=100, max_ms=1000, multiplier=2, jitter=0)
    assert [b.next_ms() for _ in range(7)] == [100, 200, 400, 800, 1000, 1000, 1000]


def test_reset_starts_over() -> None:
    b = Backoff(initial_ms=50, max_ms=400, jitter=0)
    for _ in range(5):
        b.next_ms()
    b.reset()
    assert b.next_ms() == 50


def test_same_seed_same_delays_and_different_seeds_differ() -> None:
    def delays(seed: int) -> list[float]:
        b = Backoff(rng=random.Random(seed))
        return [b.next_ms() for _ in range(8)]

    assert delays(7) == delays(7)
    assert delays(7) != delays(8)


@given(seed=st.integers(0, 2**32), attempts=st.integers(1, 200),
       initial=st.floats(1, 500), factor=st.floats(1, 20), jitter=st.floats(0, 0.99))
def test_every_delay_is_within_jitter_of_its_base_and_never_above_the_cap(
        seed: int, attempts: int, initial: float, factor: float, jitter: float) -> None:
    cap = initial * factor
    b = Backoff(initial_ms=initial, max_ms=cap, jitter=jitter, rng=random.Random(seed))
    for n in range(attempts):
        base = min(cap, initial * 2 ** n)
        delay = b.next_ms()
        assert 0 <= delay <= cap
        assert base * (1 - jitter) - 1e-6 <= delay <= base * (1 + jitter) + 1e-6


@pytest.mark.parametrize("kwargs", [
    {"initial_ms": 0}, {"initial_ms": 10, "max_ms": 5}, {"multiplier": 0.5}, {"jitter": 1.0},
])
def test_nonsense_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)
