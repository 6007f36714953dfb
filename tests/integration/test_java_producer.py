"""The Java client's producer with its default settings (idempotence on since Kafka 3.0),
against a coterie broker: Kafka 4.2.1's console producer and producer perf test, as a new
user would try them first.

Before coterie served InitProducerId both failed at once ("The node does not support
INIT_PRODUCER_ID"). Now: every line the console producer reads is stored exactly once, in
order, in batches carrying a producer id, and `kafka-transactions describe-producers` shows
that producer with its last sequence; the perf test sends all its records and exits 0.

The jars come from the reference broker's Maven cache (scripts/reference_kafka.py); the tests
skip, naming what is missing, when `java` or `mvn` is not on PATH.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.fixtures.reference_broker import load_reference_kafka, reference_tools_missing
from tests.integration.clients import consume
from tests.integration.test_data_plane_raw import create, list_offset
from tests.integration.test_idempotent_producer import stored_producers
from tests.integration.test_java_console_consumer_848 import JVM_OPTIONS, LOG4J2_PROPERTIES
from tests.kafka_raw import RawConnection

CONSOLE_PRODUCER_MAIN = "org.apache.kafka.tools.ConsoleProducer"
TRANSACTIONS_MAIN = "org.apache.kafka.tools.TransactionsCommand"
PERF_TEST_MAIN = "org.apache.kafka.tools.ProducerPerformance"
LATEST = -1


@pytest.fixture(scope="module")
def kafka_lib() -> Path:
    """Kafka 4.2.1's jars (fetched with Maven on first use); skip without java or mvn."""
    missing = reference_tools_missing()
    if missing:
        pytest.skip("the Java producer tests need java and mvn on PATH: missing "
                    + ", ".join(missing))
    rk = load_reference_kafka()
    return Path(rk.fetch(log=lambda msg: print(msg, file=sys.stderr, flush=True)))


