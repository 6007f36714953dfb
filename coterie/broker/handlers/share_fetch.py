"""ShareFetch and ShareAcknowledge v1-v2 (KIP-932): share consumers acquire records and
acknowledge them.

A ShareFetch works in the member's share session (coterie.broker.share_sessions): epoch 0
opens it with the partitions named, later epochs add and forget partitions, -1 closes it
(acknowledging only, then releasing what the member still holds). Acknowledgements carried
by a ShareFetch are applied first, then the session's partitions are fetched: from each share
partition (coterie.broker.share_partitions) the member acquires records, the stored batches
holding them go out as they are in the log, with the acquired ranges and their delivery
counts, and the client hands out only those records. Every change is durable before the
answer leaves.

Long poll: with nothing acquired and `max_wait` left, the request waits on its partitions
and is woken by an append, by a lock expiring or by records released; then it tries again.

Limits: `max_records` counts the records acquired over the whole request, `max_bytes` the
bytes of the batches sent (at least one batch, as Fetch's KIP-74 rule); `batch_size` cuts
the acquired records, in BATCH_OPTIMIZED mode, into AcquiredRecords of at least that many
records at log-batch starts, as Kafka 4.2 does (it does not bound what one fetch
acquires). A read_committed group (share.isolation.level) acquires only below the last
stable offset, and the batches of aborted transactions are archived instead of handed out
(SharePartitions.read_for).

Errors, as Kafka 4.2 answers them: the request's whole answer for a session error
(SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED,
INVALID_REQUEST for acknowledgements opening a session), GROUP_AUTHORIZATION_FAILED without
READ on the group; per partition UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED (READ on the
topic), NOT_LEADER_OR_FOLLOWER (a cluster broker not leading it, with no current leader
known here), and the acknowledgement's own error (INVALID_RECORD_STATE for records the member
does not hold, INVALID_REQUEST for a malformed batch) in its acknowledge error code. One
member's bad acknowledgement changes nothing of anyone's records.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import enforcing
from coterie.broker.context import RequestContext
from coterie.broker.group_acls import may
from coterie.broker.share_partitions import ShareUnavailable
from coterie.broker.share_sessions import ShareSessionError
from coterie.security import AclOperation, ResourceType
from coterie.share import AckBatch, AcquireMode
from coterie.storage.api import TopicIdPartition

TP = tuple[uuid.UUID, int]


def _shares(ctx: RequestContext) -> Any:
    return ctx.services.share_partitions


def _whole(ctx: RequestContext, code: ErrorCode, message: str | None) -> Any:
    return ctx.respond({"error_code": code, "error_message": message, "responses": [],
                        "node_endpoints": []})


def _first_refusal(ctx: RequestContext, request: Any) -> Any | None:
    """The answer to the whole request when it cannot be served at all."""
    if ctx.services.share_partitions is None:
        return _whole(ctx, ErrorCode.unsupported_version, "share groups are not enabled")
    if not request.group_id or "\0" in request.group_id:
        return _whole(ctx, ErrorCode.invalid_group_id,
                      "the group id is empty or holds a NUL character")
    if not request.member_id:
        return _whole(ctx, ErrorCode.invalid_request, "the member id is empty")
    if enforcing(ctx) is not None and not may(ctx, AclOperation.READ, ResourceType.GROUP,
                                               request.group_id):
        return _whole(ctx, ErrorCode.group_authorization_failed, "Group authorization failed.")
    return None


class _Partition:
    """One partition's answer, filled as the request goes."""

    __slots__ = ("ack_error", "ack_message", "acquired", "error", "message", "records",
                 "tp")

    def __init__(self, tp: TP) -> None:
        self.tp = tp
        self.error = ErrorCode.none
        self.message: str | None = None
        self.ack_error = ErrorCode.none
        self.ack_message: str | None = None
        self.acquired: tuple[Any, ...] = ()
        self.records = b""

    def news(self) -> bool:
        return bool(self.records) or self.error != ErrorCode.none or \
            self.ack_error != ErrorCode.none


