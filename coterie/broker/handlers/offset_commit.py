"""OffsetCommit v2-v9, TxnOffsetCommit v0-v5, OffsetFetch v1-v9 and OffsetDelete, for
groups of any type.

The handlers translate between the wire versions and the coordinator's values and hand them
to the group runtime's door (`GroupRuntime.handle`); the shard of the group's partition holds
every rule (a group id no record can hold, fencing by generation or member epoch, unknown
partitions, metadata size, the subscribed-topic check of OffsetDelete, the order of a
transactional commit's checks: `coterie.group.shard`). Records reach __consumer_offsets
before the answer is sent.

ACLs (coterie.broker.group_acls), checked here before the shard is asked, as Kafka 4.2's
KafkaApis: OffsetCommit needs READ on the group (else every partition is
GROUP_AUTHORIZATION_FAILED: a member may not commit into a group it cannot read) and READ on
each topic (those partitions TOPIC_AUTHORIZATION_FAILED, the others committed: a principal
that can read a topic but not the group cannot commit into it). TxnOffsetCommit needs WRITE
on the transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then the same.
OffsetFetch needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) and shows only the
topics the principal may DESCRIBE: named ones are TOPIC_AUTHORIZATION_FAILED, a whole-group
fetch leaves them out. OffsetDelete needs DELETE on the group and READ on each topic.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.group_acls import enforcing, unauthorized_topics
from coterie.broker.large import LARGE, SLICE, in_slices
from coterie.group import (
    CommitPartition,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from coterie.security import AclOperation, ResourceType

_NOTHING: frozenset[Any] = frozenset()


def _commit_refusal(ctx: RequestContext, group_id: str, topics: Any,
                    group_operation: AclOperation = AclOperation.READ,
                    ) -> tuple[ErrorCode | None, frozenset[Any] | set[Any]]:
    """A commit's (or an offset deletion's) checks: the error of every partition when the
    principal may not perform `group_operation` on the group, else None and the topics it
    may not READ (none without an authorizer)."""
    authorizer = enforcing(ctx)
    if authorizer is None:
        return None, _NOTHING
    if not authorizer.authorize(ctx, group_operation, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, _NOTHING
    return None, unauthorized_topics(ctx, AclOperation.READ,
                                     (t.name for t in topics))


def _per_partition(ctx: RequestContext, topics: Any, codes: Any, denied: Any) -> Any:
    """A commit's answer: each asked partition in the asked order, TOPIC_AUTHORIZATION_FAILED
    for a topic in `denied`, else the next of `codes` (the shard's, for the others)."""
    return ctx.respond({"topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code":
                ErrorCode.topic_authorization_failed if t.name in denied else next(codes)}
            for p in t.partitions]}
        for t in topics]})


def _uniform(ctx: RequestContext, topics: Any, error: ErrorCode) -> Any:
    return _per_partition(ctx, topics, iter(lambda: error, None), _NOTHING)


