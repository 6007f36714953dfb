"""A ConsumerGroupHeartbeat as a request: the checks on its face and the member it asks for.

Kafka validates a heartbeat before it looks at any group (`validate_request`, in Kafka's order
and words, plus coterie's: a v1 member id must be a UUID, a rebalance timeout below -1 means
nothing); a member's epoch is then checked against the one the coordinator knows
(`check_epoch`, FENCED_MEMBER_EPOCH); what the request changes is folded into the member
(`updated_member`). Pure functions; `Refused` carries the error answer.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import replace

from kio.schema.errors import ErrorCode

from coterie.assign.spec import Assignor
from coterie.common.shared_table import shared_opt, shared_str
from coterie.group.consumer.client_assignment import is_client_assignor
from coterie.group.consumer.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMember,
    shared_names,
)
from coterie.group.consumer.messages import ConsumerHeartbeatRequest, TopicPartitions
from coterie.group.limits import MAX_STRING_BYTES, first_too_long, too_long
from coterie.group.records.consumer import Partitions


class Refused(Exception):
    """A request answered with an error; nothing has been changed."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_request(req: ConsumerHeartbeatRequest, assignors: Mapping[str, Assignor],
                 configured: tuple[str, ...]) -> None:
    """Kafka's request checks, in Kafka's order and words, plus coterie's two: a v1 member
    id must be a UUID, and a rebalance timeout below -1 means nothing."""
    bad = ErrorCode.invalid_request
    epoch = req.member_epoch
    needs_id = req.version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH
    if needs_id and blank(req.member_id):
        raise Refused(bad, "MemberId can't be empty.")
    if req.version >= 1 and not blank(req.member_id) and not is_uuid(req.member_id):
        raise Refused(bad, f"MemberId {req.member_id!r} is not a UUID: from version 1 "
                            "the consumer generates its member id (KIP-1082).")
    if blank(req.group_id):
        raise Refused(bad, "GroupId can't be empty.")
    if req.instance_id is not None and blank(req.instance_id):
        raise Refused(bad, "InstanceId can't be empty.")
    if req.rack_id is not None and blank(req.rack_id):
        raise Refused(bad, "RackId can't be empty.")
    if too_long(req.group_id):
        raise Refused(ErrorCode.invalid_group_id,
                       f"GroupId is longer than {MAX_STRING_BYTES} bytes.")
    too_long_field = first_too_long([
        ("MemberId", req.member_id), ("InstanceId", req.instance_id),
        ("RackId", req.rack_id), ("ServerAssignor", req.server_assignor),
        ("SubscribedTopicRegex", req.subscribed_topic_regex),
        *(("A subscribed topic name", name) for name in req.subscribed_topic_names or ())])
    if too_long_field is not None:
        raise Refused(bad, too_long_field)
    if epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise Refused(bad, "RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:
            raise Refused(bad, "TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise Refused(bad, "Either SubscribedTopicNames or SubscribedTopicRegex must "
                                "be non-null when (re-)joining.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise Refused(bad, "InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise Refused(bad, "MemberEpoch is invalid.")
    if req.rebalance_timeout_ms < -1:
        raise Refused(bad, "RebalanceTimeoutMs is invalid.")
    if req.version == 0 and req.subscribed_topic_regex is not None:
        raise Refused(bad, "SubscribedTopicRegex needs ConsumerGroupHeartbeat version 1.")
    if (req.server_assignor is not None and req.server_assignor not in assignors
            and not is_client_assignor(req.server_assignor)):
        raise Refused(ErrorCode.unsupported_assignor,
                       f"ServerAssignor {req.server_assignor} is not supported. "
                       f"Supported assignors: {', '.join(configured)}.")


# What Java's String.trim() removes: every character up to U+0020.
_JAVA_TRIMMED = "".join(map(chr, range(33)))


def blank(value: str) -> bool:
    """Java's String.trim().isEmpty(): only characters up to U+0020."""
    return not value.lstrip(_JAVA_TRIMMED)


# 22 base64 characters, URL-safe or standard, are 16 bytes (the last one's low bits unused).
_BASE64_UUID = re.compile(r"[A-Za-z0-9+/_-]{22}")


def is_uuid(member_id: str) -> bool:
    """A Kafka Uuid string (22 characters of base64, URL-safe as the Java client writes it or
    standard as librdkafka does, no padding) or the canonical 36-character form. Not cached:
    a cache keyed by member id cost about 80 bytes per member for a check this cheap."""
    if len(member_id) == 22:
        return _BASE64_UUID.fullmatch(member_id) is not None
    if len(member_id) == 36:
        try:
            uuid.UUID(member_id)
        except ValueError:
            return False
        return True
    return False


def check_epoch(member: ConsumerMember, epoch: int, owned: Partitions | None) -> None:
    if epoch == JOIN_EPOCH:
        return
    if epoch > member.member_epoch:
        raise Refused(ErrorCode.fenced_member_epoch,
                       f"The consumer group member has a greater member epoch ({epoch}) than the "
                       f"one known by the group coordinator ({member.member_epoch}). The member "
                       "must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or owned is None
            or not owned <= member.assigned):
        raise Refused(ErrorCode.fenced_member_epoch,
                       f"The consumer group member has a smaller member epoch ({epoch}) than the "
                       f"one known by the group coordinator ({member.member_epoch}). The member "
                       "must abandon all its partitions and rejoin.")


# The rebalance timeout a rejoin that omits it gets: the clients' default max.poll.interval.ms,
# which is what the Java client and librdkafka send as their rebalance timeout.
DEFAULT_REJOIN_REBALANCE_TIMEOUT_MS = 300_000


def tolerate_partial_rejoin(req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatRequest:
    """A join (epoch 0) that carries a subscription but omits the rebalance timeout or the
    owned partitions, read as the join it means: the default rebalance timeout, nothing owned.

    librdkafka (up to 2.16 at least) sends such a join when the application subscribes again
    right after unsubscribing while a revocation was under way: the leave's answer resets
    its epoch to 0 but not its join state, so the next heartbeat is not a "full" one. Kafka
    4.2 refuses it with INVALID_REQUEST, which librdkafka treats as fatal; Kafka's slower
    answers make that race rarer there than on coterie. A member joining owns nothing the
    coordinator would honour, so reading null owned partitions as none loses nothing.
    """
    if req.member_epoch != JOIN_EPOCH or (
            req.subscribed_topic_names is None and req.subscribed_topic_regex is None):
        return req
    if req.rebalance_timeout_ms != -1 and req.owned is not None:
        return req
    return replace(
        req, owned=() if req.owned is None else req.owned,
        rebalance_timeout_ms=(DEFAULT_REJOIN_REBALANCE_TIMEOUT_MS
                              if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms))


def updated_member(member: ConsumerMember, req: ConsumerHeartbeatRequest) -> ConsumerMember:
    """The member with what the request changed (None, or -1, means unchanged)."""
    if (req.subscribed_topic_names is None and req.subscribed_topic_regex is None
            and req.instance_id is None and req.rack_id is None
            and req.rebalance_timeout_ms == -1 and req.server_assignor is None
            and req.client_id == member.client_id and req.client_host == member.client_host
            and member.classic is None):
        return member  # the steady-state heartbeat: nothing to change, nothing to copy
    names = member.subscribed_topic_names
    if req.subscribed_topic_names is not None:
        names = shared_names(req.subscribed_topic_names)
    regex = member.subscribed_topic_regex
    if req.subscribed_topic_regex is not None:
        regex = shared_opt(req.subscribed_topic_regex or None)
    # Values most members repeat are kept as one shared string (`common/shared_table.py`);
    # the steady heartbeat returned above, so this costs nothing there.
    return replace(
        member,
        instance_id=member.instance_id if req.instance_id is None else req.instance_id,
        rack_id=member.rack_id if req.rack_id is None else shared_str(req.rack_id),
        rebalance_timeout_ms=(member.rebalance_timeout_ms if req.rebalance_timeout_ms == -1
                              else req.rebalance_timeout_ms),
        server_assignor=member.server_assignor if req.server_assignor is None
        else shared_str(req.server_assignor),
        subscribed_topic_names=names,
        subscribed_topic_regex=regex,
        client_id=shared_str(req.client_id),
        client_host=shared_str(req.client_host),
        classic=None,
    )


def owned_partitions(owned: tuple[TopicPartitions, ...] | None) -> Partitions | None:
    if owned is None:
        return None
    return frozenset((tp.topic_id, p) for tp in owned for p in tp.partitions)


def wire_partitions(partitions: Partitions) -> tuple[TopicPartitions, ...]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in partitions:
        by_topic.setdefault(topic_id, []).append(p)
    return tuple(TopicPartitions(t, tuple(sorted(by_topic[t]))) for t in sorted(by_topic))
