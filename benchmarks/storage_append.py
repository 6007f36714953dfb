"""Appends to the PostgreSQL partition log: one transaction each against group commit
(issue 24, point 5), side by side in one run.

A PostgreSQL server of its own is started as the tests start theirs (tests/fixtures/
postgres.py), but durable: fsync, synchronous_commit and full_page_writes on, as a broker's
database must run. A topic of 8 partitions, one broker's leases on them. `--producers`
coroutines (64) each append `--appends` batches (50) of 10 records of 100 bytes, one after the
other, to partition i % 8, through one `Database` (one connection):

* **alone**: `PostgresLog.append`, a transaction per append (they queue for the connection);
* **group**: `GroupCommit.append`, whatever arrived while a commit was in flight goes in the
  next one.

Printed per mode and repetition (the modes alternate): appends/s, MB/s of record batches,
transactions written, and the p50 / p99 latency of an append.

    .venv/bin/python benchmarks/storage_append.py
    .venv/bin/python benchmarks/storage_append.py --producers 8 --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from coterie.storage.group_commit import GroupCommit  # noqa: E402
from coterie.storage.postgres_log import PostgresLog  # noqa: E402
from tests.fixtures import postgres  # noqa: E402
from tests.storage.helpers import open_db, topic_with_leases  # noqa: E402
from tests.unit.log.batches import make_batch  # noqa: E402

PARTITIONS = 8


async def _run(dsn: str, mode: str, producers: int, appends: int) -> dict:
    db = await open_db(dsn)
    try:
        tps, held = await topic_with_leases(db, name=f"bench-{mode}-{time.monotonic_ns()}",
                                            partitions=PARTITIONS)
        log = PostgresLog(db)
        commit = GroupCommit(log)
        batch = make_batch([b"v" * 100] * 10)
        latencies: list[float] = []

        async def producer(i: int) -> None:
            p = i % PARTITIONS
            for _ in range(appends):
                start = time.perf_counter()
                if mode == "group":
                    await commit.append(tps[p], batch, held[p])
                else:
                    await log.append(tps[p], batch, held[p])
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(producer(i) for i in range(producers)))
        took = time.perf_counter() - start
        total = producers * appends
        lat = sorted(latencies)
        return {"mode": mode, "appends/s": total / took,
                "MB/s": total * len(batch) / took / 1e6,
                "transactions": commit.commits if mode == "group" else total,
                "p50 ms": statistics.median(lat) * 1000,
                "p99 ms": lat[int(len(lat) * 0.99)] * 1000}
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--producers", type=int, default=64)
    parser.add_argument("--appends", type=int, default=50)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    postgres.SERVER_SETTINGS.update(fsync="on", synchronous_commit="on",
                                    full_page_writes="on")
    server = postgres.start_server()
    try:
        print("| mode | appends/s | MB/s | transactions | p50 ms | p99 ms |")
        print("| --- | --- | --- | --- | --- | --- |")
        for _ in range(args.reps):
            for mode in ("alone", "group"):
                dsn = server.create_database()
                r = asyncio.run(_run(dsn, mode, args.producers, args.appends))
                print(f"| {r['mode']} | {r['appends/s']:,.0f} | {r['MB/s']:.2f} | "
                      f"{r['transactions']:,} | {r['p50 ms']:.1f} | {r['p99 ms']:.1f} |",
                      flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
