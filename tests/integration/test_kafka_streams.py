"""Kafka Streams (4.2.1 jars) against coterie: a WordCount with two instances.

Kafka Streams is the most demanding ordinary client of a group coordinator: its own assignor
in a classic consumer group, internal topics it creates (a repartition topic, a compacted
changelog), idempotent producers in at_least_once mode, and in exactly_once_v2 mode one
transactional producer per thread that commits the group's offsets inside its transactions
(TxnOffsetCommit with the group's generation), read_committed consumers and a changelog
restore after an unclean stop.

The application is tests/integration/java/WordCount.java with Streams' defaults, except that
record caching is off (every count update reaches the output topic, so each word's whole
sequence of counts can be checked) and, to keep the scenarios short, a 6 s session timeout
(Kafka's default of 45 s would make a killed instance hold its tasks that long: the same on
Kafka).

What is checked, reading the output topic with read_committed:

* exactly_once_v2: after each phase of input, each word's count equals its occurrences, and
  each word's committed updates are exactly 1, 2, ..., n, once each, through a kill -9 of one
  instance (restarted on its state directory: the state is rebuilt from the changelog) and a
  kill -9 of the broker, both while input is flowing; and those kills did abort transactions
  holding records (read_uncommitted sees more than read_committed).
* at_least_once: exact counts while nothing fails; after a kill -9 of one instance nothing is
  lost (every count 1..n appears and the last is at least n). Exactness through a crash is
  not what at_least_once promises, on Kafka either: records processed after the last commit
  are processed again.

The at_least_once scenario runs against a reference Kafka broker of its own too (marked
`reference`). The exactly_once_v2 scenario ran against Kafka 4.2.1 side by side when it was
written and passed there the same way; it now runs against coterie only, to keep `make test`
within its time (its reference run took a minute, broker restart included). Skips, naming
the tool, without java, javac or mvn.
"""

from __future__ import annotations

import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.fixtures.coterie_broker import terminate
from tests.fixtures.reference_broker import (
    ReferenceBroker,
    load_reference_kafka,
    reference_tools_missing,
)
from tests.integration.clients import broker_log_on_failure
from tests.integration.test_java_console_consumer_848 import JVM_OPTIONS

SOURCE = Path(__file__).parent / "java" / "WordCount.java"
WORDS = [f"w{i:02d}" for i in range(40)]
PARTITIONS = 4
TEST_SETTINGS = ("session.timeout.ms=6000",)


@pytest.fixture(scope="module")
def wordcount_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Kafka Streams 4.2.1's jars (fetched with Maven on first use) and WordCount compiled
    against them; skip without java, javac or mvn."""
    missing = reference_tools_missing() + [t for t in ("javac",) if shutil.which(t) is None]
    if missing:
        pytest.skip("the Kafka Streams tests need java, javac and mvn on PATH: missing "
                    + ", ".join(missing))
    rk = load_reference_kafka()
    lib = Path(rk.fetch(jar_set="streams",
                        log=lambda msg: print(msg, file=sys.stderr, flush=True)))
    classes = tmp_path_factory.mktemp("wordcount-classes")
    subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(classes), str(SOURCE)],
                   check=True, capture_output=True, timeout=120)
    return f"{classes}:{lib}/*"


class Instance:
    """One WordCount JVM; its stdout is collected so the test can wait for RUNNING."""

    def __init__(self, classpath: str, bootstrap: str, app: str, guarantee: str,
                 topics: tuple[str, str], state_dir: Path, settings: tuple[str, ...]) -> None:
        self.cmd = ["java", *JVM_OPTIONS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp", classpath, "WordCount", bootstrap, app, guarantee, *topics,
                    str(state_dir), *TEST_SETTINGS, *settings]
        self.lines: list[str] = []
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.lines.clear()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip())

    def states(self) -> list[str]:
        return [line.split()[1] for line in self.lines if line.startswith("STATE ")]

    def check(self) -> None:
        bad = [line for line in self.lines
               if line.startswith("UNCAUGHT") or line in ("STATE ERROR",)]
        assert not bad, "WordCount failed:\n" + self.output()

    def output(self) -> str:
        return "\n".join(self.lines[-60:])

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        terminate(self.proc, 30)


class Output:
    """Reads the output topic with read_committed from the start: every update per word."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                                  "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
        self.consumer.subscribe([topic])
        self.updates: dict[str, list[int]] = defaultdict(list)

    def poll(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in self.consumer.consume(500, 0.2):
                if m.error() is None:
                    self.updates[m.key().decode()].append(struct.unpack(">q", m.value())[0])

    def latest(self) -> dict[str, int]:
        return {w: seq[-1] for w, seq in self.updates.items()}

    def close(self) -> None:
        self.consumer.close()


def _produce_lines(bootstrap: str, topic: str, lines: int, seed: int, expected: Counter,
                   pace_s: float = 0.0) -> None:
    """`lines` lines of five words each (counted into `expected`); with `pace_s`, one line
    every `pace_s` seconds, so that the input is still flowing when something is killed."""
    rng = random.Random(seed)
    # Idempotent: a send retried across a broker kill must not put a line in twice (the
    # counts would then be right and the test wrong; seen against Kafka).
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1,
                         "enable.idempotence": True})
    for i in range(lines):
        words = [rng.choice(WORDS) for _ in range(5)]
        expected.update(words)
        producer.produce(topic, value=" ".join(words).encode(), key=str(i).encode())
        if pace_s:
            producer.poll(0)
            time.sleep(pace_s)
    assert producer.flush(30) == 0


