"""The classic group type's timer kinds (`coterie.group.timers`; what each does is in
`classic/timers.py`)."""

from __future__ import annotations

from coterie.group.timers import TimerKind


class ClassicTimer(TimerKind):
    SESSION = "session", True  # (group, member)
    JOIN = "join"  # (group)
    SYNC = "sync"  # (group)
    PENDING = "pending", True  # (group, member): an id handed out with MEMBER_ID_REQUIRED
