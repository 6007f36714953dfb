"""Timer keys: which timer of a group type a deadline belongs to, as a typed value.

Why. The group cores are pure: they never sleep or read a clock. They return `TimerOp`s
(`coterie.group.result`) naming a key and a deadline to arm, or None to cancel, and whoever
runs them (the broker's timer seam, a test's virtual time) hands a timer that fires back
through the shard's `on_timer(key, now_ms)`. The key is all a core gets back, so it must say
what the timer is for (its kind), whose it is (group, member) and, for timers bound to an
epoch, which epoch; and the same key must be rebuilt exactly to re-arm or cancel it.

Each group type names its kinds in one `TimerKind` enum of its own (the classic ones in
`classic/kinds.py`, the consumer ones in `consumer/kinds.py`), each kind saying whether its
keys name a member and an epoch; the shard routes a firing timer to the type that registered
its enum. `TimerKey.check()` says whether a key carries exactly what its kind needs, and the
test harnesses apply it to every key a core hands out, so a misbuilt key fails the tests at
once instead of making a timer nothing routes or cancels. The key is a NamedTuple, not a
validating dataclass, because one is built and hashed on every heartbeat. The runtime reads
a key's group as `key.group_id` (it cancels all timers of a group by it).

The kinds' values are readable names ("session", "consumer-revocation"), so logs and group
events read well (`str(kind) == kind.value`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class TimerKind(StrEnum):
    """The base of every group type's timer kinds. A member is declared as
    `NAME = "value", names_member, names_epoch` (both default False)."""

    names_member: bool
    names_epoch: bool

    def __new__(cls, value: str, member: bool = False, epoch: bool = False) -> TimerKind:
        kind = str.__new__(cls, value)
        kind._value_ = value
        kind.names_member = member
        kind.names_epoch = epoch
        return kind


class TimerKey(NamedTuple):
    """One timer: its kind, its group and, as its kind needs, a member and an epoch.
    Immutable and hashable: runtimes keep armed timers by key."""

    kind: TimerKind
    group_id: str
    member_id: str | None = None
    epoch: int | None = None

    def check(self) -> TimerKey:
        """The key itself, or ValueError if its kind is not a TimerKind or it does not carry
        exactly the member and epoch its kind needs."""
        kind = self.kind
        if not isinstance(kind, TimerKind) or (kind.names_member, kind.names_epoch) != (
                self.member_id is not None, self.epoch is not None):
            raise ValueError(f"not a timer key: {tuple(self)!r}")
        return self

    def astuple(self) -> tuple[str | int, ...]:
        """The key flat, kind name first, leaving out what its kind does not carry:
        ("session", "g", "m"), ("join", "g"), ("consumer-client-assignment", "g", 3)."""
        parts: tuple[str | int, ...] = (self.kind.value, self.group_id)
        if self.member_id is not None:
            parts += (self.member_id,)
        if self.epoch is not None:
            parts += (self.epoch,)
        return parts

    def __str__(self) -> str:
        return str(self.astuple())
