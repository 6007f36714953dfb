"""InitProducerId for idempotent producers (a fresh producer id, epoch 0), and
DescribeProducers.

Every Kafka client since 3.0 starts with it (idempotence is on by default), before its first
Produce. A producer without a transactional id is known only by its id, so Kafka's rule is
simple and coterie follows it: every such request gets a new id, whatever id and epoch it
carries (a producer bumps its epoch this way after losing track of its sequence numbers,
KIP-360; a new id serves that just as well, since nothing else is tied to the old one).

A request with a transactional id goes to the transaction coordinator
(`handlers/transactions.py`). With an authorizer, one without needs IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (Kafka 4.2's check, `idempotent_refused`), else it is
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import denied
from coterie.broker.context import RequestContext
from coterie.broker.handlers.transactions import idempotent_refused, init_transactional
from coterie.common.limits import shown
from coterie.log.errors import StorageError
from coterie.security import AclOperation, ResourceType

log = logging.getLogger("coterie.producers")


def init_producer_id(ctx: RequestContext, request: Any) -> Any:
    def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1,
               message: str | None = None) -> Any:
        if message:  # the response has no error message field: the log says why
            log.warning("%s: InitProducerId refused (%s): %s", ctx.who, error.name, message)
        return ctx.respond({"throttle_time": 0, "error_code": error,
                            "producer_id": producer_id, "producer_epoch": epoch})

    if request.transactional_id is not None:
        return init_transactional(ctx, request)
    if idempotent_refused(ctx):
        return answer(ErrorCode.cluster_authorization_failed)
    try:
        producer_id = ctx.services.producer_ids.next_id()
    except (StorageError, OSError) as e:
        log.error("cannot allocate a producer id: %s", e)
        return answer(ErrorCode.coordinator_not_available, message=str(e))
    return answer(ErrorCode.none, producer_id, 0)


def describe_producers(ctx: RequestContext, request: Any) -> Any:
    """DescribeProducers v0 (`kafka-transactions describe-producers`): the producers each
    partition tracks, with their epoch, last sequence and last timestamp, and the first
    offset of an open transaction (-1 if none). Unknown partitions are
    UNKNOWN_TOPIC_OR_PARTITION. With an authorizer, a topic the principal may not READ is
    TOPIC_AUTHORIZATION_FAILED on each partition, before its existence is looked at (Kafka
    4.2's KafkaApis)."""
    logs = ctx.services.logs
    unreadable = denied(ctx, AclOperation.READ, ResourceType.TOPIC,
                        (t.name for t in request.topics or ()))
    topics = []
    for t in request.topics or ():
        parts = []
        if unreadable and t.name in unreadable:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": index, "error_code": ErrorCode.topic_authorization_failed,
                 "error_message": "Topic authorization failed.", "active_producers": []}
                for index in t.partition_indexes or ()]})
            continue
        for index in t.partition_indexes or ():
            part = logs.partition(t.name, index) if t.name is not None else None
            if part is None:
                parts.append({"partition_index": index,
                              "error_code": ErrorCode.unknown_topic_or_partition,
                              "error_message": f"{shown(t.name)}-{index} does not exist",
                              "active_producers": []})
                continue
            parts.append({"partition_index": index, "error_code": ErrorCode.none,
                          "active_producers": [
                              {"producer_id": e.producer_id, "producer_epoch": e.epoch,
                               "last_sequence": e.last_seq,
                               "last_timestamp": e.last_timestamp,
                               "coordinator_epoch": e.coordinator_epoch,
                               "current_txn_start_offset": (-1 if e.txn_first_offset is None
                                                            else e.txn_first_offset)}
                              for e in sorted(part.active_producers(),
                                              key=lambda e: e.producer_id)]})
        topics.append({"name": t.name, "partitions": parts})
    return ctx.respond({"throttle_time": 0, "topics": topics})