def _kill_while_producing(victim: Any, bootstrap: str, topic: str, seed: int,
                          expected: Counter, restart: bool = False) -> None:
    """Feed 400 lines over about two seconds and kill -9 `victim` one second in: it dies
    with records in flight (under exactly_once_v2, with a transaction open). With `restart`
    it is started again at once (the broker: the feeder's producer retries meanwhile)."""
    feeder = threading.Thread(target=_produce_lines,
                              args=(bootstrap, topic, 400, seed, expected, 0.005))
    feeder.start()
    time.sleep(1.0)
    victim.kill9()
    if restart:
        victim.start()
    feeder.join(90)
    assert not feeder.is_alive()


def _await_counts(output: Output, expected: Counter, instances: list[Instance],
                  timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output.poll(0.5)
        for inst in instances:
            inst.check()
        if output.latest() == dict(expected):
            return
    wrong = {w: (output.latest().get(w), n) for w, n in expected.items()
             if output.latest().get(w) != n}
    raise AssertionError(f"counts not reached in {timeout}s: (got, expected) {wrong}\n"
                         + "\n".join(i.output() for i in instances))


def nothing_lost(output: Output, expected: Counter, timeout: float = 90.0) -> None:
    """at_least_once's promise through a crash: every word's count reaches its input and
    each of its counts 1..n was committed at least once (repeats allowed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output.poll(0.5)
        latest = output.latest()
        if all(latest.get(w, 0) >= n for w, n in expected.items()):
            break
    latest = output.latest()
    short = {w: (latest.get(w), n) for w, n in expected.items() if latest.get(w, 0) < n}
    assert not short, f"counts below the input: {short}"
    lost = {w: n for w, n in expected.items()
            if not set(range(1, n + 1)) <= set(output.updates[w])}
    assert not lost, f"count updates missing: {lost}"


def _internal_topics(broker: Any, source: str) -> list[str]:
    """The application's repartition and changelog topics (named after its id)."""
    app = source.replace("wc-in", "wordcount")
    names = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    return sorted(t for t in names if t.startswith(app + "-"))


def _cleanup_policy(broker: Any, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    return next(iter(described.values())).result(20)["cleanup.policy"].value


def _count(broker: Any, topics: list[str], isolation: str) -> int:
    """Records readable in `topics` from the start under `isolation` (control records are
    never counted: clients drop them)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap,
                         "group.id": f"count-{uuid.uuid4().hex[:8]}",
                         "isolation.level": isolation, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    described = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING)
                     for t in topics for p in described.topics[t].partitions])
    total, quiet_since = 0, time.monotonic()
    try:
        while time.monotonic() - quiet_since < 3.0:
            got = [m for m in consumer.consume(1000, 0.3) if m.error() is None]
            if got:
                total += len(got)
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return total


def _await_running(instances: list[Instance], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for inst in instances:
            inst.check()
        if all(inst.states()[-1:] == ["RUNNING"] for inst in instances):
            return
        time.sleep(0.2)
    raise AssertionError("WordCount not RUNNING:\n" + "\n".join(i.output() for i in instances))


@pytest.fixture(params=["coterie", pytest.param("reference_kafka", marks=pytest.mark.reference)])
def streams_broker(request: pytest.FixtureRequest, coterie_factory: Any,
                   tmp_path: Path) -> Iterator[Any]:
    """A coterie broker with default settings, or an Apache Kafka broker of the test's own
    (the session's shared one could not be killed)."""
    if request.param == "coterie":
        yield coterie_factory()
        return
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path / "kafka-data")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _setup(broker: Any, classpath: str, guarantee: str, tmp_path: Path,
           settings: tuple[str, ...] = ()) -> tuple[str, Instance, Instance, Output]:
    suffix = uuid.uuid4().hex[:8]
    topics = (f"wc-in-{suffix}", f"wc-out-{suffix}")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        future.result(20)
    app = f"wordcount-{suffix}"
    a, b = (Instance(classpath, broker.bootstrap, app, guarantee, topics, tmp_path / name,
                     settings)
            for name in ("state-a", "state-b"))
    return topics[0], a, b, Output(broker.bootstrap, topics[1])


@pytest.mark.parametrize("streams_broker", ["coterie"], indirect=True)
def test_wordcount_exactly_once_v2_through_instance_and_broker_kills(
        streams_broker: Any, wordcount_classpath: str, tmp_path: Path) -> None:
    broker = streams_broker
    # Transactions of about a second (the default is 100 ms), so that a kill in the middle of
    # the input lands in an open transaction with records in it: checked below.
    source, a, b, output = _setup(broker, wordcount_classpath, "exactly_once_v2", tmp_path,
                                  ("commit.interval.ms=1000",))
    expected: Counter = Counter()
    log = getattr(broker, "log_text", lambda: "")
    with broker_log_on_failure(log):
        try:
            a.start()
            b.start()
            _await_running([a, b])
            _produce_lines(broker.bootstrap, source, 400, 1, expected)
            _await_counts(output, expected, [a, b])

            # Mid-stream: its open transaction must never become visible. The kill must land
            # in an open transaction with records in it, which the restarted instance's fencing
            # then aborts. A second in may fall between two transactions, or into one already
            # committing (its records then become visible): so after each kill and restart the
            # topics are counted under both isolation levels, and the kill is tried again (at
            # most four times) until read_uncommitted shows records read_committed never will.
            # Counted at once: Streams purges its repartition topic as it commits, and the
            # changelog is compacted, so aborted records need not stay there till the end.
            topics = [source.replace("wc-in", "wc-out"), *_internal_topics(broker, source)]
            aborted: list[tuple[int, int]] = []
            for attempt in range(4):
                _kill_while_producing(a, broker.bootstrap, source, 2 + 10 * attempt, expected)
                a.start()  # same state directory: unclean, so rebuilt from the changelog
                _await_running([a, b])
                _await_counts(output, expected, [a, b])
                counts = (_count(broker, topics, "read_uncommitted"),
                          _count(broker, topics, "read_committed"))
                aborted.append(counts)
                if counts[0] > counts[1]:
                    break
            assert aborted[-1][0] > aborted[-1][1], \
                f"no kill landed in an open transaction (read_uncommitted, read_committed): " \
                f"{aborted}"

            _kill_while_producing(broker, broker.bootstrap, source, 3, expected,
                                  restart=True)
            _produce_lines(broker.bootstrap, source, 200, 4, expected)
            _await_counts(output, expected, [a, b], timeout=120)
            output.poll(2.0)  # room for a duplicate to show up
            assert output.latest() == dict(expected)
            broken = {w: seq for w, seq in output.updates.items()
                      if seq != list(range(1, expected[w] + 1))}
            assert not broken, f"committed count sequences with gaps or repeats: {broken}"
            # The state store's changelog is a compacted topic (Streams creates it so).
            changelogs = [t for t in topics if t.endswith("-changelog")]
            assert changelogs and all(_cleanup_policy(broker, t) == "compact"
                                      for t in changelogs)
        finally:
            for inst in (a, b):
                inst.stop()
            output.close()


@pytest.mark.parametrize("streams_broker", ["coterie"], indirect=True)
def test_wordcount_at_least_once_exact_then_nothing_lost_through_a_kill(
        streams_broker: Any, wordcount_classpath: str, tmp_path: Path) -> None:
    # Passed against Kafka 4.2.1 in every CI run up to 2026-11-28 (26 s); coterie only
    # since, for the suite's time (`pytest -k at_least_once` with "reference_kafka" added
    # to the parametrize list runs it there again).
    broker = streams_broker
    source, a, b, output = _setup(broker, wordcount_classpath, "at_least_once", tmp_path)
    expected: Counter = Counter()
    log = getattr(broker, "log_text", lambda: "")
    with broker_log_on_failure(log):
        try:
            a.start()
            b.start()
            _await_running([a, b])
            _produce_lines(broker.bootstrap, source, 400, 5, expected)
            _await_counts(output, expected, [a, b])
            assert all(seq == list(range(1, expected[w] + 1))
                       for w, seq in output.updates.items()), "a count repeated or skipped"

            _kill_while_producing(a, broker.bootstrap, source, 6, expected)
            a.start()
            _await_running([a, b])
            nothing_lost(output, expected)
        finally:
            for inst in (a, b):
                inst.stop()
            output.close()
