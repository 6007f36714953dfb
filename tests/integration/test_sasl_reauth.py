"""SASL re-authentication (KIP-368, `connections.max.reauth.ms`) and PLAIN users from a JAAS
file (`java.security.auth.login.config`), with exact bytes and a real client.

One broker for the module: a SASL_PLAINTEXT listener whose PLAIN users (alice, bob) come
from the JAAS file's `sasl_plaintext.KafkaServer` section and whose PLAIN sessions last
1500 ms (`listener.name.sasl_plaintext.plain.connections.max.reauth.ms`), and an OTHER
(SASL_PLAINTEXT) listener whose users come from the file's `KafkaServer` section (carol,
next to a SCRAM module that names none) without re-authentication; SCRAM on SASL_PLAINTEXT
has the broker-wide lifetime (60 s). On it: the session's
lifetime in the SaslAuthenticate answer, the connection closed at its first request after
the session expired (a v0 client's too), a re-authentication on the same connection that
keeps it serving (with a request in flight), Kafka's refusals (a principal or mechanism
change, a second re-authentication within a second, a request during one), and
confluent-kafka producing across re-authentications with nothing lost.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_authenticate.v0.request import (
    SaslAuthenticateRequest as SaslAuthenticateV0,
)
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.integration.test_sasl_scram import scram_login
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(120)

LIFETIME_MS = 1500
JAAS_FILE = """\
// PLAIN users of the SASL_PLAINTEXT listener: its own section wins over KafkaServer.
sasl_plaintext.KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_alice="alice-secret"
    user_bob="bob-secret";
};
/* Every other listener's. */
KafkaServer {
    org.apache.kafka.common.security.scram.ScramLoginModule required;
    org.apache.kafka.common.security.plain.PlainLoginModule required
        user_carol='carol-secret';
};
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    root = tmp_path_factory.mktemp("reauth")
    (root / "kafka_server_jaas.conf").write_text(JAAS_FILE)
    b = CoterieBroker(root / "data")
    b.sasl_port, b.other_port = free_port(), free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port},"
                     f"OTHER://127.0.0.1:{b.other_port}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.other.sasl.enabled.mechanisms": "PLAIN",
        "java.security.auth.login.config": str(root / "kafka_server_jaas.conf"),
        # PLAIN on SASL_PLAINTEXT: 1500 ms; its SCRAM: the broker's 60 s; OTHER: off.
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(LIFETIME_MS),
        "connections.max.reauth.ms": "60000",
        "listener.name.other.connections.max.reauth.ms": "0",
        "connection.failed.authentication.delay.ms": "20",
    })
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
        b"dave-secret")])["dave"].result(10)
    yield b
    b.stop()


def _login(conn: RawConnection, user: str, password: str, mechanism: str = "PLAIN",
           version: int = 2) -> object:
    """SaslHandshake and one PLAIN SaslAuthenticate (v0 or v2): the authenticate answer."""
    shaken = conn.request(SaslHandshakeRequest(mechanism=mechanism))
    assert shaken.error_code == ErrorCode.none, shaken
    request = SaslAuthenticateRequest if version == 2 else SaslAuthenticateV0
    return conn.request(request(auth_bytes=f"\0{user}\0{password}".encode()))


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)