def _topic(ctx: RequestContext, topic_id: uuid.UUID | None, readable: dict[Any, bool]
           ) -> tuple[str | None, ErrorCode]:
    """The topic's name, or the partition error for a topic that cannot be read."""
    info = ctx.services.logs.topic_by_id(topic_id) if topic_id is not None else None
    if info is None:
        return None, ErrorCode.unknown_topic_id
    if enforcing(ctx) is not None:
        ok = readable.get(topic_id)
        if ok is None:
            ok = readable[topic_id] = may(ctx, AclOperation.READ, ResourceType.TOPIC, info.name)
        if not ok:
            return None, ErrorCode.topic_authorization_failed
    return info.name, ErrorCode.none


def _ack_batches(batches: Iterable[Any]) -> list[AckBatch]:
    return [AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in batches]


async def _acknowledge(ctx: RequestContext, group_id: str, member_id: str, tp: TP,
                       batches: list[AckBatch], readable: dict[Any, bool]
                       ) -> tuple[ErrorCode, str | None]:
    """Apply one partition's acknowledgements; its error (none once durable)."""
    shares = _shares(ctx)
    topic, error = _topic(ctx, tp[0], readable)
    if topic is None:
        return error, None
    key = (group_id, tp[0], tp[1])
    now = ctx.services.now_ms()
    try:
        lease = shares.lease_of(topic, TopicIdPartition(*tp))
        async with shares.lock(key):
            sp = await shares.state(key, topic, lease, now)
            outcome = sp.acknowledge(member_id, batches, now)
            code = await shares.persist(key, sp, outcome, lease)
    except ShareUnavailable as e:
        return e.code, str(e)
    except ValueError as e:  # an acknowledge type or range the core refuses outright
        return ErrorCode.invalid_request, str(e)
    ctx.services.waiters.notify(topic, tp[1])  # released records are news to others
    if outcome.error != ErrorCode.none:
        return outcome.error, outcome.message
    return code, None


def _acquire_mode(ctx: RequestContext, request: Any) -> AcquireMode | None:
    if ctx.api_version < 2:
        return AcquireMode.BATCH_OPTIMIZED
    try:
        return AcquireMode(request.share_acquire_mode)
    except ValueError:
        return None


async def _fetch_round(ctx: RequestContext, request: Any, parts: dict[TP, _Partition],
                       order: list[TP], mode: AcquireMode, readable: dict[Any, bool]
                       ) -> tuple[int, list[tuple[str, int]], bool]:
    """One pass over the session's partitions: acquire what there is; the records acquired,
    the (topic, partition) keys to wait on, and whether some partition moved without handing
    anything out (read_committed archived an aborted transaction's batches: read again
    at once rather than wait for an append)."""
    shares = _shares(ctx)
    group_id, member_id = request.group_id, request.member_id
    records_left = request.max_records
    bytes_left = request.max_bytes
    got = 0
    keys = []
    moved = False
    now = ctx.services.now_ms()
    for tp in order:
        part = parts.setdefault(tp, _Partition(tp))
        if part.error != ErrorCode.none or part.records:
            continue
        topic, error = _topic(ctx, tp[0], readable)
        if topic is None:
            part.error = error
            continue
        if ctx.services.logs.partition(topic, tp[1]) is None:
            part.error = ErrorCode.unknown_topic_or_partition
            continue
        keys.append((topic, tp[1]))
        if records_left <= 0 or bytes_left <= 0:
            continue
        key = (group_id, tp[0], tp[1])
        try:
            lease = shares.lease_of(topic, TopicIdPartition(*tp))
            async with shares.lock(key):
                sp = await shares.state(key, topic, lease, now)
                read = await shares.read_for(sp, topic, bytes_left, records_left)
                outcome, data = shares.acquire(sp, member_id, read, records_left, mode, now,
                                               max(request.batch_size, 0))
                code = await shares.persist(key, sp, outcome, lease)
        except ShareUnavailable as e:
            part.error, part.message = e.code, str(e)
            continue
        if code != ErrorCode.none:
            part.error = code
            continue
        if outcome.error != ErrorCode.none:
            part.error, part.message = outcome.error, outcome.message
            continue
        if outcome.acquired:
            part.acquired, part.records = outcome.acquired, data
            n = outcome.acquired_count
            got += n
            records_left -= n
            bytes_left -= len(data)
        elif outcome.records:
            moved = True
    return got, keys, moved


