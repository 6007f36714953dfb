"""SASL/PLAIN on SASL_PLAINTEXT and SASL_SSL listeners (issue 25, point 3, first part), with
real clients and byte-exact requests.

One broker with a PLAINTEXT, a SASL_PLAINTEXT and a SASL_SSL listener, its users in Kafka's
JAAS line: confluent-kafka and kafka-python authenticate and produce and consume over both
SASL listeners; a wrong password is answered SASL_AUTHENTICATION_FAILED and the connection
closed soon after; a request before authentication, a token over
sasl.server.max.receive.size, an unknown mechanism and requests out of order are refused
as Kafka refuses them, and other clients are served meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from coterie.broker.sasl import SaslError, check_plain, jaas_users, sasl_settings
from tests.fixtures.coterie_broker import CoterieBroker, free_port
from tests.integration.test_tls import certs  # noqa: F401 - the session's certificates
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(180)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')


@pytest.fixture
def sasl_broker(tmp_path: Path, certs: Path) -> Iterator[CoterieBroker]:  # noqa: F811
    b = CoterieBroker(tmp_path / "data")
    b.sasl_port, b.sasl_ssl_port = free_port(), free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port},"
                     f"SASL_SSL://127.0.0.1:{b.sasl_ssl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(certs / "server.pem"),
    })
    b.start()
    yield b
    b.stop()


def _client(port: int, certs: Path, protocol: str = "SASL_PLAINTEXT",  # noqa: F811
            password: str = "alice-secret", **more: str) -> dict[str, str]:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol,
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": password,
            **more}
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    return conf


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_clients_authenticate_with_plain_and_produce_and_consume(
        sasl_broker: CoterieBroker, certs: Path, protocol: str) -> None:  # noqa: F811
    b = sasl_broker
    port = b.sasl_port if protocol == "SASL_PLAINTEXT" else b.sasl_ssl_port
    md = AdminClient(_client(port, certs, protocol)).list_topics(timeout=10)
    assert {x.port for x in md.brokers.values()} == {port}  # this listener's address
    topic = f"plain-{protocol.lower()}"
    p = Producer(_client(port, certs, protocol))
    for i in range(200):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer(_client(port, certs, protocol, **{"group.id": "sasl-group",
                                                    "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(200)]

    from kafka import KafkaConsumer
    extra = {"ssl_cafile": str(certs / "ca.pem")} if protocol == "SASL_SSL" else {}
    k = KafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{port}", security_protocol=protocol,
                      sasl_mechanism="PLAIN", sasl_plain_username="alice",
                      sasl_plain_password="alice-secret", auto_offset_reset="earliest",
                      consumer_timeout_ms=10_000, **extra)
    try:
        seen = [m.value for _, m in zip(range(200), k, strict=False)]  # no 201st wait
    finally:
        k.close()
    assert seen == got


def test_a_wrong_password_fails_and_the_client_says_so(sasl_broker: CoterieBroker,
                                                        certs: Path) -> None:  # noqa: F811
    errors: list = []
    p = Producer(_client(sasl_broker.sasl_port, certs, password="guess",
                         error_cb=errors.append))
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)  # serves the error callback
    assert any("Authentication failed: Invalid username or password" in e.str()
               for e in errors), errors
    with pytest.raises(KafkaException):
        p.list_topics(timeout=1)


def test_the_sasl_exchange_is_refused_as_kafka_refuses_it(sasl_broker: CoterieBroker) -> None:
    b = sasl_broker
    host = "127.0.0.1"
    # A wrong password: SASL_AUTHENTICATION_FAILED with Kafka's words, then closed.
    with RawConnection(host, b.sasl_port) as conn:
        shaken = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert (shaken.error_code, shaken.mechanisms) == (ErrorCode.none, ("PLAIN",))
        failed = conn.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0guess"))
        assert failed.error_code == ErrorCode.sasl_authentication_failed
        assert failed.error_message == "Authentication failed: Invalid username or password"
        started = time.monotonic()
        assert conn.is_closed_by_peer(wait=5)
        assert time.monotonic() - started < 2
    # Anything but ApiVersions and the SASL requests before authentication: closed.
    with RawConnection(host, b.sasl_port) as conn:
        conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False))
        assert conn.is_closed_by_peer(wait=5)
    # A token over sasl.server.max.receive.size (512 KiB): closed before it is read.
    with RawConnection(host, b.sasl_port) as conn:
        conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        conn.send_bytes((8 * 1024 * 1024).to_bytes(4, "big") + b"\x00\x24\x00\x02")
        assert conn.is_closed_by_peer(wait=5)
    # An unknown mechanism: answered with the ones served, and the connection closed after
    # the failed-authentication delay, as Kafka closes it.
    with RawConnection(host, b.sasl_port) as conn:
        other = conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert (other.error_code, other.mechanisms) == (ErrorCode.unsupported_sasl_mechanism,
                                                        ("PLAIN",))
        assert conn.is_closed_by_peer(wait=5)
    # Authentication before the handshake; a handshake on the PLAINTEXT listener: each
    # answered with its error, the connection kept.
    with RawConnection(host, b.sasl_port) as conn:
        early = conn.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert early.error_code == ErrorCode.illegal_sasl_state
    with RawConnection(host, b.port) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == \
            ErrorCode.illegal_sasl_state
        assert not conn.is_closed_by_peer(wait=0.3)
    # The right password on a raw connection: then Metadata is served.
    with RawConnection(host, b.sasl_port) as conn:
        conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        ok = conn.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert ok.error_code == ErrorCode.none
        md = conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))
        assert [x.port for x in md.brokers] == [b.sasl_port]


def test_plain_tokens_and_settings() -> None:
    users = jaas_users(JAAS)
    assert users == {"admin": "admin-secret", "alice": "alice-secret"}
    assert check_plain(b"\0alice\0alice-secret", users) == ("alice", "")
    assert check_plain(b"alice\0alice\0alice-secret", users) == ("alice", "")
    assert check_plain(b"bob\0alice\0alice-secret", users)[0] is None
    assert check_plain(b"\0alice\0nope", users)[0] is None
    assert check_plain(b"\0nobody\0alice-secret", users)[0] is None
    assert check_plain(b"\0alice", users)[0] is None
    with pytest.raises(SaslError, match="not GSSAPI"):
        sasl_settings({}, "SASL_SSL")  # Kafka's default mechanism is not served
    with pytest.raises(SaslError, match="names no user"):
        sasl_settings({"sasl.enabled.mechanisms": "PLAIN"}, "SASL_SSL")
    settings = sasl_settings({"sasl.enabled.mechanisms": "plain",
                              "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS},
                             "SASL_SSL")
    assert settings.mechanisms == ("PLAIN",) and settings.plain_users == users
