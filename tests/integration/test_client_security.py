"""The member library and the Spark source's broker access over TLS and SASL (issue 25,
point 5), against one real coterie broker with every kind of listener.

The settings are Kafka's client properties, as a confluent-kafka program has them: a leader
election (FindCoordinator, JoinGroup, SyncGroup, heartbeats on dedicated connections) works
over SSL with `ssl.ca.location` and over SASL_SSL with PLAIN (librdkafka's username and
password, or Kafka's JAAS line) and SCRAM; mutual TLS with a client certificate; a wrong
password and an untrusted CA fail at once with AuthenticationError, and the member stops with
it instead of reconnecting forever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from coterie.client import Cluster, LeaderElection
from coterie.client.errors import SaslAuthenticationError, SslAuthenticationError
from coterie.spark.brokers import LATEST_TS, Brokers
from coterie.spark.options import read_options
from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.integration.member_helpers import run
from tests.integration.test_tls import certs  # noqa: F401 - the session's certificates

pytestmark = pytest.mark.timeout(120)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_alice="alice-secret";')
FAST = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "retry_backoff_ms": 50,
        "retry_backoff_max_ms": 200}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory,
           certs: Path) -> Iterator[CoterieBroker]:  # noqa: F811
    """PLAINTEXT, SSL, MTLS (SSL with client certificates required) and SASL_SSL (PLAIN and
    SCRAM) listeners on one broker; `b.ports[name]` is each listener's port. PLAIN's user is
    alice (JAAS line); SCRAM's is `scram_user`."""
    b = CoterieBroker(tmp_path_factory.mktemp("client-security") / "data")
    ports = {"SSL": free_port(), "MTLS": free_port(), "SASL_SSL": free_port()}
    b.ports = ports  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{ports['SSL']},"
                     f"MTLS://127.0.0.1:{ports['MTLS']},"
                     f"SASL_SSL://127.0.0.1:{ports['SASL_SSL']}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
                                          "SASL_SSL:SASL_SSL",
        "ssl.keystore.location": str(certs / "server.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.location": str(certs / "ca.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": PLAIN_JAAS,
        "group.initial.rebalance.delay.ms": "0",
    })
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def scram_user(broker: CoterieBroker) -> str:
    """bob, with SCRAM credentials for both hashes (AlterUserScramCredentials)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        done = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(mechanism, 4096), b"bob-secret")])
        for future in done.values():
            future.result(10)
    return "bob"


def _props(certs: Path, protocol: str, **more: str) -> dict[str, str]:  # noqa: F811
    return {"security.protocol": protocol, "ssl.ca.location": str(certs / "ca.pem"), **more}


async def _metadata_port(port: int, security: dict[str, str]) -> set[int]:
    cluster = Cluster(f"127.0.0.1:{port}", security=security)
    try:
        md = await cluster.metadata([])
    finally:
        await cluster.close()
    return {n.port for n in md.brokers.values()}


async def _elected(port: int, group: str, security: dict[str, str]) -> None:
    """One member elected leader of `group` through the listener on `port`."""
    async with LeaderElection(f"127.0.0.1:{port}", group, security=security,
                              **FAST) as election:
        leadership = await election.wait_elected(timeout=15)
        assert leadership.epoch >= 1
        assert election.member.coordinator_connects == 1


def test_an_election_over_ssl_and_over_sasl_ssl_with_plain(broker: CoterieBroker,
                                                          certs: Path) -> None:  # noqa: F811
    ports = broker.ports  # type: ignore[attr-defined]

    async def scenario() -> None:
        await _elected(ports["SSL"], "over-ssl", _props(certs, "SSL"))
        await _elected(ports["SASL_SSL"], "over-sasl-ssl", _props(
            certs, "SASL_SSL", **{"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                  "sasl.password": "alice-secret"}))
        # Kafka's spelling: a PEM truststore and the JAAS line.
        kafka_style = {
            "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs / "ca.pem"), "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                'required username="alice" password="alice-secret";'}
        assert await _metadata_port(ports["SASL_SSL"], kafka_style) == {ports["SASL_SSL"]}

    run(scenario(), timeout=60)


def test_scram_sha_256_and_512(broker: CoterieBroker, certs: Path,  # noqa: F811
                               scram_user: str) -> None:
    port = broker.ports["SASL_SSL"]  # type: ignore[attr-defined]

    async def scenario() -> None:
        await _elected(port, "over-scram", _props(
            certs, "SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob",
                                  "sasl.password": "bob-secret"}))
        jaas = _props(certs, "SASL_SSL", **{
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                'required username="bob" password="bob-secret";'})
        assert await _metadata_port(port, jaas) == {port}
        with pytest.raises(SaslAuthenticationError, match=r"SCRAM-SHA-512.*'bob'"):
            await _metadata_port(port, {**jaas, "sasl.jaas.config": jaas[
                "sasl.jaas.config"].replace("bob-secret", "guess")})

    run(scenario(), timeout=60)


def test_a_wrong_password_and_an_untrusted_ca_fail_at_once_and_are_not_retried(
        broker: CoterieBroker, certs: Path) -> None:  # noqa: F811
    ports = broker.ports  # type: ignore[attr-defined]
    wrong = _props(certs, "SASL_SSL", **{"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                         "sasl.password": "guess"})
    untrusted = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "other-ca.pem")}

    async def scenario() -> None:
        with pytest.raises(SaslAuthenticationError,
                           match=r"alice.*Invalid username or password"):
            await _metadata_port(ports["SASL_SSL"], wrong)
        with pytest.raises(SslAuthenticationError, match="certificate"):
            await _metadata_port(ports["SSL"], untrusted)
        # A member stops with the error (no reconnect loop), well within one backoff cap.
        for port, security, error in ((ports["SASL_SSL"], wrong, SaslAuthenticationError),
                                      (ports["SSL"], untrusted, SslAuthenticationError)):
            started = time.monotonic()
            election = LeaderElection(f"127.0.0.1:{port}", "refused", security=security,
                                      **FAST)
            await election.start()
            with pytest.raises(error):
                await asyncio.wait_for(election.wait_closed(), 10)
            assert isinstance(election.error, error)
            assert election.member.coordinator_connects == 0
            assert time.monotonic() - started < 5
            await election.close()

    run(scenario(), timeout=60)


def test_mutual_tls_with_a_client_certificate(broker: CoterieBroker, certs: Path,  # noqa: F811
                                              tmp_path: Path) -> None:
    port = broker.ports["MTLS"]  # type: ignore[attr-defined]

    async def scenario() -> None:
        librdkafka = _props(certs, "SSL", **{"ssl.certificate.location": str(certs / "client.crt"),
                                             "ssl.key.location": str(certs / "client.key")})
        await _elected(port, "over-mtls", librdkafka)
        kafka_style = _props(certs, "SSL", **{"ssl.keystore.type": "PEM",
                                              "ssl.keystore.location": str(keystore)})
        assert await _metadata_port(port, kafka_style) == {port}
        with pytest.raises(SslAuthenticationError):
            await _metadata_port(port, _props(certs, "SSL"))  # no certificate

    keystore = tmp_path / "client.pem"  # Kafka's PEM keystore: the key, then the chain
    keystore.write_text((certs / "client.key").read_text() + (certs / "client.crt").read_text())
    run(scenario(), timeout=60)


def test_the_spark_source_reaches_the_broker_with_kafka_prefixed_options(
        broker: CoterieBroker, certs: Path) -> None:  # noqa: F811
    port = broker.ports["SASL_SSL"]  # type: ignore[attr-defined]
    options = read_options({
        "kafka.bootstrap.servers": f"127.0.0.1:{port}", "subscribe": "t",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  'required username="alice" password="alice-secret";',
        "kafka.ssl.truststore.location": str(certs / "ca.pem"),
        "kafka.ssl.truststore.type": "PEM"}, streaming=False)
    assert options.connect.security.uses_sasl
    with Brokers(options.connect) as brokers:
        assert brokers.partitions(["over-sasl"], create=True) == {"over-sasl": [0]}
        # ListOffsets goes to the leader on a dedicated connection: secured too.
        assert brokers.list_offsets([("over-sasl", 0)], LATEST_TS) == {("over-sasl", 0): 0}
