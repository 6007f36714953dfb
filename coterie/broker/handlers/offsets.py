"""ListOffsets v1-v8 and OffsetForLeaderEpoch v2-v4.

Timestamp lookups answer with a record, as Kafka does: for a timestamp T, the offset and
timestamp of the first record (in offset order) whose timestamp is >= T; for MAX_TIMESTAMP
(-3), the first record carrying the partition's largest timestamp. Batch headers and the time
index find the one batch that holds it and only that batch is read (coterie.log.record_scan;
see docs/decisions.md). A single node never changes leader, so every partition lives in
leader epoch 0 and its end offset is the log end offset; a cluster broker answers with its
lease's epoch and the high watermark (the database's end), and nothing stored is ever
truncated, so every epoch ends at the high watermark (docs/cluster.md). A cluster broker
whose copy holds a partition's recent batches only asks the database for timestamp lookups
(one query, or a few for a batch whose header promises more than its records hold): the
record may lie below the copy.

ACLs (when an authorizer is configured), as Kafka 4.2's KafkaApis checks them, once per
topic: ListOffsets needs DESCRIBE on the topic, OffsetForLeaderEpoch DESCRIBE on the topic
or CLUSTER_ACTION on the cluster (a follower's question); else every partition of the topic
is TOPIC_AUTHORIZATION_FAILED, before any other check.

Both handlers are total: a null array (kio reads one as None) counts as empty. Kafka never
gets that far, its parser refuses the null and closes the connection, as coterie's wire
layer does too; the handlers do not rely on it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import denied, enforcing
from coterie.broker.context import LEADER_EPOCH, RequestContext, epoch_error, leader_epoch
from coterie.log.errors import BelowCopyError
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5

# The first ListOffsets version that may ask for each special timestamp; any other negative
# timestamp, or one asked for in an older version, is UNSUPPORTED_VERSION (Kafka's rule,
# checked before the partition is even looked up). LATEST_TIERED needs v9, which coterie does
# not offer, so it is always unsupported here.
_MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def _unsupported(timestamp: int, version: int) -> bool:
    return timestamp < 0 and version < _MIN_VERSION.get(timestamp, 1 << 15)


def _list_one(part: Any, timestamp: int, committed: bool,
              epoch: int = LEADER_EPOCH) -> dict[str, Any]:
    """The answer for one partition: offset, timestamp and leader epoch. A lookup that finds
    nothing answers -1 for all three, as Kafka does. For read_committed (`committed`) the
    log ends at its last stable offset: LATEST is the LSO, and a timestamp lookup finding an
    offset at or past it finds nothing (Kafka's rule)."""
    end = part.last_stable_offset if committed else part.high_watermark
    if timestamp == LATEST:
        return {"timestamp": -1, "offset": end, "leader_epoch": epoch}
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return {"timestamp": -1, "offset": part.log_start_offset, "leader_epoch": epoch}
    found = part.max_timestamp() if timestamp == MAX_TIMESTAMP else (
        part.offset_for_timestamp(timestamp) if timestamp >= 0 else None
    )
    return _found(found, end, epoch)


def _found(found: Any, end: int, epoch: int) -> dict[str, Any]:
    if found is None or found.offset >= end:
        return {"timestamp": -1, "offset": -1, "leader_epoch": -1}
    return {"timestamp": found.timestamp, "offset": found.offset, "leader_epoch": epoch}


async def _from_database(ctx: RequestContext, response: dict[str, Any],
                         lookups: list[tuple[dict[str, Any], Any, int, int, int]]) -> Any:
    """The lookups of partitions whose copy starts late, asked of the database, then the
    answer."""
    for entry, led, timestamp, end, epoch in lookups:
        try:
            found = await ctx.services.cluster.offset_for_timestamp(led, timestamp)
        except Exception:  # the database failed: retriable, never a crash
            entry["error_code"] = ErrorCode.kafka_storage_error
            continue
        entry.update(_found(found, end, epoch), error_code=ErrorCode.none)
    return ctx.respond(response)


def list_offsets(ctx: RequestContext, request: Any) -> Any | Awaitable[Any]:
    logs = ctx.services.logs
    lookups: list[tuple[dict[str, Any], Any, int, int, int]] = []
    version = ctx.api_version
    committed = getattr(request, "isolation_level", 0) == 1
    hidden = denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                    (t.name for t in request.topics or ()))
    topics = []
    for t in request.topics or ():
        parts = []
        if hidden and t.name in hidden:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "timestamp": -1, "offset": -1,
                 "leader_epoch": -1, "error_code": ErrorCode.topic_authorization_failed}
                for p in t.partitions or ()]})
            continue
        for p in t.partitions or ():
            entry: dict[str, Any] = {"partition_index": p.partition_index,
                                     "timestamp": -1, "offset": -1, "leader_epoch": -1}
            part = logs.partition(t.name, p.partition_index) if t.name is not None else None
            epoch = leader_epoch(ctx.services, t.name, p.partition_index) if part else -1
            err = epoch_error(getattr(p, "current_leader_epoch", -1), epoch)
            if _unsupported(p.timestamp, version):
                entry["error_code"] = ErrorCode.unsupported_version
            elif part is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif err is not None:
                entry["error_code"] = err
            else:
                try:
                    entry.update(_list_one(part, p.timestamp, committed, epoch),
                                 error_code=ErrorCode.none)
                except BelowCopyError:
                    led = ctx.services.cluster.serving(t.name, p.partition_index)
                    if led is None:
                        entry["error_code"] = ErrorCode.not_leader_or_follower
                    else:
                        end = part.last_stable_offset if committed else part.high_watermark
                        lookups.append((entry, led, p.timestamp, end, epoch))
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    if lookups:
        return _from_database(ctx, {"topics": topics}, lookups)
    return ctx.respond({"topics": topics})


def offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.services.logs
    hidden: frozenset[str] = frozenset()
    authorizer = enforcing(ctx)
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        hidden = denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                        (t.topic for t in request.topics or ()))
    topics = []
    for t in request.topics or ():
        parts = []
        if hidden and t.topic in hidden:
            topics.append({"topic": t.topic, "partitions": [
                {"partition": p.partition, "leader_epoch": -1, "end_offset": -1,
                 "error_code": ErrorCode.topic_authorization_failed}
                for p in t.partitions or ()]})
            continue
        for p in t.partitions or ():
            entry: dict[str, Any] = {"partition": p.partition, "leader_epoch": -1,
                                     "end_offset": -1}
            part = logs.partition(t.topic, p.partition) if t.topic is not None else None
            epoch = leader_epoch(ctx.services, t.topic, p.partition) if part else -1
            err = epoch_error(p.current_leader_epoch, epoch)
            if part is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif err is not None:
                entry["error_code"] = err
            elif p.leader_epoch > epoch or p.leader_epoch < 0:
                # An epoch this log never had: Kafka answers "undefined" (-1, -1).
                entry["error_code"] = ErrorCode.none
            else:
                # Nothing stored is ever truncated (a cluster's log is the database's, and a
                # single broker's never changes leader): every epoch up to this one ends at
                # the high watermark, so a client's position is never taken for truncated.
                entry.update(error_code=ErrorCode.none, leader_epoch=p.leader_epoch,
                             end_offset=part.high_watermark)
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return ctx.respond({"topics": topics})
