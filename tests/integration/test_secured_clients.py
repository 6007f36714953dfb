"""aiokafka and the Java client's producer and consumer over coterie's secured listeners
(issue 25, "Tests": real clients over each listener type).

test_sasl_scram.py and test_tls.py already run confluent-kafka and kafka-python over SASL_SSL
and TLS, and Kafka's AdminClient (kafka-topics) over both. Here the two clients left
produce and consume in a consumer group, so the paths a data client takes after its login
(Metadata, Produce, FindCoordinator, JoinGroup, SyncGroup, Fetch, OffsetCommit) are all
crossed on an authenticated connection:

* aiokafka 0.14 over SASL_SSL with SCRAM-SHA-512 (the `scram_broker` of test_sasl_scram.py)
  and over mutual TLS (an SSL listener with ssl.client.auth=required): the records read are
  the records written, and the group's committed offsets are where the consumer stopped;
  a wrong password and a missing client certificate are refused within seconds.
* Kafka 4.2.1's console producer and console consumer (one JVM each) over the same two
  listeners, configured as a Java user would (a JAAS line, PEM truststore and keystore).
  They skip, naming what is missing, without java or mvn.

The committed offsets are read back with confluent-kafka's AdminClient over the same
secured listener, so a commit the broker dropped or misfiled would show.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.fixtures.reference_broker import load_reference_kafka, reference_tools_missing
from tests.integration.test_java_producer import _java
from tests.integration.test_sasl_scram import FAILED, scram_broker  # noqa: F401 - fixture
from tests.integration.test_tls import certs  # noqa: F401 - the session's certificates

pytestmark = pytest.mark.timeout(180)

CONSOLE_PRODUCER_MAIN = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER_MAIN = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PARTITIONS = 3
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="{user}" password="{password}";')


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory: pytest.TempPathFactory,
                certs: Path) -> Iterator[CoterieBroker]:  # noqa: F811
    """A broker with a PLAINTEXT listener (for checks) and an SSL listener requiring a client
    certificate from the test CA; no initial rebalance delay, so groups form at once."""
    b = CoterieBroker(tmp_path_factory.mktemp("secured-clients-mtls") / "data")
    b.ssl_port = free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{b.ssl_port}",
        "ssl.keystore.location": str(certs / "server.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": "0",
    })
    b.start()
    yield b
    b.stop()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(b: CoterieBroker, topic: str, partitions: int = PARTITIONS) -> None:
    """Made over PLAINTEXT, so each test knows its partitions before a client asks."""
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def _committed(conf: dict[str, Any], group: str, topic: str,
               partitions: int = PARTITIONS) -> dict[int, int]:
    """The group's committed offsets as confluent-kafka's AdminClient reads them over the
    listener `conf` names (OffsetFetch through the group coordinator)."""
    admin = AdminClient(conf)
    asked = ConsumerGroupTopicPartitions(
        group, [CkTopicPartition(topic, p) for p in range(partitions)])
    answer = admin.list_consumer_group_offsets([asked])[group].result(15)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def _ends(b: CoterieBroker, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    """Each partition's end offset (its high watermark), read over PLAINTEXT."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ends-reader"})
    try:
        return {p: c.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


# --- aiokafka ---------------------------------------------------------------------------


def _scram(b: CoterieBroker, certs: Path, user: str,  # noqa: F811
           password: str | None = None) -> dict[str, Any]:
    return {"bootstrap_servers": f"127.0.0.1:{b.sasl_ssl_port}",  # type: ignore[attr-defined]
            "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": password or f"{user}-secret",
            "ssl_context": create_ssl_context(cafile=str(certs / "ca.pem")),
            "request_timeout_ms": 10_000}


def _mtls(b: CoterieBroker, certs: Path, with_cert: bool = True) -> dict[str, Any]:  # noqa: F811
    if with_cert:
        ctx = create_ssl_context(cafile=str(certs / "ca.pem"),
                                 certfile=str(certs / "client.crt"),
                                 keyfile=str(certs / "client.key"))
    else:
        ctx = create_ssl_context(cafile=str(certs / "ca.pem"))
    return {"bootstrap_servers": f"127.0.0.1:{b.ssl_port}",  # type: ignore[attr-defined]
            "security_protocol": "SSL", "ssl_context": ctx, "request_timeout_ms": 10_000}


async def _aiokafka_round_trip(producer_conf: dict[str, Any], consumer_conf: dict[str, Any],
                               topic: str, group: str, count: int
                               ) -> tuple[dict[int, list[bytes]], dict[int, list[bytes]],
                                          dict[int, int]]:
    """Produce `count` records round-robin over the partitions, then read them in group
    `group` and commit. What was written and what was read, per partition, and the offsets
    the consumer itself sees committed afterwards. Each client must stop within 5 s."""
    written: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    producer = AIOKafkaProducer(**producer_conf)
    await producer.start()
    try:
        sent = []
        for i in range(count):
            value = f"aio-{i:04d}".encode()
            written[i % PARTITIONS].append(value)
            sent.append(await producer.send(topic, value, partition=i % PARTITIONS))
        metadata = await asyncio.wait_for(asyncio.gather(*sent), 30)
        assert sorted(m.offset for m in metadata if m.partition == 0) == \
            list(range(len(written[0])))
    finally:
        # Bounded: asyncio's TLS close waits for the broker's close (see test_tls.py's
        # close_notify test); it took 30 s a connection before coterie closed at once.
        await asyncio.wait_for(producer.stop(), 5)

    read: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, **consumer_conf)
    await consumer.start()
    try:
        deadline = time.monotonic() + 45
        while sum(map(len, read.values())) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for tp, records in batches.items():
                read[tp.partition].extend(r.value for r in records)
        await consumer.commit()
        committed = {p: await consumer.committed(TopicPartition(topic, p))
                     for p in range(PARTITIONS)}
    finally:
        await asyncio.wait_for(consumer.stop(), 5)
    return written, read, committed


