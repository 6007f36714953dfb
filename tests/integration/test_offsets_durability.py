"""Committed offsets are durable: they survive kill -9, and compaction of __consumer_offsets
keeps only current values without losing any."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)

from tests.fixtures.coterie_broker import both_storages
from tests.integration.test_data_plane_raw import create
from tests.kafka_raw import RawConnection


def commit(conn: RawConnection, group: str, topic: str, offsets: dict[int, int],
           metadata: str = "") -> list[ErrorCode]:
    resp = conn.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=(OffsetCommitRequestTopic(name=topic, partitions=tuple(
            OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                         committed_leader_epoch=-1, committed_metadata=metadata)
            for p, o in offsets.items())),)))
    return [p.error_code for t in resp.topics for p in t.partitions]


def fetch(conn: RawConnection, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    resp = conn.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
        group_id=group, topics=(OffsetFetchRequestTopics(name=topic,
                                                         partition_indexes=tuple(partitions)),)),),
        require_stable=False))
    return {p.partition_index: p.committed_offset
            for t in resp.groups[0].topics for p in t.partitions}


def earliest(conn: RawConnection, topic: str, partition: int) -> int:
    resp = conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=-2),)),)))
    return resp.topics[0].partitions[0].offset


def wait_loaded(conn: RawConnection, group: str, topic: str, deadline_s: float = 20) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        resp = conn.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
            group_id=group, topics=(OffsetFetchRequestTopics(name=topic,
                                                             partition_indexes=(0,)),)),),
            require_stable=False))
        if resp.groups[0].error_code != ErrorCode.coordinator_load_in_progress:
            return
        time.sleep(0.1)
    raise TimeoutError("coordinator still loading")


@both_storages
def test_commits_survive_kill9(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        create(c, "orders", 4)
        wait_loaded(c, "g1", "orders")
        assert commit(c, "g1", "orders", {0: 10, 1: 20, 2: 30, 3: 40}) == [ErrorCode.none] * 4
        assert commit(c, "g1", "orders", {1: 21}) == [ErrorCode.none]
    coterie.restart_after_kill9()
    with RawConnection(coterie.host, coterie.port) as c:
        wait_loaded(c, "g1", "orders")
        assert fetch(c, "g1", "orders", [0, 1, 2, 3]) == {0: 10, 1: 21, 2: 30, 3: 40}


@both_storages
def test_metadata_too_large_and_unknown_partition(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        create(c, "meta", 1)
        wait_loaded(c, "g", "meta")
        assert commit(c, "g", "meta", {0: 1}, metadata="x" * 4097) == [
            ErrorCode.offset_metadata_too_large]
        assert commit(c, "g", "meta", {0: 1}, metadata="x" * 4096) == [ErrorCode.none]
        assert commit(c, "g", "meta", {5: 1}) == [ErrorCode.unknown_topic_or_partition]


def offsets_bytes(broker) -> int:
    return sum(f.stat().st_size for f in broker.data_dir.glob("__consumer_offsets-0/*.log"))


def test_compaction_keeps_current_offsets_and_drops_history(coterie_factory):
    broker = coterie_factory(config={
        "offsets.topic.num.partitions": "1",
        "offsets.topic.segment.bytes": "16384",
        "log.flush.scheduler.interval.ms": "200",
        "log.cleaner.backoff.ms": "200",
    })
    with RawConnection(broker.host, broker.port) as c:
        create(c, "busy", 8)
        wait_loaded(c, "g", "busy")
        for round_ in range(300):
            assert set(commit(c, "g", "busy", {p: round_ * 10 + p for p in range(8)})) == {
                ErrorCode.none}
        # 300 commits of 8 offsets write about 128 KB; compacted, what is left is the
        # active segment (at most 16 KiB) and a few hundred bytes of current values.
        deadline = time.monotonic() + 20
        while offsets_bytes(broker) > 20_000 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert offsets_bytes(broker) <= 20_000, "compaction never dropped any history"
        # The cleaner keeps offsets: the log still starts at 0, with gaps after it.
        assert earliest(c, "__consumer_offsets", 0) == 0
        expected = {p: 2990 + p for p in range(8)}
        assert fetch(c, "g", "busy", list(range(8))) == expected
    broker.restart_after_kill9()
    with RawConnection(broker.host, broker.port) as c:
        wait_loaded(c, "g", "busy")
        assert fetch(c, "g", "busy", list(range(8))) == expected
    size = offsets_bytes(broker)
    assert size < 300 * 8 * 60, f"__consumer_offsets still holds {size} bytes"


def test_history_is_compacted_before_its_segment_fills(coterie_factory):
    """With the default 100 MiB segments a busy group's commits would all stay in one
    segment, and every restart would replay them all (a chaos run reached 373,000 records
    and a 12 s load). Once the history since the last roll outgrows the live values (and
    20,000 records), the active segment is rolled and the log cleaner compacts it."""
    broker = coterie_factory(config={"offsets.topic.num.partitions": "1",
                                     "log.flush.scheduler.interval.ms": "200",
                                     "log.cleaner.backoff.ms": "200"})
    with RawConnection(broker.host, broker.port) as c:
        create(c, "hot", 8)
        wait_loaded(c, "g", "hot")
        for round_ in range(3000):  # 24,000 offset records
            assert set(commit(c, "g", "hot", {p: round_ * 10 + p for p in range(8)})) == {
                ErrorCode.none}
        deadline = time.monotonic() + 20
        while ("cleaned __consumer_offsets-0" not in broker.log_text()
               and time.monotonic() < deadline):
            time.sleep(0.2)
        assert "cleaned __consumer_offsets-0" in broker.log_text(), \
            "no compaction below a full segment"
        expected = {p: 29990 + p for p in range(8)}
        assert fetch(c, "g", "hot", list(range(8))) == expected
    broker.restart_after_kill9()
    with RawConnection(broker.host, broker.port) as c:
        wait_loaded(c, "g", "hot")
        assert fetch(c, "g", "hot", list(range(8))) == expected
    loaded = [line for line in broker.log_text().splitlines() if "loaded" in line
              and "group records" in line][-1]
    count = int(loaded.split("loaded ")[1].split()[0])
    assert count < 5000, loaded
