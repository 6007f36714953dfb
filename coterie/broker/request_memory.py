"""The memory that requests being received may hold together (`queued.max.request.bytes`).

A client may send the first half of a large frame and then nothing, or a byte a second:
each such connection held its partial frame, and 200 of them raised the broker's memory by
130 MB (issue 23). As in Kafka, a frame larger than `coterie.wire.framing.SMALL_FRAME`
reserves its whole size here when its size prefix arrives; while the pool is spent, such a
connection is not read (its client's sends back up), and it is read again as soon as
another frame is complete or a connection holding one is closed. Small frames (heartbeats,
commits, most requests) never wait for this pool.

Kafka's pool is not strict: a reservation succeeds while anything is left, so one request
up to `socket.request.max.bytes` always fits in an idle broker. The same here. Kafka's
default is no bound (-1); coterie's is 100 MiB (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Callable


class RequestMemory:
    """Bytes reserved by large frames being received; who waits for some."""

    __slots__ = ("capacity", "used", "waiting")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # <= 0: no bound
        self.used = 0
        self.waiting: dict[object, Callable[[], None]] = {}

    def reserve(self, size: int) -> bool:
        if 0 < self.capacity <= self.used:
            return False
        self.used += size
        return True

    def release(self, size: int) -> None:
        self.used -= size
        if self.waiting and not 0 < self.capacity <= self.used:
            waiting = list(self.waiting.values())
            self.waiting.clear()
            for wake in waiting:
                wake()

    def wait(self, owner: object, wake: Callable[[], None]) -> None:
        """Call `wake` once memory was given back (`owner` then tries again)."""
        self.waiting[owner] = wake

    def forget(self, owner: object) -> None:
        self.waiting.pop(owner, None)
