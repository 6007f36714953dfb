"""Apache Kafka's own Java console consumer, on the consumer group protocol (KIP-848,
group.protocol=consumer), against a coterie broker.

librdkafka and coterie's client are not the only KIP-848 clients: the Java consumer is the
reference one, and it is the client most Kafka users meet first through
`kafka-console-consumer.sh`. Here the ConsoleConsumer class from Kafka 4.2.1's tools jar runs
in a JVM against coterie:

* alone in a group with --max-messages N: it prints every produced record exactly once, exits
  0, and afterwards the group's committed offsets equal the end offsets and the admin APIs show
  an empty consumer-type group;
* two at once in one group: once ConsumerGroupDescribe shows the partitions split between them,
  records are produced; each prints only its own partitions, and together they print every
  record exactly once (each exits 0 after an idle --timeout-ms).

The jars come from the reference broker's Maven cache (scripts/reference_kafka.py); the test
skips, naming what is missing, when `java` or `mvn` is not on PATH.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
)
from confluent_kafka.admin import AdminClient

from tests.fixtures.coterie_broker import CoterieBroker
from tests.fixtures.reference_broker import (
    REFERENCE_GROUP_SETTINGS,
    load_reference_kafka,
    reference_tools_missing,
)
from tests.integration.clients import Record, create_topics, expected_end_offsets, produce
from tests.integration.group_clients import confluent_describe

CONSOLE_CONSUMER_MAIN = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PARTITIONS = 6
RECORDS = 300
# Short JVM start: client mode JIT only, a small heap, the serial collector.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# The client's own log goes to stderr (WARN and up), so stdout carries only records.
LOG4J2_PROPERTIES = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""
# "Partition:3<TAB>Offset:17<TAB>key-0042<TAB>value-0042"
LINE = re.compile(r"^Partition:(\d+)\tOffset:(\d+)\t(\S+)\t(\S+)$")


@dataclass(frozen=True, slots=True)
class Printed:
    """One record as the console consumer printed it."""

    partition: int
    offset: int
    key: str
    value: str


@pytest.fixture(scope="module")
def kafka_lib() -> Path:
    """Kafka 4.2.1's jars (fetched with Maven on first use); skip without java or mvn."""
    missing = reference_tools_missing()
    if missing:
        pytest.skip("the Java console consumer needs java and mvn on PATH: missing "
                    + ", ".join(missing))
    rk = load_reference_kafka()
    return Path(rk.fetch(log=lambda msg: print(msg, file=sys.stderr, flush=True)))


@pytest.fixture
def broker(coterie_factory: Callable[..., CoterieBroker]) -> CoterieBroker:
    """coterie with a 6 s consumer-group session and 500 ms heartbeats (as the reference
    broker in tests), so the group settles quickly."""
    return coterie_factory(config=dict(REFERENCE_GROUP_SETTINGS))


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class ConsoleConsumer:
    """One `ConsoleConsumer` JVM; stdout and stderr go to files (no pipe can fill up)."""

    def __init__(self, lib: Path, workdir: Path, label: str, bootstrap: str, topic: str,
                 group: str, timeout_ms: int, max_messages: int | None = None) -> None:
        log4j = workdir / "console-consumer-log4j2.properties"
        log4j.write_text(LOG4J2_PROPERTIES)
        self.label = label
        self.out_path = workdir / f"{label}.out"
        self.err_path = workdir / f"{label}.err"
        cmd = ["java", *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}",
               "-cp", f"{lib}/*", CONSOLE_CONSUMER_MAIN,
               "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
               "--command-property", "group.protocol=consumer",
               "--command-property", f"client.id={label}",
               "--from-beginning", "--timeout-ms", str(timeout_ms),
               "--formatter-property", "print.key=true",
               "--formatter-property", "print.partition=true",
               "--formatter-property", "print.offset=true"]
        if max_messages is not None:
            cmd += ["--max-messages", str(max_messages)]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"{self.label} still running after {timeout}s\n"
                                 f"{self.stderr()[-4000:]}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def printed(self) -> list[Printed]:
        lines = self.out_path.read_text(errors="replace").splitlines()
        parsed = [LINE.match(line) for line in lines if line.strip()]
        bad = [line for line, m in zip(lines, parsed, strict=False) if m is None]
        assert not bad, f"{self.label}: unexpected output lines {bad[:3]}"
        return [Printed(int(m[1]), int(m[2]), m[3], m[4]) for m in parsed if m is not None]


@pytest.fixture
def consoles(kafka_lib: Path, tmp_path: Path) -> Iterator[Callable[..., ConsoleConsumer]]:
    """Start console consumers; any still running at the end of the test is killed."""
    started: list[ConsoleConsumer] = []

    def start(label: str, bootstrap: str, topic: str, group: str, timeout_ms: int,
              max_messages: int | None = None) -> ConsoleConsumer:
        c = ConsoleConsumer(kafka_lib, tmp_path, label, bootstrap, topic, group, timeout_ms,
                            max_messages)
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


