"""The timer seam: how the group shards' deadlines are kept and fired.

The shards are pure: a result names deadlines to arm or cancel (`TimerOp`), and a deadline
that passes is handed back to the shard of its group (`GroupShard.on_timer`). Whoever keeps
them implements `Timers`: `LoopTimers` on the broker's event loop, `MemoryTimers` in virtual
time for tests of the runtime. Both call `fire(key, now_ms)` for every deadline that passes,
in deadline order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Protocol

from coterie.group import TimerKey, TimerOp

Fire = Callable[[TimerKey, int], None]


class Timers(Protocol):
    """The seam (module docstring)."""

    def apply(self, ops: Iterable[TimerOp]) -> None:
        """Arm (deadline) or cancel (None) each key, in order."""
        ...

    def cancel_group(self, group_id: str) -> None:
        """Cancel every armed timer of `group_id` (it was rebuilt from its records)."""
        ...

    def armed(self) -> dict[TimerKey, int]:
        """The armed timers and their deadlines (a copy)."""
        ...

    def close(self) -> None:
        ...


class LoopTimers:
    """Timers on the running asyncio loop. Why not a loop timer each: at 10,000 members a
    loop handle per session timer cost about 300 bytes a member. Here every deadline lives
    in one dict, and a heap of (deadline, sequence, key) entries sits behind a single loop
    timer armed for the earliest. A key's heap entry stays where it is when its deadline
    moves later (every heartbeat pushes its member's session timer): when the entry comes
    due, the later deadline is found and the key put back for it. So a heartbeat costs one
    dict store. An earlier deadline adds an entry; entries of cancelled keys are skipped."""

    def __init__(self, clock: Callable[[], int], fire: Fire) -> None:
        self._now_ms = clock
        self._fire = fire
        self._timers: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._sequence = itertools.count()
        self._wake: asyncio.TimerHandle | None = None
        self._wake_at = 0

    def apply(self, ops: Iterable[TimerOp]) -> None:
        timers = self._timers
        now = -1
        for op in ops:
            key, deadline = op.key, op.deadline_ms
            wanted = timers.get(key)
            if deadline is None:
                if wanted is not None:
                    del timers[key]
                continue
            timers[key] = deadline
            if wanted is not None and wanted <= deadline:
                continue  # an entry at or before `deadline` is in the heap already
            heap = self._heap
            heapq.heappush(heap, (deadline, next(self._sequence), key))
            if len(heap) > 2 * len(timers) + 1024:  # mostly stale: members come and go
                heap[:] = [(d, next(self._sequence), k) for k, d in timers.items()]
                heapq.heapify(heap)
            if self._wake is None or deadline < self._wake_at:
                if now < 0:
                    now = self._now_ms()
                self._schedule(deadline, now)

    def cancel_group(self, group_id: str) -> None:
        self.apply([TimerOp(key, None) for key in list(self._timers)
                    if key.group_id == group_id])

    def armed(self) -> dict[TimerKey, int]:
        return dict(self._timers)

    def pending_entries(self) -> int:
        """Heap entries, stale ones included (it stays bounded)."""
        return len(self._heap)

    def _schedule(self, deadline: int, now: int) -> None:
        """A deadline already due (a 0 ms initial rebalance delay) still goes through the
        loop: never inside the request that armed it, but on a later turn, after the
        handlers of requests read off their sockets before that turn have run. Kafka
        likewise queues such a timer behind the requests already queued for the
        coordinator."""
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = deadline
        self._wake = asyncio.get_running_loop().call_later(
            max(0.0, (deadline - now) / 1000), self._fire_due)

    def _fire_due(self) -> None:
        """Fire every timer due now, in deadline order. Timers the firing ones arm wait for
        a later turn, even those already due (`_schedule`)."""
        self._wake = None
        heap = self._heap
        timers = self._timers
        now = self._now_ms()
        due: list[TimerKey] = []
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[2])
        for key in due:
            wanted = timers.get(key)
            if wanted is None:
                continue  # cancelled, or fired already by an earlier entry
            if wanted > now:  # pushed back since its entry went in
                heapq.heappush(heap, (wanted, next(self._sequence), key))
                continue
            del timers[key]
            self._fire(key, now)
        if heap and (self._wake is None or heap[0][0] < self._wake_at):
            self._schedule(heap[0][0], now)

    def close(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        self._timers.clear()
        self._heap.clear()


class MemoryTimers:
    """Timers in virtual time, for tests of the runtime: nothing fires until `advance`
    moves time to or past a deadline (ties in the order of their keys as flat tuples)."""

    def __init__(self, fire: Fire) -> None:
        self._fire = fire
        self._timers: dict[TimerKey, int] = {}

    def apply(self, ops: Iterable[TimerOp]) -> None:
        for op in ops:
            op.key.check()
            if op.deadline_ms is None:
                self._timers.pop(op.key, None)
            else:
                self._timers[op.key] = op.deadline_ms

    def cancel_group(self, group_id: str) -> None:
        for key in [k for k in self._timers if k.group_id == group_id]:
            del self._timers[key]

    def armed(self) -> dict[TimerKey, int]:
        return dict(self._timers)

    def advance(self, now_ms: int) -> list[TimerKey]:
        """Fire, in deadline order, every timer due at `now_ms` (those the firing ones arm
        too, if due); returns the keys that fired."""
        fired = []
        while True:
            due = [(d, k) for k, d in self._timers.items() if d <= now_ms]
            if not due:
                return fired
            _, key = min(due, key=lambda x: (x[0], repr(x[1].astuple())))
            del self._timers[key]
            fired.append(key)
            self._fire(key, now_ms)

    def close(self) -> None:
        self._timers.clear()
