"""The classic group timers, and what a loaded or rebuilt group must arm again.

Timers (`TimerKey`s, by kind; `coterie.group.timers`):
- SESSION (group, member): a member that neither heartbeats nor has a request parked is
  removed when its session timeout passes, which rebalances the group.
- JOIN (group): the join phase ends at the rebalance timeout even if members are missing
  (they are removed); for a group that was Empty it is first the initial rebalance delay,
  and only this timer ends that phase, even when the delay is 0 ms.
- SYNC (group): members that have not sent SyncGroup within the rebalance timeout after
  the join phase are removed, which rebalances the group (this covers a leader that never
  sends its assignment and a follower that never collects its own).
- PENDING (group, member): a member id handed out with MEMBER_ID_REQUIRED is forgotten
  if the client does not come back with it within its session timeout.

None is durable: after loading (`after_load`) every member gets a full session again, and a
CompletingRebalance group a full sync phase, its members all still to sync.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.kinds import ClassicTimer
from coterie.group.classic.leave import remove_members
from coterie.group.classic.membership import ClassicState
from coterie.group.classic.rebalance import complete_join, maybe_complete_join, session_timer
from coterie.group.result import Result, TimerOp
from coterie.group.timers import TimerKey

S = ClassicState


def on_timer(groups: MutableMapping[str, ClassicGroup], config: ClassicConfig, key: TimerKey,
             now_ms: int) -> Result:
    kind, group_id, member_id = key.kind, key.group_id, key.member_id
    group = groups.get(group_id)
    if group is None:
        return Result()
    live = group.live
    if kind is ClassicTimer.SESSION:
        if member_id not in group.members or group.awaiting(member_id):
            return Result()
        return remove_members(group, config, [member_id], now_ms,
                              f"session of {member_id} expired")
    if kind is ClassicTimer.PENDING:
        if member_id in live.pending_members:
            live.pending_members.discard(member_id)
            return maybe_complete_join(group, now_ms)
        return Result()
    if kind is ClassicTimer.JOIN:
        phase = live.join_phase
        if phase is None:
            return Result()
        final = phase.initial_deadline
        if final is not None and phase.new_member_added and now_ms < final:
            # End of an initial delay while members kept arriving: wait one more delay
            # (never past the rebalance timeout) so a starting fleet lands in one
            # generation instead of one rebalance per member. With a 0 ms delay the
            # timer is re-armed for the same instant (the broker's next loop turn): it
            # cannot spin, as each extension needs a member that joined since the last
            # firing, and the rebalance timeout still ends the chain (Kafka's 0 ms chain
            # has no end while members keep coming: its remaining time never shrinks).
            phase.new_member_added = False
            nxt = min(now_ms + config.initial_rebalance_delay_ms, final)
            return Result(timers=[TimerOp(TimerKey(ClassicTimer.JOIN, group_id), nxt)])
        return complete_join(group, now_ms)
    if kind is ClassicTimer.SYNC:
        # Members of this generation that never sent SyncGroup, whether the leader's
        # assignment arrived (Stable) or not (CompletingRebalance), are gone.
        if not group.is_(S.COMPLETING_REBALANCE, S.STABLE):
            return Result()
        missing = [mid for mid in live.pending_sync if mid in group.members]
        return remove_members(group, config, missing, now_ms, "sync timeout")
    return Result()


def after_load(group: ClassicGroup, now_ms: int) -> list[TimerOp]:
    """What a group built from its records alone must arm, and its sync phase re-derived:
    members must show up again in time (module docstring)."""
    ops = [session_timer(group.group_id, m, now_ms) for m in group.members.values()]
    if group.is_(S.COMPLETING_REBALANCE):
        group.live.pending_sync = set(group.members)
        ops.append(TimerOp(TimerKey(ClassicTimer.SYNC, group.group_id),
                           now_ms + group.durable.max_rebalance_timeout_ms()))
    return ops
