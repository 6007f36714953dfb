"""ListOffsets v1-v8 and OffsetForLeaderEpoch v2-v4.

Timestamp lookups work at record-batch granularity: the broker reads batch headers only, so
"the first offset with a timestamp >= T" is answered with the base offset of the first batch
whose max timestamp is >= T (see docs/decisions.md). A single node never changes leader, so
every partition lives in leader epoch 0 and its end offset is the log end offset.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.handlers.metadata import LEADER_EPOCH

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def _epoch_error(current_leader_epoch: int) -> ErrorCode | None:
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch
    return None


def _list_one(part: Any, timestamp: int) -> dict[str, Any]:
    if timestamp == LATEST:
        return {"timestamp": -1, "offset": part.log_end_offset}
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return {"timestamp": -1, "offset": part.log_start_offset}
    if timestamp == LATEST_TIERED:
        return {"timestamp": -1, "offset": -1}
    found = part.max_timestamp() if timestamp == MAX_TIMESTAMP else (
        part.offset_for_timestamp(timestamp) if timestamp >= 0 else None
    )
    if found is None:
        return {"timestamp": -1, "offset": -1}
    offset, ts = found
    return {"timestamp": ts, "offset": offset}


def list_offsets(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index,
                                     "timestamp": -1, "offset": -1, "leader_epoch": -1}
            part = logs.partition(t.name, p.partition_index)
            err = _epoch_error(getattr(p, "current_leader_epoch", -1))
            if part is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif err is not None:
                entry["error_code"] = err
            elif p.timestamp < LATEST_TIERED:
                entry["error_code"] = ErrorCode.unsupported_version
            else:
                entry.update(_list_one(part, p.timestamp), error_code=ErrorCode.none,
                             leader_epoch=LEADER_EPOCH)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return ctx.respond({"topics": topics})


def offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.broker.logs
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition": p.partition, "leader_epoch": -1,
                                     "end_offset": -1}
            part = logs.partition(t.topic, p.partition)
            err = _epoch_error(p.current_leader_epoch)
            if part is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif err is not None:
                entry["error_code"] = err
            elif p.leader_epoch > LEADER_EPOCH or p.leader_epoch < 0:
                # An epoch this log never had: Kafka answers "undefined" (-1, -1).
                entry["error_code"] = ErrorCode.none
            else:
                entry.update(error_code=ErrorCode.none, leader_epoch=LEADER_EPOCH,
                             end_offset=part.log_end_offset)
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return ctx.respond({"topics": topics})
