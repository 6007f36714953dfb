"""The timer kinds of share groups (`coterie.group.timers` has the key rules).

- SHARE_SESSION (group, member): no heartbeat within the share session timeout -> the
  member is fenced (removed) and the group epoch bumped. A share member gives nothing back
  before its partitions move (several members may hold one), so there is no revocation
  timer.
"""

from __future__ import annotations

from coterie.group.timers import TimerKind


class ShareTimer(TimerKind):
    SHARE_SESSION = "share-session", True
