"""Fetch v4-v16 with long polling.

Stored batch bytes go out as they sit in the segment files: `PartitionLog.read` returns whole
batches (starting with the one that contains the requested offset, so a fetch that starts
mid-batch gets the whole batch and the client skips ahead), and kio writes them length-prefixed
into the response without any record decoding.

The broker never creates incremental fetch sessions (KIP-227): it answers session id 0, which
tells clients to keep sending full fetch requests. That is allowed by the protocol and keeps a
single broker free of per-client session state.

Long poll: if fewer than `min_bytes` are available and `max_wait` has not passed, the request
parks on the partitions it reads (broker.waiters) and is woken by the next append to any of
them, or by its deadline.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.handlers.metadata import LEADER_EPOCH
from coterie.log.errors import OffsetOutOfRangeError

log = logging.getLogger("coterie.fetch")


def _resolve(ctx: RequestContext, topic: Any) -> tuple[str | None, Any, ErrorCode]:
    """Topic name, topic-id-or-name echo field, and error for one requested topic."""
    logs = ctx.broker.logs
    if ctx.api_version >= 13:
        info = logs.topic_by_id(topic.topic_id)
        if info is None:
            return None, topic.topic_id, ErrorCode.unknown_topic_id
        return info.name, topic.topic_id, ErrorCode.none
    name = topic.topic
    return name, name, ErrorCode.none


def _read_all(ctx: RequestContext, request: Any) -> tuple[list[dict], int, list]:
    """One pass over every requested partition: response entries, bytes read, wait keys."""
    logs = ctx.broker.logs
    budget = request.max_bytes if ctx.api_version >= 3 else 0x7FFFFFFF
    total = 0
    keys = []
    errors = False
    responses = []
    for topic in request.topics:
        name, echo, topic_error = _resolve(ctx, topic)
        parts = []
        for p in topic.partitions:
            index = p.partition
            entry: dict[str, Any] = {"partition_index": index, "high_watermark": -1,
                                     "last_stable_offset": -1, "log_start_offset": -1,
                                     "preferred_read_replica": -1, "records": None}
            part = logs.partition(name, index) if name is not None else None
            leader_epoch = getattr(p, "current_leader_epoch", -1)
            if topic_error != ErrorCode.none:
                entry["error_code"] = topic_error
                errors = True
            elif part is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
                errors = True
            elif leader_epoch > LEADER_EPOCH:
                entry["error_code"] = ErrorCode.unknown_leader_epoch
                errors = True
            else:
                hw = part.log_end_offset
                entry.update(high_watermark=hw, last_stable_offset=hw,
                             log_start_offset=part.log_start_offset)
                max_bytes = min(p.partition_max_bytes, budget) if total else p.partition_max_bytes
                try:
                    data = part.read(p.fetch_offset, max_bytes) if max_bytes > 0 else b""
                except OffsetOutOfRangeError:
                    entry["error_code"] = ErrorCode.offset_out_of_range
                    errors = True
                else:
                    entry["error_code"] = ErrorCode.none
                    entry["records"] = data
                    total += len(data)
                    budget -= len(data)
                    keys.append((name, index))
            parts.append(entry)
        responses.append({"topic": echo, "topic_id": echo, "partitions": parts})
    if errors:
        keys = []  # an error is news: answer at once instead of waiting
    return responses, total, keys


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 7 and request.session_id != 0:
        return ctx.respond({"error_code": ErrorCode.fetch_session_id_not_found,
                            "session_id": 0, "responses": []})
    max_wait_s = request.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait_s
    while True:
        responses, total, keys = _read_all(ctx, request)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or not keys or remaining <= 0:
            break
        await ctx.broker.waiters.wait(keys, remaining)
    return ctx.respond({"error_code": ErrorCode.none, "session_id": 0, "responses": responses})
