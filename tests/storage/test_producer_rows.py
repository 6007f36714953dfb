"""Producer state and aborted transactions read from the batch rows' header columns
(coterie.storage.producer_rows), on a real PostgreSQL, checked against what a replay of the
batches themselves gives (coterie.log.producers, the rules a local log applies).

Random histories of an idempotent producer and two transactional ones (retries, new
epochs, commits, aborts, markers of a newer epoch, batches of no producer) are written to a
local log, which refuses what Kafka refuses; what it accepted goes to the database. At every
batch boundary the database's answer must equal the replay's, and so must the aborted
transactions of ranges of the log."""

from __future__ import annotations

import asyncio
import datetime
import io
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch

from coterie.log.config import LogConfig
from coterie.log.errors import LogError
from coterie.log.partition import PartitionLog, control_marker
from coterie.log.producers import ProducerStates
from coterie.storage import topics
from coterie.storage.api import Lease, TopicIdPartition
from coterie.storage.database import Database
from coterie.storage.postgres_log import PostgresLog
from coterie.wire.record_batch import TRANSACTIONAL_FLAG, batch_headers
from coterie.wire.txn_markers import control_batch
from tests.storage.helpers import open_db, topic_with_leases
from tests.unit.log.batches import make_batch

NOW = 1_700_000_000_000
PIDS = (7, 8, 9)  # 7 idempotent, 8 and 9 transactional


def batch(pid: int, epoch: int, seq: int, n: int, txn: bool, ts: int) -> bytes:
    stamp = datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC)
    records = tuple(Record(attributes=0, timestamp=stamp, offset=i, key=None,
                           value=b"v%d" % i, headers=()) for i in range(n))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=pid, producer_epoch=epoch,
                                        base_sequence=seq, records=records,
                                        attributes=TRANSACTIONAL_FLAG if txn else 0))
    return buf.getvalue()


def written_history(ops: list[tuple[str, int, int]], local: PartitionLog) -> list[bytes]:
    """Play `ops` against a local log; the batches it accepted, as it stored them."""
    epoch = dict.fromkeys(PIDS, 0)
    seq = dict.fromkeys(PIDS, 0)
    last: dict[int, bytes] = {}
    ts = NOW
    for kind, who, n in ops:
        pid = PIDS[who]
        ts += 1
        coordinator = False
        if kind == "data":
            records = batch(pid, epoch[pid], seq[pid], n, pid != PIDS[0], ts)
            last[pid] = records
            seq[pid] += n
        elif kind == "gap":  # a sequence that does not follow: refused
            records = batch(pid, epoch[pid], seq[pid] + 3, n, pid != PIDS[0], ts)
        elif kind == "retry" and pid in last:
            records = last[pid]  # a duplicate: answered, not written
        elif kind in ("commit", "abort") and pid != PIDS[0]:
            records = control_batch(pid, epoch[pid], kind == "commit", 0, ts)
            coordinator = True
        elif kind == "bump":
            epoch[pid] += 1
            seq[pid] = 0
            last.pop(pid, None)
            if pid == PIDS[0]:
                continue
            # Transactions version 2: the marker ending a transaction carries the new epoch.
            records = control_batch(pid, epoch[pid], False, 0, ts)
            coordinator = True
        else:
            records = make_batch(n, timestamp=ts)
        try:
            local.append(records, 0, ts, coordinator=coordinator)
        except LogError:
            continue
    return [bytes(b) for b in _stored(local)]


def _stored(local: PartitionLog) -> list[bytes]:
    data = local.read(0, 1 << 30)
    return [data[h.position:h.end] for h in batch_headers(data, strict=True)]


def replayed_states(stored: list[bytes]) -> dict[int, dict]:
    """The producer state a replay leaves after each batch boundary (offset -> state)."""
    states = ProducerStates()
    at = {0: {}}
    for b in stored:
        h = batch_headers(b, strict=True)[0]
        if h.producer_id >= 0:
            states.replay_batch(h, control_marker(b, 0) if h.is_control else None)
        at[h.next_offset] = view(states)
    return at


def view(states: ProducerStates) -> dict:
    return {e.producer_id: (e.epoch, list(e.batches), e.last_timestamp, e.txn_first_offset,
                            e.last_offset) for e in states.entries.values()}


def aborted_with_records(stored: list[bytes], local: PartitionLog, start: int,
                         end: int) -> list[tuple[int, int, int]]:
    """The local log's aborted transactions overlapping [start, end), less those with no
    record in it (their producer wrote nothing there: a consumer has nothing to drop)."""
    heads = [batch_headers(b, strict=True)[0] for b in stored]
    kept = []
    for txn in local.aborted_transactions(start, end):
        has_records = any(
            h.producer_id == txn.producer_id and not h.is_control and h.is_transactional
            and txn.first_offset <= h.base_offset < txn.last_offset
            and h.last_offset >= start and h.base_offset < end for h in heads)
        if start <= txn.last_offset < end or has_records:
            kept.append((txn.producer_id, txn.first_offset, txn.last_offset))
    return kept


