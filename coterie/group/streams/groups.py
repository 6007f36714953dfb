"""KIP-1071 streams groups of one shard: the `GroupKind` (Kafka 4.2's streams parts of
GroupMetadataManager), pure like the other cores: requests and `now_ms` in, `Result` out,
state changed only by replaying the records it returns.

A StreamsGroupHeartbeat, step by step (`heartbeat`):
1. Face checks (`heartbeat_request.validate_request`: INVALID_REQUEST with Kafka's messages,
   STREAMS_INVALID_TOPOLOGY for a topology that can never be served). A leave (epoch -1) is
   `_leave`.
2. The group: a join (epoch 0) creates it (an *empty classic* group under the id is deleted
   first, as Kafka does) and is refused GROUP_MAX_SIZE_REACHED when full; otherwise it must
   exist (GROUP_ID_NOT_FOUND "Streams group <id> not found."). An id held by a group of
   another type is GROUP_ID_NOT_FOUND "Group <id> is not a streams group.".
3. The member: a join creates it under the id the client chose; otherwise UNKNOWN_MEMBER_ID.
   Its epoch is checked (`reconciliation.check_member_epoch`: FENCED_MEMBER_EPOCH).
4. Its metadata from the request (None: unchanged); any change writes the member record and
   bumps the group epoch.
5. The topology (joins only): the first member's initialises the group's (a record);
   another at the same or a higher epoch is refused (INVALID_REQUEST "Topology updates are not
   supported yet."); an older one is kept out and the member is told STALE_TOPOLOGY on every
   heartbeat.
6. The topology configured against the shard's topics (`configure_topology`, cached on the
   group per topic-picture version). A changed metadata hash of the topology's topics, a
   changed validated topology epoch (-1 while not ready) or changed assignment configs
   (num.standby.replicas) bump the group epoch too. When ready, the tasks the member says it
   owns must exist (INVALID_REQUEST).
7. A first member starts the initial rebalance delay (group.streams.initial.rebalance.delay.ms,
   STREAMS_INITIAL_REBALANCE timer); while it runs, members get no tasks, at target epoch
   max(1, the target's), with status ASSIGNMENT_DELAYED. Otherwise, if the group epoch is
   ahead of the target's, a new target is computed (`target.py`).
8. The member reconciles towards its target (`reconciliation.reconcile`: revoke before
   assign); its current-assignment record is written when it changed; its revocation timer
   runs while it has tasks to give back, its session timer is re-armed.
9. The answer: epoch, heartbeat interval, statuses (STALE_TOPOLOGY, ASSIGNMENT_DELAYED, the
   configured topology's MISSING_SOURCE_TOPICS / INCORRECTLY_PARTITIONED_TOPICS /
   MISSING_INTERNAL_TOPICS, SHUTDOWN_APPLICATION once a member asked), its tasks when they
   changed, it joined, or it reports other tasks than the settled member has (it lost the
   answer that gave them: `_reports_other_tasks`), the endpoint -> partitions map when its
   endpoint epoch is not the group's, and, for the broker only, the internal topics to
   create.

Topic changes (`on_topics`): every group whose topology's topics hash differently gets its
topology configured again and its group epoch bumped at once (Kafka marks the group for a
metadata refresh and bumps at its next heartbeat; bumping at once is simpler, and the same to
members, whose next heartbeat sees the new epoch). The hash is the shard's
(`TopicImage.metadata_hash`) over the topology's source, repartition and changelog topics.

Timers: STREAMS_SESSION and STREAMS_REVOCATION fence the member (tombstones, group epoch
bump); STREAMS_INITIAL_REBALANCE computes the delayed first target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.kind import Handler, ShardContext
from coterie.group.limits import invalid_group_id
from coterie.group.records.record import Record
from coterie.group.records.streams import (
    STREAMS_RECORD_KEY_TYPES,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTopologyKey,
)
from coterie.group.records.tasks import NO_TASKS, TaskSet
from coterie.group.result import Result, TimerOp
from coterie.group.streams.config import StreamsGroupConfig
from coterie.group.streams.configured_topology import (
    ConfiguredTopology,
    ImagePartitionCounts,
    configure_topology,
)
from coterie.group.streams.describe import describe, not_found
from coterie.group.streams.endpoints import endpoint_partitions
from coterie.group.streams.group import StreamsGroup, StreamsReplayError
from coterie.group.streams.heartbeat_request import Refused, check_owned_tasks, validate_request
from coterie.group.streams.kinds import StreamsTimer
from coterie.group.streams.member import (
    JOIN_EPOCH,
    MemberMetadata,
    StreamsMember,
    assignment_value,
)
from coterie.group.streams.member_state import MemberState
from coterie.group.streams.messages import (
    StreamsGroupDescribeRequest,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
    StreamsSettledHeartbeat,
)
from coterie.group.streams.reconciliation import (
    CurrentAssignment,
    FencedMemberEpoch,
    check_member_epoch,
    reconcile,
)
from coterie.group.streams.status import (
    GroupStatus,
    assignment_delayed,
    shutdown_application,
    stale_topology,
)
from coterie.group.streams.target import target_records
from coterie.group.streams.topology import Topology
from coterie.group.streams.topology_record import topology_value
from coterie.group.streams.validation import TopologyError, TopologyUpdate, topology_update
from coterie.group.timers import TimerKey
from coterie.group.topic_image import TopicImage
from coterie.group.typed_groups import GroupsOf

# A group's own settings (the GROUP config resource) that streams groups read.
SESSION_TIMEOUT = "streams.session.timeout.ms"
HEARTBEAT_INTERVAL = "streams.heartbeat.interval.ms"
NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
INITIAL_REBALANCE_DELAY = "streams.initial.rebalance.delay.ms"
GROUP_CONFIG_KEYS = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL, NUM_STANDBY_REPLICAS,
                     INITIAL_REBALANCE_DELAY)
# The assignment config Kafka 4.2 records in the group's metadata (last_assignment_configs).
ASSIGNMENT_STANDBY_KEY = "num.standby.replicas"
FIRST_GROUP_EPOCH = 2


@dataclass(frozen=True, slots=True)
class _Topics:
    """The group's topology configured against the current picture, and its metadata."""

    configured: ConfiguredTopology | None
    metadata_hash: int
    validated_epoch: int


