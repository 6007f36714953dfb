"""Wake-ups for long-polling fetches.

A fetch that has not yet gathered `min_bytes` parks on the partitions it reads; every append
to one of those partitions resolves the parked future, and the fetch reads again. There is no
polling loop: an idle broker with parked fetches does no work until data or a deadline
arrives.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

Key = tuple[str, int]


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[Key, set[asyncio.Future[None]]] = defaultdict(set)

    def notify(self, topic: str, partition: int) -> None:
        futures = self._waiting.pop((topic, partition), None)
        if futures:
            for fut in futures:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, keys: Iterable[Key], timeout_s: float) -> None:
        """Wait until one of `keys` gets new data or `timeout_s` passes."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiting[key].add(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiting = self._waiting.get(key)
                if waiting is not None:
                    waiting.discard(fut)
                    if not waiting:
                        del self._waiting[key]

    @property
    def parked(self) -> int:
        return len({id(f) for futs in self._waiting.values() for f in futs})
