"""The share-partition state store behind its seam (`coterie.storage.share_state`), one contract
run on both implementations: files in the data directory (`FilesShareStateStore`) and
PostgreSQL (`PostgresShareStateStore`, on the session's real server). Then what only one of
them has: on PostgreSQL the lease fencing (a deposed leader writes nothing, the new one
loads everything acknowledged) and the partition's rows; on files the torn tail of a crash,
the layout on disk and the fsync policy.

Every scenario runs on a store opened for it (`Harness.run`), so a later scenario of one
test sees only what an earlier one made durable, as a broker restarting would.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.common.limits import MAX_STRING_BYTES
from coterie.log.manager import LogManager
from coterie.storage import leases
from coterie.storage.api import Lease, Resource, TopicIdPartition
from coterie.storage.database import Database
from coterie.storage.errors import LeaseLost, StateEpochFenced, StorageError, UnknownPartition
from coterie.storage.files_share_state import (
    SHARE_STATE_DIR,
    FilesShareStateStore,
    group_dir_name,
)
from coterie.storage.postgres_share_state import PostgresShareStateStore
from coterie.storage.share_state import ShareStateStore
from coterie.storage.topics import delete_topic
from tests.storage.helpers import LONG_TTL, expire, open_db, topic_with_leases


@dataclass
class Ctx:
    """What a scenario gets: a store, two topics' four partitions, node 1's lease on each,
    and (on PostgreSQL) the database under the store."""

    store: ShareStateStore
    tps: list[TopicIdPartition]
    held: dict[TopicIdPartition, Lease]
    db: Database | None = None

    @property
    def tp(self) -> TopicIdPartition:
        return self.tps[0]

    def lease(self, tp: TopicIdPartition | None = None) -> Lease:
        return self.held[tp or self.tp]


Scenario = Callable[[Ctx], Awaitable[None]]


@dataclass
class Harness:
    kind: str
    tmp_path: Path
    dsn: str | None = None
    tps: list[TopicIdPartition] = field(default_factory=list)
    held: dict[TopicIdPartition, Lease] = field(default_factory=dict)

    def run(self, scenario: Scenario) -> None:
        """Run `scenario` on a store of this kind opened for it (the same files or
        database as the previous runs)."""
        if self.kind == "files":
            if not self.tps:
                self.tps = [TopicIdPartition(uuid.uuid4(), p) for p in (0, 1)] + \
                    [TopicIdPartition(uuid.uuid4(), p) for p in (0, 1)]
                self.held = {tp: Lease(Resource.partition(tp), 1, 1) for tp in self.tps}
            store = FilesShareStateStore(self.tmp_path / "data")
            try:
                asyncio.run(scenario(Ctx(store, self.tps, self.held)))
            finally:
                store.close()
            return
        assert self.dsn is not None
        dsn = self.dsn

        async def main() -> None:
            db = await open_db(dsn)
            try:
                if not self.tps:
                    for name in ("t", "u"):
                        tps, held = await topic_with_leases(db, name, partitions=2)
                        self.tps += tps
                        self.held.update(zip(tps, held, strict=True))
                await scenario(Ctx(PostgresShareStateStore(db), self.tps, self.held, db))
            finally:
                await db.close()

        asyncio.run(main())


@pytest.fixture(params=["files", "postgresql"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "files":
        yield Harness("files", tmp_path)
    else:
        yield Harness("postgresql", tmp_path, request.getfixturevalue("pg_dsn"))


# ------------------------------------------------------------------------ the contract


def test_appends_load_in_write_order(harness: Harness) -> None:
    async def write(c: Ctx) -> None:
        assert isinstance(c.store, ShareStateStore)
        assert await c.store.load("g", c.tp) == []
        assert await c.store.partitions_of("g") == []
        await c.store.append("g", c.tp, [b"snapshot", b"u1"], c.lease())
        await c.store.append("g", c.tp, [b"u2"], c.lease())
        await c.store.append("g", c.tp, [], c.lease())  # nothing
        await c.store.append("g", c.tp, [bytearray(b"u3"), memoryview(b"u4")], c.lease())
        await c.store.append("g", c.tps[3], [b"other partition"], c.lease(c.tps[3]))
        await c.store.append("h", c.tp, [b"other group"], c.lease())
        assert await c.store.load("g", c.tp) == [b"snapshot", b"u1", b"u2", b"u3", b"u4"]

    async def read(c: Ctx) -> None:  # a store opened later (a restart, another broker)
        assert await c.store.load("g", c.tp) == [b"snapshot", b"u1", b"u2", b"u3", b"u4"]
        assert await c.store.load("g", c.tps[3]) == [b"other partition"]
        assert await c.store.load("g", c.tps[1]) == []
        assert await c.store.load("h", c.tp) == [b"other group"]
        assert await c.store.partitions_of("g") == sorted([c.tp, c.tps[3]])
        assert await c.store.partitions_of("h") == [c.tp]
        assert await c.store.partitions_of("nobody") == []

    harness.run(write)
    harness.run(read)


def test_replace_makes_the_entries_the_whole_list(harness: Harness) -> None:
    async def write(c: Ctx) -> None:
        await c.store.append("g", c.tp, [b"s0", b"u1", b"u2"], c.lease())
        await c.store.append("g", c.tps[1], [b"kept"], c.lease(c.tps[1]))
        await c.store.replace("g", c.tp, [b"s1"], c.lease())
        assert await c.store.load("g", c.tp) == [b"s1"]
        await c.store.append("g", c.tp, [b"u3"], c.lease())
        await c.store.replace("g", c.tp, [b"s2", b"u4"], c.lease())
        await c.store.append("g", c.tp, [b"u5"], c.lease())
        # Replacing a partition with no state yet is writing its first snapshot.
        await c.store.replace("g", c.tps[2], [b"first"], c.lease(c.tps[2]))

    async def read(c: Ctx) -> None:
        assert await c.store.load("g", c.tp) == [b"s2", b"u4", b"u5"]
        assert await c.store.load("g", c.tps[1]) == [b"kept"]
        assert await c.store.load("g", c.tps[2]) == [b"first"]
        # Replaced by nothing: no state (as deleted, but fenced like a write).
        await c.store.replace("g", c.tp, [], c.lease())
        assert await c.store.load("g", c.tp) == []
        assert await c.store.partitions_of("g") == sorted([c.tps[1], c.tps[2]])
        await c.store.append("g", c.tp, [b"again"], c.lease())
        assert await c.store.load("g", c.tp) == [b"again"]

    harness.run(write)
    harness.run(read)


def test_delete_one_partition_or_the_whole_group(harness: Harness) -> None:
    async def scenario(c: Ctx) -> None:
        for tp in c.tps[:3]:
            await c.store.append("g", tp, [b"g %s" % str(tp).encode()], c.lease(tp))
        await c.store.append("h", c.tp, [b"h"], c.lease())
        await c.store.delete("g", c.tps[1])
        assert await c.store.partitions_of("g") == sorted([c.tps[0], c.tps[2]])
        assert await c.store.load("g", c.tps[1]) == []
        await c.store.delete("g", c.tps[1])  # nothing left to delete: fine
        await c.store.delete("g")
        assert await c.store.partitions_of("g") == []
        assert [await c.store.load("g", tp) for tp in c.tps] == [[]] * 4
        await c.store.delete("g")
        await c.store.delete("never-written")
        await c.store.delete("never-written", c.tp)
        assert await c.store.load("h", c.tp) == [b"h"]  # other groups keep theirs
        # A deleted group's state starts afresh.
        await c.store.append("g", c.tps[1], [b"new"], c.lease(c.tps[1]))
        assert await c.store.load("g", c.tps[1]) == [b"new"]

    harness.run(scenario)
    harness.run(lambda c: _expect(c, {("g", c.tps[1]): [b"new"], ("h", c.tp): [b"h"]}))


async def _expect(c: Ctx, wanted: dict[tuple[str, TopicIdPartition], list[bytes]]) -> None:
    for (group, tp), entries in wanted.items():
        assert await c.store.load(group, tp) == entries, (group, tp)
    for group in {g for g, _ in wanted}:
        assert await c.store.partitions_of(group) == sorted(
            tp for (g, tp), entries in wanted.items() if g == group and entries)


_entries = st.lists(st.binary(max_size=300), max_size=6)
_writes = st.lists(st.tuples(st.sampled_from(["append", "replace"]), _entries),
                   min_size=1, max_size=8)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(writes=_writes, group=st.text(min_size=1, max_size=20).filter(lambda g: "\0" not in g))
def test_any_bytes_come_back_as_written(harness: Harness,
                                        writes: list[tuple[str, list[bytes]]],
                                        group: str) -> None:
    """Arbitrary entries (empty ones, every byte value), appended and replaced in any order,
    load as a model list says, from a store opened afresh."""
    model: dict[int, list[bytes]] = {}

    async def write(c: Ctx) -> None:
        await c.store.delete(group)  # examples share the store: start from nothing
        for i, (op, entries) in enumerate(writes):
            tp = c.tps[i % 2]
            if op == "append":
                await c.store.append(group, tp, entries, c.lease(tp))
                model.setdefault(tp.partition, []).extend(entries)
            else:
                await c.store.replace(group, tp, entries, c.lease(tp))
                model[tp.partition] = list(entries)

    async def read(c: Ctx) -> None:
        for tp in c.tps[:2]:
            assert await c.store.load(group, tp) == model.get(tp.partition, [])
        assert await c.store.partitions_of(group) == [
            tp for tp in sorted(c.tps[:2]) if model.get(tp.partition)]

    harness.run(write)
    harness.run(read)


# Group ids that must neither escape the store's directory nor collide with each other.
UNUSUAL_GROUP_IDS = [
    "..", ".", "/", "../../../etc/passwd", "a/b", "a\\b", "/abs", "~", "-", " ", "\t\n",
    "groupe-été", "群组", "🙂 emoji", "CaseMatters", "casematters", "x" * 249, "y" * 256,
    "é" * (MAX_STRING_BYTES // 2), "z" * MAX_STRING_BYTES, ".hidden", "name.deleted",
    "share-state", "group-id", "0f" * 16,
]


def test_unusual_group_ids_are_kept_apart_and_inside_the_store(harness: Harness) -> None:
    async def write(c: Ctx) -> None:
        for i, group in enumerate(UNUSUAL_GROUP_IDS):
            await c.store.append(group, c.tp, [b"%d" % i], c.lease())
            await c.store.replace(group, c.tps[1], [b"r%d" % i], c.lease(c.tps[1]))

    async def read(c: Ctx) -> None:
        for i, group in enumerate(UNUSUAL_GROUP_IDS):
            assert await c.store.load(group, c.tp) == [b"%d" % i], group[:40]
            assert await c.store.load(group, c.tps[1]) == [b"r%d" % i], group[:40]
            assert await c.store.partitions_of(group) == sorted(c.tps[:2])
        await c.store.delete("..")
        await c.store.delete("/", c.tp)
        assert await c.store.load(".", c.tp) == [b"1"]
        assert await c.store.load("/", c.tps[1]) == [b"r2"]
        assert await c.store.partitions_of("..") == []
        assert await c.store.load("x" * 249, c.tp) == [b"%d" % UNUSUAL_GROUP_IDS.index(
            "x" * 249)]

    harness.run(write)
    harness.run(read)
    if harness.kind == "files":
        data = harness.tmp_path / "data"
        assert [p.name for p in data.iterdir()] == [SHARE_STATE_DIR]
        outside = [p for p in harness.tmp_path.rglob("*")
                   if not p.is_relative_to(data / SHARE_STATE_DIR) and p != data]
        assert outside == []
        names = [p.name for p in (data / SHARE_STATE_DIR).iterdir()]
        assert len(names) == len(UNUSUAL_GROUP_IDS) - 1  # ".." was deleted
        assert all(re.fullmatch(r"[a-z0-9_]{1,24}-[0-9a-f]{32}", n) for n in names), names


@pytest.mark.parametrize("group", ["", "nul\0inside", "z" * (MAX_STRING_BYTES + 1),
                                   "é" * (MAX_STRING_BYTES // 2 + 1), "lone \ud800"])
def test_group_ids_no_store_can_keep_are_refused(harness: Harness, group: str) -> None:
    async def scenario(c: Ctx) -> None:
        calls = [c.store.load(group, c.tp), c.store.append(group, c.tp, [b"x"], c.lease()),
                 c.store.replace(group, c.tp, [b"x"], c.lease()), c.store.delete(group),
                 c.store.delete(group, c.tp), c.store.partitions_of(group)]
        for call in calls:
            with pytest.raises(ValueError, match="share group's id"):
                await call

    harness.run(scenario)


def test_a_lease_of_another_resource_is_refused(harness: Harness) -> None:
    async def scenario(c: Ctx) -> None:
        others = [c.lease(c.tps[1]), Lease(Resource.group_shard(0), 1, c.lease().epoch)]
        for other in others:
            with pytest.raises(ValueError, match="under the lease of"):
                await c.store.append("g", c.tp, [b"x"], other)
            with pytest.raises(ValueError, match="under the lease of"):
                await c.store.replace("g", c.tp, [b"x"], other)
        assert await c.store.load("g", c.tp) == []

    harness.run(scenario)


# ------------------------------------------------------------------ PostgreSQL: fencing


def _postgresql(pg_dsn: str, tmp_path: Path) -> Harness:
    return Harness("postgresql", tmp_path, pg_dsn)


def test_a_lost_lease_writes_nothing(pg_dsn: str, tmp_path: Path) -> None:
    """Expired, taken by another node, released, or an older epoch of the same node: every
    write under such a lease is LeaseLost and leaves the state as it was."""

    async def scenario(c: Ctx) -> None:
        assert c.db is not None
        store, tp, old = c.store, c.tp, c.lease()
        await store.append("g", tp, [b"s", b"u1"], old)

        async def refused(lease: Lease, match: str) -> None:
            before = await store.load("g", tp)
            with pytest.raises(LeaseLost, match=match):
                await store.append("g", tp, [b"late"], lease)
            with pytest.raises(LeaseLost, match=match):
                await store.replace("g", tp, [b"late snapshot"], lease)
            with pytest.raises(LeaseLost, match=match):
                await store.append("g", tp, [], lease)  # checked even with nothing to add
            assert await store.load("g", tp) == before
            assert await store.partitions_of("g") == [tp]

        await expire(c.db, old)  # node 1 paused past its tenure, nobody took it yet
        await refused(old, r"epoch 1 \(.*expired\)")
        new = await leases.acquire(c.db, Resource.partition(tp), 2, LONG_TTL)
        assert new is not None and new.epoch == old.epoch + 1
        await refused(old, r"now node 2 at epoch 2 \(live\)")
        # The new leader loads what was acknowledged and goes on from there.
        await store.append("g", tp, [b"u2"], new)
        assert await leases.release(c.db, new)
        await refused(new, "released at epoch 2")
        again = await leases.acquire(c.db, Resource.partition(tp), 2, LONG_TTL)
        assert again is not None and again.epoch == 3
        with pytest.raises(LeaseLost, match="now node 2 at epoch 3"):
            await store.replace("g", tp, [b"stale epoch"], new)  # its own older tenure
        assert await store.load("g", tp) == [b"s", b"u1", b"u2"]
        await store.replace("g", tp, [b"s2"], again)
        assert await store.load("g", tp) == [b"s2"]

    _postgresql(pg_dsn, tmp_path).run(scenario)


def test_a_take_over_racing_with_appends_loses_nothing_acknowledged(pg_dsn: str) -> None:
    """Node 1 keeps appending while its lease runs out and node 2 takes the partition: what
    node 2 loads right after taking it holds every append acknowledged to node 1, in order,
    and node 1 writes nothing after."""

    async def scenario() -> None:
        a, b = await open_db(pg_dsn), await open_db(pg_dsn)
        try:
            (tp,), (old,) = await topic_with_leases(a, node_id=1)
            store_a, store_b = PostgresShareStateStore(a), PostgresShareStateStore(b)
            acked: list[bytes] = []
            loaded: list[bytes] = []

            async def node1() -> None:
                for i in range(300):
                    try:
                        await store_a.append("g", tp, [b"a%d" % i], old)
                    except LeaseLost:
                        return
                    acked.append(b"a%d" % i)

            async def node2() -> None:
                await asyncio.sleep(0.02)
                await expire(b, old)
                new = None
                while new is None:
                    new = await leases.acquire(b, Resource.partition(tp), 2, LONG_TTL)
                loaded.extend(await store_b.load("g", tp))
                await store_b.append("g", tp, [b"b"], new)

            await asyncio.gather(node1(), node2())
            assert 0 < len(acked) < 300
            # Every append acknowledged to node 1 committed before node 2 took the lease
            # (the take-over waits for writes in flight), and none after.
            assert loaded == acked
            assert await store_b.load("g", tp) == [*acked, b"b"]
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())


def test_two_connections_of_one_leader_append_in_turn(pg_dsn: str) -> None:
    """Appends to one partition through two connections are numbered one after the other
    (the partition's row orders them), none lost, each connection's in its order."""

    async def scenario() -> None:
        a, b = await open_db(pg_dsn), await open_db(pg_dsn)
        try:
            (tp,), (lease,) = await topic_with_leases(a)

            async def writer(db: Database, tag: bytes) -> None:
                store = PostgresShareStateStore(db)
                for i in range(60):
                    await store.append("g", tp, [b"%s%d" % (tag, i), b"%s%d'" % (tag, i)],
                                       lease)

            await asyncio.gather(writer(a, b"a"), writer(b, b"b"))
            stored = await PostgresShareStateStore(a).load("g", tp)
            assert len(stored) == 240
            for tag in (b"a", b"b"):
                mine = [e for e in stored if e.startswith(tag)]
                assert mine == [x for i in range(60) for x in (b"%s%d" % (tag, i),
                                                               b"%s%d'" % (tag, i))]
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())


def test_a_replace_racing_with_appends_never_mixes_the_lists(pg_dsn: str) -> None:
    """Snapshots (and deletions) through one connection, updates through another: the
    stored list is always the last snapshot followed by updates, whole and in order; an
    update committed before the snapshot never survives it, one committed after is never
    lost."""

    async def scenario() -> None:
        a, b, r = await open_db(pg_dsn), await open_db(pg_dsn), await open_db(pg_dsn)
        try:
            (tp,), (lease,) = await topic_with_leases(a)
            snapshots, updates = PostgresShareStateStore(a), PostgresShareStateStore(b)
            reader = PostgresShareStateStore(r)
            seen: list[list[bytes]] = []
            done = asyncio.Event()

            async def snapshot_writer() -> None:
                for i in range(40):
                    if i % 10 == 5:
                        await snapshots.delete("g", tp)  # an administrator's, unfenced
                    elif i % 10 == 7:
                        await snapshots.replace("g", tp, [], lease)
                    else:
                        await snapshots.replace("g", tp, [b"s%03d" % i], lease)
                done.set()

            acked = 0

            async def update_writer() -> None:
                nonlocal acked
                while not done.is_set():
                    await updates.append("g", tp, [b"u%05d" % acked, b"u%05d'" % acked],
                                         lease)
                    acked += 1

            async def watcher() -> None:
                while not done.is_set():
                    seen.append(await reader.load("g", tp))

            await asyncio.gather(snapshot_writer(), update_writer(), watcher())
            seen.append(await reader.load("g", tp))
            for stored in seen:
                rest = stored[1:] if stored and stored[0].startswith(b"s") else stored
                # The updates since the snapshot: whole appends, in order, none missing
                # between the first and the last.
                first = int(rest[0][1:6]) if rest else 0
                assert rest == [x for i in range(first, first + len(rest) // 2)
                                for x in (b"u%05d" % i, b"u%05d'" % i)], stored
            assert seen[-1][0] == b"s039"
            # ... and the last one acknowledged is there.
            assert seen[-1][-1] == b"u%05d'" % (acked - 1) or len(seen[-1]) == 1
        finally:
            for db in (a, b, r):
                await db.close()

    asyncio.run(scenario())


def test_reads_and_deletes_need_no_lease_and_unknown_partitions_are_refused(
        pg_dsn: str, tmp_path: Path) -> None:
    async def scenario(c: Ctx) -> None:
        assert c.db is not None
        await c.store.append("g", c.tp, [b"s"], c.lease())
        db2 = await open_db(pg_dsn)  # node 2, holding no lease
        try:
            other = PostgresShareStateStore(db2)
            assert await other.load("g", c.tp) == [b"s"]
            assert await other.partitions_of("g") == [c.tp]
            await other.delete("g", c.tp)
            assert await c.store.load("g", c.tp) == []
        finally:
            await db2.close()
        missing = TopicIdPartition(c.tp.topic_id, 9)
        lease = await leases.acquire(c.db, Resource.partition(missing), 1, LONG_TTL)
        assert lease is not None
        with pytest.raises(UnknownPartition):
            await c.store.append("g", missing, [b"x"], lease)
        with pytest.raises(UnknownPartition):
            await c.store.replace("g", missing, [b"x"], lease)
        assert await c.store.partitions_of("g") == []

    _postgresql(pg_dsn, tmp_path).run(scenario)


def test_deleting_a_topic_deletes_its_share_state(pg_dsn: str, tmp_path: Path) -> None:
    async def scenario(c: Ctx) -> None:
        assert c.db is not None
        for tp in c.tps:
            await c.store.append("g", tp, [b"x"], c.lease(tp))
        assert await delete_topic(c.db, c.tp.topic_id)
        assert await c.store.partitions_of("g") == c.tps[2:]
        assert await c.store.load("g", c.tp) == []
        async with c.db.session() as conn:
            cur = await conn.execute("SELECT count(*), count(DISTINCT topic_id) "
                                     "FROM share_state_entries")
            assert await cur.fetchone() == (2, 1)

    _postgresql(pg_dsn, tmp_path).run(scenario)


# ------------------------------------------------------------------ files: crashes, disk


def _files(tmp_path: Path) -> Harness:
    return Harness("files", tmp_path)


def _state_file(tmp_path: Path, group: str, tp: TopicIdPartition) -> Path:
    return tmp_path / "data" / SHARE_STATE_DIR / group_dir_name(group) / \
        f"{tp.topic_id}-{tp.partition}.state"


def test_a_torn_tail_is_dropped_on_load_and_cut_off_by_the_next_append(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    h = _files(tmp_path)

    async def write(c: Ctx) -> None:
        await c.store.append("g", c.tp, [b"s", b"u1"], c.lease())
        await c.store.append("g", c.tp, [b"u2", b"u3" * 50], c.lease())  # one frame

    h.run(write)
    path = _state_file(tmp_path, "g", h.tps[0])
    whole = path.read_bytes()
    for cut in (1, 5, 9, 60):  # inside the last frame: its header, entries, the CRC'd body
        path.write_bytes(whole[:-cut])

        async def torn(c: Ctx) -> None:
            assert await c.store.load("g", c.tp) == [b"s", b"u1"]  # the torn append whole
            assert await c.store.partitions_of("g") == [c.tp]

        h.run(torn)
        assert "dropped" in caplog.text

    async def append_after(c: Ctx) -> None:
        await c.store.append("g", c.tp, [b"u4"], c.lease())  # the torn bytes go first

    h.run(append_after)
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s", b"u1", b"u4"]}))
    # Zeros at the end (a file grown but not written when the power went): dropped too.
    with path.open("ab") as f:
        f.write(bytes(40))
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s", b"u1", b"u4"]}))

    async def load_then_append(c: Ctx) -> None:  # the same store loads, then appends
        assert await c.store.load("g", c.tp) == [b"s", b"u1", b"u4"]
        await c.store.append("g", c.tp, [b"u5"], c.lease())

    h.run(load_then_append)
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s", b"u1", b"u4", b"u5"]}))


def test_a_torn_first_write_loads_as_nothing(tmp_path: Path) -> None:
    h = _files(tmp_path)
    h.run(lambda c: c.store.append("g", c.tp, [b"s"], c.lease()))
    path = _state_file(tmp_path, "g", h.tps[0])
    for torn in (b"", b"CS", bytes(30)):
        path.write_bytes(torn)
        h.run(lambda c: _expect(c, {("g", h.tps[0]): []}))
        h.run(lambda c: c.store.append("g", c.tp, [b"s2"], c.lease()))
        h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s2"]}))


def test_a_corrupt_frame_hides_what_follows_it(tmp_path: Path) -> None:
    """A frame failing its CRC ends what loads: updates after it cannot be applied without
    it, and the next append continues from the last whole frame."""
    h = _files(tmp_path)

    async def write(c: Ctx) -> None:
        for entry in (b"s", b"u1", b"u2"):
            await c.store.append("g", c.tp, [entry], c.lease())

    h.run(write)
    path = _state_file(tmp_path, "g", h.tps[0])
    data = bytearray(path.read_bytes())
    data[-19] ^= 0x01  # the last byte of u1's frame (each frame here is 18 bytes)
    path.write_bytes(bytes(data))
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s"]}))
    h.run(lambda c: c.store.append("g", c.tp, [b"u3"], c.lease()))
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s", b"u3"]}))


def test_files_of_another_kind_or_a_newer_format_are_errors(tmp_path: Path) -> None:
    h = _files(tmp_path)
    h.run(lambda c: c.store.append("g", c.tp, [b"s"], c.lease()))
    path = _state_file(tmp_path, "g", h.tps[0])
    data = path.read_bytes()
    for bad, match in ((b"JUNKJUNK" + data[8:], "not a share state file"),
                       (data[:4] + b"\0\0\0\x02" + data[8:], "format 2.*newer coterie")):
        path.write_bytes(bad)

        async def scenario(c: Ctx, match: str = match) -> None:
            with pytest.raises(StorageError, match=match):
                await c.store.load("g", c.tp)
            with pytest.raises(StorageError, match=match):
                await c.store.append("g", c.tp, [b"u"], c.lease())

        h.run(scenario)
        assert path.read_bytes() == bad  # left alone


def test_a_replace_interrupted_before_its_rename_leaves_the_old_list(tmp_path: Path) -> None:
    h = _files(tmp_path)
    h.run(lambda c: c.store.append("g", c.tp, [b"s", b"u"], c.lease()))
    path = _state_file(tmp_path, "g", h.tps[0])
    # The temporary file of a replace a crash interrupted, in the group's directory.
    (path.parent / ".0123456789abcdef.tmp").write_bytes(b"half a new snapshot")
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s", b"u"]}))
    h.run(lambda c: c.store.replace("g", c.tp, [b"s2"], c.lease()))
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s2"]}))


def test_a_failed_append_leaves_nothing_behind(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails half-way (a full disk) is undone: the append is all or nothing."""
    h = _files(tmp_path)
    h.run(lambda c: c.store.append("g", c.tp, [b"s"], c.lease()))
    real_pwrite = os.pwrite

    def half_then_full(fd: int, data: memoryview, offset: int) -> int:
        if len(data) > 4:
            return real_pwrite(fd, data[:len(data) // 2], offset)
        raise OSError(28, "No space left on device")

    async def scenario(c: Ctx) -> None:
        with monkeypatch.context() as m:
            m.setattr(os, "pwrite", half_then_full)
            with pytest.raises(OSError, match="No space"):
                await c.store.append("g", c.tp, [b"u1", b"u2"], c.lease())
        assert await c.store.load("g", c.tp) == [b"s"]
        await c.store.append("g", c.tp, [b"u3"], c.lease())

    h.run(scenario)
    h.run(lambda c: _expect(c, {("g", h.tps[0]): [b"s", b"u3"]}))


def test_appends_are_synced_per_the_policy(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Written to the OS before returning always; synced at once with fsync=True, else at
    the next flush() (the broker's flush tick, or close)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    tp = TopicIdPartition(uuid.uuid4(), 0)
    lease = Lease(Resource.partition(tp), 1, 1)
    path = _state_file(tmp_path, "g", tp)

    async def scenario(store: FilesShareStateStore) -> None:
        await store.append("g", tp, [b"s"], lease)  # creates the group's directory
        synced.clear()
        await store.append("g", tp, [b"u1"], lease)
        assert path.read_bytes().endswith(b"u1")  # in the file (the OS) already

    store = FilesShareStateStore(tmp_path / "data")
    asyncio.run(scenario(store))
    assert synced == []
    store.flush()
    assert str(path) in synced
    synced.clear()
    store.flush()
    assert synced == []  # nothing appended since

    eager = FilesShareStateStore(tmp_path / "data", fsync=True)
    asyncio.run(eager.append("g", tp, [b"u2"], lease))
    assert synced == [str(path)]
    synced.clear()
    asyncio.run(eager.append("g", TopicIdPartition(tp.topic_id, 1), [b"new file"],
                             Lease(Resource.partition(TopicIdPartition(tp.topic_id, 1)), 1, 1)))
    assert synced == [str(path.with_name(f"{tp.topic_id}-1.state")), str(path.parent)]


def test_the_log_manager_leaves_the_share_state_directory_alone(tmp_path: Path) -> None:
    """The data directory is shared with the topics' partition directories; opening it as a
    log (which removes orphan partition directories) keeps `share-state` and its files."""
    h = _files(tmp_path)
    h.run(lambda c: c.store.append("g-0", c.tp, [b"s"], c.lease()))
    for i in range(2):  # the second open is a restart, looking for orphans
        logs = LogManager.open(tmp_path / "data", {}, 0)
        if i == 0:
            logs.create_topic("share", 1, {}, 0)  # "share-0" beside "share-state"
        logs.close()
    h.run(lambda c: _expect(c, {("g-0", h.tps[0]): [b"s"]}))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=300).filter(lambda g: "\0" not in g),
                min_size=2, max_size=2, unique=True))
def test_group_directory_names_are_safe_and_distinct(groups: list[str]) -> None:
    names = [group_dir_name(g) for g in groups]
    for name in names:
        assert re.fullmatch(r"[a-z0-9_]{1,24}-[0-9a-f]{32}", name), name
        assert len(name.encode()) <= 57
    assert names[0] != names[1]


def test_the_layout_on_disk(tmp_path: Path) -> None:
    """share-state/<group dir>/<topic id>-<partition>.state, with the group's id beside its
    partitions' files; a group gone leaves no directory, and a deletion a crash interrupted
    is finished when a store opens."""
    h = _files(tmp_path)
    h.run(lambda c: c.store.append("Orders.EU/1", c.tp, [b"s"], c.lease()))
    root = tmp_path / "data" / SHARE_STATE_DIR
    (group_dir,) = root.iterdir()
    assert group_dir.name == "orders_eu_1-" + group_dir.name[-32:]
    tp = h.tps[0]
    assert sorted(p.name for p in group_dir.iterdir()) == [
        f"{tp.topic_id}-0.state", "group-id"]
    assert (group_dir / "group-id").read_text() == "Orders.EU/1"
    h.run(lambda c: c.store.delete("Orders.EU/1", c.tp))
    assert list(root.iterdir()) == []  # its last partition gone, the group's directory too
    (root / "left-0123.deleted" / "x").mkdir(parents=True)
    h.run(lambda c: _expect(c, {("g", tp): []}))
    assert list(root.iterdir()) == []


def test_a_reset_fences_every_write_of_an_older_state_epoch(harness: Harness) -> None:
    """AlterShareGroupOffsets through a broker not leading the partition: `reset` writes a
    new snapshot with no lease and a newer state epoch; from then on the leader's copy,
    loaded before, can write nothing (StateEpochFenced), until it loads the new state."""
    async def scenario(c: Ctx) -> None:
        await c.store.replace("g", c.tp, [b"s0"], c.lease(), state_epoch=0)
        await c.store.append("g", c.tp, [b"u0"], c.lease(), state_epoch=0)
        await c.store.reset("g", c.tp, [b"s1"], 1)
        assert await c.store.load("g", c.tp) == [b"s1"]
        with pytest.raises(StateEpochFenced):
            await c.store.append("g", c.tp, [b"late"], c.lease(), state_epoch=0)
        with pytest.raises(StateEpochFenced):
            await c.store.replace("g", c.tp, [b"late"], c.lease(), state_epoch=0)
        with pytest.raises(StateEpochFenced):  # a reset must be newer than what is stored
            await c.store.reset("g", c.tp, [b"again"], 1)
        assert await c.store.load("g", c.tp) == [b"s1"]
        # The leader, having loaded the new state, writes at its epoch, and resets itself.
        await c.store.append("g", c.tp, [b"u1"], c.lease(), state_epoch=1)
        await c.store.replace("g", c.tp, [b"s2"], c.lease(), state_epoch=2)
        assert await c.store.load("g", c.tp) == [b"s2"]
        # A reset where nothing is stored starts the state; an empty one is refused.
        await c.store.reset("g", c.tps[1], [b"n"], 1)
        assert await c.store.load("g", c.tps[1]) == [b"n"]
        with pytest.raises(ValueError):
            await c.store.reset("g", c.tp, [], 3)
        assert await c.store.partitions_of("g") == sorted(c.tps[:2])

    harness.run(scenario)