class StreamsGroups:
    """Streams groups of one shard (module docstring): a `GroupKind`."""

    record_keys = STREAMS_RECORD_KEY_TYPES
    timer_kinds = (StreamsTimer,)

    def __init__(self, ctx: ShardContext) -> None:
        self._ctx = ctx
        self.groups: GroupsOf[StreamsGroup] = GroupsOf(ctx.groups, StreamsGroup)
        self.config: StreamsGroupConfig = getattr(ctx.config, "streams", StreamsGroupConfig())
        # Per-group overrides (set_group_config), kept for ids without a group too.
        self.group_configs: dict[str, dict[str, int]] = {}

    @property
    def image(self) -> TopicImage:
        return self._ctx.topics.image

    def requests(self) -> Mapping[type, Handler]:
        return {StreamsHeartbeatRequest: self.heartbeat,
                StreamsSettledHeartbeat: self.settled_heartbeat,
                StreamsGroupDescribeRequest: self.describe}

    # == settings ==============================================================================
    def set_group_config(self, group_id: str, config: Mapping[str, Any]) -> None:
        own = {k: int(config[k]) for k in GROUP_CONFIG_KEYS if config.get(k) is not None}
        if own:
            self.group_configs[group_id] = own
        else:
            self.group_configs.pop(group_id, None)

    def _setting(self, group_id: str, key: str, default: int) -> int:
        return self.group_configs.get(group_id, {}).get(key, default)

    def session_timeout_of(self, group_id: str) -> int:
        return self._setting(group_id, SESSION_TIMEOUT, self.config.session_timeout_ms)

    def heartbeat_interval_of(self, group_id: str) -> int:
        return self._setting(group_id, HEARTBEAT_INTERVAL, self.config.heartbeat_interval_ms)

    def num_standby_of(self, group_id: str) -> int:
        return self._setting(group_id, NUM_STANDBY_REPLICAS, self.config.num_standby_replicas)

    def initial_delay_of(self, group_id: str) -> int:
        return self._setting(group_id, INITIAL_REBALANCE_DELAY,
                             self.config.initial_rebalance_delay_ms)

    def assignment_configs(self, group_id: str) -> tuple[tuple[str, str], ...]:
        return ((ASSIGNMENT_STANDBY_KEY, str(self.num_standby_of(group_id))),)

    # == records ===============================================================================
    def replay(self, record: Record) -> None:
        """Apply one streams record: the only way streams groups change."""
        group = self.groups.for_record(record, StreamsGroupMetadataKey, StreamsGroup,
                                       StreamsReplayError, "streams")
        if group is None:
            return
        key, value = record.key, record.value
        match key:
            case StreamsGroupMetadataKey():
                group.apply_metadata(value)  # type: ignore[arg-type]
            case StreamsGroupTopologyKey():
                group.apply_topology(value)  # type: ignore[arg-type]
            case StreamsGroupMemberMetadataKey(member_id=member_id):
                group.apply_member_metadata(member_id, value)  # type: ignore[arg-type]
            case StreamsGroupTargetAssignmentMetadataKey():
                group.apply_target_epoch(value)  # type: ignore[arg-type]
            case StreamsGroupTargetAssignmentMemberKey(member_id=member_id):
                group.apply_target_member(member_id, value)  # type: ignore[arg-type]
            case StreamsGroupCurrentMemberAssignmentKey(member_id=member_id):
                group.apply_current_assignment(member_id, value)  # type: ignore[arg-type]

    def _apply(self, records: list[Record]) -> None:
        for record in records:
            self.replay(record)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Every member's session deadline, and the revocation deadline of those giving
        tasks back (none is durable)."""
        ops: list[TimerOp] = []
        for group in self.groups.values():
            ops += self._member_timers(group, now_ms)
        return ops

    def _member_timers(self, group: StreamsGroup, now_ms: int) -> list[TimerOp]:
        ops = []
        timeout = self.session_timeout_of(group.group_id)
        for mid, m in group.members.items():
            ops.append(TimerOp(TimerKey(StreamsTimer.STREAMS_SESSION, group.group_id, mid),
                               now_ms + timeout))
            if m.assignment.state is MemberState.UNREVOKED_TASKS:
                ops.append(TimerOp(_revocation_key(group.group_id, mid, m.member_epoch),
                                   now_ms + max(m.metadata.rebalance_timeout_ms, 0)))
        return ops

    def after_rebuild(self, group_id: str, failed: list[Record], now_ms: int) -> Result:
        """The group was rebuilt from its durable records (its volatile table is new and
        empty, its configured topology recomputed at its next use): deadlines as after a
        load."""
        group = self.groups.get(group_id)
        if group is None:
            return Result()
        return Result(timers=self._member_timers(group, now_ms))

    # == topics ================================================================================
    def on_topics(self, previous: TopicImage, now_ms: int) -> Result:
        """Groups whose topology's topics changed: configured again, group epoch bumped."""
        records: list[Record] = []
        for group in list(self.groups.values()):
            if group.topology is None:
                continue
            topics = self._topics(group, group.topology)
            if topics.metadata_hash == group.metadata_hash and (
                    topics.validated_epoch == group.validated_topology_epoch):
                continue
            records.append(_metadata_record(group, group.group_epoch + 1, topics))
        self._apply(records)
        return Result(records=records)

    def _topics(self, group: StreamsGroup, topology: Topology) -> _Topics:
        """The topology configured against the current picture (cached on the group per
        picture version: the volatile table), its metadata hash and validated epoch."""
        image = self.image
        key = (topology, image.version)
        if group.configured_for != key or group.configured is None:
            group.configured = configure_topology(topology, ImagePartitionCounts(image))
            group.configured_hash = image.metadata_hash(topology.required_topics())
        # Keyed by this very topology object (an equal one may have built the cache): the
        # settled-heartbeat shortcut checks the key by identity.
        group.configured_for = key
        configured = group.configured
        validated = topology.epoch if configured.is_ready() else -1
        return _Topics(configured, group.configured_hash, validated)

    # == StreamsGroupHeartbeat ==================================================================
    def heartbeat(self, req: StreamsHeartbeatRequest, now_ms: int) -> Result:
        try:
            validate_request(req)
            if req.member_epoch < JOIN_EPOCH:
                return self._leave(req, now_ms)
            return self._heartbeat(req, now_ms)
        except Refused as refused:
            return Result(StreamsHeartbeatResponse(refused.code, refused.message))

    def settled_heartbeat(self, req: StreamsSettledHeartbeat, now_ms: int) -> Result | None:
        """The answer to a settled member's heartbeat that changes nothing, or None to take
        the general path (`heartbeat`). Most heartbeats of a streams application are these.
        The broker has seen that the request sets no field but the endpoint epoch; here: the
        group is a streams group whose target is at its epoch and that waits for nothing (no
        initial rebalance delay, no shutdown asked), its topology configured for the current
        topic picture, ready, hashed and validated as recorded, its assignment configs as
        recorded; the member exists under this id at the target epoch, STABLE, on the
        group's topology epoch, with the same client id and host, and knows the group's
        endpoint epoch. The general path would then write no record, compute no target,
        keep the member as it is, and answer its epoch with no tasks, no status and no
        endpoints, after pushing its session timer back: exactly this.
        (`tests/unit/group/streams/test_streams_steady_path.py` holds the two paths to the
        same answers.)"""
        group_id, member_id, member_epoch, endpoint_epoch, client_id, client_host = req
        group = self._ctx.groups.get(group_id)
        if (not isinstance(group, StreamsGroup) or member_epoch <= 0
                or group.group_epoch != group.assignment_epoch
                or member_epoch != group.assignment_epoch
                or group.delay_armed or group.shutdown_requester is not None
                or endpoint_epoch != group.endpoint_epoch):
            return None
        member = group.members.get(member_id)
        if member is None:
            return None
        current, metadata = member.assignment, member.metadata
        if (current.member_epoch != member_epoch or current.state is not MemberState.STABLE
                or metadata.client_id != client_id or metadata.client_host != client_host):
            return None
        topology, configured, cached_for = group.topology, group.configured, group.configured_for
        if (topology is None or configured is None or cached_for is None
                or cached_for[0] is not topology or cached_for[1] != self.image.version
                or metadata.topology_epoch < topology.epoch or not configured.is_ready()
                or configured.topics_to_create
                or group.configured_hash != group.metadata_hash
                or topology.epoch != group.validated_topology_epoch
                or self.assignment_configs(group_id) != group.last_assignment_configs):
            return None
        return Result(StreamsHeartbeatResponse(
            ErrorCode.none, member_id=member_id, member_epoch=member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_of(group_id),
            endpoint_information_epoch=endpoint_epoch,
        ), timers=[TimerOp(TimerKey(StreamsTimer.STREAMS_SESSION, group_id, member_id),
                           now_ms + self.session_timeout_of(group_id))])

    def _group(self, req: StreamsHeartbeatRequest) -> tuple[StreamsGroup, list[Record]]:
        """The heartbeat's group (step 2), and the tombstones of an empty classic group it
        replaces (not applied yet)."""
        gid = req.group_id
        held = self._ctx.groups.get(gid)
        if isinstance(held, StreamsGroup):
            if req.member_epoch == JOIN_EPOCH and req.member_id not in held.members and (
                    len(held.members) >= self.config.max_size):
                raise Refused(ErrorCode.group_max_size_reached,
                              f"The streams group has reached its maximum capacity of "
                              f"{self.config.max_size} members.")
            return held, []
        if req.member_epoch != JOIN_EPOCH:
            if held is None:
                raise Refused(ErrorCode.group_id_not_found, f"Streams group {gid} not found.")
            raise Refused(ErrorCode.group_id_not_found, f"Group {gid} is not a streams group.")
        if held is None:
            return StreamsGroup(gid), []
        if held.group_type == "classic" and not held.has_members():
            code, tombstones = held.deletion()
            if code == ErrorCode.none:
                return StreamsGroup(gid), tombstones
        raise Refused(ErrorCode.group_id_not_found, f"Group {gid} is not a streams group.")

    def _heartbeat(self, req: StreamsHeartbeatRequest, now_ms: int) -> Result:
        group, conversion = self._group(req)
        gid, mid = req.group_id, req.member_id
        created = gid not in self.groups
        joining = req.member_epoch == JOIN_EPOCH
        member = group.members.get(mid)
        if member is None:
            if not joining:
                raise Refused(ErrorCode.unknown_member_id,
                              f"Member {mid} is not a member of group {gid}.")
            member = StreamsMember(mid)
        try:
            check_member_epoch(member.assignment, req.member_epoch, req.owned)
        except FencedMemberEpoch as exc:
            raise Refused(ErrorCode.fenced_member_epoch, str(exc)) from None

        records: list[Record] = []
        statuses: list[GroupStatus] = []
        bump = False
        # Step 4: the member's metadata.
        metadata = _updated_metadata(member.metadata, req)
        if mid not in group.members or metadata != member.metadata:
            records.append(Record(StreamsGroupMemberMetadataKey(gid, mid), metadata.value()))
            bump = True
        updated = member.with_metadata(metadata)

        # Step 5: the topology.
        topology = group.topology
        if req.topology is not None:
            update = topology_update(topology, req.topology)
            if isinstance(update, TopologyError):
                raise Refused(update.code, update.message)
            if update is TopologyUpdate.INITIALIZE:
                topology = req.topology
                records.append(Record(StreamsGroupTopologyKey(gid), topology_value(topology)))
        if topology is None:  # a heartbeat without one is refused before (face checks)
            raise Refused(ErrorCode.invalid_request,
                          "The topology is null and the group topology is also null.")
        if metadata.topology_epoch < topology.epoch:
            statuses.append(stale_topology(metadata.topology_epoch, topology.epoch))

        # Step 6: the topology configured against the topics; what bumps the group epoch.
        topics = self._topics(group, topology)
        configured = topics.configured
        if configured is not None and configured.error is not None:
            raise Refused(configured.error.code, configured.error.message)
        if configured is not None and configured.is_ready() and configured.subtopologies:
            check_owned_tasks(configured.subtopologies, req.owned)
        configs = self.assignment_configs(gid)
        if (topics.metadata_hash != group.metadata_hash
                or topics.validated_epoch != group.validated_topology_epoch
                or configs != group.last_assignment_configs):
            bump = True
        group_epoch = group.group_epoch
        if bump:
            # Kafka 4.2 starts a new group at epoch 2, not 1: the delayed first target of
            # step 7 (at epoch max(1, ...)) is then always behind the group epoch.
            group_epoch = FIRST_GROUP_EPOCH if group_epoch == 0 else group_epoch + 1
            records.append(_metadata_record(group, group_epoch, topics, configs))

        # Step 7: the target.
        timers: list[TimerOp] = []
        arm_delay = (not group.members and not group.delay_armed
                     and self.initial_delay_of(gid) > 0)
        if arm_delay:
            timers.append(TimerOp(TimerKey(StreamsTimer.STREAMS_INITIAL_REBALANCE, gid),
                                  now_ms + self.initial_delay_of(gid)))
        if group_epoch > group.assignment_epoch:
            if group.delay_armed or arm_delay:
                target_epoch, my_target = max(1, group.assignment_epoch), NO_TASKS
                statuses.append(assignment_delayed())
            else:
                members = dict(group.members)
                members[mid] = updated
                targets, target_recs = target_records(
                    gid, group_epoch, members, group.targets, configured,
                    self.num_standby_of(gid))
                records += target_recs
                target_epoch, my_target = group_epoch, targets[mid]
        else:
            target_epoch, my_target = group.assignment_epoch, group.target_of(mid)

        # Step 8: reconciliation.
        current = updated.assignment
        try:
            reconciled = reconcile(current, metadata.process_id, target_epoch, my_target,
                                   group.owners, req.owned)
        except FencedMemberEpoch as exc:
            raise Refused(ErrorCode.fenced_member_epoch, str(exc)) from None
        if reconciled is not current or mid not in group.members:
            records.append(Record(StreamsGroupCurrentMemberAssignmentKey(gid, mid),
                                  assignment_value(reconciled)))
        timers.append(TimerOp(TimerKey(StreamsTimer.STREAMS_SESSION, gid, mid),
                              now_ms + self.session_timeout_of(gid)))
        timers += _revocation_timers(gid, mid, current, reconciled,
                                     metadata.rebalance_timeout_ms, now_ms)

        # Everything is decided: apply (the group object is the one the records built).
        if conversion:
            self._ctx.groups.pop(gid, None)
        self._apply(records)
        group = self.groups[gid]
        if arm_delay:
            group.delay_armed = True
        if req.shutdown_application:
            group.shutdown_requester = mid
        assigned_changed = reconciled.assigned != member.assignment.assigned
        endpoint_moved = metadata.user_endpoint != member.metadata.user_endpoint
        if metadata.user_endpoint is not None and (assigned_changed or endpoint_moved):
            group.endpoint_epoch += 1

        # Step 9: the answer.
        if configured is not None and configured.status is not None:
            statuses.append(configured.status)
        if group.shutdown_requester is not None:
            statuses.append(shutdown_application(group.shutdown_requester))
        endpoints = None
        if req.endpoint_information_epoch != group.endpoint_epoch:
            endpoints = endpoint_partitions(group.members.values(), group.topology, self.image)
        response = StreamsHeartbeatResponse(
            ErrorCode.none, member_id=mid, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_of(gid), status=tuple(statuses),
            assignment=(reconciled.assigned if joining or assigned_changed
                        or _reports_other_tasks(req.owned, reconciled) else None),
            # Kafka 4.2 sets the epoch only for a group that existed before this heartbeat.
            endpoint_information_epoch=0 if created else group.endpoint_epoch,
            endpoints=endpoints,
            topics_to_create=tuple(configured.topics_to_create.values())
            if configured is not None else ())
        return Result(response, conversion + records, timers)

    # == leaving and fencing ===================================================================
    def _leave(self, req: StreamsHeartbeatRequest, now_ms: int) -> Result:
        gid, mid = req.group_id, req.member_id
        held = self._ctx.groups.get(gid)
        if held is None:
            raise Refused(ErrorCode.group_id_not_found, f"Group {gid} not found.")
        if not isinstance(held, StreamsGroup):
            raise Refused(ErrorCode.group_id_not_found, f"Group {gid} is not a streams group.")
        member = held.members.get(mid)
        if member is None:
            raise Refused(ErrorCode.unknown_member_id,
                          f"Member {mid} is not a member of group {gid}.")
        if req.shutdown_application:
            held.shutdown_requester = mid
        result = self.fence(held, member)
        result.response = StreamsHeartbeatResponse(ErrorCode.none, member_id=mid,
                                                   member_epoch=req.member_epoch)
        return result

    def fence(self, group: StreamsGroup, member: StreamsMember) -> Result:
        """Remove a member (left, session expired, never revoked): its tombstones in the
        order replay accepts, and a group epoch bump. Its tasks are free at once."""
        gid, mid = group.group_id, member.member_id
        records = [Record(StreamsGroupCurrentMemberAssignmentKey(gid, mid), None),
                   Record(StreamsGroupTargetAssignmentMemberKey(gid, mid), None),
                   Record(StreamsGroupMemberMetadataKey(gid, mid), None)]
        topics = _Topics(None, group.metadata_hash, group.validated_topology_epoch)
        records.append(_metadata_record(group, group.group_epoch + 1, topics))
        timers = [TimerOp(TimerKey(StreamsTimer.STREAMS_SESSION, gid, mid), None)]
        if member.assignment.state is MemberState.UNREVOKED_TASKS:
            timers.append(TimerOp(_revocation_key(gid, mid, member.member_epoch), None))
        self._apply(records)
        if member.metadata.user_endpoint is not None:
            group.endpoint_epoch += 1
        if not group.members:
            group.shutdown_requester = None
        return Result(records=records, timers=timers)

    # == timers ================================================================================
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        group = self.groups.get(key.group_id)
        if group is None:
            return Result()
        if key.kind is StreamsTimer.STREAMS_INITIAL_REBALANCE:
            return self._delayed_target(group)
        member = group.members.get(key.member_id or "")
        if member is None:
            return Result()
        if key.kind is StreamsTimer.STREAMS_REVOCATION and (
                member.member_epoch != key.epoch
                or member.assignment.state is not MemberState.UNREVOKED_TASKS):
            return Result()  # it moved on in time
        return self.fence(group, member)

    def _delayed_target(self, group: StreamsGroup) -> Result:
        """The initial rebalance delay ran out: the first target, for every member."""
        group.delay_armed = False
        if not group.members or group.group_epoch <= group.assignment_epoch:
            return Result()
        if group.topology is None:
            return Result()
        configured = self._topics(group, group.topology).configured
        _, records = target_records(group.group_id, group.group_epoch, group.members,
                                    group.targets, configured,
                                    self.num_standby_of(group.group_id))
        self._apply(records)
        return Result(records=records)

    # == describe ==============================================================================
    def describe(self, req: StreamsGroupDescribeRequest, now_ms: int) -> Result:
        gid = req.group_id
        if invalid_group_id(gid):
            return Result(req.refused(ErrorCode.invalid_group_id))
        group = self.groups.get(gid)
        if group is None:
            other = gid in self._ctx.groups or self._ctx.offsets.has_offsets(gid)
            return Result(not_found(gid, other))
        return Result(describe(group))


