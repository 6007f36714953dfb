"""DeleteRecords v0-v2: move a partition's log start forward (Kafka Streams purges its
repartition topics with it; `kafka-delete-records` is the operator's tool).

Per partition: offset -1 means the high watermark (everything); an offset above it is
OFFSET_OUT_OF_RANGE; one at or below the current log start changes nothing. The new start is
written durably before it takes effect, segments wholly below it are deleted, and from then on
a fetch below it is OFFSET_OUT_OF_RANGE and ListOffsets(earliest) answers it. The answer's
low watermark is the log start after the request. Internal topics are refused
(INVALID_TOPIC_EXCEPTION), as Kafka refuses them; unknown topics and partitions are
UNKNOWN_TOPIC_OR_PARTITION. Producer state is kept: an idempotent or transactional producer
still writing to a purged partition goes on without a reset.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.log.errors import LogError, OffsetOutOfRangeError
from coterie.log.names import is_internal_topic

HIGH_WATERMARK = -1


def delete_records(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.services.logs
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            low, code = -1, ErrorCode.none
            log = logs.partition(t.name, p.partition_index)
            if is_internal_topic(t.name):
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
