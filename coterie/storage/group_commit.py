"""Appends arriving together share one database transaction (issue 24, point 5).

Why: on PostgreSQL an append costs its round trips and its commit (a WAL flush with
`synchronous_commit=on`), whatever its size, and one connection runs one transaction at a
time (`database.py`). Produce requests from many clients arrive while a commit is in flight;
committing each alone would make them wait in line, one flush each. `GroupCommit` queues them
instead and, as soon as the previous commit is done, writes everything queued in one
`append_many` (one transaction, the leases of every partition checked in it). An idle broker
adds no delay: the first append is committed at once. Appends to one partition keep their
order of arrival, and so their offsets.

A group fails as a whole (`append_many` is all or nothing: a lost lease, a bad payload); then
each of its appends is tried alone, so one partition's lost lease or one client's bad batch
fails only its own request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from coterie.storage.api import Append, Appended, Lease, TopicIdPartition

__all__ = ["GroupCommit"]


class _AppendsMany(Protocol):
    async def append_many(self, appends: Sequence[Append]) -> list[Appended]: ...


@dataclass(slots=True)
class _Waiting:
    append: Append
    answer: asyncio.Future[Appended]


class GroupCommit:
    """Queues appends and writes each run of them in one transaction."""

    def __init__(self, log: _AppendsMany, max_appends: int = 1_000) -> None:
        self._log = log
        self._max = max_appends
        self._queue: list[_Waiting] = []
        self._draining: asyncio.Task | None = None
        self.commits = 0  # transactions that wrote (figures for benchmarks and tests)
        self.appends = 0

    async def append(self, tp: TopicIdPartition, records: bytes | bytearray | memoryview,
                     lease: Lease) -> Appended:
        """Store `records` under `lease` with whatever else arrives meanwhile."""
        return await self.submit(Append(tp, records, lease))

    def submit(self, append: Append) -> asyncio.Future[Appended]:
        """Queue `append` now (its place in its partition's order is taken at this call, not
        when a task gets to run) and return the future of its answer."""
        loop = asyncio.get_running_loop()
        waiting = _Waiting(append, loop.create_future())
        self._queue.append(waiting)
        if self._draining is None:
            self._draining = loop.create_task(self._drain())
        return waiting.answer

    async def _drain(self) -> None:
        try:
            while self._queue:
                await self._commit(self._take())
        finally:
            self._draining = None
            for w in self._queue:  # only after a cancellation (the broker stopping)
                if not w.answer.done():
                    w.answer.cancel()

    def _take(self) -> list[_Waiting]:
        """The longest run at the queue's head that one transaction can take: at most
        `max_appends`, and one lease per partition (a partition taken back at a new epoch
        between two appends starts the next group)."""
        leases: dict[TopicIdPartition, Lease] = {}
        n = 0
        for w in self._queue[:self._max]:
            a = w.append
            if leases.setdefault(a.tp, a.lease) != a.lease:
                break
            n += 1
        group, self._queue = self._queue[:n], self._queue[n:]
        return group

    async def _commit(self, group: list[_Waiting]) -> None:
        try:
            answers = await self._log.append_many([w.append for w in group])
        except Exception as e:
            if len(group) == 1:
                _fail(group[0], e)
                return
            for w in group:  # alone, each fails or succeeds on its own
                await self._commit([w])
            return
        self.commits += 1
        self.appends += len(group)
        for w, answer in zip(group, answers, strict=True):
            if not w.answer.done():
                w.answer.set_result(answer)


def _fail(w: _Waiting, error: Exception) -> None:
    if not w.answer.done():
        w.answer.set_exception(error)
