"""Brokers sharing resources through a real PostgreSQL (issue 24, points 2, 4 and 6): three
`Membership`s, each on a connection of its own, as three brokers would be. What the fault
simulation checks in virtual time (tests/unit/storage/test_lease_simulation.py), here with
the database's own clock: the resources spread over the live brokers, a silent broker's taken
over at new epochs after its time-to-live, its share given back when it returns, one node.id
per live broker."""

from __future__ import annotations

import asyncio

import pytest

from coterie.storage import leases
from coterie.storage.api import Resource
from coterie.storage.database import Database
from coterie.storage.errors import NodeIdInUse
from coterie.storage.membership import Membership
from coterie.storage.tenure import spread
from tests.storage.helpers import open_db

TTL = 1.0
RESOURCES = [*(Resource("partition", f"t-{i}") for i in range(6)),
             *(Resource.group_shard(i) for i in range(3))]


async def _cluster(dsn: str, nodes: list[int]) -> list[Membership]:
    members = []
    for node in nodes:
        m = Membership(await open_db(dsn), node, "127.0.0.1", 9000 + node,
                       lambda: RESOURCES, ttl=TTL)
        await m.start()
        members.append(m)
    return members


async def _rounds(members: list[Membership], n: int = 2) -> None:
    for _ in range(n):
        for m in members:
            await m.round()


async def _holders(db: Database) -> dict[Resource, int | None]:
    return {r: (None if (h := await leases.holder(db, r)) is None else h.owner)
            for r in RESOURCES}


async def _silence(quiet: Membership, others: list[Membership]) -> None:
    """`quiet` does nothing for its time-to-live and a little more; the others do their
    rounds every quarter of it, and one more after."""
    deadline = asyncio.get_running_loop().time() + TTL * 1.2
    while asyncio.get_running_loop().time() < deadline:
        await _rounds(others, 1)
        assert all(len(n) <= 1 for n in _serving([quiet, *others]).values())
        await asyncio.sleep(TTL / 4)
    await _rounds(others, 1)


def _serving(members: list[Membership]) -> dict[Resource, list[int]]:
    return {r: [m.node_id for m in members if m.lease(r) is not None] for r in RESOURCES}


def test_resources_spread_over_live_brokers_fail_over_and_come_back(pg_dsn: str) -> None:
    async def scenario() -> None:
        members = await _cluster(pg_dsn, [1, 2, 3])
        one, two, three = members
        try:
            await _rounds(members)
            want = spread(RESOURCES, [1, 2, 3])
            assert await _holders(one.db) == want
            assert _serving(members) == {r: [n] for r, n in want.items()}
            assert {b.node_id for b in one.live} == {1, 2, 3}
            epochs = {r: one.lease(r) or two.lease(r) or three.lease(r) for r in RESOURCES}

            # Broker 3 goes silent (killed, paused, cut off) while the others go on: past its
            # time-to-live it serves nothing by its own clock, and the others take its share,
            # each resource once, at the next epoch.
            await _silence(three, [one, two])
            assert not any(three.lease(r) for r in RESOURCES)
            want = spread(RESOURCES, [1, 2])
            assert await _holders(one.db) == want
            assert _serving([one, two]) == {r: [n] for r, n in want.items()}
            for r, before in epochs.items():
                if before is not None and before.owner == 3:
                    assert (one.lease(r) or two.lease(r)).epoch == before.epoch + 1

            # It comes back: a new registration, and its share, once the others have seen it
            # live and given those resources back (one round each), with no resource ever
            # served by two.
            for m in (three, one, two, three):
                await m.round()
                assert all(len(n) <= 1 for n in _serving(members).values())
            want = spread(RESOURCES, [1, 2, 3])
            assert await _holders(one.db) == want
            assert _serving(members) == {r: [n] for r, n in want.items()}
        finally:
            for m in members:
                await m.stop()
                await m.db.close()

    asyncio.run(scenario())


def test_a_clean_stop_hands_over_at_once(pg_dsn: str) -> None:
    async def scenario() -> None:
        members = await _cluster(pg_dsn, [1, 2])
        try:
            await _rounds(members)
            await members[1].stop()
            await members[0].round()  # no wait for an expiry
            assert set((await _holders(members[0].db)).values()) == {1}
            assert {b.node_id for b in members[0].live} == {1}
        finally:
            for m in members:
                await m.stop()
                await m.db.close()

    asyncio.run(scenario())


def test_one_node_id_per_live_broker(pg_dsn: str) -> None:
    async def scenario() -> None:
        (first,) = await _cluster(pg_dsn, [7])
        second = Membership(await open_db(pg_dsn), 7, "127.0.0.2", 9999, lambda: RESOURCES,
                            ttl=TTL)
        try:
            with pytest.raises(NodeIdInUse, match=r"node.id 7 is registered by a live broker "
                                                  r"at 127.0.0.1:9007"):
                await second.start()
            await asyncio.sleep(TTL * 1.1)  # the first stopped heartbeating: the id is free
            await second.start()
        finally:
            await second.stop()
            await second.db.close()
            await first.db.close()

    asyncio.run(scenario())