def offset_commit(ctx: RequestContext, request: Any) -> Any:
    group_id = request.group_id
    refused, denied = _commit_refusal(ctx, group_id, request.topics)
    if refused is not None:
        return _uniform(ctx, request.topics, refused)
    kept = [t for t in request.topics if t.name not in denied] if denied else request.topics
    if not kept and denied:  # nothing the principal may commit: the shard is not asked
        return _per_partition(ctx, request.topics, iter(()), denied)
    retention = getattr(request, "retention_time", None)
    commit = OffsetCommitRequest(
        group_id=group_id, member_id=request.member_id,
        epoch=request.generation_id_or_member_epoch,
        partitions=tuple(
            CommitPartition(t.name, p.partition_index, p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
            for t in kept for p in t.partitions),
        instance_id=getattr(request, "group_instance_id", None), version=ctx.api_version,
        retention_ms=int(retention.total_seconds() * 1000) if retention is not None else -1)
    answer = ctx.services.groups.handle(commit)
    return _per_partition(ctx, request.topics, iter(answer.codes), denied)


def _entry(fetched: FetchedOffset) -> dict:
    value = fetched.value
    if fetched.unstable:
        return {"partition_index": fetched.partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "",
                "error_code": ErrorCode.unstable_offset_commit}
    if value is None:
        return {"partition_index": fetched.partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": ErrorCode.none}
    return {"partition_index": fetched.partition, "committed_offset": value.offset,
            "committed_leader_epoch": value.leader_epoch, "metadata": value.metadata,
            "error_code": ErrorCode.none}


def _fetch(ctx: RequestContext, group_id: str, topics: Any, member_id: str | None = None,
           member_epoch: int = -1, require_stable: bool = False) -> tuple[ErrorCode, list[dict]]:
    partitions = None if topics is None else tuple(
        (t.name, p) for t in topics for p in t.partition_indexes)
    answer = ctx.services.groups.handle(
        OffsetFetchRequest(group_id, partitions, member_id, member_epoch, require_stable))
    if answer.error != ErrorCode.none:
        return answer.error, []
    return answer.error, _by_topic(topics, [_entry(o) for o in answer.offsets], answer.offsets)


def _by_topic(topics: Any, entries: list[dict], offsets: Any) -> list[dict]:
    """The answer's topics: every asked topic, in the asked order, or (all offsets asked)
    the group's topics as the shard listed them."""
    if topics is not None:
        fetched = iter(entries)
        return [{"name": t.name, "partitions": [next(fetched) for _ in t.partition_indexes]}
                for t in topics]
    by_topic: dict[str, list[dict]] = {}
    for offset, entry in zip(offsets, entries, strict=True):
        by_topic.setdefault(offset.topic, []).append(entry)
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def _fetch_in_slices(ctx: RequestContext, group_id: str, topics: Any,
                           member_id: str | None, member_epoch: int,
                           require_stable: bool) -> tuple[ErrorCode, list[dict]]:
    """`_fetch` for a large request: the asked partitions are read a slice at a time, with
    other connections served in between (coterie.broker.large)."""
    runtime = ctx.services.groups
    if topics is None:  # every offset of the group: one read, entries made in slices
        answer = runtime.handle(OffsetFetchRequest(group_id, None, member_id, member_epoch,
                                                   require_stable))
        if answer.error != ErrorCode.none:
            return answer.error, []
        entries = await in_slices(answer.offsets, _entry)
        return answer.error, _by_topic(None, entries, answer.offsets)
    answered: list[dict] = []
    since_turn = 0
    for t in topics:
        indexes = t.partition_indexes
        partitions: list[dict] = []
        for i in range(0, len(indexes), SLICE):
            since_turn += min(SLICE, len(indexes) - i)
            if since_turn >= SLICE:
                await asyncio.sleep(0)
                since_turn = 0
            answer = runtime.handle(OffsetFetchRequest(
                group_id, tuple((t.name, p) for p in indexes[i:i + SLICE]), member_id,
                member_epoch, require_stable))
            if answer.error != ErrorCode.none:
                return answer.error, []
            partitions.extend(_entry(o) for o in answer.offsets)
        answered.append({"name": t.name, "partitions": partitions})
    return ErrorCode.none, answered


def _fetch_plan(ctx: RequestContext, group_id: str, topics: Any,
                ) -> tuple[ErrorCode | None, Any, Any]:
    """An OffsetFetch group's checks: GROUP_AUTHORIZATION_FAILED without DESCRIBE on the
    group, else None, the topics to ask the shard for (those the principal may DESCRIBE)
    and the asked ones it may not (None for a whole-group fetch: filtered after)."""
    authorizer = enforcing(ctx)
    if authorizer is None:
        return None, topics, _NOTHING
    if not authorizer.authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None, _NOTHING
    if topics is None:
        return None, None, None
    denied = unauthorized_topics(ctx, AclOperation.DESCRIBE,
                                 (t.name for t in topics))
    return None, [t for t in topics if t.name not in denied] if denied else topics, denied


def _fetch_finish(ctx: RequestContext, topics: Any, denied: Any,
                  answered: list[dict]) -> list[dict]:
    """The group's topics as answered, with the plan's refusals put back (in the asked
    order) or, for a whole-group fetch, the topics the principal may not DESCRIBE left out."""
    if denied is None:
        authorizer = enforcing(ctx)
        return [t for t in answered if authorizer.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"])]
    if not denied:
        return answered
    fetched = iter(answered)
    return [{"name": t.name, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
         "metadata": "", "error_code": ErrorCode.topic_authorization_failed}
        for p in t.partition_indexes]} if t.name in denied else next(fetched)
        for t in topics]


def _fetch_group(ctx: RequestContext, group_id: str, topics: Any, member_id: str | None,
                 member_epoch: int, stable: bool) -> tuple[ErrorCode, list[dict]]:
    """`_fetch` with the ACL checks (`_fetch_plan`, `_fetch_finish`)."""
    refused, asked, denied = _fetch_plan(ctx, group_id, topics)
    if refused is not None:
        return refused, []
    error, answered = _fetch(ctx, group_id, asked, member_id, member_epoch, stable)
    if error != ErrorCode.none:
        return error, []
    return error, _fetch_finish(ctx, topics, denied, answered)


async def _fetch_group_in_slices(ctx: RequestContext, group_id: str, topics: Any,
                                 member_id: str | None, member_epoch: int,
                                 stable: bool) -> tuple[ErrorCode, list[dict]]:
    """`_fetch_in_slices` with the ACL checks."""
    refused, asked, denied = _fetch_plan(ctx, group_id, topics)
    if refused is not None:
        return refused, []
    error, answered = await _fetch_in_slices(ctx, group_id, asked, member_id, member_epoch,
                                             stable)
    if error != ErrorCode.none:
        return error, []
    return error, _fetch_finish(ctx, topics, denied, answered)


def _size(request: Any, version: int) -> int:
    """How many entries an OffsetFetch asks for (a whole group's counts as one slice)."""
    groups = request.groups if version >= 8 else (request,)
    return sum(SLICE if g.topics is None else sum(len(t.partition_indexes) for t in g.topics)
               for g in groups)


def _refused_partitions(topics: Any, error: ErrorCode) -> list[dict]:
    """OffsetFetch before v8 answers a group-level error (the coordinator still loading)
    in every asked partition too."""
    return [{"name": t.name, "partitions": [
        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": error}
        for p in t.partition_indexes]} for t in topics or ()]


def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    if _size(request, ctx.api_version) >= LARGE:
        return _offset_fetch_large(ctx, request)
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            error, topics = _fetch_group(ctx, g.group_id, g.topics,
                                         getattr(g, "member_id", None),
                                         getattr(g, "member_epoch", -1),
                                         bool(getattr(request, "require_stable", False)))
            groups.append({"group_id": g.group_id, "error_code": error,
                           "topics": topics if error == ErrorCode.none else []})
        return ctx.respond({"groups": groups})
    error, topics = _fetch_group(ctx, request.group_id, request.topics, None, -1,
                                 bool(getattr(request, "require_stable", False)))
    if error != ErrorCode.none:
        topics = _refused_partitions(request.topics, error)
    return ctx.respond({"error_code": error, "topics": topics})


async def _offset_fetch_large(ctx: RequestContext, request: Any) -> Any:
    """OffsetFetch of thousands of partitions or groups: read in slices, encoded off the
    event loop (coterie.broker.large). The same answer as the ordinary path."""
    stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version < 8:
        error, topics = await _fetch_group_in_slices(ctx, request.group_id, request.topics,
                                                     None, -1, stable)
        if error != ErrorCode.none:
            topics = _refused_partitions(request.topics, error)
        return ctx.respond_off_loop({"error_code": error, "topics": topics})
    groups = []
    for i, g in enumerate(request.groups):
        if i:
            await asyncio.sleep(0)
        error, topics = await _fetch_group_in_slices(ctx, g.group_id, g.topics,
                                                     getattr(g, "member_id", None),
                                                     getattr(g, "member_epoch", -1), stable)
        groups.append({"group_id": g.group_id, "error_code": error,
                       "topics": topics if error == ErrorCode.none else []})
    return ctx.respond_off_loop({"groups": groups})


def offset_delete(ctx: RequestContext, request: Any) -> Any:
    refused, denied = _commit_refusal(ctx, request.group_id, request.topics,
                                      AclOperation.DELETE)
    if refused is not None:
        return ctx.respond({"error_code": refused, "topics": []})
    # As Kafka, the shard is asked even when every topic is refused (the group's own errors
    # still answer first).
    answer = ctx.services.groups.handle(OffsetDeleteRequest(request.group_id, tuple(
        (t.name, p.partition_index) for t in request.topics if t.name not in denied
        for p in t.partitions)))
    if answer.error != ErrorCode.none:
        return ctx.respond({"error_code": answer.error, "topics": []})
    codes = iter(answer.codes)
    return ctx.respond({"error_code": ErrorCode.none, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code":
                ErrorCode.topic_authorization_failed if t.name in denied else next(codes)}
            for p in t.partitions]}
        for t in request.topics]})



def txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    """TxnOffsetCommit v0-v5: offsets committed inside a transaction, pending in the group's
    shard until the transaction coordinator writes the transaction's marker
    (`GroupShard.txn_offset_commit`, which also asks for the transaction to be verified, in
    Kafka's order, before it goes on)."""
    authorizer = enforcing(ctx)
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _uniform(ctx, request.topics, ErrorCode.transactional_id_authorization_failed)
    refused, denied = _commit_refusal(ctx, request.group_id, request.topics)
    if refused is not None:
        return _uniform(ctx, request.topics, refused)
    kept = [t for t in request.topics if t.name not in denied] if denied else request.topics
    if not kept and denied:
        return _per_partition(ctx, request.topics, iter(()), denied)
    answer = ctx.services.groups.handle(TxnOffsetCommitRequest(
        transactional_id=request.transactional_id, group_id=request.group_id,
        producer_id=request.producer_id, producer_epoch=request.producer_epoch,
        partitions=tuple(
            CommitPartition(t.name, p.partition_index, p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
            for t in kept for p in t.partitions),
        generation=getattr(request, "generation_id", -1),
        member_id=getattr(request, "member_id", ""),
        instance_id=getattr(request, "group_instance_id", None), version=ctx.api_version,
        verify=True))
    return _per_partition(ctx, request.topics, iter(answer.codes), denied)
