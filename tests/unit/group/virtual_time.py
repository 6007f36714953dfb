"""Virtual time for driving a pure coordinator: the plumbing the consumer and mixed
harnesses share.

A coordinator returns records, timer operations and completed parked requests; a harness
keeps the records (to replay later), the armed timers and the answers, and fires timers in
deadline order when told that time has passed. Nothing reads a real clock.
"""

from __future__ import annotations

from typing import Any

from coterie.group.records.record import Record
from coterie.group.result import Result
from coterie.group.timers import TimerKey


class VirtualTime:
    """Records, timers and answers of one coordinator (`self.coordinator`) at `self.now`."""

    coordinator: Any

    def __init__(self, now_ms: int = 0) -> None:
        self.now = now_ms
        self.records: list[Record] = []
        self.timers: dict[TimerKey, int] = {}
        self.answers: dict[Any, Any] = {}

    def apply(self, result: Result) -> Any:
        """Take in a handler's side effects; return its response."""
        self.records.extend(result.records)
        for op in result.timers:
            op.key.check()  # every key a core hands out fits its kind
            if op.deadline_ms is None:
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms
        for token, answer in result.completed:
            self.answers[token] = answer
        return result.response

    def advance(self, ms: int) -> list[TimerKey]:
        """Move virtual time forward, firing due timers in deadline order (ties in the order
        of their keys as flat tuples, by repr); returns the keys of the timers that fired."""
        target = self.now + ms
        fired = []
        while True:
            due = [(d, k) for k, d in self.timers.items() if d <= target]
            if not due:
                break
            deadline, key = min(due, key=lambda x: (x[0], repr(x[1].astuple())))
            self.now = max(self.now, deadline)
            del self.timers[key]
            fired.append(key)
            self.apply(self.coordinator.on_timer(key, self.now))
        self.now = target
        return fired

    def load(self, records: list[Record]) -> None:
        """Replay `records` as a coordinator loading its partition, then arm its timers."""
        for record in records:
            self.coordinator.replay(record)
            self.records.append(record)
        self.apply(Result(timers=self.coordinator.timers_after_load(self.now)))
