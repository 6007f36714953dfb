"""Requests parked in the group core, and the futures their answers come through.

A JoinGroup or SyncGroup may have no answer yet when its shard returns: the request carries
a token, and a later call (another member's join, a timer) completes it (`Result.completed`:
token -> answer). `ParkedRequests` hands out the tokens with a future each, resolves a
future when its token's answer comes, and forgets a token answered at once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Hashable
from typing import Any


class ParkedRequests:
    """Tokens and futures of parked requests (module docstring)."""

    def __init__(self) -> None:
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)

    def park(self) -> tuple[int, asyncio.Future[Any]]:
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        return token, fut

    def resolve(self, token: Hashable, answer: Any) -> None:
        fut = self._waiters.pop(token, None) if isinstance(token, int) else None
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def forget(self, token: int) -> None:
        """The request parked under `token` was answered at once."""
        self._waiters.pop(token, None)

    def __len__(self) -> int:
        return len(self._waiters)