def test_the_session_lifetime_is_answered_and_an_expired_session_closes(
        broker: CoterieBroker) -> None:
    b = broker
    with RawConnection(b.host, b.sasl_port) as conn, \
            RawConnection(b.host, b.sasl_port) as old:
        ok = _login(conn, "alice", "alice-secret")
        assert ok.error_code == ErrorCode.none
        assert ok.session_lifetime == datetime.timedelta(milliseconds=LIFETIME_MS)
        authenticated = time.monotonic()
        # SaslAuthenticate v0 has no lifetime field: its session ends all the same.
        assert _login(old, "bob", "bob-secret", version=0).error_code == ErrorCode.none
        assert [x.port for x in conn.request(_metadata()).brokers] == [b.sasl_port]
        time.sleep(max(0.0, authenticated + LIFETIME_MS / 1000 + 0.2 - time.monotonic()))
        for expired in (conn, old):
            expired.send(_metadata())
            assert expired.is_closed_by_peer(wait=5)
    assert "after the SASL session expired" in b.log_text()
    # Users from the file's KafkaServer section on OTHER, where sessions do not end: the
    # lifetime is 0 and a second handshake is answered ILLEGAL_SASL_STATE, connection kept.
    with RawConnection(b.host, b.other_port) as conn:
        ok = _login(conn, "carol", "carol-secret")
        assert (ok.error_code, ok.session_lifetime) == (ErrorCode.none, datetime.timedelta(0))
        again = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert again.error_code == ErrorCode.illegal_sasl_state
        assert conn.request(_metadata()).brokers[0].port == b.other_port
    for port, user in ((b.other_port, "alice"), (b.sasl_port, "carol")):
        with RawConnection(b.host, port) as conn:
            refused = _login(conn, user, f"{user}-secret")
            assert refused.error_code == ErrorCode.sasl_authentication_failed


def test_a_connection_reauthenticates_and_goes_on(broker: CoterieBroker) -> None:
    b = broker
    with RawConnection(b.host, b.sasl_port) as conn:
        assert _login(conn, "alice", "alice-secret").error_code == ErrorCode.none
        first = time.monotonic()
        # A request in flight when the re-authentication begins is answered first.
        in_flight = conn.send(_metadata())
        shake = conn.send(SaslHandshakeRequest(mechanism="PLAIN"))
        got, md = conn.recv(MetadataResponse)
        assert (got, [x.port for x in md.brokers]) == (in_flight, [b.sasl_port])
        got, shaken = conn.recv(SaslHandshakeResponse)
        assert (got, shaken.error_code) == (shake, ErrorCode.none)
        again = conn.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert again.error_code == ErrorCode.none
        assert again.session_lifetime == datetime.timedelta(milliseconds=LIFETIME_MS)
        # Kafka allows one re-authentication a second: the next handshake is answered as
        # on an authenticated connection, and the connection goes on.
        early = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert early.error_code == ErrorCode.illegal_sasl_state
        time.sleep(max(0.0, first + 1.05 - time.monotonic()))
        assert _login(conn, "alice", "alice-secret").error_code == ErrorCode.none
        # Past the first session's end, within the new one's: served.
        time.sleep(max(0.0, first + LIFETIME_MS / 1000 + 0.2 - time.monotonic()))
        assert conn.request(_metadata()).brokers[0].port == b.sasl_port
        # After the session, a re-authentication still may begin (Kafka: the handshake
        # comes before the expiry check).
        time.sleep(max(0.0, first + 1.05 + LIFETIME_MS / 1000 + 0.1 - time.monotonic()))
        assert _login(conn, "alice", "alice-secret").error_code == ErrorCode.none
        assert conn.request(_metadata()).brokers[0].port == b.sasl_port


