"""Share groups with real clients (KIP-932): confluent-kafka's ShareConsumer (librdkafka's
share consumer) against a real broker. More consumers than partitions all get records, each
record is delivered once when everyone accepts, released records come back with a higher
delivery count, a consumer killed holding records loses them to the others, and a broker
killed with -9 gives back nothing accepted and loses nothing unaccepted."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.fixtures.reference_broker import (
    kafka_tool,
    load_reference_kafka,
    reference_tools_missing,
)
from tests.integration.test_java_console_consumer_848 import JVM_OPTIONS

LOCK_MS = 2000
SHARE_CONFIG = {"group.share.record.lock.duration.ms": str(LOCK_MS),
                "group.share.min.record.lock.duration.ms": "1000"}


@pytest.fixture
def share_broker(coterie_factory):
    return coterie_factory(config=SHARE_CONFIG)


@pytest.fixture(params=["coterie", pytest.param("reference_kafka",
                                                marks=pytest.mark.reference)])
def any_broker(request: pytest.FixtureRequest):
    """A coterie broker, or the session's Kafka 4.2.1 broker (the same scenario on both)."""
    if request.param == "coterie":
        return request.getfixturevalue("coterie_factory")(config=SHARE_CONFIG)
    return request.getfixturevalue(request.param)


def _topic(broker, name: str, group: str, partitions: int = 1) -> None:
    """A topic, and `group` reading it from the start (share.auto.offset.reset)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    (future,) = admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])]).values()
    future.result(10)


def _produce(broker, topic: str, values: list[bytes], one_batch_each: bool = False) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, v)
        if one_batch_each:
            p.flush(10)
    assert p.flush(10) == 0


def _consumer(broker, group: str, topic: str, **extra: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **extra})
    c.subscribe([topic])
    return c


def _records(consumer: ShareConsumer, timeout: float = 0.5) -> list:
    return [m for m in consumer.poll(timeout) or () if m.error() is None]


def test_three_consumers_on_one_partition_share_it_and_get_each_record_once(share_broker):
    broker = share_broker
    _topic(broker, "jobs", "workers")
    consumers = [_consumer(broker, "workers", "jobs", **{"max.poll.records": "3"})
                 for _ in range(3)]
    seen: list[list[bytes]] = [[], [], []]
    stop = threading.Event()

    def work(i: int) -> None:
        while not stop.is_set():
            for m in _records(consumers[i], 0.2):
                seen[i].append(m.value())
                time.sleep(0.01)  # some work per record: the others get their turn

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(3)  # all three in the group and waiting
        values = [f"job-{i}".encode() for i in range(90)]
        _produce(broker, "jobs", values, one_batch_each=True)
        deadline = time.monotonic() + 30
        while sum(map(len, seen)) < len(values) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # anything delivered twice would show now
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in consumers:
            c.close()
    got = [v for s in seen for v in s]
    assert sorted(got) == sorted(values)  # every record, each exactly once
    assert all(seen), [len(s) for s in seen]  # more consumers than partitions: all got some


def test_released_records_come_back_with_a_higher_delivery_count(share_broker):
    broker = share_broker
    _topic(broker, "retry", "retriers")
    _produce(broker, "retry", [b"a", b"b", b"c"])
    c = _consumer(broker, "retriers", "retry", **{"share.acknowledgement.mode": "explicit"})
    try:
        first: list = []
        deadline = time.monotonic() + 20
        while len(first) < 3 and time.monotonic() < deadline:
            batch = _records(c)
            for m in batch:
                c.acknowledge(m, AcknowledgeType.RELEASE)
            first += batch
        assert [m.value() for m in first] == [b"a", b"b", b"c"]
        assert {m.delivery_count() for m in first} == {1}
        c.commit_sync()
        again: list = []
        deadline = time.monotonic() + 20
        while len(again) < 3 and time.monotonic() < deadline:
            batch = _records(c)
            for m in batch:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            again += batch
        c.commit_sync()
        assert [m.value() for m in again] == [b"a", b"b", b"c"]
        assert {m.delivery_count() for m in again} == {2}
    finally:
        c.close()


_HOLDER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    held = 0
    while held < int(sys.argv[4]):
        held += len([m for m in c.poll(0.5) or () if m.error() is None])
    print("holding", held, flush=True)
    time.sleep(600)
""")