OPS = st.lists(st.tuples(
    st.sampled_from(["data", "data", "data", "commit", "abort", "bump", "retry", "gap",
                     "plain"]),
    st.integers(0, 2), st.integers(1, 3)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=OPS)
def test_producer_state_and_aborted_transactions_from_rows_equal_a_replay(
        pg_dsn: str, tmp_path_factory, ops) -> None:
    local = PartitionLog.open(tmp_path_factory.mktemp("p") / "t-0", LogConfig(), NOW)
    try:
        stored = written_history(ops, local)
        expected = replayed_states(stored)

        async def scenario(db: Database, tp: TopicIdPartition, lease: Lease) -> None:
            log = PostgresLog(db)
            for b in stored:
                await log.append(tp, b, lease)
            for at, state in expected.items():
                assert view(await log.producer_states(tp, at)) == state, at
            end = local.log_end_offset
            for start in range(0, end + 1, 3):
                for stop in (start + 1, start + 4, end):
                    got = await log.aborted_transactions(tp, start, stop)
                    assert [(a.producer_id, a.first_offset, a.last_offset) for a in got] == \
                        aborted_with_records(stored, local, start, stop), (start, stop)

        run(pg_dsn, scenario)
    finally:
        local.close_unclean()


def run(dsn: str, scenario) -> None:
    async def main() -> None:
        db = await open_db(dsn)
        try:
            name = f"t-{uuid.uuid4().hex}"
            (tp,), (lease,) = await topic_with_leases(db, name)
            try:
                await scenario(db, tp, lease)
            finally:
                await topics.delete_topic(db, tp.topic_id)
        finally:
            await db.close()

    asyncio.run(main())


def test_an_open_transaction_begun_long_ago_and_a_long_idempotent_run(pg_dsn: str,
                                                                      tmp_path: Path) -> None:
    """The open transaction's first offset lies far below the last five batches, and an
    idempotent producer's thousands of batches need not be read to find its window."""
    local = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    try:
        local.append(batch(8, 0, 0, 1, True, NOW), 0, NOW)
        for i in range(300):
            local.append(batch(7, 0, i, 1, False, NOW + i), 0, NOW + i)
            local.append(batch(8, 0, i + 1, 1, True, NOW + i), 0, NOW + i)
        stored = [bytes(b) for b in _stored(local)]

        async def scenario(db: Database, tp: TopicIdPartition, lease: Lease) -> None:
            log = PostgresLog(db)
            for i in range(0, len(stored), 100):
                await log.append(tp, b"".join(stored[i:i + 100]), lease)
            states = await log.producer_states(tp, local.log_end_offset)
            assert view(states) == view(ProducerStates.from_entries(local.active_producers()))
            assert states.first_unstable_offset() == 0
            assert [b.first_seq for b in states.entries[7].batches] == [295, 296, 297, 298,
                                                                       299]
            # The same half way: the window moves with the offset asked for.
            half = await log.producer_states(tp, 301)
            assert half.entries[7].last_seq == 149 and half.first_unstable_offset() == 0

        run(pg_dsn, scenario)
    finally:
        local.close_unclean()


def test_both_queries_touch_a_few_pages_of_a_large_partition(pg_dsn: str) -> None:
    """On a partition of 20,000 batches (statistics gathered, as autovacuum would), the
    producer state at its end and the aborted transactions of a short range read a few
    dozen pages, not the thousands of rows below them: each is index probes per producer
    and per range (EXPLAIN ANALYZE's buffer counts)."""
    import json

    from coterie.storage import producer_rows

    batches = [batch(8, 0, 0, 1, True, NOW)]  # a transaction open from the start
    batches += [batch(7, 0, i, 1, False, NOW + i) for i in range(20_000)]
    batches += [batch(8, 0, 1, 1, True, NOW), control_batch(8, 0, False, 0, NOW)]

    async def scenario(db: Database, tp: TopicIdPartition, lease: Lease) -> None:
        log = PostgresLog(db)
        for i in range(0, len(batches), 5000):
            await log.append(tp, b"".join(batches[i:i + 5000]), lease)
        end = len(batches)
        async with db.session() as conn:
            await conn.execute("ANALYZE batches")
            for query, params in (
                    (producer_rows._STATES, {"at": end}),
                    (producer_rows._ABORTED, {"start": 10_000, "end": 10_100})):
                cur = await conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query,
                    {"topic_id": tp.topic_id, "partition": tp.partition, **params})
                plan = (await cur.fetchone())[0]
                plan = json.loads(plan) if isinstance(plan, str) else plan
                top = plan[0]["Plan"]
                pages = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
                assert pages < 150, (pages, json.dumps(plan, indent=1)[:4000])
        states = await log.producer_states(tp, end)
        assert states.first_unstable_offset() is None
        assert [b.first_seq for b in states.entries[7].batches] == list(range(19_995, 20_000))
        # The transaction spans the range but has no record in it: a consumer has nothing
        # of it to drop there. From its last batch on, it is listed, from its first.
        assert await log.aborted_transactions(tp, 10_000, 10_100) == []
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in
                await log.aborted_transactions(tp, end - 2, end)] == [(8, 0, end - 1)]

    run(pg_dsn, scenario)
