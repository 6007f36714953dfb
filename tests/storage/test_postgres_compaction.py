"""Compaction on a cluster (issue 24): a leader's cleaner pass over its copy, done to the
database's rows too (`PostgresLog.compact`), must leave the rows the very batches the
cleaned copy holds, so that a broker that copies the partition next (`write_copy`) gets
the compacted log, every key's last value in it, and the log end where it was.

The copy is a real PartitionLog whose appends are written through to a real PostgreSQL,
numbered from the same offsets, as coterie.broker.cluster does; the pass is the broker's
(plan on the log, clean into files, do it to the rows, install)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coterie.log.cleaner import CleanResult, rebuilt_batches, run_cleaning
from coterie.log.partition import PartitionLog, write_copy
from coterie.storage.api import Append, Lease, TopicIdPartition
from coterie.storage.database import Database
from coterie.storage.errors import LeaseLost
from coterie.storage.postgres_log import PostgresLog
from coterie.wire.record_batch import batch_headers
from tests.storage.helpers import batch_count, expire, topic_with_leases, with_dbs
from tests.unit.log.test_cleaner import (
    BUDGET,
    COMPACT,
    NOW,
    keyed_batch,
    last_values,
    records_of,
)
from tests.unit.log.test_copy import all_batches


async def _rebuilt(result: CleanResult):
    for group in result.groups:
        yield rebuilt_batches(group, group.rebuilt)


async def _stored(store: PostgresLog, tp: TopicIdPartition) -> list[bytes]:
    start, end = await store.bounds(tp)
    chunks, offset = [], start
    while offset < end:
        data = await store.read(tp, offset, 1 << 20)
        if not data:
            break
        chunks.append(data)
        offset = batch_headers(data, strict=True)[-1].next_offset
    return chunks


class WrittenThrough:
    """A local copy whose every append also goes to the database under a lease."""

    def __init__(self, path: Path, store: PostgresLog, tp: TopicIdPartition,
                 lease: Lease) -> None:
        self.log = PartitionLog.open(path, COMPACT, NOW)
        self.store, self.tp, self.lease = store, tp, lease
        self._handed: list[tuple[int, bytes]] = []
        self.log.on_append = lambda first, data: self._handed.append((first, bytes(data)))

    async def write(self, pairs) -> None:
        self.log.append(keyed_batch(pairs), self.lease.epoch, NOW)  # as the leader does
        appends = [Append(self.tp, data, self.lease, expected_offset=first)
                   for first, data in self._handed]
        self._handed.clear()
        await self.store.append_many(appends)
        self.log.durable_end = self.log.log_end_offset


def test_a_pass_done_to_the_rows_leaves_them_the_cleaned_copys_batches(
        pg_dsn: str, tmp_path: Path) -> None:
    async def scenario(db: Database) -> None:
        (tp,), (lease,) = await topic_with_leases(db)
        store = PostgresLog(db)
        copy = WrittenThrough(tmp_path / "leader", store, tp, lease)
        await copy.write([(b"a", b"a0"), (b"b", b"b0")])  # rebuilt: a is overwritten below
        for i in range(1, 12):
            await copy.write([(b"a", b"a%d" % i)])  # dropped, all but the last
        await copy.write([(b"c", b"c0"), (b"d", b"d0"), (b"e", b"e0")])
        await copy.write([(b"d", None)])  # a tombstone, kept (delete.retention.ms)
        for i in range(8):
            await copy.write([(b"f", b"f%d" % i), (b"g", b"g%d" % i)])
        history = records_of(copy.log)
        before = await batch_count(db, tp)
        bounds = await store.bounds(tp)

        job = copy.log.cleaning_job(NOW, BUDGET)
        assert job is not None
        result = run_cleaning(job)
        dropped = [b for g in result.groups for b in g.dropped]
        rebuilt = [i for g in result.groups for i in g.rebuilt]
        assert dropped and rebuilt, "the scenario must both drop and thin batches"
        assert await store.compact(tp, lease, dropped, _rebuilt(result)) == (
            len(dropped), len(rebuilt))
        assert copy.log.install_cleaned(result)

        assert await batch_count(db, tp) == before - len(dropped)
        assert await store.bounds(tp) == bounds  # compaction moves neither end
        stored = await _stored(store, tp)
        assert b"".join(stored) == b"".join(all_batches(copy.log))
        # The next broker's copy is the compacted log: same records, same end.
        write_copy(tmp_path / "next", bounds[0], bounds[1], stored, COMPACT.segment_bytes)
        successor = PartitionLog.open(tmp_path / "next", COMPACT, NOW)
        assert successor.log_end_offset == bounds[1]
        assert records_of(successor) == records_of(copy.log)
        assert last_values(records_of(successor)) == last_values(history)
        assert len(records_of(successor)) < len(history)

    with_dbs(pg_dsn, scenario)


def test_a_pass_under_a_lost_lease_changes_no_row(pg_dsn: str, tmp_path: Path) -> None:
    async def scenario(db: Database) -> None:
        (tp,), (lease,) = await topic_with_leases(db)
        store = PostgresLog(db)
        copy = WrittenThrough(tmp_path / "leader", store, tp, lease)
        for i in range(20):
            await copy.write([(b"k", b"v%d" % i), (b"j%d" % (i % 3), b"w")])
        stored = await _stored(store, tp)
        job = copy.log.cleaning_job(NOW, BUDGET)
        assert job is not None
        result = run_cleaning(job)
        await expire(db, lease)
        with pytest.raises(LeaseLost):
            await store.compact(tp, lease, [b for g in result.groups for b in g.dropped],
                                _rebuilt(result))
        assert await _stored(store, tp) == stored

    with_dbs(pg_dsn, scenario)
