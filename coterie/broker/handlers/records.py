"""DeleteRecords v0-v2 and DescribeLogDirs v1-v4.

DeleteRecords moves a partition's log start forward (Kafka Streams purges its
repartition topics with it; `kafka-delete-records` is the operator's tool).

Per partition: offset -1 means the high watermark (everything); an offset above it is
OFFSET_OUT_OF_RANGE; one at or below the current log start changes nothing. The new start is
written durably before it takes effect, segments wholly below it are deleted, and from then on
a fetch below it is OFFSET_OUT_OF_RANGE and ListOffsets(earliest) answers it. The answer's
low watermark is the log start after the request. Internal topics are refused
(INVALID_TOPIC_EXCEPTION), as Kafka refuses them; unknown topics and partitions are
UNKNOWN_TOPIC_OR_PARTITION. Producer state is kept: an idempotent or transactional producer
still writing to a purged partition goes on without a reset.

DescribeLogDirs answers coterie's one log directory (the data directory): every asked
partition with its size on disk, offset lag 0 (nothing is being moved between directories),
and the file system's total and usable bytes. Topics and partitions that do not exist are
left out, as Kafka leaves them out.

ACLs (when an authorizer is configured), as Kafka 4.2's KafkaApis checks them: DeleteRecords
needs DELETE on each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED before any
other check (whether the topic exists or is internal is not disclosed); DescribeLogDirs
needs DESCRIBE on the cluster, else it answers CLUSTER_AUTHORIZATION_FAILED and no
directories.
"""

from __future__ import annotations

import shutil
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import denied, enforcing
from coterie.broker.context import RequestContext
from coterie.log.errors import LogError, OffsetOutOfRangeError
from coterie.log.names import is_internal_topic
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType
from coterie.storage.errors import LeaseLost

HIGH_WATERMARK = -1


def _undeletable(ctx: RequestContext, request: Any) -> frozenset[str]:
    """The topics whose records the principal may not delete (no DELETE on them)."""
    return denied(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))


def delete_records(ctx: RequestContext, request: Any) -> Any:
    refused = _undeletable(ctx, request)
    if ctx.services.cluster is not None:
        return _delete_in_cluster(ctx, request, refused)
    logs = ctx.services.logs
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            low, code = -1, ErrorCode.none
            log = logs.partition(t.name, p.partition_index)
            if t.name in refused:
                code = ErrorCode.topic_authorization_failed
            elif is_internal_topic(t.name):
                code = ErrorCode.invalid_topic_exception
            elif log is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                offset = log.log_end_offset if p.offset == HIGH_WATERMARK else p.offset
                try:
                    if offset < 0:
                        raise OffsetOutOfRangeError(f"offset {offset}")
                    low = log.delete_records(offset)
                except OffsetOutOfRangeError:
                    code = ErrorCode.offset_out_of_range
                except (LogError, OSError):
                    code = ErrorCode.kafka_storage_error
            partitions.append({"partition_index": p.partition_index, "low_watermark": low,
                               "error_code": code})
        topics.append({"name": t.name, "partitions": partitions})
    return ctx.respond({"topics": topics})


def describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    authorizer = enforcing(ctx)
    if authorizer is not None and not authorizer.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return ctx.respond({"error_code": ErrorCode.cluster_authorization_failed,
                            "results": []})
    logs = ctx.services.logs
    log_dir = str(logs.data_dir.resolve())
    wanted = None if request.topics is None else {
        t.topic: set(t.partitions) for t in request.topics}
    topics = []
    for name, info in sorted(logs.topics.items()):
        if wanted is not None and name not in wanted:
            continue
        partitions = []
        for index in range(info.partitions):
            log = logs.partition(name, index)
            if log is None or (wanted is not None and index not in wanted[name]):
                continue
            partitions.append({"partition_index": index, "partition_size": log.size_bytes,
                               "offset_lag": 0, "is_future_key": False})
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    try:
        usage = shutil.disk_usage(log_dir)
        total, usable, code = usage.total, usage.free, ErrorCode.none
    except OSError:
        total, usable, code = -1, -1, ErrorCode.kafka_storage_error
    return ctx.respond({"error_code": ErrorCode.none, "results": [{
        "error_code": code, "log_dir": log_dir, "topics": topics, "total_bytes": total,
        "usable_bytes": usable}]})


async def _delete_in_cluster(ctx: RequestContext, request: Any,
                             refused: frozenset[str]) -> Any:
    """DeleteRecords on a cluster broker: in the database first (under the partition's
    lease), then in its copy, so that the records stay deleted whoever leads next."""
    services = ctx.services
    cluster = services.cluster
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            low, code = -1, ErrorCode.none
            led = cluster.serving(t.name, p.partition_index) if t.name is not None else None
            if t.name in refused:
                code = ErrorCode.topic_authorization_failed
            elif is_internal_topic(t.name):
                code = ErrorCode.invalid_topic_exception
            elif services.logs.partition(t.name, p.partition_index) is None:
                code = ErrorCode.unknown_topic_or_partition
            elif led is None:
                code = ErrorCode.not_leader_or_follower
            else:
                hw = led.part.high_watermark
                offset = hw if p.offset == HIGH_WATERMARK else p.offset
                if not 0 <= offset <= hw:
                    code = ErrorCode.offset_out_of_range
                else:
                    try:
                        low = await cluster.delete_records(led, offset)
                    except LeaseLost:
                        code = ErrorCode.not_leader_or_follower
                    except Exception:
                        code = ErrorCode.kafka_storage_error
            partitions.append({"partition_index": p.partition_index, "low_watermark": low,
                               "error_code": code})
        topics.append({"name": t.name, "partitions": partitions})
    return ctx.respond({"topics": topics})
