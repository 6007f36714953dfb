"""OffsetCommit v2-v9, OffsetFetch v1-v9 and OffsetDelete for classic and consumer groups.

Commits from classic group members are fenced by generation and member id
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID); a commit
with generation -1 and no member id is a standalone commit (the "simple consumer" case) and is
accepted for groups without members. Commits to a KIP-848 consumer group name a member and
its current member epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; v9 at least), and so does an
OffsetFetch v9 that carries a member id. `GroupCoordinator` holds the rules. Records reach
__consumer_offsets before the answer is sent.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.group.limits import too_long
from coterie.group.offsets.store import OffsetCommitRequestEntry, metadata_too_large

LOADING = ErrorCode.coordinator_load_in_progress


def _all_partitions(request: Any, code: ErrorCode) -> list[dict]:
    return [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]}
        for t in request.topics]


def offset_commit(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    runtime = broker.groups
    group_id = request.group_id
    if not runtime.loaded:
        return ctx.respond({"topics": _all_partitions(request, LOADING)})
    if not group_id or too_long(group_id):  # a group id no record can hold: never stored
        return ctx.respond({"topics": _all_partitions(request, ErrorCode.invalid_group_id)})
    fence = runtime.coordinator.validate_commit(
        group_id, request.member_id, request.generation_id_or_member_epoch,
        getattr(request, "group_instance_id", None), ctx.api_version)
    if fence is not None:
        return ctx.respond({"topics": _all_partitions(request, fence.code)})
    now = broker.now_ms()
    retention = getattr(request, "retention_time", None)
    retention_ms = int(retention.total_seconds() * 1000) if retention is not None else -1
    expire = now + retention_ms if retention_ms >= 0 else -1
    max_meta = runtime.offset_metadata_max_bytes
    entries: list[OffsetCommitRequestEntry] = []
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if broker.logs.partition(t.name, p.partition_index) is None:
                code = ErrorCode.unknown_topic_or_partition
            elif metadata_too_large(p.committed_metadata, max_meta):
                code = ErrorCode.offset_metadata_too_large
            else:
                code = ErrorCode.none
                entries.append(OffsetCommitRequestEntry(
                    topic=t.name, partition=p.partition_index, offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=p.committed_metadata, expire_timestamp_ms=expire))
            parts.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    if entries:
        records = runtime.offsets.commit(group_id, entries, now)
        try:
            runtime.persist(group_id, records)
        except Exception:
            failed = {(e.topic, e.partition) for e in entries}
            for t in topics:
                for p in t["partitions"]:
                    if (t["name"], p["partition_index"]) in failed:
                        p["error_code"] = ErrorCode.coordinator_not_available
    return ctx.respond({"topics": topics})


def _fetch_group(runtime: Any, group_id: str, topics: Any) -> list[dict]:
    if topics is None:
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), v in sorted(runtime.offsets.fetch_all(group_id).items()):
            by_topic.setdefault(topic, []).append(_entry(partition, v))
        return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    out = []
    for t in topics:
        out.append({"name": t.name, "partitions": [
            _entry(p, runtime.offsets.fetch(group_id, t.name, p)) for p in t.partition_indexes]})
    return out


def _entry(partition: int, value: Any) -> dict:
    if value is None:
        return {"partition_index": partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": ErrorCode.none}
    return {"partition_index": partition, "committed_offset": value.offset,
            "committed_leader_epoch": value.leader_epoch, "metadata": value.metadata,
            "error_code": ErrorCode.none}


def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    runtime = ctx.broker.groups
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            fence = None
            if runtime.loaded:
                fence = runtime.coordinator.validate_fetch(
                    g.group_id, getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            if not runtime.loaded:
                groups.append({"group_id": g.group_id, "topics": [], "error_code": LOADING})
            elif fence is not None:
                groups.append({"group_id": g.group_id, "topics": [], "error_code": fence.code})
            else:
                groups.append({"group_id": g.group_id, "error_code": ErrorCode.none,
                               "topics": _fetch_group(runtime, g.group_id, g.topics)})
        return ctx.respond({"groups": groups})
    if not runtime.loaded:
        return ctx.respond({"error_code": LOADING, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p, "committed_offset": -1, "metadata": "",
                 "error_code": LOADING} for p in t.partition_indexes]}
            for t in request.topics or ()]})
    return ctx.respond({"error_code": ErrorCode.none,
                        "topics": _fetch_group(runtime, request.group_id, request.topics)})


def offset_delete(ctx: RequestContext, request: Any) -> Any:
    runtime = ctx.broker.groups
    group_id = request.group_id
    if not runtime.loaded:
        return ctx.respond({"error_code": LOADING, "topics": []})
    known = runtime.coordinator.group_type(group_id) is not None
    if not known and not runtime.offsets.has_offsets(group_id):
        return ctx.respond({"error_code": ErrorCode.group_id_not_found, "topics": []})
    subscribed = runtime.subscribed_topics(group_id)
    wanted = []
    topics = []
    for t in request.topics:
        code = ErrorCode.group_subscribed_to_topic if t.name in subscribed else ErrorCode.none
        if code == ErrorCode.none:
            wanted.extend((t.name, p.partition_index) for p in t.partitions)
        topics.append({"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]})
    records = runtime.offsets.delete(group_id, wanted)
    if records:
        runtime.persist(group_id, records)
    return ctx.respond({"error_code": ErrorCode.none, "topics": topics})
