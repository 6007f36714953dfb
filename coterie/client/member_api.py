"""The life cycle shared by APIs that wrap one `GroupMember` (leader election, task
distribution): start, close, `async with`, the member's fatal error.

Each such API holds resources the member's generation granted (a leadership, running tasks)
that must be released however the member stops: on `close()`, on leaving an `async with`
block, and even when closing the member raises. Subclasses say how in `_release`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from coterie.client.member import GroupMember

log = logging.getLogger("coterie.client")


async def call_back(callback: Callable[..., Any] | None, *args: Any) -> None:
    """Run a user callback (plain or async) if there is one. What it raises is logged, not
    propagated: a faulty callback must not stop the member's heartbeats."""
    if callback is None:
        return
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("callback %r raised", callback)


class MemberBackedApi:
    """Base of the APIs built on one `GroupMember` held in `self.member`."""

    member: GroupMember

    async def _release(self, reason: str) -> None:
        """Give up what the current generation granted (the member is stopping)."""
        raise NotImplementedError

    @property
    def error(self) -> BaseException | None:
        """The member's fatal error, if it stopped with one."""
        return self.member.error

    async def start(self) -> None:
        await self.member.start()

    async def close(self, **kwargs: Any) -> None:
        """Release, leave the group and stop; see `GroupMember.close` for the options."""
        try:
            await self.member.close(**kwargs)
        finally:
            await self._release("closing")

    async def wait_closed(self) -> None:
        """Wait until the member stops; raises its fatal error, if any."""
        await self.member.wait_closed()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            await self.member.__aexit__(exc_type, exc, tb)
        finally:
            await self._release("closing")