def test_a_consumer_killed_holding_records_loses_them_to_the_others(share_broker):
    broker = share_broker
    _topic(broker, "held", "holders")
    values = [f"h{i}".encode() for i in range(5)]
    _produce(broker, "held", values)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, broker.bootstrap, "holders",
                               "held", str(len(values))], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["holding", str(len(values))]
        other = _consumer(broker, "holders", "held")
        try:
            assert _records(other, 1.0) == []  # all held by the other process
            holder.kill()
            holder.wait(10)
            got: list = []
            deadline = time.monotonic() + LOCK_MS / 1000 + 15
            while len(got) < len(values) and time.monotonic() < deadline:
                got += _records(other)
            assert sorted(m.value() for m in got) == values
            assert {m.delivery_count() for m in got} == {2}
        finally:
            other.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def test_a_broker_killed_gives_back_nothing_accepted_and_loses_nothing(share_broker):
    broker = share_broker
    _topic(broker, "ledger", "bookkeepers")
    values = [f"e{i}".encode() for i in range(10)]
    _produce(broker, "ledger", values)
    c = _consumer(broker, "bookkeepers", "ledger", **{"share.acknowledgement.mode": "explicit"})
    accepted: list[bytes] = []
    try:
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < len(values) and time.monotonic() < deadline:
            got += _records(c)
        assert len(got) == len(values)
        for m in got[:6]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            accepted.append(m.value())
        c.commit_sync()  # six accepted, durably; four still held
    finally:
        broker.restart_after_kill9()
        c.close()
    after = _consumer(broker, "bookkeepers", "ledger")
    try:
        again: list = []
        deadline = time.monotonic() + 30
        while len(again) < len(values) - len(accepted) and time.monotonic() < deadline:
            again += _records(after)
        time.sleep(1)
        again += _records(after)
        assert sorted(m.value() for m in again) == sorted(set(values) - set(accepted))
    finally:
        after.close()


SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def _tool_rows(out: str, group: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.startswith(group + " ")]


def test_kafka_share_groups_describes_resets_and_deletes_share_offsets(any_broker):
    """`kafka-share-groups.sh` (Kafka 4.2.1's ShareGroupCommand), side by side on coterie and
    Kafka 4.2.1: --describe shows each partition's start offset and lag, --reset-offsets
    moves it (the group empty), and --delete-offsets drops the group's state on a topic."""
    broker = any_broker
    suffix = uuid.uuid4().hex[:6]
    tally, counters = f"tally-{suffix}", f"counters-{suffix}"
    _topic(broker, tally, counters)
    _produce(broker, tally, [f"t{i}".encode() for i in range(8)])
    c = _consumer(broker, counters, tally, **{"share.acknowledgement.mode": "explicit"})
    try:
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 8 and time.monotonic() < deadline:
            got += _records(c)
        for m in got[:5]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
    finally:
        c.close()  # the rest released; the group is empty now
    described = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--describe", "--group",
                           counters)
    # GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET LAG
    rows = _tool_rows(described, counters)
    assert len(rows) == 1, described
    (row,) = rows
    assert row[1:3] == [tally, "0"] and row[-2:] == ["5", "3"], described
    reset = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--reset-offsets", "--group",
                       counters, "--topic", tally, "--to-earliest", "--execute")
    assert any(r[-1] == "0" for r in _tool_rows(reset, counters)), reset
    again = _consumer(broker, counters, tally)
    try:
        redone: list = []
        deadline = time.monotonic() + 20
        while len(redone) < 8 and time.monotonic() < deadline:
            redone += _records(again)
        assert sorted(m.value() for m in redone) == sorted(f"t{i}".encode() for i in range(8))
    finally:
        again.close()
    deleted = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--delete-offsets", "--group",
                         counters, "--topic", tally)
    assert "Successful" in deleted or "successful" in deleted, deleted
    described = kafka_tool(SHARE_GROUP_COMMAND, broker.bootstrap, "--describe", "--group",
                           counters)
    assert all(r[2] != "0" or r[-2] == "-" for r in _tool_rows(described, counters)), described


SHARE_CONSUME = Path(__file__).parent / "java" / "ShareConsume.java"


def test_kafka_share_consumers_read_every_record_once(any_broker, tmp_path: Path) -> None:
    """Kafka 4.2.1's KafkaShareConsumer, two in one share group on a two-partition topic,
    side by side on coterie and on Kafka 4.2.1: every record read, none twice, both
    consumers busy."""
    broker = any_broker
    missing = reference_tools_missing() + [t for t in ("javac",) if shutil.which(t) is None]
    if missing:
        pytest.skip("the Java share consumer test needs java, javac and mvn on PATH: "
                    "missing " + ", ".join(missing))
    lib = Path(load_reference_kafka().fetch(
        log=lambda msg: print(msg, file=sys.stderr, flush=True)))
    subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(tmp_path), str(SHARE_CONSUME)],
                   check=True, capture_output=True, timeout=120)
    topic, group = f"java-share-{uuid.uuid4().hex[:6]}", f"java-sharers-{uuid.uuid4().hex[:6]}"
    _topic(broker, topic, group, partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(60):
        p.produce(topic, f"m{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0
    done = subprocess.run(
        ["java", *JVM_OPTIONS, "-cp", f"{tmp_path}:{lib}/*", "ShareConsume", broker.bootstrap,
         group, topic, "2", "60", "60"], capture_output=True, timeout=150)
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 0, out + done.stderr.decode(errors="replace")[-3000:]
    words = out.split()
    assert words[:4] == ["DISTINCT", "60", "TWICE", "0"], out
    each = [int(n) for n in words[5:7]]
    assert sum(each) == 60 and all(each), out
