"""The Fetch, ListOffsets and OffsetForLeaderEpoch handlers against a real LogManager, for
issue 10: Fetch's size limits (Kafka's rule, at whole-batch granularity), unknown and zero
topic ids, and null arrays (kio reads a null array as None; Kafka's parser refuses one, as
coterie's wire layer now does, but the handlers must not depend on that: None counts as empty).
Answers are decoded with kio from the exact bytes the broker would send."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchPartition as FetchPartitionV4
from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v4.request import FetchTopic as FetchTopicV4
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v1.request import ListOffsetsPartition as ListOffsetsPartitionV1
from kio.schema.list_offsets.v1.request import ListOffsetsRequest as ListOffsetsRequestV1
from kio.schema.list_offsets.v1.request import ListOffsetsTopic as ListOffsetsTopicV1
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderTopic,
)
from kio.serial import entity_reader

from coterie.broker.context import RequestContext
from coterie.broker.handlers import fetch, offsets
from coterie.log.manager import LogManager
from coterie.wire.codec import encode_response
from tests.unit.broker.test_fetch_encoding import _wire
from tests.unit.log.batches import make_batch

NOW = 1_700_000_000_000


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager.open(tmp_path / "data", {}, NOW)
    yield manager
    manager.close()


def _ctx(logs: LogManager, api_key: int, version: int) -> RequestContext:
    # Handlers reach only `broker.logs` (and `broker.waiters`, for a long poll none of these
    # requests asks for).
    services = SimpleNamespace(logs=logs, cluster=None)  # a single broker's
    return RequestContext(services, api_key, version, 1, "test", "test")


def _decode(api_key: int, version: int, response: Any) -> Any:
    frame = _wire(encode_response(1, response, api_key, version))[4:]
    schema = load_response_schema(api_key, version)
    _, size = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, size)
    return body


def _fetch(logs: LogManager, topics: Any, max_bytes: int = 1 << 20, version: int = 16) -> Any:
    request = FetchRequest(max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=max_bytes,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=topics,
                           forgotten_topics_data=(), rack_id="")
    response = asyncio.run(fetch.handle(_ctx(logs, 1, version), request))
    return _decode(1, version, response)


def _parts(topic_id: uuid.UUID, specs: list[tuple[int, int, int]]) -> FetchTopic:
    return FetchTopic(topic_id=topic_id, partitions=tuple(
        FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offset,
                       last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=pmb)
        for p, offset, pmb in specs))


def _topic_with_batches(logs: LogManager, name: str, partitions: int, batches: int,
                        size: int) -> tuple[uuid.UUID, int]:
    """Each partition holds `batches` one-record batches; returns (topic id, batch size)."""
    info = logs.create_topic(name, partitions, {}, NOW)
    batch = make_batch([b"x" * size])
    for p in range(partitions):
        for _ in range(batches):
            logs.partition(name, p).append(batch, 0, NOW)
    return info.topic_id, len(batch)


# ------------------------------------------------------------------------------- Fetch


def test_fetch_size_limits_follow_kafkas_rule(logs):
    """max_bytes caps the whole response, the first partition included (issue 10: it did
    not); only the first batch of the first partition with data may exceed a limit, alone."""
    tid, b = _topic_with_batches(logs, "big", 3, 4, 1000)
    big = 1 << 20

    def sizes(specs: list[tuple[int, int, int]], max_bytes: int) -> list[int]:
        body = _fetch(logs, (_parts(tid, specs),), max_bytes)
        return [len(p.records) for p in body.responses[0].partitions]

    every = [(0, 0, big), (1, 0, big), (2, 0, big)]
    assert sizes(every, big) == [4 * b, 4 * b, 4 * b]
    # The request's max_bytes holds for the first partition too, then for the rest.
    assert sizes(every, 2 * b + 10) == [2 * b, 0, 0]
    assert sizes(every, 5 * b) == [4 * b, b, 0]
    # A limit smaller than one batch: that batch alone, from the first partition with data.
    assert sizes(every, 10) == [b, 0, 0]
    assert sizes(every, 0) == [b, 0, 0]
    assert sizes([(0, 0, 0), (1, 0, big), (2, 0, big)], big) == [b, 4 * b, 4 * b]
    assert sizes([(0, 0, b // 2), (1, 0, b // 2), (2, 0, big)], big) == [b, 0, 4 * b]
    # partition_max_bytes per partition, whole batches only.
    assert sizes([(0, 0, 2 * b + 5), (1, 0, 3 * b), (2, 0, big)], 6 * b) == [2 * b, 3 * b, b]
    # A partition with nothing to return does not use up the exception; an error neither.
    assert sizes([(0, 4, big), (1, 0, 10), (2, 0, big)], 10) == [0, b, 0]
    body = _fetch(logs, (_parts(tid, [(0, 99, big), (1, 0, 10)]),), 10)
    oor, data = body.responses[0].partitions
    assert (oor.error_code, oor.records) == (ErrorCode.offset_out_of_range, b"")
    assert (data.error_code, len(data.records)) == (ErrorCode.none, b)


def test_fetch_offset_out_of_range_has_empty_records_even_without_room(logs):
    tid, b = _topic_with_batches(logs, "oor", 2, 1, 100)
    body = _fetch(logs, (_parts(tid, [(0, 0, 1 << 20), (1, 7, 1 << 20)]),), max_bytes=b)
    first, second = body.responses[0].partitions
    assert len(first.records) == b
    assert (second.error_code, second.records) == (ErrorCode.offset_out_of_range, b"")


@pytest.mark.parametrize("topic_id", [uuid.UUID(int=0), uuid.uuid4()])
def test_fetch_unknown_topic_id_answers_per_partition(logs, topic_id):
    """Kafka answers UNKNOWN_TOPIC_ID on each partition of a topic id it does not know (the
    zero id too), with hw -1 and empty records; the zero id crashed the handler."""
    known, _ = _topic_with_batches(logs, "known", 1, 1, 10)
    body = _fetch(logs, (_parts(topic_id, [(0, 0, 100), (3, 5, 100)]),
                         _parts(known, [(0, 0, 1 << 20)])))
    assert body.error_code == ErrorCode.none
    unknown, ok = body.responses
    assert unknown.topic_id == (None if topic_id.int == 0 else topic_id)
    assert [(p.partition_index, p.error_code, p.high_watermark, p.records)
            for p in unknown.partitions] == [(0, ErrorCode.unknown_topic_id, -1, b""),
                                              (3, ErrorCode.unknown_topic_id, -1, b"")]
    assert ok.partitions[0].error_code == ErrorCode.none and ok.partitions[0].records


def test_fetch_null_arrays_count_as_empty(logs):
    tid, _ = _topic_with_batches(logs, "n", 1, 1, 10)
    assert _fetch(logs, None).responses == ()
    body = _fetch(logs, (FetchTopic(topic_id=tid, partitions=None),))
    assert [(t.topic_id, t.partitions) for t in body.responses] == [(tid, ())]
    # By name (v4), a null name is an unknown partition, not a crash.
    request = FetchRequestV4(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                             max_bytes=100, isolation_level=0, topics=(
                                 FetchTopicV4(topic=None, partitions=(FetchPartitionV4(
                                     partition=0, fetch_offset=0, partition_max_bytes=10),)),
                                 FetchTopicV4(topic="n", partitions=None)))
    body = _decode(1, 4, asyncio.run(fetch.handle(_ctx(logs, 1, 4), request)))
    assert [[(p.error_code, p.records) for p in t.partitions] for t in body.responses] == [
        [(ErrorCode.unknown_topic_or_partition, b"")], []]


# ------------------------------------------------------------------------ ListOffsets


def _list(logs: LogManager, topics: Any) -> Any:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=topics)
    return _decode(2, 8, offsets.list_offsets(_ctx(logs, 2, 8), request))


def test_list_offsets_null_arrays_count_as_empty(logs):
    assert _list(logs, None).topics == ()
    body = _list(logs, (ListOffsetsTopic(name="t", partitions=None),))
    assert [(t.name, t.partitions) for t in body.topics] == [("t", ())]


def test_list_offsets_answers_records_not_batches(logs):
    logs.create_topic("ts", 1, {}, NOW)
    part = logs.partition("ts", 0)
    part.append(make_batch(4, timestamps=[1000, 3000, 2000, 3000]), 0, NOW)
    part.append(make_batch(3, timestamps=[7000, 6000, 7000]), 0, NOW)

    def ask(ts: int) -> tuple:
        (p,) = _list(logs, (ListOffsetsTopic(name="ts", partitions=(ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=ts),)),)).topics[0].partitions
        return p.error_code, p.offset, p.timestamp, p.leader_epoch

    assert ask(2000) == (ErrorCode.none, 1, 3000, 0)
    assert ask(3001) == (ErrorCode.none, 4, 7000, 0)
    assert ask(-3) == (ErrorCode.none, 4, 7000, 0)
    assert ask(7001) == (ErrorCode.none, -1, -1, -1)  # nothing: -1 everywhere, as Kafka
    assert ask(-1) == (ErrorCode.none, 7, -1, 0)
    assert ask(-2) == (ErrorCode.none, 0, -1, 0)
    # Special timestamps a version cannot ask for, checked before the partition exists.
    assert ask(-5)[0] == ask(-6)[0] == ErrorCode.unsupported_version
    (p,) = _list(logs, (ListOffsetsTopic(name="nope", partitions=(ListOffsetsPartition(
        partition_index=0, current_leader_epoch=-1, timestamp=-9),)),)).topics[0].partitions
    assert p.error_code == ErrorCode.unsupported_version


def test_list_offsets_max_timestamp_needs_v7(logs):
    logs.create_topic("v1", 1, {}, NOW)
    logs.partition("v1", 0).append(make_batch(2, timestamp=50), 0, NOW)
    request = ListOffsetsRequestV1(replica_id=-1, topics=(ListOffsetsTopicV1(name="v1", partitions=(
        ListOffsetsPartitionV1(partition_index=0, timestamp=-3),
        ListOffsetsPartitionV1(partition_index=0, timestamp=10))),))
    body = _decode(2, 1, offsets.list_offsets(_ctx(logs, 2, 1), request))
    assert [(p.error_code, p.offset) for p in body.topics[0].partitions] == [
        (ErrorCode.unsupported_version, -1), (ErrorCode.none, 0)]


# --------------------------------------------------------------- OffsetForLeaderEpoch


def test_offset_for_leader_epoch_null_arrays_count_as_empty(logs):
    def ask(topics: Any) -> Any:
        request = OffsetForLeaderEpochRequest(replica_id=-1, topics=topics)
        return _decode(23, 4, offsets.offset_for_leader_epoch(_ctx(logs, 23, 4), request))

    assert ask(None).topics == ()
    body = ask((OffsetForLeaderTopic(topic="t", partitions=None),))
    assert [(t.topic, t.partitions) for t in body.topics] == [("t", ())]


# --------------------------------------------------------------------- read_committed


def _txn_topic(logs: LogManager) -> uuid.UUID:
    """offsets 0 plain; 1 txn of producer 5 (aborted at 3); 2 txn of producer 6 (committed
    at 4); 5 plain; 6 txn of producer 7, still open; 7 plain."""
    from coterie.wire.txn_markers import control_batch
    from tests.unit.log.test_producers import batch

    info = logs.create_topic("txn", 1, {}, NOW)
    part = logs.partition("txn", 0)
    part.append(make_batch([b"a"]), 0, NOW)
    part.append(batch(5, 0, 0, txn=True), 0, NOW)
    part.append(batch(6, 0, 0, txn=True), 0, NOW)
    part.append(control_batch(5, 0, False, 0, NOW), 0, NOW, coordinator=True)
    part.append(control_batch(6, 0, True, 0, NOW), 0, NOW, coordinator=True)
    part.append(make_batch([b"b"]), 0, NOW)
    part.append(batch(7, 0, 0, txn=True), 0, NOW)
    part.append(make_batch([b"c"]), 0, NOW)
    return info.topic_id


def _fetch_isolated(logs: LogManager, topic_id: uuid.UUID, offset: int, isolation: int) -> Any:
    request = FetchRequest(max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                           isolation_level=isolation, session_id=0, session_epoch=-1,
                           topics=(_parts(topic_id, [(0, offset, 1 << 20)]),),
                           forgotten_topics_data=(), rack_id="")
    response = asyncio.run(fetch.handle(_ctx(logs, 1, 16), request))
    return _decode(1, 16, response).responses[0].partitions[0]


def _next_offsets(records: bytes) -> list[int]:
    from coterie.wire.record_batch import batch_headers

    return [h.base_offset for h in batch_headers(records or b"")]


def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_transactions(logs):
    topic_id = _txn_topic(logs)
    committed = _fetch_isolated(logs, topic_id, 0, isolation=1)
    assert (committed.high_watermark, committed.last_stable_offset) == (8, 6)
    assert _next_offsets(committed.records) == [0, 1, 2, 3, 4, 5]  # markers go out as stored
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(5, 1)]
    # read_uncommitted: everything, no aborted list, the same LSO.
    uncommitted = _fetch_isolated(logs, topic_id, 0, isolation=0)
    assert _next_offsets(uncommitted.records) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert uncommitted.last_stable_offset == 6 and not uncommitted.aborted_transactions
    # From the open transaction on, a read_committed fetch has nothing yet.
    waiting = _fetch_isolated(logs, topic_id, 6, isolation=1)
    assert (waiting.error_code, waiting.records or b"") == (ErrorCode.none, b"")
    # Past the aborted transaction's marker it is no longer listed.
    later = _fetch_isolated(logs, topic_id, 4, isolation=1)
    assert _next_offsets(later.records) == [4, 5] and not later.aborted_transactions


def test_read_committed_list_offsets_ends_at_the_lso(logs):
    _txn_topic(logs)

    def latest(isolation: int) -> int:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(
            ListOffsetsTopic(name="txn", partitions=(ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
        response = offsets.list_offsets(_ctx(logs, 2, 8), request)
        return _decode(2, 8, response).topics[0].partitions[0].offset

    assert (latest(0), latest(1)) == (8, 6)
