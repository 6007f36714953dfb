"""A partition larger than `cluster.copy.bytes` taken over after a kill -9: the new leader
copies only its last bytes, with the producer state of the batches below them read from the
rows' header columns, and serves what lies below its copy from the database.

What must hold, as if the whole partition had been copied: consumers read from offset 0 to
the end, every record exact; the idempotent producer goes on without a duplicate or an
OutOfOrderSequence; the transaction left open below the copy is committed and counts;
read_committed readers skip the aborted records below the copy; a timestamp lookup below
the copy finds its record; a share group starting at the earliest offset gets every record,
those below the copy read from the database. And the takeover reads about the bound, not
the partition: the new leader's log says how many bytes it copied. As the copy grows again
it is trimmed back to its bound (the files on the leader's disk)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.cluster.test_cluster_clients import create, leaders
from tests.fixtures.coterie_cluster import running_cluster, wait_until

pytestmark = pytest.mark.timeout(300)

COPY_BYTES = 64 * 1024
TOPIC = "big"
PAD = b"x" * 90


def value(kind: str, i: int) -> bytes:
    return f"{kind}-{i:06d}-".encode() + PAD


def producer(cluster, **extra) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                     "linger.ms": 1, "batch.num.messages": 20,
                     "message.timeout.ms": 60_000, **extra})


def read_from_start(cluster, expected: int, committed: bool) -> list[tuple[int, bytes]]:
    """(offset, value) of every record from offset 0 until the end (`expected` records)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{committed}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed" if committed else "read_uncommitted",
                  "max.partition.fetch.bytes": 32 * 1024})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 90
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append((m.offset(), m.value()))
    finally:
        c.close()
    return got


def last_stable_offset(cluster) -> int:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "lso",
                  "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1]
    finally:
        c.close()


def copied_bytes(log_text: str) -> list[tuple[int, int, int]]:
    """(bytes copied, copy start, log start) of every take of the topic's partition."""
    pattern = (rf"leads {TOPIC}-0 at epoch \d+ \((\d+) batches' bytes copied, offsets (\d+)-\d+"
               r" of (\d+)-\d+")
    return [(int(a), int(b), int(c)) for a, b, c in re.findall(pattern, log_text)]


def local_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size
               for p in (data_dir / "cluster-cache" / f"{TOPIC}-0").glob("*.log"))