def keyed_records(topic: str) -> list[Record]:
    """RECORDS records with distinct printable keys, spread round-robin over the partitions."""
    now_ms = time.time_ns() // 1_000_000
    return [Record(topic=topic, partition=i % PARTITIONS, key=f"key-{i:04d}".encode(),
                   value=f"value-{i:04d}".encode(), headers=(), timestamp=now_ms)
            for i in range(RECORDS)]


def expected_prints(acked: list[Record]) -> Counter[Printed]:
    return Counter(Printed(r.partition, r.offset, r.key.decode(), r.value.decode())
                   for r in acked)


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                               request_timeout=15)[group]
    result = future.result(timeout=15)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def assert_empty_consumer_group(bootstrap: str, group: str) -> None:
    """ConsumerGroupDescribe and ListGroups both show `group` as an empty consumer group."""
    described = confluent_describe(bootstrap, group)
    assert described.type == ConsumerGroupType.CONSUMER, described
    assert described.state == ConsumerGroupState.EMPTY, described
    assert list(described.members) == []
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups(
        types={ConsumerGroupType.CONSUMER}, request_timeout=15).result(timeout=15).valid}
    assert group in listed, sorted(listed)
    assert listed[group].type == ConsumerGroupType.CONSUMER


def test_console_consumer_reads_every_record_once(broker: CoterieBroker,
                                                  consoles: Callable[..., ConsoleConsumer]
                                                  ) -> None:
    """--max-messages N with N records: all printed once, exit 0, offsets committed."""
    topic, group = _name("java-console"), _name("java-group")
    create_topics(broker.bootstrap, {topic: PARTITIONS})
    acked = produce("confluent", broker.bootstrap, keyed_records(topic))

    console = consoles("solo", broker.bootstrap, topic, group, timeout_ms=30_000,
                       max_messages=RECORDS)
    rc = console.wait(45)
    assert rc == 0, f"exit code {rc}\n{console.stderr()[-4000:]}\n{broker.log_text()[-4000:]}"
    got = Counter(console.printed())
    assert got == expected_prints(acked), (
        f"missing {list((expected_prints(acked) - got).elements())[:5]}, "
        f"extra {list((got - expected_prints(acked)).elements())[:5]}")
    assert f"Processed a total of {RECORDS} messages" in console.stderr()

    ends = expected_end_offsets(acked, {topic: PARTITIONS})
    assert all(n > 0 for n in ends.values())
    assert committed_offsets(broker.bootstrap, group) == ends
    assert_empty_consumer_group(broker.bootstrap, group)


def _split(bootstrap: str, group: str) -> dict[str, frozenset[int]] | None:
    """client.id -> partitions, once the group is Stable with two members whose non-empty
    assignments split every partition between them; else None."""
    try:
        d: Any = confluent_describe(bootstrap, group, timeout=5)
    except Exception:  # the group does not exist yet
        return None
    owned = {m.client_id: frozenset(tp.partition for tp in m.assignment.topic_partitions)
             for m in d.members}
    if d.state != ConsumerGroupState.STABLE or len(owned) != 2:
        return None
    a, b = owned.values()
    if not a or not b or a & b or a | b != set(range(PARTITIONS)):
        return None
    return owned


def test_two_console_consumers_split_the_partitions(broker: CoterieBroker,
                                                    consoles: Callable[..., ConsoleConsumer]
                                                    ) -> None:
    """Two console consumers in one group: once the coordinator has split the partitions
    between them, every record produced is printed exactly once, by its partition's owner."""
    topic, group = _name("java-console2"), _name("java-group2")
    create_topics(broker.bootstrap, {topic: PARTITIONS})
    # The idle timeout must outlast the second JVM's start and the group settling, since the
    # records are produced only after that.
    first = consoles("first", broker.bootstrap, topic, group, timeout_ms=12_000)
    second = consoles("second", broker.bootstrap, topic, group, timeout_ms=12_000)

    deadline = time.monotonic() + 25
    owned = None
    while owned is None and time.monotonic() < deadline:
        for c in (first, second):
            assert c.proc.poll() is None, f"{c.label} exited early\n{c.stderr()[-4000:]}"
        owned = _split(broker.bootstrap, group)
        if owned is None:
            time.sleep(0.2)
    assert owned is not None, (f"the group never split {PARTITIONS} partitions between two "
                               f"members: {confluent_describe(broker.bootstrap, group)}")
    assert set(owned) == {"first", "second"}

    acked = produce("confluent", broker.bootstrap, keyed_records(topic))
    for c in (first, second):
        rc = c.wait(45)
        assert rc == 0, f"{c.label}: exit code {rc}\n{c.stderr()[-4000:]}"

    printed = {c.label: c.printed() for c in (first, second)}
    union = Counter(printed["first"]) + Counter(printed["second"])
    want = expected_prints(acked)
    assert union == want, (f"missing {list((want - union).elements())[:5]}, "
                           f"extra {list((union - want).elements())[:5]}")
    for label, records in printed.items():
        partitions = {p.partition for p in records}
        assert partitions == owned[label], (label, partitions, owned)

    ends = expected_end_offsets(acked, {topic: PARTITIONS})
    assert committed_offsets(broker.bootstrap, group) == ends
    assert_empty_consumer_group(broker.bootstrap, group)
