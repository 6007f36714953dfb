"""Share groups (KIP-932) on a coterie cluster: three brokers on one PostgreSQL database
(issue 27: "it must work on both storages").

A share partition's state is written by the broker leading the data partition, under that
partition's lease, to the database (coterie/storage/postgres_share_state.py); the share
group's coordinator is the broker leading the group's `__consumer_offsets` partition. So:
consumers on a topic led by all three brokers get every record once; the leader of a
partition killed with -9 gives way to another that loads the state from the database, and
nothing accepted is delivered again, nothing unaccepted lost; the coordinator killed, the
members rejoin the next one; a broker that lost a lease writes no share state
(NOT_LEADER_OR_FOLLOWER) and a broker taking a partition back reloads its state; share
offsets deleted or altered through a coordinator that does not lead the partition are what
the group's next member starts from.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from tests.cluster.test_cluster_clients import leaders
from tests.fixtures.coterie_cluster import LEASE_MS, CoterieCluster, running_cluster, wait_until
from tests.fixtures.reference_broker import kafka_tool
from tests.integration.test_share_consumers import SHARE_GROUP_COMMAND
from tests.integration.test_share_fetch import ACCEPT, Member, _acquired, _offsets, _partition

pytestmark = pytest.mark.timeout(120)

LOCK_MS = 2000
SHARE_CONFIG = {"group.share.record.lock.duration.ms": str(LOCK_MS),
                "group.share.min.record.lock.duration.ms": "1000"}


@pytest.fixture
def share_cluster(tmp_path: Path, postgres_server) -> CoterieCluster:
    """The `coterie_cluster` fixture's three brokers, with share locks of LOCK_MS."""
    with running_cluster(tmp_path, postgres_server, config=SHARE_CONFIG) as cluster:
        yield cluster


def _topic(cluster: CoterieCluster, name: str, group: str, partitions: int) -> dict[int, int]:
    """A topic and `group` reading it from the start; each partition's leader once every
    live broker agrees on it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    (future,) = admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])]).values()
    future.result(10)
    return _led(cluster, name)


def _led(cluster: CoterieCluster, topic: str, nodes: set[int] | None = None,
         timeout: float = 30) -> dict[int, int]:
    """Every partition's leader, once every live broker agrees (and they are `nodes`)."""
    def check():
        found = leaders(cluster, topic)
        if not found or -1 in found.values():
            return None
        return found if nodes is None or set(found.values()) == nodes else None
    return wait_until(check, timeout, f"{topic}'s leaders")


def _leader_of(cluster: CoterieCluster, topic: str, wanted, timeout: float) -> int:
    """Partition 0's leader once every live broker agrees on one that is `wanted`."""
    def check():
        node = leaders(cluster, topic).get(0, -1)
        return node if node != -1 and wanted(node) else None
    return wait_until(check, timeout, f"{topic}-0's leader")


def _coordinator(cluster: CoterieCluster, group: str) -> int | None:
    """The group's coordinator as FindCoordinator names it; None while there is none (a
    failover: COORDINATOR_NOT_AVAILABLE)."""
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    from tests.kafka_raw import RawConnection

    b = cluster.live()[0]
    with RawConnection(b.host, b.port) as conn:
        answer = conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    (found,) = answer.coordinators
    return found.node_id if found.error_code == 0 else None


def _produce(cluster: CoterieCluster, topic: str, values: list[bytes],
             partition: int | None = None) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "acks": "all"})
    for i, v in enumerate(values):
        if partition is None:
            p.produce(topic, v, key=str(i).encode())
        else:
            p.produce(topic, v, partition=partition)
        if i % 10 == 9:
            p.flush(10)  # a few batches, not one
    assert p.flush(30) == 0


def _consumer(cluster: CoterieCluster, group: str, topic: str, **extra: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, **extra})
    c.subscribe([topic])
    return c


def _records(consumer: ShareConsumer, timeout: float = 0.5) -> list:
    return [m for m in consumer.poll(timeout) or () if m.error() is None]