def _updated_metadata(old: MemberMetadata, req: StreamsHeartbeatRequest) -> MemberMetadata:
    """The member's metadata after the request: what it sent, the rest as it was (Kafka's
    maybeUpdate*: None keeps; client id and host are always the request's)."""
    topology_epoch = old.topology_epoch if req.topology is None else req.topology.epoch
    return MemberMetadata(
        instance_id=old.instance_id,
        rack_id=old.rack_id if req.rack_id is None else req.rack_id,
        client_id=req.client_id, client_host=req.client_host,
        rebalance_timeout_ms=(old.rebalance_timeout_ms if req.rebalance_timeout_ms == -1
                              else req.rebalance_timeout_ms),
        topology_epoch=topology_epoch,
        process_id=old.process_id if req.process_id is None else req.process_id,
        user_endpoint=old.user_endpoint if req.user_endpoint is None else req.user_endpoint,
        client_tags=(old.client_tags if req.client_tags is None
                     else tuple(sorted(req.client_tags))))


def _reports_other_tasks(owned: TaskSet | None, reconciled: CurrentAssignment) -> bool:
    """Whether a STABLE member reported owned tasks that are not the ones it has. Kafka 4.2
    sends a member its tasks only when it joins or they change, so a member that lost the
    answer that changed them (at the same epoch, once another member released them, or at a
    new one) would never learn them and run other tasks than the coordinator believes. A
    Kafka Streams client reports its tasks only when they changed since it last did, so
    this costs a settled group nothing; coterie then sends the tasks again
    (docs/decisions.md). A member giving tasks back (UNREVOKED_TASKS) that lost the answer
    is fenced at its rebalance timeout and rejoins, as in Kafka."""
    return (owned is not None and reconciled.state is MemberState.STABLE
            and owned != reconciled.assigned)


