"""The kept answers of settled members' heartbeats.

A settled member's heartbeat answer (no error, no new assignment, no status) is the same
every time: the answer is kept per key (the API, its version, the member, its epoch and
whatever else the answer carries), its body encoded once (`encode_body_once`), so the
hottest path of the broker builds and encodes nothing. ConsumerGroupHeartbeat and
StreamsGroupHeartbeat keep theirs here (one per broker, in its services).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from coterie.wire.codec import encode_body_once


class SteadyAnswers:
    """Bounded: cleared whole when full (about 0.2 KB an entry, the key and the encoded
    body)."""

    __slots__ = ("_answers", "_max")

    def __init__(self, max_entries: int = 16_384) -> None:
        self._answers: dict[Hashable, Any] = {}
        self._max = max_entries

    def answer(self, key: Hashable, build: Callable[[Any, Any], Any], ctx: Any,
               response: Any) -> Any:
        """The kept answer under `key`, or `build(ctx, response)` encoded and kept."""
        answers = self._answers
        answer = answers.get(key)
        if answer is None:
            if len(answers) >= self._max:
                answers.clear()
            answer = answers[key] = encode_body_once(build(ctx, response))
        return answer
