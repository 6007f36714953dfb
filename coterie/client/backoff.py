"""Bounded exponential backoff with jitter, for reconnects and retried requests.

Every retry loop in the client asks one of these for its next delay. Delays grow by
`multiplier` from `initial_ms` up to `max_ms` and never beyond it (bounded), and each delay is
spread by +/- `jitter` so that a fleet of members that lost the same broker does not come
back in lock step. `reset()` after a success starts over from `initial_ms`.

The random source is injected (a `random.Random`), so tests can fix it and check the exact
sequence; nothing else in this module has state or side effects.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """The delays of one retry loop."""

    initial_ms: float = 100.0
    max_ms: float = 1_000.0
    multiplier: float = 2.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.initial_ms <= self.max_ms:
            raise ValueError(f"need 0 < initial_ms <= max_ms, got {self.initial_ms}, "
                             f"{self.max_ms}")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")

    def next_ms(self) -> float:
        """The delay before the next attempt, in milliseconds (and count the attempt)."""
        base = min(self.max_ms, self.initial_ms * self.multiplier ** min(self.attempts, 64))
        self.attempts += 1
        spread = base * self.jitter * (2 * self.rng.random() - 1)
        return min(self.max_ms, max(0.0, base + spread))

    def next_s(self) -> float:
        """`next_ms` in seconds, for asyncio.sleep."""
        return self.next_ms() / 1000

    def reset(self) -> None:
        self.attempts = 0