def test_kafkas_refusals_of_a_reauthentication(broker: CoterieBroker) -> None:
    b = broker
    cases = [
        # Another principal, with the right password: Kafka's words.
        ("PLAIN", b"\0bob\0bob-secret",
         "Cannot change principals during re-authentication from User.alice: User.bob"),
        # A wrong password.
        ("PLAIN", b"\0alice\0guess", "Authentication failed: Invalid username or password"),
        # Another mechanism the listener serves: the handshake passes, the rest fails.
        ("SCRAM-SHA-256", b"n,,n=alice,r=abcdefghijklmnop",
         "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
         "re-authentication of mechanism 'PLAIN'"),
    ]
    for mechanism, token, message in cases:
        with RawConnection(b.host, b.sasl_port) as conn:
            assert _login(conn, "alice", "alice-secret").error_code == ErrorCode.none
            shaken = conn.request(SaslHandshakeRequest(mechanism=mechanism))
            assert shaken.error_code == ErrorCode.none
            failed = conn.request(SaslAuthenticateRequest(auth_bytes=token))
            assert (failed.error_code, failed.error_message) == \
                (ErrorCode.sasl_authentication_failed, message)
            assert conn.is_closed_by_peer(wait=5)
    # SCRAM on the same listener: its own lifetime (the broker's 60 s), a re-authentication
    # with the client-first and client-final messages again, and Kafka's words for a
    # failed one.
    with RawConnection(b.host, b.sasl_port) as conn:
        ok = scram_login(conn, "SCRAM-SHA-256", "dave", "dave-secret")
        assert ok.session_lifetime == datetime.timedelta(seconds=60)  # type: ignore[attr-defined]
        again = scram_login(conn, "SCRAM-SHA-256", "dave", "dave-secret")
        assert again.error_code == ErrorCode.none  # type: ignore[attr-defined]
        assert conn.request(_metadata()).brokers[0].port == b.sasl_port
    with RawConnection(b.host, b.sasl_port) as conn:
        scram_login(conn, "SCRAM-SHA-256", "dave", "dave-secret")
        failed = scram_login(conn, "SCRAM-SHA-256", "dave", "guess")
        assert failed.error_message == (  # type: ignore[attr-defined]
            "Authentication failed during re-authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256")
        assert conn.is_closed_by_peer(wait=5)
    # Anything but SaslAuthenticate during a re-authentication: closed.
    with RawConnection(b.host, b.sasl_port) as conn:
        assert _login(conn, "alice", "alice-secret").error_code == ErrorCode.none
        conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        conn.send(_metadata())
        assert conn.is_closed_by_peer(wait=5)
    # A mechanism the listener does not serve: refused, closed.
    with RawConnection(b.host, b.sasl_port) as conn:
        assert _login(conn, "alice", "alice-secret").error_code == ErrorCode.none
        other = conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert other.error_code == ErrorCode.unsupported_sasl_mechanism
        assert conn.is_closed_by_peer(wait=5)


def test_confluent_kafka_produces_across_reauthentications(broker: CoterieBroker) -> None:
    b = broker
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("test_sasl_reauth.librdkafka")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    expired_before = b.log_text().count("after the SASL session expired")
    p = Producer({"bootstrap.servers": f"127.0.0.1:{b.sasl_port}",
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.username": "alice", "sasl.password": "alice-secret",
                  "linger.ms": 5, "debug": "security", "logger": logger})
    topic = "reauth-produce"
    sent = 0
    # librdkafka re-authenticates at 90% of the lifetime; producing goes on past the end
    # of the first session, which would close the connection had it not.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        for _ in range(20):
            p.produce(topic, value=f"v{sent}".encode())
            sent += 1
        p.poll(0.05)
    assert p.flush(15) == 0
    # The broker's connection (not the bootstrap one) was given a lifetime twice at least:
    # its authentication and a re-authentication.
    lifetimes = [line for line in lines
                 if "Received session lifetime 1500 ms" in line and "/bootstrap]" not in line]
    assert len(lifetimes) >= 2, lines[-20:]
    assert b.log_text().count("after the SASL session expired") == expired_before
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "reauth",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    until = time.monotonic() + 15
    while len(got) < sent and time.monotonic() < until:
        for m in c.consume(1000, 0.5):
            if not m.error():
                got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(sent)]


def test_coteries_own_client_reauthenticates_on_the_same_connection(
        broker: CoterieBroker) -> None:
    """coterie.client's Connection renews its SASL session (KIP-368) before the broker's
    1500 ms run out, with requests going on concurrently: over 4 s (more than two
    lifetimes) nothing fails and the connection is never closed; without the renewal the
    broker closes it at the first request after 1500 ms."""
    from coterie.client.connection import Connection
    from coterie.client.security import SecuritySettings
    from coterie.client.versions import ApiKey

    security = SecuritySettings.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"})

    async def scenario() -> int:
        conn = await Connection.open("127.0.0.1", broker.sasl_port,  # type: ignore[attr-defined]
                                     security=security)
        answered = 0

        async def metadata_loop() -> None:
            nonlocal answered
            deadline = asyncio.get_running_loop().time() + 4.0
            while asyncio.get_running_loop().time() < deadline:
                await conn.call(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False})
                answered += 1
                await asyncio.sleep(0.05)

        try:
            await asyncio.gather(metadata_loop(), metadata_loop())
            assert not conn.closed
        finally:
            await conn.aclose()
        return answered

    assert asyncio.run(scenario()) > 40