def _metadata_record(group: StreamsGroup, epoch: int, topics: _Topics,
                     configs: tuple[tuple[str, str], ...] | None = None) -> Record:
    return Record(StreamsGroupMetadataKey(group.group_id), StreamsGroupMetadataValue(
        epoch=epoch, metadata_hash=topics.metadata_hash,
        validated_topology_epoch=topics.validated_epoch,
        last_assignment_configs=group.last_assignment_configs if configs is None else configs))


def _revocation_key(group_id: str, member_id: str, epoch: int) -> TimerKey:
    return TimerKey(StreamsTimer.STREAMS_REVOCATION, group_id, member_id, epoch)


def _revocation_timers(group_id: str, member_id: str, before: CurrentAssignment,
                       after: CurrentAssignment, rebalance_timeout_ms: int,
                       now_ms: int) -> list[TimerOp]:
    """Arm the revocation deadline when the member starts giving tasks back; cancel the
    old one when it is done or moved to another epoch."""
    ops: list[TimerOp] = []
    was = before.state is MemberState.UNREVOKED_TASKS
    now = after.state is MemberState.UNREVOKED_TASKS
    if was and (not now or after.member_epoch != before.member_epoch):
        ops.append(TimerOp(_revocation_key(group_id, member_id, before.member_epoch), None))
    if now and (not was or after.member_epoch != before.member_epoch):
        ops.append(TimerOp(_revocation_key(group_id, member_id, after.member_epoch),
                           now_ms + max(rebalance_timeout_ms, 0)))
    return ops

