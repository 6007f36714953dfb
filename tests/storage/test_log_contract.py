"""One set of scenarios for the partition log behind the storage seam, run on both storages:
the local file log (`coterie.storage.files_log.FilesLog` over coterie.log) and PostgreSQL
(`coterie.storage.postgres_log.PostgresLog`, on the session's real server). What Kafka's
clients see must not depend on the storage: offsets, the bytes a read returns, KIP-74's
"at least one batch", timestamp lookups, DeleteRecords, refusals (issue 24, point 1).

Retention is left out on purpose: the file log drops whole segments (as Kafka does), the
PostgreSQL log single batches; each is tested on its own.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from coterie.log.errors import CorruptRecordError
from coterie.log.manager import LogManager
from coterie.storage.api import (
    Append,
    Lease,
    OffsetAndTimestamp,
    PartitionLogStore,
    Resource,
    TopicIdPartition,
)
from coterie.storage.errors import OffsetOutOfRange, UnknownPartition
from coterie.storage.files_log import FilesLog
from coterie.storage.postgres_log import PostgresLog
from tests.storage.helpers import open_db, topic_with_leases
from tests.unit.log.batches import batch_base_offset, make_batch, split_batches, without_offset

Scenario = Callable[[PartitionLogStore, TopicIdPartition, Lease], Awaitable[None]]
Runner = Callable[[Scenario], None]


@pytest.fixture(params=["files", "postgresql"])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runner]:
    """Runs a scenario with a log store of the parameter's kind and one partition it leads."""
    if request.param == "files":
        def files(scenario: Scenario) -> None:
            logs = LogManager.open(tmp_path / "data", {}, 0)
            try:
                info = logs.create_topic("t", 1, {}, 0)
                tp = TopicIdPartition(info.topic_id, 0)
                lease = Lease(Resource.partition(tp), 1, 3)
                asyncio.run(scenario(FilesLog(logs, lambda: 0), tp, lease))
            finally:
                logs.close()
        yield files
        return
    dsn = request.getfixturevalue("pg_dsn")

    def postgresql(scenario: Scenario) -> None:
        async def main() -> None:
            db = await open_db(dsn)
            try:
                (tp,), (lease,) = await topic_with_leases(db)
                await scenario(PostgresLog(db), tp, lease)
            finally:
                await db.close()
        asyncio.run(main())
    yield postgresql


def _epoch(batch: bytes) -> int:
    return struct.unpack_from(">i", batch, 12)[0]


def test_offsets_and_bytes(run: Runner) -> None:
    sent = [make_batch([b"a", b"b", b"c"], timestamp=10), make_batch(1, timestamp=11),
            make_batch(2) + make_batch(3)]

    async def scenario(log: PartitionLogStore, tp: TopicIdPartition, lease: Lease) -> None:
        assert isinstance(log, PartitionLogStore)
        answers = [await log.append(tp, batch, lease) for batch in sent]
        assert [(a.first_offset, a.last_offset, a.record_count) for a in answers] == [
            (0, 2, 3), (3, 3, 1), (4, 8, 5)]
        assert (await log.log_start_offset(tp), await log.log_end_offset(tp)) == (0, 9)
        stored = split_batches(await log.read(tp, 0, 1 << 20))
        assert [batch_base_offset(b) for b in stored] == [0, 3, 4, 6]
        assert [without_offset(b) for b in stored] == [
            without_offset(b) for b in split_batches(b"".join(sent))]
        assert {_epoch(b) for b in stored} == {lease.epoch}

    run(scenario)


def test_reads_from_inside_a_batch_and_within_max_bytes(run: Runner) -> None:
    async def scenario(log: PartitionLogStore, tp: TopicIdPartition, lease: Lease) -> None:
        sizes = []
        for i in range(4):
            batch = make_batch([b"x" * (100 * (i + 1))] * 3)
            sizes.append(len(batch))
            await log.append(tp, batch, lease)

        async def bases(offset: int, max_bytes: int) -> list[int]:
            return [batch_base_offset(b) for b in split_batches(
                await log.read(tp, offset, max_bytes))]

        assert await bases(4, 1 << 20) == [3, 6, 9]  # from the batch holding the offset
        assert await bases(0, 0) == [0]  # KIP-74: one batch even over the limit
        assert await bases(0, sizes[0] + sizes[1] - 1) == [0]
        assert await bases(0, sizes[0] + sizes[1]) == [0, 3]
        assert await log.read(tp, 12, 1 << 20) == b""  # the log end
        with pytest.raises(OffsetOutOfRange, match=r"the log holds \[0, 12\]"):
            await log.read(tp, 13, 1 << 20)

    run(scenario)


def test_timestamp_lookups(run: Runner) -> None:
    async def scenario(log: PartitionLogStore, tp: TopicIdPartition, lease: Lease) -> None:
        await log.append(tp, make_batch(3, timestamps=[10, 30, 20]), lease)  # 0-2
        await log.append(tp, make_batch(2, timestamps=[25, 40]), lease)  # 3-4
        assert await log.offset_for_timestamp(tp, 0) == OffsetAndTimestamp(0, 10)
        assert await log.offset_for_timestamp(tp, 15) == OffsetAndTimestamp(1, 30)
        assert await log.offset_for_timestamp(tp, 35) == OffsetAndTimestamp(4, 40)
        assert await log.offset_for_timestamp(tp, 41) is None
        assert await log.max_timestamp(tp) == OffsetAndTimestamp(4, 40)

    run(scenario)


def test_delete_records(run: Runner) -> None:
    async def scenario(log: PartitionLogStore, tp: TopicIdPartition, lease: Lease) -> None:
        for _ in range(4):
            await log.append(tp, make_batch(3, timestamps=[10, 20, 30]), lease)  # 0-11
        assert await log.delete_records(tp, 4, lease) == 4
        assert await log.log_start_offset(tp) == 4
        assert batch_base_offset(split_batches(await log.read(tp, 4, 1 << 20))[0]) == 3
        with pytest.raises(OffsetOutOfRange):
            await log.read(tp, 3, 1 << 20)
        assert await log.offset_for_timestamp(tp, 0) == OffsetAndTimestamp(4, 20)
        assert await log.delete_records(tp, 2, lease) == 4  # below the start: nothing
        with pytest.raises(OffsetOutOfRange, match="the log ends at 12"):
            await log.delete_records(tp, 13, lease)
        nxt = await log.append(tp, make_batch(1), lease)
        assert nxt.first_offset == 12 and nxt.log_start_offset == 4

    run(scenario)


def test_bad_bytes_and_unknown_partitions_write_nothing(run: Runner) -> None:
    async def scenario(log: PartitionLogStore, tp: TopicIdPartition, lease: Lease) -> None:
        good = make_batch(2)
        bad = bytearray(good)
        bad[-1] ^= 0xFF  # the CRC no longer holds
        with pytest.raises(CorruptRecordError, match="CRC"):
            await log.append_many([Append(tp, good, lease), Append(tp, bytes(bad), lease)])
        assert await log.log_end_offset(tp) == 0
        missing = TopicIdPartition(tp.topic_id, 7)
        with pytest.raises(UnknownPartition):
            await log.append(missing, good, lease)
        with pytest.raises(UnknownPartition):
            await log.read(missing, 0, 100)

    run(scenario)