def _java(lib: Path, workdir: Path, main: str, args: list[str], stdin: bytes = b"",
          timeout: float = 120) -> subprocess.CompletedProcess:
    log4j = workdir / "java-producer-log4j2.properties"
    log4j.write_text(LOG4J2_PROPERTIES)
    cmd = ["java", *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{lib}/*",
           main, *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)


def test_console_producer_with_defaults(coterie, kafka_lib, tmp_path):
    topic = f"console-{uuid.uuid4().hex[:8]}"
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic, 1).error_code == ErrorCode.none
    lines = [f"line-{i:04d}" for i in range(200)]
    done = _java(kafka_lib, tmp_path, CONSOLE_PRODUCER_MAIN,
                 ["--bootstrap-server", coterie.bootstrap, "--topic", topic],
                 stdin="".join(f"{line}\n" for line in lines).encode())
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    got = consume("confluent", coterie.bootstrap, {topic: 1}, len(lines))
    assert [r.value.decode() for r in got.records] == lines  # once each, in order
    with RawConnection(coterie.host, coterie.port) as conn:
        written = stored_producers(conn, topic, 1)
    assert sum(written.values()) == len(lines)
    assert list(written) != [-1] and -1 not in written, written
    # kafka-transactions describe-producers shows the producer and its last sequence.
    (producer_id,) = written
    described = _java(kafka_lib, tmp_path, TRANSACTIONS_MAIN,
                      ["--bootstrap-server", coterie.bootstrap, "describe-producers",
                       "--topic", topic, "--partition", "0"])
    out = described.stdout.decode(errors="replace")
    assert described.returncode == 0, described.stderr.decode(errors="replace")[-3000:]
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == [str(producer_id)]]
    assert rows, out
    # ProducerId, ProducerEpoch, LatestCoordinatorEpoch, LastSequence, ...
    assert (rows[0][1], rows[0][3]) == ("0", str(len(lines) - 1)), out


def test_producer_perf_test_with_defaults(coterie, kafka_lib, tmp_path):
    topic = f"perf-{uuid.uuid4().hex[:8]}"
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic, 2).error_code == ErrorCode.none
    records = 20_000
    done = _java(kafka_lib, tmp_path, PERF_TEST_MAIN,
                 ["--topic", topic, "--num-records", str(records), "--record-size", "100",
                  "--throughput", "-1",
                  "--producer-props", f"bootstrap.servers={coterie.bootstrap}"])
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:] + out[-2000:]
    assert f"{records} records sent" in out, out[-2000:]
    with RawConnection(coterie.host, coterie.port) as conn:
        ends = [list_offset(conn, topic, p, LATEST).offset for p in range(2)]
        written = stored_producers(conn, topic, 2)
    assert sum(ends) == records
    assert -1 not in written and sum(written.values()) == records, written


def test_kafka_transactions_list_and_describe(coterie, kafka_lib, tmp_path):
    from confluent_kafka import Producer

    topic = f"txtool-{uuid.uuid4().hex[:8]}"
    tid = f"tool-tx-{uuid.uuid4().hex[:6]}"
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, topic, 2).error_code == ErrorCode.none
    p = Producer({"bootstrap.servers": coterie.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x", partition=1)
    p.flush(30)  # the transaction stays open: partition 1 is in it

    def tool(*args: str) -> str:
        done = _java(kafka_lib, tmp_path, TRANSACTIONS_MAIN,
                     ["--bootstrap-server", coterie.bootstrap, *args])
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
        return done.stdout.decode(errors="replace")

    described = tool("describe", "--transactional-id", tid)
    assert "Ongoing" in described and f"{topic}-1" in described, described
    p.commit_transaction(30)
    listed = [line.split() for line in tool("list").splitlines()]
    assert any(row[:1] == [tid] and "CompleteCommit" in row for row in listed), listed


COPIER_MAIN = "org.apache.kafka.tools.TransactionalMessageCopier"


def test_java_exactly_once_copier_with_random_aborts(coterie, kafka_lib, tmp_path):
    """Kafka's own TransactionalMessageCopier (the tool its system tests use for
    exactly-once): the Java client's transactional producer with a consumer in a group,
    committing offsets in each transaction (`sendOffsetsToTransaction` with the group
    metadata) and aborting transactions at random. The output, read with read_committed,
    holds every input record exactly once, and the group's committed offset is the end."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    source = f"copy-in-{uuid.uuid4().hex[:6]}"
    sink = f"copy-out-{uuid.uuid4().hex[:6]}"
    group = f"copier-{uuid.uuid4().hex[:6]}"
    with RawConnection(coterie.host, coterie.port) as conn:
        assert create(conn, source, 1).error_code == ErrorCode.none
        assert create(conn, sink, 1).error_code == ErrorCode.none
    feeder = Producer({"bootstrap.servers": coterie.bootstrap})
    values = [f"msg-{i:04d}".encode() for i in range(500)]
    for v in values:
        feeder.produce(source, v, partition=0)
    assert feeder.flush(30) == 0
    tid = f"copier-tx-{uuid.uuid4().hex[:6]}"
    done = _java(kafka_lib, tmp_path, COPIER_MAIN,
                 ["--broker-list", coterie.bootstrap, "--input-topic", source,
                  "--input-partition", "0", "--output-topic", sink,
                  "--transactional-id", tid,
                  "--consumer-group", group, "--transaction-size", "50",
                  "--max-messages", "500", "--enable-random-aborts", "--group-mode",
                  "--use-group-metadata"], timeout=180)
    assert done.returncode == 0, (done.stderr.decode(errors="replace")[-3000:]
                                  + done.stdout.decode(errors="replace")[-2000:])
    reader = Consumer({"bootstrap.servers": coterie.bootstrap, "group.id": "reader",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        reader.assign([TopicPartition(sink, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < len(values):
            msg = reader.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        extra = reader.poll(1.0)
        assert extra is None or extra.error() is not None, "more than every record once"
    finally:
        reader.close()
    assert sorted(got) == values
    checker = Consumer({"bootstrap.servers": coterie.bootstrap, "group.id": group})
    try:
        assert checker.committed([TopicPartition(source, 0)], 10)[0].offset == len(values)
    finally:
        checker.close()
    # The client ran transactions version 2 (coterie finalizes transaction.version 2): each
    # EndTxn v5 bumped the epoch, so after ten or more transactions (commits of 50 records
    # and random aborts) the epoch is at least 10; under version 1 it would still be 0.
    with RawConnection(coterie.host, coterie.port) as conn:
        state = _describe_transaction(conn, tid)
    assert state.error_code == ErrorCode.none
    assert state.transaction_state == "CompleteCommit"
    assert state.producer_epoch >= 10, state


def _describe_transaction(conn: RawConnection, tid: str) -> Any:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    return conn.request(DescribeTransactionsRequest(transactional_ids=(tid,))
                        ).transaction_states[0]
