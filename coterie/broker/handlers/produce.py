"""Produce v3+: append the client's record batches as they are, with offsets assigned.

The broker checks each batch's header and CRC (coterie.log.batch) and rewrites only the base
offset and leader epoch; the records inside are never decoded. On one node acks=1 and
acks=all mean the same thing: appended to the local log. acks=0 gets no response at all.

Batches of idempotent producers are checked against the partition's producer state
(coterie.log.producer_state): a retried batch that is already in the log is acknowledged
again with its original offsets and not written twice; a gap in sequence numbers or a stale
epoch is refused with Kafka's codes, and nothing of that partition's request is written.

ACLs (when an authorizer is configured), as Kafka 4.2's KafkaApis checks them, decided once
per request and never per partition: a request carrying transactional batches needs WRITE
on its transactional id, else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
nothing is written; each topic needs WRITE, else its partitions are
TOPIC_AUTHORIZATION_FAILED (before any other check: whether the topic exists is not
disclosed). An idempotent produce needs nothing more (KIP-679 dropped the IDEMPOTENT_WRITE
check on the cluster).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import denied, enforcing
from coterie.broker.context import LEADER_EPOCH, RequestContext
from coterie.common.limits import MAX_STRING_BYTES, shown, too_long
from coterie.log.batch import TRANSACTIONAL_FLAG, parse_batch_header
from coterie.log.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)
from coterie.security import AclOperation, ResourceType
from coterie.txn.versions import ABORTABLE_PRODUCE, TV2_PRODUCE

log = logging.getLogger("coterie.produce")


def _partition_result(ctx: RequestContext, topic: str, index: int, records: Any) -> dict:
    services = ctx.services
    part = services.logs.partition(topic, index)
    if part is None:
        return {"index": index, "error_code": ErrorCode.unknown_topic_or_partition,
                "base_offset": -1, "log_start_offset": -1}
    epoch = LEADER_EPOCH
    cluster = services.cluster
    if cluster is not None:
        led = cluster.serving(topic, index)
        if led is None:
            return {"index": index, "error_code": ErrorCode.not_leader_or_follower,
                    "base_offset": -1, "log_start_offset": -1}
        epoch = led.lease.epoch
    if not records:
        return {"index": index, "error_code": ErrorCode.corrupt_message, "base_offset": -1,
                "log_start_offset": part.log_start_offset,
                "error_message": "produce request carries no record batches"}
    try:
        info = part.append(records, epoch, services.now_ms())
    except CorruptRecordError as e:
        log.warning("rejected batch from %s for %s-%d: %s", ctx.who, topic, index, e)
        return {"index": index, "error_code": ErrorCode.corrupt_message, "base_offset": -1,
                "log_start_offset": part.log_start_offset, "error_message": str(e)}
    except InvalidRecordError as e:
        return {"index": index, "error_code": ErrorCode.invalid_record, "base_offset": -1,
                "log_start_offset": part.log_start_offset, "error_message": str(e)}
    except RecordTooLargeError as e:
        return {"index": index, "error_code": ErrorCode.message_too_large, "base_offset": -1,
                "log_start_offset": part.log_start_offset, "error_message": str(e)}
    except (OutOfOrderSequenceError, InvalidProducerEpochError, InvalidTxnStateError) as e:
        code = (ErrorCode.out_of_order_sequence_number if isinstance(e, OutOfOrderSequenceError)
                else ErrorCode.invalid_txn_state if isinstance(e, InvalidTxnStateError)
                else ErrorCode.invalid_producer_epoch)
        log.info("refused batch from %s for %s-%d: %s", ctx.who, topic, index, e)
        return {"index": index, "error_code": code, "base_offset": -1,
                "log_start_offset": part.log_start_offset, "error_message": str(e)}
    services.waiters.notify(topic, index)
    metrics = getattr(services, "metrics", None)  # (None in services made up by tests)
    if metrics is not None:
        metrics.produced(topic, len(records))
    result = {"index": index, "error_code": ErrorCode.none, "base_offset": info.first_offset,
              "log_append_time": info.log_append_time_ms,
              "log_start_offset": part.log_start_offset}
    if cluster is not None:
        durable = cluster.durable(led, info.last_offset)
        if durable is not None:
            result["_durable"] = durable
    return result


_LONG_TID = f"The transactional id is longer than {MAX_STRING_BYTES} bytes."
_COORDINATOR_TROUBLE = frozenset({ErrorCode.coordinator_load_in_progress,
                                  ErrorCode.coordinator_not_available,
                                  ErrorCode.not_coordinator})


def _transactional(ctx: RequestContext, tid: str, topic: str, p: Any) -> dict:
    """A transactional produce: the partition must be in the producer's open transaction
    (AddPartitionsToTxn first, as Kafka checks since KIP-890), else TRANSACTION_ABORTABLE
    (INVALID_TXN_STATE before v11; INVALID_PRODUCER_EPOCH for an old epoch); from v12
    (transactions version 2) the produce adds it itself. Then it is appended like any
    other."""
    headers = _first_header(p.records)
    runtime = ctx.services.transactions
    if headers is not None and runtime is not None:
        # Produce v12 (transactions version 2) adds the partition itself; before, the
        # client's AddPartitionsToTxn must have.
        if ctx.api_version >= TV2_PRODUCE:
            refusal = runtime.add_implicitly(tid, headers.producer_id, headers.producer_epoch,
                                             topic, p.index)
            if refusal in _COORDINATOR_TROUBLE:
                # Kafka's partition leader answers a produce whose transaction coordinator
                # cannot be reached with NOT_ENOUGH_REPLICAS, which producers retry.
                refusal = ErrorCode.not_enough_replicas
        else:
            refusal = runtime.verify(tid, headers.producer_id, headers.producer_epoch, topic,
                                     p.index, abortable=ctx.api_version >= ABORTABLE_PRODUCE)
        if refusal is not None:
            return {"index": p.index, "error_code": refusal, "base_offset": -1,
                    "log_start_offset": -1,
                    "error_message": f"{shown(topic)}-{p.index} is not in the open "
                    f"transaction of {shown(tid)!r} for this producer ({refusal.name})"}
    return _partition_result(ctx, topic, p.index, p.records)


def _first_header(records: Any) -> Any:
    if not records:
        return None
    try:
        return parse_batch_header(records, 0)
    except CorruptRecordError:
        return None


def _has_transactional_batches(request: Any) -> bool:
    """Whether some partition's first batch is transactional: Kafka's test for a
    transactional produce (RequestUtils.hasTransactionalRecords)."""
    for topic_data in request.topic_data:
        for p in topic_data.partition_data:
            header = _first_header(p.records)
            if header is not None and header.attributes & TRANSACTIONAL_FLAG:
                return True
    return False


def _refused(ctx: RequestContext, request: Any) -> tuple[ErrorCode | None, frozenset[str]]:
    """The ACL checks of one request (module docstring): the error every partition gets
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or None, and the topics the principal may not
    WRITE to. Only called with an authorizer configured."""
    tid = request.transactional_id
    if _has_transactional_batches(request) and (tid is None or not ctx.services.authorizer
                                                .authorize(ctx, AclOperation.WRITE,
                                                           ResourceType.TRANSACTIONAL_ID, tid)):
        return ErrorCode.transactional_id_authorization_failed, frozenset()
    return None, denied(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                        (t.name for t in request.topic_data))


def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    responses = []
    refusal: ErrorCode | None = None
    unwritable: frozenset[str] = frozenset()
    if enforcing(ctx) is not None and not too_long(request.transactional_id):
        refusal, unwritable = _refused(ctx, request)
    for topic_data in request.topic_data:
        name = topic_data.name
        if refusal is not None or name in unwritable:
            code = refusal if refusal is not None else ErrorCode.topic_authorization_failed
            results = [{"index": p.index, "error_code": code, "base_offset": -1,
                        "log_start_offset": -1} for p in topic_data.partition_data]
        elif acks not in (0, 1, -1):
            results = [{"index": p.index, "error_code": ErrorCode.invalid_required_acks,
                        "base_offset": -1, "log_start_offset": -1}
                       for p in topic_data.partition_data]
        elif too_long(request.transactional_id):
            results = [{"index": p.index, "error_code": ErrorCode.invalid_request,
                        "base_offset": -1, "log_start_offset": -1,
                        "error_message": _LONG_TID} for p in topic_data.partition_data]
        elif request.transactional_id is not None:
            results = [_transactional(ctx, request.transactional_id, name, p)
                       for p in topic_data.partition_data]
        else:
            results = [_partition_result(ctx, name, p.index, p.records)
                       for p in topic_data.partition_data]
        responses.append({"name": name, "partition_responses": results})
    if acks == 0:
        return None
    if ctx.services.cluster is not None:
        waiting = [r for t in responses for r in t["partition_responses"] if "_durable" in r]
        if waiting:
            return _when_durable(ctx, responses, waiting)
    return ctx.respond({"responses": responses})


async def _when_durable(ctx: RequestContext, responses: list[dict], waiting: list[dict]) -> Any:
    """A cluster broker answers once the batches are in the database (acks=1 and acks=all
    alike: the database is the only replica that counts). A partition whose write failed
    (its lease lost, the database gone) is answered NOT_LEADER_OR_FOLLOWER, which
    producers retry after refreshing their metadata; an idempotent producer's retry is
    then numbered as new by the next leader, since nothing of it was stored."""
    for r in waiting:
        if not await r.pop("_durable"):
            r.update(error_code=ErrorCode.not_leader_or_follower, base_offset=-1,
                     log_append_time=-1,
                     error_message="the partition's leadership moved before the write was "
                     "stored")
    return ctx.respond({"responses": responses})