def _answer(ctx: RequestContext, request: Any, parts: dict[TP, _Partition],
            listed: Iterable[TP], lock_ms: int) -> Any:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for tp in listed:
        p = parts.get(tp) or _Partition(tp)
        by_topic.setdefault(tp[0], []).append({
            "partition_index": tp[1], "error_code": p.error, "error_message": p.message,
            "acknowledge_error_code": p.ack_error,
            "acknowledge_error_message": p.ack_message,
            "current_leader": {"leader_id": -1, "leader_epoch": -1},
            "records": p.records,
            "acquired_records": [{"first_offset": r.first_offset, "last_offset": r.last_offset,
                                  "delivery_count": r.delivery_count} for r in p.acquired]})
    return ctx.respond({
        "error_code": ErrorCode.none, "acquisition_lock_timeout": lock_ms,
        "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
        "node_endpoints": []})


async def share_fetch(ctx: RequestContext, request: Any) -> Any:
    refused = _first_refusal(ctx, request)
    if refused is not None:
        return refused
    mode = _acquire_mode(ctx, request)
    if mode is None:
        return _whole(ctx, ErrorCode.invalid_request,
                      f"unknown share acquire mode {request.share_acquire_mode}")
    group_id, member_id = request.group_id, request.member_id
    asked: list[TP] = [(t.topic_id, p.partition_index) for t in request.topics or ()
                       for p in t.partitions or ()]
    acks = {(t.topic_id, p.partition_index): _ack_batches(p.acknowledgement_batches)
            for t in request.topics or () for p in t.partitions or ()
            if p.acknowledgement_batches}
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data or ()
                 for p in t.partitions or ()]
    sessions = ctx.services.share_sessions
    try:
        session = sessions.fetch(group_id, member_id, request.share_session_epoch, asked,
                                 forgotten, bool(acks), ctx.connection)
    except ShareSessionError as e:
        return _whole(ctx, e.code, str(e))
    readable: dict[Any, bool] = {}
    parts: dict[TP, _Partition] = {}
    for tp, batches in acks.items():
        part = parts[tp] = _Partition(tp)
        part.ack_error, part.ack_message = await _acknowledge(
            ctx, group_id, member_id, tp, batches, readable)
    lock_ms = _shares(ctx).config_of(group_id).record_lock_duration_ms
    if session.final:
        sessions.remove(group_id, member_id)
        await _shares(ctx).release_member(group_id, member_id)
        return _answer(ctx, request, parts, list(acks), lock_ms)
    order = list(session.partitions)
    # Nothing to fetch: a renewal of locks only (v2), or no room for a record (Kafka
    # answers such a request at once, with nothing acquired).
    fetching = not getattr(request, "is_renew_ack", False) and request.max_records > 0 \
        and request.max_bytes > 0
    if fetching and order:
        deadline = time.monotonic() + max(request.max_wait.total_seconds(), 0)
        while True:
            got, keys, moved = await _fetch_round(ctx, request, parts, order, mode, readable)
            remaining = deadline - time.monotonic()
            if got or not keys or remaining <= 0 or any(p.news() for p in parts.values()):
                break
            if moved:
                continue
            await ctx.services.waiters.wait(keys, remaining)
    listed = order if session.full else [tp for tp in order if parts.get(tp) and
                                         parts[tp].news()]
    listed += [tp for tp in acks if tp not in listed]
    return _answer(ctx, request, parts, listed, lock_ms)


async def share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    refused = _first_refusal(ctx, request)
    if refused is not None:
        return refused
    group_id, member_id = request.group_id, request.member_id
    try:
        final = ctx.services.share_sessions.acknowledge(group_id, member_id,
                                                        request.share_session_epoch)
    except ShareSessionError as e:
        return _whole(ctx, e.code, str(e))
    readable: dict[Any, bool] = {}
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for t in request.topics or ():
        for p in t.partitions or ():
            tp = (t.topic_id, p.partition_index)
            code, message = await _acknowledge(ctx, group_id, member_id, tp,
                                               _ack_batches(p.acknowledgement_batches),
                                               readable)
            by_topic.setdefault(t.topic_id, []).append({
                "partition_index": p.partition_index, "error_code": code,
                "error_message": message,
                "current_leader": {"leader_id": -1, "leader_epoch": -1}})
    if final:
        ctx.services.share_sessions.remove(group_id, member_id)
        await _shares(ctx).release_member(group_id, member_id)
    lock_ms = _shares(ctx).config_of(group_id).record_lock_duration_ms
    return ctx.respond({
        "error_code": ErrorCode.none, "acquisition_lock_timeout": lock_ms,
        "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
        "node_endpoints": []})
