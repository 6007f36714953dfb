"""Static membership (KIP-345, KIP-814): a restarted instance takes over its old member.

A JoinGroup without a member id but with a known `group.instance.id` replaces the member that
instance had: it gets a new member id, keeps its place and its assignment, and whatever the
old incarnation had parked is answered FENCED_INSTANCE_ID. A Stable group whose returning
member sends the same metadata does not rebalance: the replacement is written as the group's
record at once (and replayed), and the member is answered with the current generation (a
returning leader of JoinGroup v9+ learns that it leads, with every member's metadata, without
being made to assign: KIP-814). Otherwise the replacement joins a join phase, like any
rejoin with new metadata.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.group import ClassicGroup
from coterie.group.classic.membership import ClassicState, Membership
from coterie.group.classic.messages import JoinGroupRequest, JoinGroupResponse, SyncGroupResponse
from coterie.group.classic.rebalance import (
    join_into_phase,
    join_response,
    no_session_timer,
    session_timer,
    update_member,
    write,
)
from coterie.group.result import Result

S = ClassicState


def rejoin_static(group: ClassicGroup, config: ClassicConfig, new_id: str,
                  req: JoinGroupRequest, now_ms: int) -> Result:
    """The instance `req.group_instance_id`, known to the group, comes back as `new_id`
    (module docstring)."""
    assert req.group_instance_id is not None
    gid = group.group_id
    live = group.live
    old_id = group.static_members[req.group_instance_id]
    old = group.members[old_id]
    result = Result()
    # Whatever the old incarnation had parked is answered: it has been replaced.
    token = live.joins.pop(old_id, None)
    if token is not None:
        result.completed.append((token, JoinGroupResponse(ErrorCode.fenced_instance_id,
                                                          member_id=old_id)))
    token = live.syncs.pop(old_id, None)
    if token is not None:
        result.completed.append((token, SyncGroupResponse(ErrorCode.fenced_instance_id)))
    result.timers.append(no_session_timer(gid, old_id))
    if old_id in live.pending_sync:
        live.pending_sync.discard(old_id)
        live.pending_sync.add(new_id)
    protocols_changed = not old.same_protocols(req.protocols)
    if group.is_(S.STABLE) and not protocols_changed:
        changed = group.durable.draft()
        changed.replace_static(old_id, new_id)
        update_member(changed, new_id, req)
        write(group, changed.to_record(), result, known=changed.members)
        member = group.members[new_id]
        result.timers.append(session_timer(gid, member, now_ms))
        # KIP-814: a returning leader that can skip the assignment step still learns that
        # it leads, with every member's metadata, so it goes on watching topic metadata
        # (and rebalances when it changes) without forcing a rebalance now. Older
        # clients get the plain answer, as from Kafka.
        skip = new_id == group.leader and req.supports_skip_assignment
        members = join_response(group, new_id).members if skip else ()
        result.response = JoinGroupResponse(
            ErrorCode.none, generation_id=group.generation,
            protocol_type=group.protocol_type, protocol_name=group.protocol,
            leader=group.leader or "", member_id=new_id, members=members,
            skip_assignment=skip,
        )
        return result

    def replace(draft: Membership) -> None:
        draft.replace_static(old_id, new_id)
        update_member(draft, new_id, req)

    return join_into_phase(group, config, req, new_id, replace, now_ms,
                           "static member rejoined", result)
