"""A StreamsGroupHeartbeat's checks on its face, before any group is looked at (Kafka 4.2's
GroupCoordinatorService: throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures, then
throwIfStreamsGroupHeartbeatRequestIsInvalid, with their messages), and the owned-task check
against a configured topology (GroupMetadataManager.throwIfRequestContainsInvalidTasks).

Kafka 4.2 supports no static membership in streams groups (an instance id is refused), nor
the task offsets, end offsets and warm-up tasks the request has fields for.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from coterie.group.records.tasks import Tasks, TaskSet
from coterie.group.streams.configured_topology import ConfiguredSubtopology
from coterie.group.streams.member import JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from coterie.group.streams.messages import StreamsHeartbeatRequest
from coterie.group.streams.validation import KAFKA_INTERNAL_TOPICS, validate_topology


class Refused(Exception):
    """The heartbeat is answered with an error; nothing of it was applied."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> Refused:
    return Refused(ErrorCode.invalid_request, message)


def validate_request(req: StreamsHeartbeatRequest) -> None:
    """Raises Refused for a request Kafka 4.2 refuses on its face."""
    if req.instance_id is not None:
        raise _invalid("Static membership is not yet supported.")
    if req.task_offsets is not None:
        raise _invalid("TaskOffsets are not supported yet.")
    if req.task_end_offsets is not None:
        raise _invalid("TaskEndOffsets are not supported yet.")
    if req.owned is not None and req.owned.warmup:
        raise _invalid("WarmupTasks are not supported yet.")
    if req.topology is not None and any(s.source_topic_regex
                                        for s in req.topology.subtopologies):
        raise _invalid("Regular expressions for source topics are not supported yet.")
    if not req.member_id:
        raise _invalid("MemberId can't be empty.")
    if not req.group_id:
        raise _invalid("GroupId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise _invalid("RackId can't be empty.")
    epoch = req.member_epoch
    if epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        owned = req.owned
        if owned is not None:
            for role, tasks in (("ActiveTasks", owned.active), ("StandbyTasks", owned.standby),
                                ("WarmupTasks", owned.warmup)):
                if tasks:
                    raise _invalid(f"{role} must be empty when (re-)joining.")
        if req.topology is None:
            raise _invalid("Topology must be non-null when (re-)joining.")
        error = validate_topology(req.topology, internal_topics=KAFKA_INTERNAL_TOPICS)
        if error is not None:
            raise Refused(error.code, error.message)
    elif epoch == STATIC_LEAVE_EPOCH:
        raise _invalid("InstanceId can't be null.")  # an instance id was refused above
    elif epoch < STATIC_LEAVE_EPOCH:
        raise _invalid(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    if epoch not in (JOIN_EPOCH, LEAVE_EPOCH) and req.topology is not None:
        raise _invalid("Topology can only be provided when (re-)joining.")
    if epoch == LEAVE_EPOCH and req.topology is not None:
        raise _invalid("Topology can only be provided when (re-)joining.")


def check_owned_tasks(subtopologies: Mapping[str, ConfiguredSubtopology],
                      owned: TaskSet | None) -> None:
    """Every task a member says it owns must exist in the configured topology."""
    if owned is None:
        return
    for tasks in (owned.active, owned.standby, owned.warmup):
        _check(subtopologies, tasks)


def _check(subtopologies: Mapping[str, ConfiguredSubtopology], tasks: Tasks) -> None:
    for sid, partitions in tasks.items():
        configured = subtopologies.get(sid)
        if configured is None:
            raise _invalid(f"Subtopology {sid} does not exist in the topology.")
        for p in sorted(partitions):
            if not 0 <= p < configured.number_of_tasks:
                raise _invalid(f"Task {p} for subtopology {sid} is invalid. Number of tasks "
                               f"for this subtopology: {configured.number_of_tasks}")