def _drain(consumers: list[ShareConsumer], want: int, timeout: float,
           settle: float = 1.5) -> list:
    """Poll every consumer (implicit acknowledgement: each poll accepts the last) until
    `want` records came, then `settle` seconds more: anything delivered twice shows."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for c in consumers:
            got += _records(c, 0.2)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        for c in consumers:
            got += _records(c, 0.2)
    return got


def _close(consumers: list[ShareConsumer]) -> None:
    for c in consumers:
        c.close()


def test_three_consumers_on_partitions_of_three_leaders_get_every_record_once(share_cluster):
    cluster = share_cluster
    found = _topic(cluster, "spread-jobs", "spread-workers", 6)
    wait_until(lambda: set(_led(cluster, "spread-jobs").values()) == {1, 2, 3}, 30,
               "partitions led by all three brokers")
    consumers = [_consumer(cluster, "spread-workers", "spread-jobs") for _ in range(3)]
    seen: list[list] = [[], [], []]
    stop = threading.Event()

    def work(i: int) -> None:
        while not stop.is_set():
            seen[i].extend(_records(consumers[i], 0.2))

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        values = [f"job-{i}".encode() for i in range(300)]
        _produce(cluster, "spread-jobs", values)
        deadline = time.monotonic() + 40
        while sum(map(len, seen)) < len(values) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)  # anything delivered twice would show now
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        _close(consumers)
    got = [m.value() for s in seen for m in s]
    assert sorted(got) == sorted(values), (len(got), len(set(got)))
    assert {m.partition() for s in seen for m in s} == set(found)
    assert all(seen), [len(s) for s in seen]


def _accept_part(consumers: list[ShareConsumer], total: int, accept: int,
                 timeout: float = 30) -> tuple[list[bytes], list[bytes]]:
    """Explicit acknowledgement: poll until `total` records are held, accept the first
    `accept` of them (commit_sync: durable once it returns); (accepted, held) values."""
    got: list = []
    deadline = time.monotonic() + timeout
    held: dict[int, list] = {id(c): [] for c in consumers}
    while len(got) < total and time.monotonic() < deadline:
        for c in consumers:
            batch = _records(c, 0.2)
            held[id(c)] += batch
            got += batch
    assert len(got) == total, f"{len(got)} of {total} records delivered"
    accepted = []
    for c in consumers:
        for m in held[id(c)]:
            if len(accepted) < accept:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                accepted.append(m.value())
        for result in c.commit_sync() or ():
            assert result.error is None, result
    return accepted, [m.value() for m in got]


def test_the_leader_killed_another_loads_the_share_state_and_nothing_is_lost_or_redone(
        share_cluster):
    cluster = share_cluster
    (leader,) = _topic(cluster, "ledger", "bookkeepers", 1).values()
    values = [f"e{i}".encode() for i in range(40)]
    _produce(cluster, "ledger", values)
    explicit = {"share.acknowledgement.mode": "explicit"}
    consumers = [_consumer(cluster, "bookkeepers", "ledger", **explicit) for _ in range(3)]
    try:
        accepted, held = _accept_part(consumers, len(values), 25)
        assert sorted(held) == sorted(values)
        cluster.broker(leader).kill9()
        survivors = {1, 2, 3} - {leader}
        wait_until(lambda: set(_led(cluster, "ledger").values()) <= survivors,
                   LEASE_MS / 1000 * 10, "another leader")
    finally:
        _close(consumers)  # what they hold unaccepted is released (or died with the leader)
    after = [_consumer(cluster, "bookkeepers", "ledger") for _ in range(3)]
    try:
        again = _drain(after, len(values) - len(accepted), 40)
    finally:
        _close(after)
    assert sorted(m.value() for m in again) == sorted(set(values) - set(accepted))
    assert all(m.delivery_count() >= 1 for m in again)


def test_the_share_coordinator_killed_the_members_rejoin_the_next_and_go_on(share_cluster):
    cluster = share_cluster
    group = "rejoiners"
    found = _topic(cluster, "rejoin", group, 3)
    coordinator = wait_until(lambda: _coordinator(cluster, group), 20, "a coordinator")
    consumers = [_consumer(cluster, group, "rejoin") for _ in range(3)]
    try:
        first = [f"a{i}".encode() for i in range(60)]
        _produce(cluster, "rejoin", first)
        got = _drain(consumers, len(first), 30, settle=0.5)
        assert sorted(m.value() for m in got) == sorted(first)
        cluster.broker(coordinator).kill9()
        wait_until(lambda: _coordinator(cluster, group) not in (None, coordinator), 20,
                   "another coordinator")
        wait_until(lambda: coordinator not in _led(cluster, "rejoin").values(),
                   LEASE_MS / 1000 * 10, "the dead broker's partitions led by others")
        second = [f"b{i}".encode() for i in range(60)]
        _produce(cluster, "rejoin", second)
        got = _drain(consumers, len(second), 60)
        values = [m.value() for m in got]
        assert not set(values) & set(first), "accepted records delivered again"
        assert sorted(values) == sorted(second)
    finally:
        _close(consumers)
    assert found


def _topic_id(cluster: CoterieCluster, name: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tid = admin.describe_topics(TopicCollection([name]))[name].result(15).topic_id
    high = tid.get_most_significant_bits() & (1 << 64) - 1
    low = tid.get_least_significant_bits() & (1 << 64) - 1
    return uuid.UUID(int=high << 64 | low)


def _join(cluster: CoterieCluster, group: str, topic: str) -> None:
    """A member of `group` subscribed to `topic`, joined at the group's coordinator (a raw
    ShareGroupHeartbeat; it stays a member for the session timeout): share partitions are
    set up only for a share group subscribed to their topic."""
    from coterie.wire.build import build
    from coterie.wire.codec import request_schema
    from tests.kafka_raw import RawConnection

    node = wait_until(lambda: _coordinator(cluster, group), 20, "a coordinator")
    b = cluster.broker(node)
    with RawConnection(b.host, b.port) as conn:
        joined = conn.request(build(request_schema(76, 1), {
            "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
            "rack_id": None, "subscribed_topic_names": [topic]}))
    assert joined.error_code == ErrorCode.none, joined.error_message


def test_a_broker_that_lost_a_partition_writes_nothing_and_reloads_it_when_it_leads_again(
        share_cluster):
    """A leads the partition, B takes it over (A paused past its lease), A takes it back:
    A, deposed, answers NOT_LEADER_OR_FOLLOWER and changes nothing, and A, leading again,
    serves the state B left in the database, not the one it had cached."""
    cluster = share_cluster
    group = "returners"
    (a,) = _topic(cluster, "comeback", group, 1).values()
    topic_id = _topic_id(cluster, "comeback")
    _join(cluster, group, "comeback")
    _produce(cluster, "comeback", [f"c{i}".encode() for i in range(30)], partition=0)
    m1 = Member(cluster.broker(a), group, topic_id)
    try:
        assert _offsets(_acquired(m1.fetch(max_wait_ms=5000))) == list(range(30))
        accepted = m1.acknowledge([(0, 29, [ACCEPT])])
        assert _partition(accepted).error_code == ErrorCode.none
        # A's cache: 0-29 accepted, nothing held (no lock whose expiry would drop it). A is
        # paused past its lease: B takes the partition and loads the state, 30-49 are
        # produced there, m2 accepts 30-39 and holds 40-49.
        cluster.pause(a)
        try:
            b = _leader_of(cluster, "comeback", lambda node: node != a, LEASE_MS / 1000 * 10)
            _produce(cluster, "comeback", [f"c{i}".encode() for i in range(30, 50)],
                     partition=0)
            m2 = Member(cluster.broker(b), group, topic_id)
            try:
                assert _offsets(_acquired(m2.fetch(max_wait_ms=5000))) == list(range(30, 50))
                assert _partition(m2.acknowledge([(30, 39, [ACCEPT])])).error_code == \
                    ErrorCode.none
            finally:
                m2.close()
        finally:
            cluster.resume(a)
        # Awake, A no longer leads: m1's ShareFetch there is refused, nothing acquired.
        late = _partition(m1.fetch())
        assert late.error_code == ErrorCode.not_leader_or_follower, late
        assert not late.acquired_records
    finally:
        m1.close()
    # A takes its partition back (rendezvous hashing gives it to A again) at a new epoch:
    # 0-39 are accepted, 40-49 were only held on B (locks do not survive a leader change).
    _leader_of(cluster, "comeback", lambda node: node == a, 30)
    m3 = Member(cluster.broker(a), group, topic_id)
    try:
        again = _acquired(m3.fetch(max_wait_ms=5000))
        assert _offsets(again) == list(range(40, 50)), again
    finally:
        m3.close()


def test_share_consumers_go_on_when_their_leader_is_paused_past_its_lease(share_cluster):
    """The leader paused (SIGSTOP) past its lease with share fetches waiting on it: awake,
    it answers them NOT_LEADER_OR_FOLLOWER, writes nothing, and the consumers go on with
    whoever leads the partition. Nothing accepted is delivered again, nothing is lost.

    Records produced while another broker led are delivered at least once: librdkafka may
    acquire some there in the background, and when the partition goes back to its first
    leader those acquisitions (never written: Kafka does not write them either) are gone
    and the records delivered again, with the same delivery count (docs/share-partitions.md,
    "a delivery cut short by a restart is not counted"). Records produced once the
    leadership settled are delivered exactly once."""
    cluster = share_cluster
    group = "sleepers"
    (a,) = _topic(cluster, "drowsy", group, 1).values()
    consumers = [_consumer(cluster, group, "drowsy", **{"socket.timeout.ms": "10000"})
                 for _ in range(2)]
    try:
        first = [f"d{i}".encode() for i in range(30)]
        _produce(cluster, "drowsy", first, partition=0)
        got = _drain(consumers, len(first), 30, settle=0.5)
        assert sorted(m.value() for m in got) == sorted(first)
        cluster.pause(a)
        try:
            _leader_of(cluster, "drowsy", lambda node: node != a, LEASE_MS / 1000 * 10)
            second = [f"e{i}".encode() for i in range(30)]
            _produce(cluster, "drowsy", second, partition=0)
        finally:
            cluster.resume(a)
        wait_until(lambda: "no longer leads drowsy-0" in cluster.broker(a).log_text(), 30,
                   "the paused broker giving the partition up")
        _leader_of(cluster, "drowsy", lambda node: node == a, 30)  # back on its first leader
        got = _drain(consumers, len(second), 60)
        values = {m.value() for m in got}
        assert values == set(second), (len(values), sorted(values))
        third = [f"f{i}".encode() for i in range(30)]
        _produce(cluster, "drowsy", third, partition=0)
        got = _drain(consumers, len(third), 60)
        values = [m.value() for m in got]
        assert not set(values) & set(first), "accepted records delivered again"
        assert sorted(v for v in values if v in set(third)) == sorted(third)
    finally:
        _close(consumers)


def test_kafka_share_groups_deletes_offsets_the_leader_is_another_broker(share_cluster):
    """`kafka-share-groups --delete-offsets` goes to the group's coordinator, which deletes
    the stored share state; the partition is led by another broker. The group's next member
    starts afresh (share.auto.offset.reset earliest: every record again), not from the
    leader's copy of the state before the deletion."""
    cluster = share_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("wipe", 1, 1)])["wipe"].result(30)
    (leader,) = _led(cluster, "wipe").values()
    group = next((g for g in (f"wipers-{i}" for i in range(30))
                  if wait_until(lambda g=g: _coordinator(cluster, g), 20, "a coordinator")
                  != leader), None)
    assert group is not None, "every candidate group is coordinated by the leader"
    (future,) = admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])]).values()
    future.result(10)
    values = [f"w{i}".encode() for i in range(8)]
    _produce(cluster, "wipe", values, partition=0)
    c = _consumer(cluster, group, "wipe", **{"share.acknowledgement.mode": "explicit"})
    try:
        accepted, _ = _accept_part([c], len(values), 5)
    finally:
        c.close()  # the rest released; the group is empty now
    assert len(accepted) == 5
    deleted = kafka_tool(SHARE_GROUP_COMMAND, cluster.bootstrap, "--delete-offsets",
                         "--group", group, "--topic", "wipe")
    assert "uccessful" in deleted, deleted
    again = _consumer(cluster, group, "wipe")
    try:
        got = _drain([again], len(values), 30)
    finally:
        again.close()
    assert sorted(m.value() for m in got) == sorted(values)


