"""InitProducerId with a transactional id, AddPartitionsToTxn (v0-v3, the client form),
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions: translations to the
transaction coordinator's core (coterie.txn.manager) through its runtime
(coterie.broker.transactions).

Versions: coterie finalizes the `transaction.version` feature at level 2, as a Kafka 4.x
broker does, so Kafka 4.x Java clients use transactions version 2 (coterie.txn.versions):
no AddPartitionsToTxn or AddOffsetsToTxn, EndTxn v5 bumping the epoch. Clients that know
only version 1 (librdkafka, kafka-python) add partitions and offsets explicitly with
AddPartitionsToTxn v0-v3 and AddOffsetsToTxn, and end with EndTxn up to v4: served as
before. AddPartitionsToTxn v4+ is the broker-to-broker form, which a single broker never
needs.

ACLs (coterie.broker.group_acls), as Kafka 4.2's KafkaApis, checked before the coordinator
is asked: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn need WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn also WRITE on
each topic (TOPIC_AUTHORIZATION_FAILED, the other partitions OPERATION_NOT_ATTEMPTED) and
AddOffsetsToTxn READ on the group; DescribeTransactions needs DESCRIBE per id (and shows
only the topics the principal may DESCRIBE); ListTransactions lists only the ids it may
DESCRIBE; WriteTxnMarkers, the brokers' own request, needs ALTER or CLUSTER_ACTION on the
cluster. An idempotent InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on some
topic (`idempotent_refused`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.context import LEADER_EPOCH, RequestContext, millis
from coterie.broker.group_acls import enforcing, may, may_on_cluster, unauthorized_topics
from coterie.broker.offsets_topic import OFFSETS_TOPIC
from coterie.log.errors import InvalidProducerEpochError, LogError
from coterie.log.names import validate_topic_name
from coterie.security import AclOperation, ResourceType
from coterie.txn.metadata import TxnState
from coterie.txn.versions import TV2_END_TXN
from coterie.wire.txn_markers import control_batch


def _runtime(ctx: RequestContext) -> Any:
    return ctx.services.transactions


def _may_write_id(ctx: RequestContext, tid: str | None) -> bool:
    """WRITE on the transactional id: what using it in a transaction needs."""
    authorizer = enforcing(ctx)
    return authorizer is None or (tid is not None and authorizer.authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid))


def idempotent_refused(ctx: RequestContext) -> bool:
    """Whether an InitProducerId without a transactional id must be refused
    (CLUSTER_AUTHORIZATION_FAILED, as Kafka): the principal may neither IDEMPOTENT_WRITE on
    the cluster nor WRITE on any topic (Kafka's authorizeByResourceType). False without an
    authorizer. For the idempotent path in producers.py."""
    authorizer = enforcing(ctx)
    return (authorizer is not None and not may_on_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
            and not authorizer.authorize_any(ctx, AclOperation.WRITE, ResourceType.TOPIC))


def init_transactional(ctx: RequestContext, request: Any) -> Any:
    """InitProducerId for a transactional id (the idempotent case is in producers.py)."""
    runtime = _runtime(ctx)

    def answer(error: ErrorCode, pid: int = -1, epoch: int = -1) -> Any:
        return ctx.respond({"throttle_time": 0, "error_code": error, "producer_id": pid,
                            "producer_epoch": epoch})

    tid = request.transactional_id
    if not _may_write_id(ctx, tid):
        return answer(ErrorCode.transactional_id_authorization_failed)
    result = runtime.handle(tid, lambda manager, now: manager.init_producer_id(
        tid, millis(request.transaction_timeout), getattr(request, "producer_id", -1),
        getattr(request, "producer_epoch", -1), now))
    return answer(result.error, result.producer_id, result.producer_epoch)


def add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    runtime = _runtime(ctx)
    topics = request.v3_and_below_topics or ()
    tid = request.v3_and_below_transactional_id

    def answer(codes: dict[tuple[str, int], ErrorCode]) -> Any:
        return ctx.respond({"throttle_time": 0, "results_by_topic_v3_and_below": [
            {"name": t.name, "results_by_partition": [
                {"partition_index": p, "partition_error_code": codes[(t.name, p)]}
                for p in t.partitions or ()]} for t in topics]})

    wanted = [(t.name, p) for t in topics for p in t.partitions or ()]
    if not _may_write_id(ctx, tid):
        return answer(dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed))
    authorizer = enforcing(ctx)
    denied = (unauthorized_topics(ctx, AclOperation.WRITE, (t.name for t in topics))
              if authorizer is not None else set())
    logs = ctx.services.logs
    unknown = {tp for tp in wanted if tp[0] not in denied and (
        validate_topic_name(tp[0]) is not None or logs.partition(*tp) is None)}
    if unknown or denied:
        # Kafka refuses the whole request (before asking its transaction coordinator): the
        # partitions of topics the principal may not WRITE and the unknown ones with their
        # error, the others OPERATION_NOT_ATTEMPTED.
        return answer({tp: ErrorCode.topic_authorization_failed if tp[0] in denied
                       else ErrorCode.unknown_topic_or_partition if tp in unknown
                       else ErrorCode.operation_not_attempted for tp in wanted})
    result = runtime.handle(tid, lambda manager, now: manager.add_partitions(
        tid, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, wanted,
        now))
    return answer(dict.fromkeys(wanted, result.error))


def add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    tid = request.transactional_id
    if not _may_write_id(ctx, tid):
        return ctx.respond({"throttle_time": 0,
                            "error_code": ErrorCode.transactional_id_authorization_failed})
    if not may(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond({"throttle_time": 0,
                            "error_code": ErrorCode.group_authorization_failed})
    result = _runtime(ctx).handle(tid, lambda manager, now: manager.add_offsets(
        tid, request.producer_id, request.producer_epoch, request.group_id, now))
    return ctx.respond({"throttle_time": 0, "error_code": result.error})


def end_txn(ctx: RequestContext, request: Any) -> Any:
    tid = request.transactional_id
    if not _may_write_id(ctx, tid):
        return ctx.respond({"throttle_time": 0,
                            "error_code": ErrorCode.transactional_id_authorization_failed,
                            "producer_id": -1, "producer_epoch": -1})
    tv2 = ctx.api_version >= TV2_END_TXN
    result = _runtime(ctx).handle(tid, lambda manager, now: manager.end_txn(
        tid, request.producer_id, request.producer_epoch, request.committed, now, tv2=tv2))
    # v5 answers with the producer id and epoch of the client's next transaction.
    return ctx.respond({"throttle_time": 0, "error_code": result.error,
                        "producer_id": result.producer_id,
                        "producer_epoch": result.producer_epoch})


def describe_transactions(ctx: RequestContext, request: Any) -> Any:
    """DescribeTransactions v0 (`kafka-transactions describe`): state, producer id and
    epoch, timeout, start time and partitions of each transactional id;
    TRANSACTIONAL_ID_NOT_FOUND for an unknown one."""
    runtime = _runtime(ctx)
    states = []
    for tid in request.transactional_ids or ():
        entry: dict[str, Any] = {"transactional_id": tid, "transaction_state": "",
                                 "transaction_timeout": 0, "transaction_start_time": -1,
                                 "producer_id": -1, "producer_epoch": -1, "topics": []}
        if not may(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            states.append({**entry,
                           "error_code": ErrorCode.transactional_id_authorization_failed})
            continue
        meta = runtime.describe(tid)
        if isinstance(meta, ErrorCode):
            states.append({**entry, "error_code": meta})
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        # Only the topics the principal may DESCRIBE, as Kafka.
        by_topic = {t: ps for t, ps in by_topic.items()
                    if may(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t)}
        states.append({**entry, "error_code": ErrorCode.none,
                       "transaction_state": meta.state.label,
                       "transaction_timeout": meta.timeout_ms,
                       "transaction_start_time": meta.txn_start_ms,
                       "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                       "topics": [{"topic": t, "partitions": ps}
                                  for t, ps in by_topic.items()]})
    return ctx.respond({"throttle_time": 0, "transaction_states": states})


def list_transactions(ctx: RequestContext, request: Any) -> Any:
    """ListTransactions v0-v1 (`kafka-transactions list`), with Kafka's filters: states
    (unknown names are echoed back), producer ids, and (v1) how long a transaction has run."""
    known = {s.label.lower() for s in TxnState}
    wanted = list(request.state_filters or ())
    unknown = [s for s in wanted if s.lower() not in known]
    listed = _runtime(ctx).listing([s for s in wanted if s.lower() in known] or
                                   ([] if not wanted else ["-none-"]),
                                   request.producer_id_filters or (),
                                   getattr(request, "duration_filter", -1))
    if listed is None:
        return ctx.respond({"throttle_time": 0,
                            "error_code": ErrorCode.coordinator_load_in_progress,
                            "unknown_state_filters": [], "transaction_states": []})
    authorizer = enforcing(ctx)
    if authorizer is not None:  # only the ids the principal may DESCRIBE, as Kafka
        listed = [m for m in listed if authorizer.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id)]
    return ctx.respond({"throttle_time": 0, "error_code": ErrorCode.none,
                        "unknown_state_filters": unknown,
                        "transaction_states": [
                            {"transactional_id": m.transactional_id,
                             "producer_id": m.producer_id,
                             "transaction_state": m.state.label}
                            for m in sorted(listed, key=lambda m: m.transactional_id)]})


def write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    """WriteTxnMarkers v0-v1: a transaction coordinator's markers for partitions this broker
    leads (in a cluster, the coordinator of a transaction may be another broker:
    coterie.broker.transactions). Each marker is a COMMIT or ABORT control batch appended to
    its partition, through the group runtime for a __consumer_offsets partition (which
    commits or drops the transaction's pending offsets). A cluster broker answers once they
    are in the database, and NOT_LEADER_OR_FOLLOWER for a partition it does not lead (or
    whose marker did not reach the database): the coordinator sends it again."""
    if not (may_on_cluster(ctx, AclOperation.ALTER)
            or may_on_cluster(ctx, AclOperation.CLUSTER_ACTION)):
        # Kafka's answer to a principal that is not a broker: every marker's partitions
        # CLUSTER_AUTHORIZATION_FAILED, nothing written.
        return ctx.respond({"markers": [
            {"producer_id": m.producer_id, "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p,
                     "error_code": ErrorCode.cluster_authorization_failed}
                    for p in t.partition_indexes or ()]} for t in m.topics or ()]}
            for m in request.markers or ()]})
    services = ctx.services
    cluster = services.cluster
    now = services.now_ms()
    waits: list[tuple[dict[str, Any], Any]] = []
    markers = []
    for m in request.markers or ():
        topics = []
        for t in m.topics or ():
            results = []
            for p in t.partition_indexes or ():
                entry: dict[str, Any] = {"partition_index": p, "error_code": ErrorCode.none}
                results.append(entry)
                entry["error_code"], wait = _write_marker(services, cluster, m, t.name, p, now)
                if wait is not None:
                    waits.append((entry, wait))
            topics.append({"name": t.name, "partitions": results})
        markers.append({"producer_id": m.producer_id, "topics": topics})
    if waits:
        return _when_stored(ctx, markers, waits)
    return ctx.respond({"markers": markers})


def _write_marker(services: Any, cluster: Any, m: Any, topic: str | None, p: int,
                  now: int) -> tuple[ErrorCode, Any]:
    """Append one marker; its error code, and what to await before answering (or None)."""
    part = services.logs.partition(topic, p) if topic is not None else None
    if part is None:
        return ErrorCode.unknown_topic_or_partition, None
    led = cluster.serving(topic, p) if cluster is not None else None
    if cluster is not None and led is None:
        return ErrorCode.not_leader_or_follower, None
    producer = (m.producer_id, m.producer_epoch)
    try:
        if topic == OFFSETS_TOPIC:
            if not services.groups.coordinates(p):
                return ErrorCode.not_leader_or_follower, None
            services.groups.end_transaction(p, producer, m.transaction_result,
                                            m.coordinator_epoch)
        else:
            epoch = led.lease.epoch if led is not None else LEADER_EPOCH
            part.append(control_batch(m.producer_id, m.producer_epoch, m.transaction_result,
                                      m.coordinator_epoch, now), epoch, now, coordinator=True)
            services.waiters.notify(topic, p)
    except InvalidProducerEpochError:
        return ErrorCode.invalid_producer_epoch, None
    except (LogError, OSError):
        return ErrorCode.kafka_storage_error, None
    if led is None:
        return ErrorCode.none, None
    return ErrorCode.none, cluster.durable(led, led.part.log_end_offset - 1)


async def _when_stored(ctx: RequestContext, markers: list[dict[str, Any]],
                       waits: list[tuple[dict[str, Any], Any]]) -> Any:
    for entry, wait in waits:
        if not await wait:
            entry["error_code"] = ErrorCode.not_leader_or_follower
    return ctx.respond({"markers": markers})