def test_aiokafka_produces_and_consumes_in_a_group_over_sasl_ssl_with_scram_sha_512(
        scram_broker: CoterieBroker, certs: Path) -> None:  # noqa: F811
    """aiokafka's SCRAM-SHA-512 over TLS (bob has that mechanism only; alice both): every
    connection it opens, to the group coordinator too, logs in; the records come back in
    order per partition and the commit lands where the consumer stopped."""
    b = scram_broker
    topic, group = _name("aio-scram"), _name("aio-scram-group")
    _create_topic(b, topic)
    written, read, committed = asyncio.run(_aiokafka_round_trip(
        _scram(b, certs, "bob"), _scram(b, certs, "alice"), topic, group, 150))
    assert read == written
    ends = {p: len(values) for p, values in written.items()}
    assert committed == ends
    over_sasl_ssl = {"bootstrap.servers": f"127.0.0.1:{b.sasl_ssl_port}",
                     "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": "bob", "sasl.password": "bob-secret",
                     "ssl.ca.location": str(certs / "ca.pem")}
    assert _committed(over_sasl_ssl, group, topic) == ends


def test_aiokafka_with_a_wrong_password_is_refused_promptly(
        scram_broker: CoterieBroker, certs: Path,  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    """A wrong SCRAM-SHA-512 password: the producer's start fails within seconds (aiokafka
    reports a bootstrap failure) and what it logged is the broker's SaslAuthenticate error,
    in Kafka's words, not a timeout or a dropped connection."""
    caplog.set_level(logging.ERROR, logger="aiokafka")

    async def start() -> None:
        producer = AIOKafkaProducer(**_scram(scram_broker, certs, "bob", password="guess"))
        try:
            await asyncio.wait_for(producer.start(), 20)
        finally:
            await producer.stop()

    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
        asyncio.run(start())
    assert time.monotonic() - started < 10
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "SaslAuthenticationFailed" in said and FAILED + "SCRAM-SHA-512" in said, said


def test_aiokafka_produces_and_consumes_in_a_group_over_mutual_tls(
        mtls_broker: CoterieBroker, certs: Path) -> None:  # noqa: F811
    """aiokafka with a client certificate (create_ssl_context(cafile, certfile, keyfile))
    against a listener that requires one: a group round trip with its commit."""
    b = mtls_broker
    topic, group = _name("aio-mtls"), _name("aio-mtls-group")
    _create_topic(b, topic)
    written, read, committed = asyncio.run(_aiokafka_round_trip(
        _mtls(b, certs), _mtls(b, certs), topic, group, 150))
    assert read == written
    ends = {p: len(values) for p, values in written.items()}
    assert committed == ends
    over_mtls = {"bootstrap.servers": f"127.0.0.1:{b.ssl_port}",  # type: ignore[attr-defined]
                 "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
                 "ssl.certificate.location": str(certs / "client.crt"),
                 "ssl.key.location": str(certs / "client.key")}
    assert _committed(over_mtls, group, topic) == ends


def test_aiokafka_without_a_client_certificate_is_refused_on_the_mtls_listener(
        mtls_broker: CoterieBroker, certs: Path) -> None:  # noqa: F811
    """Without a certificate the broker ends the handshake (TLS 1.3: right after the
    client's side of it), so aiokafka never gets Metadata and its start fails, within
    seconds, instead of hanging."""

    async def start() -> None:
        consumer = AIOKafkaConsumer(group_id="never", **_mtls(mtls_broker, certs, False))
        try:
            await asyncio.wait_for(consumer.start(), 20)
        finally:
            await consumer.stop()

    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
        asyncio.run(start())
    assert time.monotonic() - started < 10


# --- the Java client: console producer and console consumer ------------------------------


@pytest.fixture(scope="module")
def kafka_lib() -> Path:
    """Kafka 4.2.1's jars (fetched with Maven on first use); skip without java or mvn."""
    missing = reference_tools_missing()
    if missing:
        pytest.skip("the Java console producer and consumer need java and mvn on PATH: "
                    "missing " + ", ".join(missing))
    rk = load_reference_kafka()
    return Path(rk.fetch(log=lambda msg: print(msg, file=sys.stderr, flush=True)))


def _java_produce_and_consume(lib: Path, workdir: Path, bootstrap: str, config: Path,
                              topic: str, group: str, count: int) -> list[str]:
    """The console producer writes `count` lines from stdin; the console consumer reads
    them back in `group` (and commits as it closes). The lines it printed."""
    lines = [f"java-line-{i:04d}" for i in range(count)]
    produced = _java(lib, workdir, CONSOLE_PRODUCER_MAIN,
                     ["--bootstrap-server", bootstrap, "--topic", topic,
                      "--command-config", str(config)],
                     stdin="".join(f"{line}\n" for line in lines).encode())
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")[-4000:]
    consumed = _java(lib, workdir, CONSOLE_CONSUMER_MAIN,
                     ["--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
                      "--command-config", str(config), "--from-beginning",
                      "--max-messages", str(count), "--timeout-ms", "20000"])
    err = consumed.stderr.decode(errors="replace")
    assert consumed.returncode == 0, err[-4000:]
    assert f"Processed a total of {count} messages" in err, err[-4000:]
    return consumed.stdout.decode(errors="replace").splitlines()


def test_the_java_producer_and_consumer_over_sasl_ssl_with_scram_sha_512(
        scram_broker: CoterieBroker, certs: Path, kafka_lib: Path,  # noqa: F811
        tmp_path: Path) -> None:
    """Kafka 4.2.1's console producer (idempotent, its default) and console consumer (a
    classic group, auto-commit on close) log in with SCRAM-SHA-512 over TLS, configured
    with a JAAS line and a PEM truststore; the lines come back and the group's offsets
    are committed at the end of each partition."""
    b = scram_broker
    topic, group = _name("java-scram"), _name("java-scram-group")
    _create_topic(b, topic)
    config = tmp_path / "scram.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={SCRAM_JAAS.format(user='bob', password='bob-secret')}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certs / 'ca.pem'}\n")
    count = 60
    printed = _java_produce_and_consume(kafka_lib, tmp_path, f"127.0.0.1:{b.sasl_ssl_port}",
                                        config, topic, group, count)
    # One consumer reads the partitions one after another: compare as sets, and no line
    # twice.
    assert sorted(printed) == [f"java-line-{i:04d}" for i in range(count)]
    over_sasl_ssl = {"bootstrap.servers": f"127.0.0.1:{b.sasl_ssl_port}",
                     "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": "alice", "sasl.password": "alice-secret",
                     "ssl.ca.location": str(certs / "ca.pem")}
    ends = _ends(b, topic)
    assert sum(ends.values()) == count
    assert _committed(over_sasl_ssl, group, topic) == ends


