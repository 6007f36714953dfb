"""Timer keys: which timer of a group core a deadline belongs to, as a typed value.

Why. The group cores are pure: they never sleep or read a clock. They return `TimerOp`s
(`coterie.group.result`) naming a key and a deadline to arm, or None to cancel, and whoever
runs them (the broker's asyncio loop, a test's virtual time) hands a timer that fires back
through `on_timer(key, now_ms)`. The key is all a core gets back, so it must say what the
timer is for (its kind), whose it is (group, member) and, for timers bound to an epoch, which
epoch; and the same key must be rebuilt exactly to re-arm or cancel it. Keys used to be plain
tuples whose first item was a kind string, spelled out at every place that built or matched
one: a misspelt kind or a missing item made a timer that nothing routes or cancels, without
any error. `TimerKind` names every kind once, and `TimerKey` has named fields; `check()` says
whether a key carries exactly what its kind needs (`SHAPES`), and the test harnesses apply it
to every key a core hands out, so such a mistake fails the tests at once. The key is a
NamedTuple, not a validating dataclass, because one is built and hashed on every heartbeat:
a tuple costs a fraction of a microsecond there, a checked dataclass several times more. The
runtime reads a key's group as `key.group_id` (it cancels all timers of a group by it).

The kinds' values are the strings the tuples used, so logs and group events read as before
(`TimerKind` is a `StrEnum`: `str(TimerKind.SESSION) == "session"`).

Kinds, and what their keys carry besides the group id:

- classic groups (`classic/coordinator.py`):
  SESSION (member), JOIN, SYNC, PENDING (member: an id handed out with MEMBER_ID_REQUIRED);
- consumer groups (`consumer/coordinator.py`):
  CONSUMER_SESSION (member), CONSUMER_REVOCATION (member, epoch: the member epoch it was
  asked to revoke at), CONSUMER_CLIENT_ASSIGNMENT (epoch: the group epoch of the pending
  client-side assignment round, `consumer/client_assignment.py`), CONSUMER_REGEX;
- classic-protocol members of consumer groups (`mixed/classic_members.py`):
  CONSUMER_JOIN (member), CONSUMER_SYNC (member).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class TimerKind(StrEnum):
    """What a timer is for; the value is the readable name logs and events show."""

    # classic groups
    SESSION = "session"
    JOIN = "join"
    SYNC = "sync"
    PENDING = "pending"
    # consumer groups (KIP-848)
    CONSUMER_SESSION = "consumer-session"
    CONSUMER_REVOCATION = "consumer-revocation"
    CONSUMER_CLIENT_ASSIGNMENT = "consumer-client-assignment"
    CONSUMER_REGEX = "consumer-regex"  # Kafka's "<group>-regex" executor task
    # classic-protocol members of consumer groups (mixed groups): rejoin after being told
    # REBALANCE_IN_PROGRESS, and SyncGroup after a JoinGroup, each within the member's
    # rebalance timeout
    CONSUMER_JOIN = "consumer-join"
    CONSUMER_SYNC = "consumer-sync"


# Per kind: whether its key names a member, and whether it names an epoch.
SHAPES: dict[TimerKind, tuple[bool, bool]] = {
    TimerKind.SESSION: (True, False),
    TimerKind.JOIN: (False, False),
    TimerKind.SYNC: (False, False),
    TimerKind.PENDING: (True, False),
    TimerKind.CONSUMER_SESSION: (True, False),
    TimerKind.CONSUMER_REVOCATION: (True, True),
    TimerKind.CONSUMER_CLIENT_ASSIGNMENT: (False, True),
    TimerKind.CONSUMER_REGEX: (False, False),
    TimerKind.CONSUMER_JOIN: (True, False),
    TimerKind.CONSUMER_SYNC: (True, False),
}


class TimerKey(NamedTuple):
    """One timer: its kind, its group and, as its kind needs (`SHAPES`), a member and an
    epoch (a member epoch for CONSUMER_REVOCATION, a group epoch for
    CONSUMER_CLIENT_ASSIGNMENT). Immutable and hashable: runtimes keep armed timers by key."""

    kind: TimerKind
    group_id: str
    member_id: str | None = None
    epoch: int | None = None

    def check(self) -> TimerKey:
        """The key itself, or ValueError if its kind is not a TimerKind or it does not carry
        exactly the member and epoch its kind needs."""
        if not isinstance(self.kind, TimerKind) or SHAPES[self.kind] != (
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
