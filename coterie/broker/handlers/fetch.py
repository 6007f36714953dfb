"""Fetch v4-v16 with long polling.

Stored batch bytes go out as they sit in the segment files: a fetch starts with the batch that
contains the requested offset (so a fetch that starts mid-batch gets the whole batch and the
client skips ahead) and returns whole batches, without any record decoding.

The broker never creates incremental fetch sessions (KIP-227): it answers session id 0, which
tells clients to keep sending full fetch requests. That is allowed by the protocol and keeps a
single broker free of per-client session state.

Read committed (isolation level 1): a partition answers only below its last stable offset
(the first offset of a transaction still open), and lists the aborted transactions that
overlap what it returns (coterie.log.txn_index), whose records the consumer drops; control
batches (transaction markers) go out as stored, and consumers skip them. Every answer carries
the partition's last stable offset, whatever the isolation level, as Kafka's does.

Long poll: if fewer than `min_bytes` are available and `max_wait` has not passed, the request
parks on the partitions it reads (services.waiters) and is woken by the next append to any of
them, or by its deadline.

ACLs (when an authorizer is configured), as Kafka 4.2's KafkaApis checks them, decided once
per request (not again at each wake-up of a long poll): a consumer needs READ on each topic,
else its partitions are TOPIC_AUTHORIZATION_FAILED (a topic id no topic has stays
UNKNOWN_TOPIC_ID; a known id the principal may not read is TOPIC_AUTHORIZATION_FAILED, as
Kafka answers); a follower's fetch (replica id >= 0) needs CLUSTER_ACTION on the cluster
instead, else every partition is TOPIC_AUTHORIZATION_FAILED.

Below a cluster broker's copy: a cluster broker may copy only a partition's recent batches
(docs/cluster.md, "The copy of a partition"). A fetch from below the copy's start is read
from the database, one `PostgresLog.read` per partition and fetch (never a query per batch),
with the aborted transactions of what it read for a read_committed reader (from the rows'
header columns); the plan is then made again with those bytes in place, so that nothing
awaits between the final plan and the response.

Speed: a response is first planned (which byte range of which segment each partition
answers with, found through the offset index without reading any data), and only the final
plan is written, by hand rather than through kio, into one buffer sized exactly for it: the
batches are read from the segment files straight into their place in that buffer, which then
goes to the socket as it is (`RawResponse`). Going through kio cost several copies of every
byte served plus per-field Python work, which made the broker, not the network or the
client, the limit of a bulk reader.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.acls import denied, enforcing
from coterie.broker.context import LEADER_EPOCH, RequestContext
from coterie.log.segment import Segment
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType
from coterie.storage.errors import OffsetOutOfRange
from coterie.wire.codec import FileRange, RawResponse, response_header_room
from coterie.wire.record_batch import batch_headers

log = logging.getLogger("coterie.fetch")


def _resolve(ctx: RequestContext, topic: Any) -> tuple[str | None, Any, ErrorCode]:
    """Topic name, topic-id-or-name echo field, and error for one requested topic.

    v13+ names topics by id. An id no topic has, the zero id included (kio reads it as None),
    is UNKNOWN_TOPIC_ID on each of its partitions, as Kafka answers; the id is echoed as sent.
    """
    logs = ctx.services.logs
    if ctx.api_version >= 13:
        info = logs.topic_by_id(topic.topic_id) if topic.topic_id is not None else None
        if info is None:
            return None, topic.topic_id, ErrorCode.unknown_topic_id
        return info.name, topic.topic_id, ErrorCode.none
    name = topic.topic
    if name is None:  # a null name: Kafka cannot parse the request; never a crash here
        return None, "", ErrorCode.unknown_topic_or_partition
    return name, name, ErrorCode.none


@dataclass(slots=True)
class _Part:
    """One partition of the planned response. `span` is where its records lie (segment,
    start, end); the records are empty when `span` is None, errors included (Kafka sends
    empty records with an error, never null: librdkafka cannot parse a null there)."""

    index: int
    error: int
    high_watermark: int = -1
    log_start_offset: int = -1
    # Where the records lie in a segment file, or the records themselves (read from the
    # database, below a cluster broker's copy).
    span: tuple[Segment, int, int] | bytes | None = None
    last_stable_offset: int = -1
    # read_committed only: (producer id, first offset) of the overlapping aborted
    # transactions; None for read_uncommitted (an empty array on the wire).
    aborted: list[tuple[int, int]] | None = None


class _Every:
    """The topics a follower without CLUSTER_ACTION may not fetch: all of them."""

    def __contains__(self, name: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


def _unreadable(ctx: RequestContext, request: Any) -> frozenset[str] | _Every:
    """The topics this fetch may not read (module docstring); empty without an authorizer,
    asked once per request."""
    authorizer = enforcing(ctx)
    if authorizer is None:
        return frozenset()
    state = getattr(request, "replica_state", None)
    replica = state.replica_id if state is not None else getattr(request, "replica_id", -1)
    if replica is not None and replica >= 0:
        if authorizer.authorize(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                CLUSTER_NAME):
            return frozenset()
        return _Every()
    return denied(ctx, AclOperation.READ, ResourceType.TOPIC,
                  (_resolve(ctx, topic)[0] for topic in request.topics or ()))


@dataclass(slots=True)
class _Below:
    """A partition's read from below its copy: asked for by a plan, done by `_read_below`,
    used by the next plan. `data` None: `error` instead."""

    key: tuple[str, int]
    led: Any
    offset: int
    max_bytes: int
    limit: int | None
    committed: bool
    data: bytes | None = None
    aborted: list[tuple[int, int]] | None = None
    error: int = ErrorCode.none


def _fit(data: bytes, limit: int | None, max_bytes: int, min_one: bool) -> bytes | None:
    """Of batches read from the database, the whole ones a plan may answer with: below
    `limit` (the last stable offset or the high watermark), within `max_bytes` (the first
    one whatever its size when `min_one`)."""
    end = 0
    for h in batch_headers(data, strict=True):
        if limit is not None and h.base_offset >= limit:
            break
        if h.end > max_bytes and not (min_one and end == 0):
            break
        end = h.end
    return data[:end] if end else None


def _plan(ctx: RequestContext, request: Any, unreadable: frozenset[str] | _Every = frozenset(),
          below: dict[tuple[str, int], _Below] | None = None
          ) -> tuple[list[tuple[Any, list[_Part]]], int, list, list[_Below]]:
    """One pass over every requested partition: what each answers, bytes planned, wait keys.

    Size limits follow Kafka's ReplicaManager.readFromLog, at whole-batch granularity: each
    partition may use min(its partition_max_bytes, what is left of the request's max_bytes);
    until some partition has returned data, the first batch at the fetch offset is returned
    whole even if it alone is larger (so a consumer can always make progress), but never
    more than that one batch when it is; after that a partition whose first batch does not fit
    returns nothing. So the records of a response never exceed max_bytes, except by that one
    batch. (Kafka fills the rest of a limit with the bytes of a partial batch, which clients
    drop; coterie stops at the last whole batch.)

    `below`: the reads from the database done for an earlier plan of this request; a
    partition whose fetch offset lies below its copy and has none is in the list returned
    last (to read, then plan again).
    """
    logs = ctx.services.logs
    cluster = ctx.services.cluster
    budget = max(request.max_bytes, 0) if ctx.api_version >= 3 else 0x7FFFFFFF
    committed = getattr(request, "isolation_level", 0) == 1
    min_one = True  # until a partition has returned data (Kafka's minOneMessage)
    total = 0
    keys = []
    errors = False
    topics = []
    wanted: list[_Below] = []
    for topic in request.topics or ():
        name, echo, topic_error = _resolve(ctx, topic)
        if unreadable and name in unreadable:
            topic_error = ErrorCode.topic_authorization_failed
        parts = []
        for p in topic.partitions or ():
            index = p.partition
            part = logs.partition(name, index) if name is not None else None
            leader_epoch = getattr(p, "current_leader_epoch", -1)
            epoch = LEADER_EPOCH
            led = None
            if cluster is not None and part is not None:
                led = cluster.serving(name, index)
                epoch = -1 if led is None else led.lease.epoch
            if topic_error != ErrorCode.none:
                parts.append(_Part(index, topic_error))
                errors = True
            elif part is None:
                parts.append(_Part(index, ErrorCode.unknown_topic_or_partition))
                errors = True
            elif epoch < 0:
                # A cluster broker that does not lead the partition (now).
                parts.append(_Part(index, ErrorCode.not_leader_or_follower))
                errors = True
            elif leader_epoch > epoch:
                parts.append(_Part(index, ErrorCode.unknown_leader_epoch))
                errors = True
            elif 0 <= leader_epoch < epoch:
                parts.append(_Part(index, ErrorCode.fenced_leader_epoch))
                errors = True
            else:
                hw = part.high_watermark
                lso = part.last_stable_offset
                entry = _Part(index, ErrorCode.none, hw, part.log_start_offset,
                              last_stable_offset=lso)
                parts.append(entry)
                max_bytes = max(min(p.partition_max_bytes, budget), 0)
                if not part.log_start_offset <= p.fetch_offset <= hw:
                    # Out of range whatever room is left, as in Kafka (checked before reading).
                    entry.error = ErrorCode.offset_out_of_range
                    errors = True
                    continue
                # locate() answers with at least the first batch, however small max_bytes is.
                limit = lso if committed else part.durable_end
                span: tuple[Segment, int, int] | bytes | None
                if led is not None and p.fetch_offset < part.local_start_offset:
                    # Below the copy: the database's batches, read for an earlier plan.
                    done = below.get((name, index)) if below else None
                    if done is None or done.offset != p.fetch_offset:
                        if (min_one or max_bytes) and (limit is None or p.fetch_offset < limit):
                            wanted.append(_Below((name, index), led, p.fetch_offset,
                                                 max_bytes, limit, committed))
                        span = None
                    elif done.data is None:
                        entry.error = done.error
                        errors = True
                        continue
                    else:
                        span = _fit(done.data, limit, max_bytes, min_one)
                    entry.span = span
                    if committed:
                        entry.aborted = [] if span is None or done is None else (
                            done.aborted or [])
                else:
                    span = (part.locate(p.fetch_offset, max_bytes, limit)
                            if min_one or max_bytes else None)
                    if span is not None and not min_one and span[2] - span[1] > max_bytes:
                        span = None  # its first batch does not fit in what is left
                    entry.span = span
                    if committed:
                        entry.aborted = [] if span is None else [
                            (t.producer_id, t.first_offset)
                            for t in part.aborted_transactions(p.fetch_offset, lso)]
                if span is not None:
                    size = len(span) if type(span) is bytes else span[2] - span[1]
                    total += size
                    budget = max(budget - size, 0)
                    min_one = False
                keys.append((name, index))
        topics.append((echo, parts))
    if errors or wanted:
        keys = []  # an error is news: answer at once instead of waiting
    return topics, total, keys, wanted


async def _read_below(ctx: RequestContext, wanted: list[_Below],
                      below: dict[tuple[str, int], _Below]) -> None:
    """The database's batches for each partition fetched below its copy: one read each,
    and for read_committed the aborted transactions of what it read."""
    cluster = ctx.services.cluster
    for w in wanted:
        try:
            data = await cluster.read_below_copy(w.led, w.offset, max(w.max_bytes, 1))
            if w.committed and data:
                stop = batch_headers(data, strict=True)[-1].next_offset
                if w.limit is not None:
                    stop = min(stop, w.limit)
                w.aborted = [(t.producer_id, t.first_offset) for t in
                             await cluster.aborted_below_copy(w.led, w.offset, stop)]
            w.data = data
        except OffsetOutOfRange:
            w.error = ErrorCode.offset_out_of_range
        except Exception as e:  # the database failed: a retriable error, never a crash
            log.warning("fetch of %s-%d from offset %d in the database failed: %s",
                        w.key[0], w.key[1], w.offset, str(e).strip() or type(e).__name__)
            w.error = ErrorCode.kafka_storage_error
        below[w.key] = w


# Spans at least this big are sent from the segment file by sendfile (no copy through Python);
# smaller ones are read into the response buffer, which costs less than a sendfile round.
SENDFILE_MIN_BYTES = 64 * 1024

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@cache
def _layout(version: int) -> tuple[struct.Struct, struct.Struct | None]:
    """Fixed-size parts of a partition entry in `version`: the fields before the aborted
    transactions, and (v11+) the preferred read replica after them."""
    before = ">ihqq" + ("q" if version >= 5 else "")
    return struct.Struct(before), struct.Struct(">i") if version >= 11 else None


def _encode(ctx: RequestContext, topics: list[tuple[Any, list[_Part]]]) -> RawResponse:
    """Write the planned response in the request's version (the byte layout kio would write
    for the same data, with no tagged fields and no throttling)."""
    version = ctx.api_version
    flexible = version >= 12
    fixed, replica = _layout(version)
    room = response_header_room(ctx.api_key, version)
    # Encoded fields, and the spans whose stored bytes go between them.
    pieces: list[bytes | tuple[Segment, int, int]] = []
    size = room

    def count(n: int) -> bytes:
        return _uvarint(n + 1) if flexible else _I32.pack(n)

    end_tags = b"\0" if flexible else b""  # an entity's (empty) tagged fields
    top = b"\0\0\0\0" + (b"\0\0\0\0\0\0" if version >= 7 else b"")  # throttle, error, session
    pieces.append(top + count(len(topics)))
    no_aborted = _uvarint(1) if flexible else _I32.pack(0)  # an empty array, as kio writes
    after_aborted = no_aborted + (replica.pack(-1) if replica is not None else b"")
    replica_tail = replica.pack(-1) if replica is not None else b""
    for echo, parts in topics:
        if version >= 13:
            head = echo.bytes if echo is not None else bytes(16)  # kio's None is the zero id
        else:
            name = echo.encode()
            head = (_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))) + name
        pieces.append(head + count(len(parts)))
        for part in parts:
            values = [part.index, part.error, part.high_watermark, part.last_stable_offset]
            if version >= 5:
                values.append(part.log_start_offset)
            if part.aborted:
                entry = fixed.pack(*values) + _aborted(part.aborted, flexible) + replica_tail
            else:
                entry = fixed.pack(*values) + after_aborted
            span = part.span
            if span is None:
                pieces.append(entry + count(0) + end_tags)
            elif type(span) is bytes:
                pieces.append(entry + count(len(span)))
                pieces.append(span)
                size += len(span)
                pieces.append(end_tags)
            else:
                pieces.append(entry + count(span[2] - span[1]))
                pieces.append(span)
                size += span[2] - span[1]
                pieces.append(end_tags)
        pieces.append(end_tags)
    pieces.append(end_tags)
    # Runs of fields and small spans become buffers; big spans go by sendfile.
    response = RawResponse(bytearray())
    run: list[bytes | tuple[Segment, int, int]] = []
    try:
        for piece in pieces:
            if type(piece) is bytes or piece[2] - piece[1] < SENDFILE_MIN_BYTES:
                run.append(piece)
                continue
            _put_run(response, run, room)
            run = []
            seg, start, end = piece
            response.rest.append(FileRange(os.dup(seg.fd), start, end - start))
        _put_run(response, run, room)
    except BaseException:
        response.close()
        raise
    return response


_ABORTED = struct.Struct(">qq")


def _aborted(aborted: list[tuple[int, int]], flexible: bool) -> bytes:
    """The aborted-transactions array: (producer id, first offset) entries, each with its
    (empty) tagged fields when flexible."""
    head = _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
    tail = b"\0" if flexible else b""
    return head + b"".join(_ABORTED.pack(pid, first) + tail for pid, first in aborted)


def _put_run(response: RawResponse, run: list[bytes | tuple[Segment, int, int]],
             room: int) -> None:
    """Write `run` (encoded fields and spans to read) as the next buffer of `response`; the
    first buffer starts with `room` bytes for the response header."""
    first = not response.buffer
    pos = room if first else 0
    size = pos + sum(len(p) if type(p) is bytes else p[2] - p[1] for p in run)
    buf = bytearray(size)
    with memoryview(buf) as view:
        for piece in run:
            if type(piece) is bytes:
                view[pos : pos + len(piece)] = piece
                pos += len(piece)
            else:
                seg, start, end = piece
                seg.read_into(view[pos : pos + end - start], start)
                pos += end - start
    if first:
        response.buffer = buf
    elif buf:
        response.rest.append(buf)


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 7 and request.session_id != 0:
        return ctx.respond({"error_code": ErrorCode.fetch_session_id_not_found,
                            "session_id": 0, "responses": []})
    max_wait_s = request.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait_s
    unreadable = _unreadable(ctx, request)
    below: dict[tuple[str, int], _Below] = {}
    rounds = 0
    while True:
        topics, total, keys, wanted = _plan(ctx, request, unreadable, below)
        if wanted and rounds < 3:  # (a copy trimmed meanwhile asks for another read)
            rounds += 1
            await _read_below(ctx, wanted, below)
            continue
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or not keys or remaining <= 0:
            break
        await ctx.services.waiters.wait(keys, remaining)
    # No await between the last plan and this: the planned byte ranges are still current.
    metrics = getattr(ctx.services, "metrics", None)  # (None in services made up by tests)
    if metrics is not None:
        metrics.fetched(ctx.services.logs, topics)
    return _encode(ctx, topics)
