"""The consumer group type's timer kinds (`coterie.group.timers`; what each does is in
`consumer/groups.py` and `consumer/deadlines.py`)."""

from __future__ import annotations

from coterie.group.timers import TimerKind


class ConsumerTimer(TimerKind):
    CONSUMER_SESSION = "consumer-session", True  # (group, member)
    # (group, member, epoch: the member epoch it was asked to revoke at)
    CONSUMER_REVOCATION = "consumer-revocation", True, True
    # (group, epoch: the group epoch of the pending client-side assignment round)
    CONSUMER_CLIENT_ASSIGNMENT = "consumer-client-assignment", False, True
    CONSUMER_REGEX = "consumer-regex"  # (group): Kafka's "<group>-regex" executor task
    # Classic-protocol members of consumer groups (mixed groups): rejoin after being told
    # REBALANCE_IN_PROGRESS, and SyncGroup after a JoinGroup, each within the member's
    # rebalance timeout. (group, member)
    CONSUMER_JOIN = "consumer-join", True
    CONSUMER_SYNC = "consumer-sync", True