def test_a_partition_past_the_copy_bound_taken_over_after_a_kill(tmp_path, postgres_server):
    with running_cluster(tmp_path, postgres_server, size=2,
                         config={"cluster.copy.bytes": str(COPY_BYTES)}) as cluster:
        create(cluster, TOPIC, 1)
        # An aborted and a committed transaction, then one left open: all below the copy.
        aborting = producer(cluster, **{"transactional.id": "aborting"})
        aborting.init_transactions(30)
        aborting.begin_transaction()
        for i in range(30):
            aborting.produce(TOPIC, value("aborted", i), partition=0)
        aborting.flush(30)
        aborting.abort_transaction(30)
        aborting.begin_transaction()
        for i in range(10):
            aborting.produce(TOPIC, value("committed", i), partition=0)
        aborting.commit_transaction(30)
        open_txn = producer(cluster, **{"transactional.id": "open"})
        open_txn.init_transactions(30)
        open_txn.begin_transaction()
        for i in range(5):
            open_txn.produce(TOPIC, value("open", i), partition=0)
        open_txn.flush(30)
        # An idempotent producer writes far more than the bound after them.
        errors: list[str] = []
        acked: dict[bytes, int] = {}

        def done(err, msg) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked[msg.value()] = msg.offset()

        idem = producer(cluster, **{"enable.idempotence": True})
        first_ts = int(time.time() * 1000) - 1
        for i in range(3000):
            idem.produce(TOPIC, value("idem", i), partition=0, on_delivery=done)
            idem.poll(0)
        assert idem.flush(60) == 0 and not errors, errors
        before = leaders(cluster, TOPIC)[0]
        victim = cluster.broker(before)
        survivor = cluster.broker(3 - before)
        victim.kill9()
        wait_until(lambda: leaders(cluster, TOPIC).get(0) == 3 - before, 60,
                   "the survivor leading the partition")
        takes = copied_bytes(survivor.log_text())
        assert takes, survivor.log_text()[-3000:]
        copied, copy_start, log_start = takes[-1]
        print(f"takeover copied {copied} bytes from offset {copy_start} (log start "
              f"{log_start}); bound {COPY_BYTES}")
        assert log_start == 0 and copy_start > 100
        assert copied <= COPY_BYTES

        # The transaction open below the copy holds the last stable offset there, as it did
        # on the old leader: read_committed readers see nothing from it on.
        lso_before = last_stable_offset(cluster)
        assert lso_before < copy_start

        # The idempotent producer goes on: no duplicate, no OutOfOrderSequence.
        for i in range(3000, 4000):
            idem.produce(TOPIC, value("idem", i), partition=0, on_delivery=done)
            idem.poll(0)
        assert idem.flush(90) == 0 and not errors, errors
        # The transaction open below the copy is committed through the new leader.
        open_txn.commit_transaction(60)

        idem_offsets = sorted(acked.values())
        assert len(set(idem_offsets)) == 4000
        total = 30 + 10 + 5 + 4000  # data records; markers take offsets too
        got = read_from_start(cluster, total, committed=False)
        values = [v for _, v in got]
        assert len(values) == total and len(set(values)) == total
        assert [v for v in values if v.startswith(b"idem")] == [value("idem", i)
                                                               for i in range(4000)]
        assert {acked[v] for v in acked} == {o for o, v in got if v.startswith(b"idem")}
        assert [v for v in values if v.startswith(b"aborted")] == [value("aborted", i)
                                                                  for i in range(30)]
        assert got[0][0] == 0
        assert lso_before == next(o for o, v in got if v == value("open", 0))

        committed = read_from_start(cluster, total - 30, committed=True)
        kinds = [v.split(b"-")[0] for _, v in committed]
        assert b"aborted" not in kinds
        assert kinds.count(b"committed") == 10 and kinds.count(b"open") == 5
        assert kinds.count(b"idem") == 4000

        # A timestamp lookup below the copy: the first idempotent record is far below it.
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "times"})
        try:
            found = c.offsets_for_times([TopicPartition(TOPIC, 0, first_ts)], timeout=30)
        finally:
            c.close()
        assert found[0].offset == min(idem_offsets[:3000]) < copy_start

        # The copy is kept to its bound as it grows: after another bound's worth and more,
        # the survivor's files hold about the bound (whole segments of a quarter of it).
        for i in range(4000, 6000):
            idem.produce(TOPIC, value("idem", i), partition=0, on_delivery=done)
            idem.poll(0)
        assert idem.flush(90) == 0 and not errors, errors
        held = wait_until(lambda: (n := local_bytes(survivor.data_dir)) <= COPY_BYTES * 1.5
                          and n, 30, "the copy trimmed to its bound")
        print(f"the copy holds {held} bytes after {sum(map(len, acked)) // 1024} KiB "
              "were produced")
        # And what the trim removed is still read, from the database.
        again = read_from_start(cluster, total + 2000, committed=False)
        assert [v for _, v in again if v.startswith(b"idem")] == [value("idem", i)
                                                                 for i in range(6000)]

        # A share group starting at the earliest offset: every record, those below the copy
        # read from the database (a Fetch's rule; read_uncommitted, so the aborted ones too).
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        (future,) = admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, "below-copy", incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", "earliest",
                incremental_operation=AlterConfigOpType.SET)])]).values()
        future.result(10)
        share = ShareConsumer({"bootstrap.servers": cluster.bootstrap,
                               "group.id": "below-copy"})
        share.subscribe([TOPIC])
        shared: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 90
        try:
            while len(shared) < total + 2000 and time.monotonic() < deadline:
                shared += [(m.offset(), m.value()) for m in share.poll(0.5) or ()
                           if m.error() is None]
        finally:
            share.close()
        assert sorted(shared) == sorted(again), (len(shared), len(again))
        assert min(o for o, _ in shared) == 0 < copy_start
