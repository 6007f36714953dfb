"""Group commit on a real PostgreSQL (issue 24, point 5): appends arriving together share one
transaction, keep their order per partition, and fail only on their own account."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from coterie.log.errors import CorruptRecordError
from coterie.storage.database import Database
from coterie.storage.errors import LeaseLost
from coterie.storage.group_commit import GroupCommit
from coterie.storage.postgres_log import PostgresLog
from tests.storage.helpers import batch_count, expire, topic_with_leases, with_dbs
from tests.unit.log.batches import make_batch


def test_concurrent_appends_share_transactions_and_keep_their_order(pg_dsn: str) -> None:
    """20 producers, each appending 10 batches one after the other to its partition (of
    4): every append gets its own offsets, a producer's appends come in its order, and far
    fewer transactions than appends were written."""

    async def scenario(db: Database) -> None:
        tps, held = await topic_with_leases(db, partitions=4)
        commit = GroupCommit(PostgresLog(db))
        got: dict[int, list[int]] = defaultdict(list)

        async def producer(i: int) -> None:
            p = i % 4
            for n in range(10):
                answer = await commit.append(tps[p], make_batch([f"{i}:{n}".encode()]),
                                             held[p])
                got[i].append(answer.first_offset)

        await asyncio.gather(*(producer(i) for i in range(20)))
        assert commit.appends == 200
        assert commit.commits <= 100, commit.commits  # 12-40 here; 200 without it
        for i, offsets in got.items():
            assert offsets == sorted(offsets), f"producer {i} out of order: {offsets}"
        for p in range(4):
            taken = sorted(o for i, offsets in got.items() if i % 4 == p for o in offsets)
            assert taken == list(range(50))  # one record each: offsets 0-49, no gap
            assert await batch_count(db, tps[p]) == 50

    with_dbs(pg_dsn, scenario)


def test_a_lost_lease_or_a_bad_batch_fails_only_its_own_append(pg_dsn: str) -> None:
    async def scenario(db: Database) -> None:
        (a, b), (lease_a, lease_b) = await topic_with_leases(db, partitions=2)
        await expire(db, lease_a)  # partition a's writer lost its lease
        commit = GroupCommit(PostgresLog(db))
        bad = bytearray(make_batch(1))
        bad[-1] ^= 0xFF
        results = await asyncio.gather(
            commit.append(b, make_batch(1), lease_b),
            commit.append(a, make_batch(1), lease_a),
            commit.append(b, make_batch(2), lease_b),
            commit.append(b, bytes(bad), lease_b),
            commit.append(b, make_batch(3), lease_b),
            return_exceptions=True)
        assert isinstance(results[1], LeaseLost)
        assert isinstance(results[3], CorruptRecordError)
        ok = [results[i] for i in (0, 2, 4)]
        assert [(r.first_offset, r.last_offset) for r in ok] == [(0, 0), (1, 2), (3, 5)]
        assert await batch_count(db, a) == 0
        assert await batch_count(db, b) == 3

    with_dbs(pg_dsn, scenario)


def test_an_idle_append_is_committed_at_once(pg_dsn: str) -> None:
    async def scenario(db: Database) -> None:
        (tp,), (lease,) = await topic_with_leases(db)
        commit = GroupCommit(PostgresLog(db))
        for n in range(3):
            answer = await asyncio.wait_for(commit.append(tp, make_batch(1), lease), 5)
            assert answer.first_offset == n
        assert commit.commits == 3
        with pytest.raises(LeaseLost):
            await expire(db, lease)
            await commit.append(tp, make_batch(1), lease)

    with_dbs(pg_dsn, scenario)