def _alter(cluster: CoterieCluster, coordinator: int, group: str, topic: str,
           start_offset: int) -> Any:
    """AlterShareGroupOffsets of partition 0 to `start_offset`, sent to `coordinator`;
    retried while the group still has the member that just left (NON_EMPTY_GROUP)."""
    from kio.schema.alter_share_group_offsets.v0.request import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsRequestPartition,
        AlterShareGroupOffsetsRequestTopic,
    )

    from tests.kafka_raw import RawConnection

    b = cluster.broker(coordinator)
    request = AlterShareGroupOffsetsRequest(group_id=group, topics=(
        AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(
            AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                   start_offset=start_offset),)),))

    def attempt():
        with RawConnection(b.host, b.port) as conn:
            answer = conn.request(request)
        return None if answer.error_code == ErrorCode.non_empty_group else answer
    return wait_until(attempt, 30, "the group to be empty")


def test_share_offsets_altered_through_a_coordinator_not_leading_the_partition(share_cluster):
    """AlterShareGroupOffsets goes to the group's coordinator, here not the partition's
    leader: the coordinator writes the new start offset with the next state epoch, and the
    group's next member starts there (rewound: records accepted before come again)."""
    cluster = share_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("rewind", 1, 1)])["rewind"].result(30)
    (leader,) = _led(cluster, "rewind").values()
    group, coordinator = next(((g, c) for g, c in (
        (g, wait_until(lambda g=g: _coordinator(cluster, g), 20, "a coordinator"))
        for g in (f"rewinders-{i}" for i in range(30))) if c != leader), (None, None))
    assert group is not None, "every candidate group is coordinated by the leader"
    (future,) = admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])]).values()
    future.result(10)
    values = [f"r{i}".encode() for i in range(10)]
    _produce(cluster, "rewind", values, partition=0)
    first = _consumer(cluster, group, "rewind")
    try:
        assert sorted(m.value() for m in _drain([first], len(values), 30)) == sorted(values)
    finally:
        first.close()
    answer = _alter(cluster, coordinator, group, "rewind", 3)
    assert answer.error_code == ErrorCode.none, answer
    ((partition,),) = [t.partitions for t in answer.responses]
    assert partition.error_code == ErrorCode.none, partition
    again = _consumer(cluster, group, "rewind")
    try:
        got = _drain([again], len(values) - 3, 30)
    finally:
        again.close()
    assert sorted(m.value() for m in got) == sorted(values[3:])
