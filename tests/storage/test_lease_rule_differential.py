"""The lease rule in memory (`coterie.storage.lease_table.LeaseTable`, what the fault
simulation of brokers and leases drives) against the rule PostgreSQL evaluates
(`coterie.storage.leases` and the fenced writes of `postgres_log`): the same random sequence
of acquires, renewals, releases, expiries and writes by three nodes on two partitions must
get the same answers from both, epochs included. So what the simulation shows of the rule
holds for the database."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.storage import leases
from coterie.storage.api import Lease, Resource, TopicIdPartition
from coterie.storage.errors import LeaseLost
from coterie.storage.lease_table import LeaseTable
from coterie.storage.postgres_log import PostgresLog
from coterie.storage.topics import create_topic
from tests.storage.helpers import LONG_TTL, expire, open_db
from tests.unit.log.batches import make_batch

OPS = st.lists(st.tuples(st.sampled_from(["acquire", "renew", "release", "expire", "write",
                                          "holder"]),
                         st.integers(1, 3), st.integers(0, 1)),
               min_size=1, max_size=25)


async def _both(dsn: str, ops: list[tuple[str, int, int]]) -> None:
    db = await open_db(dsn)
    try:
        topic = await create_topic(db, f"t-{uuid.uuid4().hex[:12]}", 2)
        tps = [TopicIdPartition(topic.topic_id, p) for p in range(2)]
        resources = [Resource.partition(tp) for tp in tps]
        log = PostgresLog(db)
        table, now = LeaseTable(), 0.0  # the model's time stands still: only expiries move
        last: dict[tuple[int, int], Lease] = {}  # what each node last got, per resource
        for op, node, which in ops:
            r = resources[which]
            mine = last.get((node, which))
            if op == "acquire":
                got = await leases.acquire(db, r, node, LONG_TTL)
                assert got == table.acquire(r, node, now, LONG_TTL), (op, node, which)
                if got is not None:
                    last[(node, which)] = got
            elif op == "renew" and mine is not None:
                assert await leases.renew(db, mine, LONG_TTL) == table.renew(mine, now,
                                                                             LONG_TTL)
            elif op == "release" and mine is not None:
                assert await leases.release(db, mine) == table.release(mine, now)
            elif op == "expire":
                held = await leases.holder(db, r)
                if held is not None:
                    await expire(db, held)
                table.expire(r, now)
            elif op == "write" and mine is not None:
                try:
                    await log.append(tps[which], make_batch(1), mine)
                    written = True
                except LeaseLost:
                    written = False
                assert written == table.may_write(mine, now), (op, node, which, mine)
            assert await leases.holder(db, r) == table.holder(r, now), (op, node, which)
    finally:
        await db.close()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_the_rule_in_memory_is_the_rule_in_the_database(pg_dsn, ops):
    asyncio.run(_both(pg_dsn, ops))
