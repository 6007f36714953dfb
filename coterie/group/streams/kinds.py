"""The timer kinds of streams groups (`coterie.group.timers` has the key rules).

- STREAMS_SESSION (group, member): no heartbeat within the streams session timeout -> the
  member is fenced (removed) and the group epoch bumped.
- STREAMS_REVOCATION (group, member, epoch): the member was asked at member epoch `epoch` to
  give tasks back and has not confirmed within its rebalance timeout -> fenced likewise.
- STREAMS_INITIAL_REBALANCE (group): the initial rebalance delay of a group that got its
  first member (Kafka 4.2's `group.streams.initial.rebalance.delay.ms`) ran out -> the first
  target assignment is computed, for every member that joined meanwhile.
"""

from __future__ import annotations

from coterie.group.timers import TimerKind


class StreamsTimer(TimerKind):
    STREAMS_SESSION = "streams-session", True
    STREAMS_REVOCATION = "streams-revocation", True, True
    STREAMS_INITIAL_REBALANCE = "streams-initial-rebalance"
