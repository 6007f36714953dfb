"""Describe-, Alter- and DeleteShareGroupOffsets (KIP-932): where a share group stands on
each partition, as `kafka-share-groups --describe / --reset-offsets / --delete-offsets` ask.

A share group's "offset" on a partition is its share-partition start offset (SPSO): every
record below it is done with. It lives in the share partition's state (coterie.broker.
share_partitions, durable in the share-state store), which these requests read and change.
They go to the group's coordinator, which checks the group as Kafka 4.2's does:

- Describe (v0-v1) needs DESCRIBE on the group and on each topic; with no topics named, it
  lists every partition the group has share state for. A partition without state answers
  start offset -1. v1 adds the lag: the records from the SPSO to the high watermark not yet
  acknowledged or archived (-1 where this broker does not know the partition's end).
- Alter (v0) and Delete (v0) need the group to exist as a share group with no members
  (NON_EMPTY_GROUP otherwise: records in flight would lose their meaning), READ (alter) or
  DELETE (delete) on the group and READ on each topic. Delete drops the group's state on the
  topics named; Alter sets each named partition's SPSO, which starts an empty window there
  (a new state epoch, as Kafka's InitializeShareGroupState does).

Decision (docs/share-groups.md): in a cluster, Alter resets a partition's state under the
lease where this broker leads the partition; for a partition another broker leads it writes
the new state itself, with no lease and the next state epoch, which refuses the leader's
older copy its next write (`SharePartitions.reset`). Kafka's coordinator asks the share
coordinator, which fences by state epoch the same way.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import enforcing
from coterie.broker.context import RequestContext
from coterie.broker.group_acls import may
from coterie.broker.share_partitions import ShareUnavailable, entry_record
from coterie.group import ShareGroupDescribeRequest
from coterie.security import AclOperation, ResourceType
from coterie.share import RecordState, SharePartition, replay
from coterie.storage.api import TopicIdPartition

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _allowed(ctx: RequestContext, op: AclOperation, kind: ResourceType, name: str) -> bool:
    return enforcing(ctx) is None or may(ctx, op, kind, name)


async def _state(ctx: RequestContext, group_id: str, tp: TopicIdPartition
                 ) -> SharePartition | None:
    """The share partition as this broker has it: live if it leads it, else as stored."""
    shares = ctx.services.share_partitions
    live = shares.cached((group_id, tp.topic_id, tp.partition))
    if live is not None:
        return live
    entries = await shares.store.load(group_id, tp)
    return replay([entry_record(e) for e in entries]) if entries else None


def _lag(ctx: RequestContext, name: str, index: int, sp: SharePartition) -> int:
    part = ctx.services.logs.partition(name, index)
    if part is None:
        return -1
    start, view = sp.durable_view()
    done = sum(1 for offset, state, _ in view if offset >= start and state in _DONE)
    return max(part.high_watermark - start - done, 0)


def _group_error(ctx: RequestContext, group_id: str, *, empty: bool
                 ) -> tuple[ErrorCode, str | None]:
    """Whether the group is a share group this coordinator serves (and has no members)."""
    described = ctx.services.groups.handle(ShareGroupDescribeRequest(group_id))
    if described.error != ErrorCode.none:
        return described.error, described.error_message
    if empty and described.members:
        return ErrorCode.non_empty_group, f"the share group {group_id} has members"
    return ErrorCode.none, None


async def describe_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    shares = ctx.services.share_partitions
    groups = []
    for g in request.groups or ():
        group_id = g.group_id
        if not _allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append({"group_id": group_id, "topics": [],
                           "error_code": ErrorCode.group_authorization_failed,
                           "error_message": "Group authorization failed."})
            continue
        error, message = _group_error(ctx, group_id, empty=False)
        if error != ErrorCode.none:
            groups.append({"group_id": group_id, "topics": [], "error_code": error,
                           "error_message": message})
            continue
        asked: dict[str, list[int]] = defaultdict(list)
        if g.topics is None:
            for tp in await shares.store.partitions_of(group_id):
                info = ctx.services.logs.topic_by_id(tp.topic_id)
                if info is not None:
                    asked[info.name].append(tp.partition)
        else:
            for t in g.topics:
                asked[t.topic_name].extend(t.partitions or ())
        topics = []
        for name, indexes in asked.items():
            info = ctx.services.logs.topics.get(name) if name else None
            topic_id = info.topic_id if info is not None else None
            readable = _allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            partitions = []
            for index in sorted(set(indexes)):
                entry: dict[str, Any] = {"partition_index": index, "start_offset": -1,
                                         "leader_epoch": -1, "lag": -1}
                if not readable:
                    entry["error_code"] = ErrorCode.topic_authorization_failed
                elif info is None or not 0 <= index < info.partitions:
                    entry["error_code"] = ErrorCode.unknown_topic_or_partition
                else:
                    sp = await _state(ctx, group_id, TopicIdPartition(info.topic_id, index))
                    if sp is not None:
                        entry.update(start_offset=sp.start_offset,
                                     leader_epoch=sp.leader_epoch,
                                     lag=_lag(ctx, name, index, sp))
                partitions.append(entry)
            topics.append({"topic_name": name, "topic_id": topic_id, "partitions": partitions})
        groups.append({"group_id": group_id, "topics": topics, "error_code": ErrorCode.none})
    return ctx.respond({"groups": groups})


def _whole(ctx: RequestContext, code: ErrorCode, message: str | None) -> Any:
    return ctx.respond({"error_code": code, "error_message": message, "responses": []})


def _refusal(ctx: RequestContext, group_id: str, operation: AclOperation) -> Any | None:
    """The whole answer of an Alter or Delete the group does not allow: `operation` on the
    group not granted, or the group not an empty share group here."""
    if not _allowed(ctx, operation, ResourceType.GROUP, group_id):
        return _whole(ctx, ErrorCode.group_authorization_failed, "Group authorization failed.")
    error, message = _group_error(ctx, group_id, empty=True)
    return None if error == ErrorCode.none else _whole(ctx, error, message)


async def delete_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    group_id = request.group_id
    refused = _refusal(ctx, group_id, AclOperation.DELETE)
    if refused is not None:
        return refused
    shares = ctx.services.share_partitions
    responses = []
    for t in request.topics or ():
        info = ctx.services.logs.topics.get(t.topic_name) if t.topic_name else None
        entry: dict[str, Any] = {"topic_name": t.topic_name,
                                 "topic_id": info.topic_id if info is not None else None,
                                 "error_code": ErrorCode.none}
        if not _allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            entry["error_code"] = ErrorCode.topic_authorization_failed
        elif info is None:
            entry["error_code"] = ErrorCode.unknown_topic_or_partition
        else:
            for index in range(info.partitions):
                await shares.delete_state(group_id, TopicIdPartition(info.topic_id, index))
        responses.append(entry)
    return ctx.respond({"error_code": ErrorCode.none, "responses": responses})


async def alter_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    group_id = request.group_id
    refused = _refusal(ctx, group_id, AclOperation.READ)
    if refused is not None:
        return refused
    shares = ctx.services.share_partitions
    responses = []
    for t in request.topics or ():
        info = ctx.services.logs.topics.get(t.topic_name) if t.topic_name else None
        readable = _allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.topic_name)
        partitions = []
        for p in t.partitions or ():
            code, text = ErrorCode.none, None
            if not readable:
                code = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= p.partition_index < info.partitions:
                code = ErrorCode.unknown_topic_or_partition
            elif p.start_offset < 0:
                code, text = ErrorCode.invalid_request, "a start offset must not be negative"
            else:
                try:
                    await shares.reset(group_id, t.topic_name,
                                       TopicIdPartition(info.topic_id, p.partition_index),
                                       p.start_offset)
                except ShareUnavailable as e:
                    code, text = e.code, str(e)
            partitions.append({"partition_index": p.partition_index, "error_code": code,
                               "error_message": text})
        responses.append({"topic_name": t.topic_name,
                          "topic_id": info.topic_id if info is not None else None,
                          "partitions": partitions})
    return ctx.respond({"error_code": ErrorCode.none, "responses": responses})