def test_the_java_producer_and_consumer_over_mutual_tls(
        mtls_broker: CoterieBroker, certs: Path, kafka_lib: Path,  # noqa: F811
        tmp_path: Path) -> None:
    """The console producer and consumer with a PEM keystore (the client's key and
    certificate in one file) and a PEM truststore, against a listener requiring client
    certificates; the lines come back and the group's offsets are committed."""
    b = mtls_broker
    topic, group = _name("java-mtls"), _name("java-mtls-group")
    _create_topic(b, topic)
    keystore = tmp_path / "client.pem"
    keystore.write_text((certs / "client.key").read_text() + (certs / "client.crt").read_text())
    config = tmp_path / "mtls.properties"
    config.write_text(
        f"security.protocol=SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs / 'ca.pem'}\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n")
    count = 60
    printed = _java_produce_and_consume(kafka_lib, tmp_path,
                                        f"127.0.0.1:{b.ssl_port}",  # type: ignore[attr-defined]
                                        config, topic, group, count)
    assert sorted(printed) == [f"java-line-{i:04d}" for i in range(count)]
    ends = _ends(b, topic)
    assert sum(ends.values()) == count
    over_mtls = {"bootstrap.servers": f"127.0.0.1:{b.ssl_port}",  # type: ignore[attr-defined]
                 "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
                 "ssl.certificate.location": str(certs / "client.crt"),
                 "ssl.key.location": str(certs / "client.key")}
    assert _committed(over_mtls, group, topic) == ends
