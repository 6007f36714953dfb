"""The partition log on a real PostgreSQL: Kafka's bytes in and out, offsets, reads bounded
by max_bytes, timestamp lookups, DeleteRecords and retention."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import crc32c
import pytest

from coterie.log.batch import validate_batches
from coterie.log.errors import CorruptRecordError
from coterie.storage.api import (
    Append,
    Lease,
    OffsetAndTimestamp,
    PartitionLogStore,
    Retention,
    TopicIdPartition,
)
from coterie.storage.database import Database
from coterie.storage.errors import Diverged, OffsetOutOfRange, UnknownPartition
from coterie.storage.postgres_log import PostgresLog
from tests.storage.helpers import batch_count, open_db, topic_with_leases
from tests.unit.log.batches import (
    batch_base_offset,
    kio_batch,
    make_batch,
    split_batches,
    without_offset,
)

Scenario = Callable[[Database, PostgresLog, TopicIdPartition, Lease], Awaitable[None]]


def run(dsn: str, scenario: Scenario) -> None:
    """Run `scenario` with a migrated database, its log store and one leased partition."""

    async def main() -> None:
        db = await open_db(dsn)
        try:
            (tp,), (lease,) = await topic_with_leases(db)
            await scenario(db, PostgresLog(db), tp, lease)
        finally:
            await db.close()

    asyncio.run(main())


def leader_epoch_of(batch: bytes) -> int:
    return struct.unpack_from(">i", batch, 12)[0]


def test_append_and_read_keep_kafkas_bytes(pg_dsn: str) -> None:
    sent = [make_batch([b"a", b"b", b"c"], timestamp=10), make_batch(1, timestamp=11),
            kio_batch(4)]

    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        assert isinstance(log, PartitionLogStore)  # the seam's every method is there
        answers = [await log.append(tp, batch, lease) for batch in sent]
        assert [(a.first_offset, a.last_offset, a.record_count) for a in answers] == [
            (0, 2, 3), (3, 3, 1), (4, 7, 4)]
        assert await log.bounds(tp) == (0, 8)
        stored = split_batches(await log.read(tp, 0, 1 << 20))
        assert [batch_base_offset(b) for b in stored] == [0, 3, 4]
        # Byte for byte the producer's batch but for baseOffset and the leader epoch (the
        # lease's), which lie outside the CRC: the CRC still holds.
        assert [without_offset(b) for b in stored] == [without_offset(b) for b in sent]
        assert [leader_epoch_of(b) for b in stored] == [lease.epoch] * 3
        assert len(validate_batches(b"".join(stored))) == 3
        # The next append continues the offsets.
        more = await log.append(tp, make_batch(2), lease)
        assert (more.first_offset, more.last_offset) == (8, 9)
        assert await log.log_end_offset(tp) == 10

    run(pg_dsn, scenario)


def test_several_batches_in_one_append_are_one_row_each(pg_dsn: str) -> None:
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        payload = make_batch(2) + make_batch(3) + make_batch(1)
        answer = await log.append(tp, payload, lease)
        assert (answer.first_offset, answer.last_offset, answer.record_count) == (0, 5, 6)
        assert await batch_count(db, tp) == 3
        stored = split_batches(await log.read(tp, 0, 1 << 20))
        assert [batch_base_offset(b) for b in stored] == [0, 2, 5]

    run(pg_dsn, scenario)


def test_read_from_inside_a_batch_returns_that_batch(pg_dsn: str) -> None:
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        for n in (3, 3, 3):
            await log.append(tp, make_batch(n), lease)
        for offset, first in [(0, 0), (1, 0), (2, 0), (3, 3), (4, 3), (8, 6)]:
            stored = split_batches(await log.read(tp, offset, 1 << 20))
            assert batch_base_offset(stored[0]) == first
            assert [batch_base_offset(b) for b in stored] == list(range(first, 9, 3))
        assert await log.read(tp, 9, 1 << 20) == b""  # the log end: nothing yet
        with pytest.raises(OffsetOutOfRange, match=r"the log holds \[0, 9\]"):
            await log.read(tp, 10, 1 << 20)
        with pytest.raises(OffsetOutOfRange):
            await log.read(tp, -1, 1 << 20)

    run(pg_dsn, scenario)


def test_read_is_bounded_by_max_bytes_but_returns_at_least_one_batch(pg_dsn: str) -> None:
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        sizes = []
        for i in range(5):
            batch = make_batch([b"x" * (100 * (i + 1))])
            sizes.append(len(batch))
            await log.append(tp, batch, lease)

        async def bases(offset: int, max_bytes: int) -> list[int]:
            return [batch_base_offset(b) for b in split_batches(
                await log.read(tp, offset, max_bytes))]

        assert await bases(0, 0) == [0]  # KIP-74: one batch even over the limit
        assert await bases(0, 1) == [0]
        assert await bases(0, sizes[0]) == [0]
        assert await bases(0, sizes[0] + sizes[1] - 1) == [0]
        assert await bases(0, sizes[0] + sizes[1]) == [0, 1]
        assert await bases(1, sizes[1] + sizes[2]) == [1, 2]
        assert await bases(2, sum(sizes)) == [2, 3, 4]
        assert await bases(4, 1) == [4]

    run(pg_dsn, scenario)


def test_offset_for_timestamp_answers_with_the_first_record_in_offset_order(
        pg_dsn: str) -> None:
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        await log.append(tp, make_batch(3, timestamps=[1000, 1001, 1002]), lease)  # 0-2
        await log.append(tp, make_batch(3, timestamps=[2000, 1900, 2100]), lease)  # 3-5
        await log.append(tp, make_batch(2, timestamps=[1500, 1600]), lease)  # 6-7
        lookup = log.offset_for_timestamp
        assert await lookup(tp, 0) == OffsetAndTimestamp(0, 1000)
        assert await lookup(tp, 1001) == OffsetAndTimestamp(1, 1001)
        # The first record at or after 1500 in offset order is 2000 at offset 3, not the
        # 1500 at offset 6 (Kafka's rule: timestamps need not grow).
        assert await lookup(tp, 1500) == OffsetAndTimestamp(3, 2000)
        # Inside a batch: 2050 is first reached by the third record.
        assert await lookup(tp, 2050) == OffsetAndTimestamp(5, 2100)
        assert await lookup(tp, 2101) is None
        assert await log.max_timestamp(tp) == OffsetAndTimestamp(5, 2100)

    run(pg_dsn, scenario)


def test_timestamp_lookups_look_past_a_batch_whose_records_do_not_reach_its_header(
        pg_dsn: str) -> None:
    """A producer's header may claim a max timestamp no record carries; the lookup then goes
    on to the next batch rather than answering None."""

    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        liar = bytearray(make_batch(2, timestamps=[100, 200]))
        struct.pack_into(">q", liar, 35, 900)  # maxTimestamp under the CRC: re-hash it
        struct.pack_into(">I", liar, 17, crc32c.crc32c(bytes(liar[21:])))
        for _ in range(5):  # more liars than one round of candidates
            await log.append(tp, bytes(liar), lease)
        await log.append(tp, make_batch(1, timestamps=[800]), lease)
        assert await log.offset_for_timestamp(tp, 700) == OffsetAndTimestamp(10, 800)

    run(pg_dsn, scenario)


def test_delete_records_drops_the_rows_wholly_below_the_log_start(pg_dsn: str) -> None:
    """What Kafka's clients see of DeleteRecords is in test_log_contract.py (both storages);
    here, the rows: a batch holding the new start stays, the ones wholly below go."""
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        for _ in range(4):
            await log.append(tp, make_batch(3, timestamps=[10, 20, 30]), lease)  # 0-11
        assert await log.delete_records(tp, 4, lease) == 4
        assert await log.bounds(tp) == (4, 12)
        assert await batch_count(db, tp) == 3  # 0-2 went; 3-5 holds the new start
        assert await log.delete_records(tp, 12, lease) == 12  # everything
        assert await batch_count(db, tp) == 0
        assert await log.read(tp, 12, 1 << 20) == b""
        nxt = await log.append(tp, make_batch(1), lease)
        assert nxt.first_offset == 12 and nxt.log_start_offset == 12

    run(pg_dsn, scenario)


def test_retention_by_time_drops_the_expired_prefix(pg_dsn: str) -> None:
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        for ts in (1_000, 2_000, 3_000, 2_500, 4_000):  # offsets 0..4, one record each
            await log.append(tp, make_batch(1, timestamp=ts), lease)
        keep_all = Retention(retention_ms=10_000)
        assert await log.enforce_retention(tp, lease, keep_all, now_ms=5_000) == 0
        # Older than 2_600 goes, but only as a prefix: offset 3 (2_500) stays behind 3_000.
        assert await log.enforce_retention(tp, lease, Retention(retention_ms=2_400),
                                           now_ms=5_000) == 2
        assert await log.bounds(tp) == (2, 5)
        assert await log.enforce_retention(tp, lease, Retention(retention_ms=0),
                                           now_ms=10_000) == 3
        assert await log.bounds(tp) == (5, 5)
        assert await log.enforce_retention(tp, lease, Retention(), now_ms=10_000) == 0

    run(pg_dsn, scenario)


def test_retention_by_size_keeps_at_least_retention_bytes(pg_dsn: str) -> None:
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        batch = make_batch([b"y" * 200])
        size = len(batch)
        for _ in range(6):
            await log.append(tp, batch, lease)
        policy = Retention(retention_bytes=size * 3 + 10)  # 3 batches fit, 4 do not
        assert await log.enforce_retention(tp, lease, policy, now_ms=0) == 2
        assert await log.bounds(tp) == (2, 6)  # 4 batches: dropping one more leaves < limit
        assert await log.enforce_retention(tp, lease, policy, now_ms=0) == 0
        exact = Retention(retention_bytes=size * 2)
        assert await log.enforce_retention(tp, lease, exact, now_ms=0) == 2
        assert await log.bounds(tp) == (4, 6)

    run(pg_dsn, scenario)


def test_bad_bytes_and_unknown_partitions_write_nothing(pg_dsn: str) -> None:
    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        good = make_batch(2)
        bad = bytearray(good)
        bad[-1] ^= 0xFF  # the CRC no longer holds
        with pytest.raises(CorruptRecordError, match="CRC"):
            await log.append_many([Append(tp, good, lease), Append(tp, bytes(bad), lease)])
        assert await log.bounds(tp) == (0, 0)
        assert await batch_count(db, tp) == 0
        missing = TopicIdPartition(tp.topic_id, 7)
        with pytest.raises(UnknownPartition):
            await log.append(missing, good, lease)
        with pytest.raises(UnknownPartition):
            await log.read(missing, 0, 100)
        with pytest.raises(UnknownPartition):
            await log.bounds(missing)

    run(pg_dsn, scenario)


def test_an_append_numbered_elsewhere_than_the_stored_end_writes_nothing(pg_dsn: str) -> None:
    """A broker writing through from its own copy names the offset it numbered from; a copy
    that is not the stored log (its earlier write failed) is refused: Diverged."""

    async def scenario(db: Database, log: PostgresLog, tp: TopicIdPartition,
                       lease: Lease) -> None:
        first = await log.append_many([Append(tp, make_batch(3), lease, expected_offset=0),
                                       Append(tp, make_batch(2), lease, expected_offset=3)])
        assert [(a.first_offset, a.last_offset) for a in first] == [(0, 2), (3, 4)]
        # The second is numbered from 9 where the first of the two left the log at 6.
        with pytest.raises(Diverged, match="numbered from offset 9, but the stored log ends "
                                           "at 6"):
            await log.append_many([Append(tp, make_batch(1), lease, expected_offset=5),
                                   Append(tp, make_batch(1), lease, expected_offset=9)])
        assert await log.bounds(tp) == (0, 5)  # all or nothing: the first one went too
        assert await batch_count(db, tp) == 2

    run(pg_dsn, scenario)
