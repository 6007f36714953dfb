"""Listeners and TLS (issue 25, points 1 and 2) with real clients over real sockets.

A broker with a PLAINTEXT and an SSL listener at once, configured with Kafka's PEM settings
(scripts/make-test-certs makes the CA and certificates, once per session): confluent-kafka
and kafka-python produce, consume in a group and fetch over TLS; each listener's Metadata
names that listener's address; the inline PEM settings and an encrypted key work; mutual TLS
lets a client with a certificate from the trusted CA in and keeps the others out; and
clients that misbehave (plaintext sent to the TLS port, a handshake that stalls, garbage)
are closed while other clients are served.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from coterie.broker.tls import principal_of
from tests.fixtures.coterie_broker import CoterieBroker, free_port

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
API_VERSIONS_V0 = bytes.fromhex("0000000a" "0012" "0000" "00000007" "ffff")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("the TLS tests need the openssl command (Debian's openssl package) to "
                    "make their certificates")
    out = tmp_path_factory.mktemp("certs")
    subprocess.run([str(REPO / "scripts" / "make-test-certs"), str(out)], check=True)
    return out


def _broker(tmp_path: Path, name: str, **settings: str) -> CoterieBroker:
    """A broker with a PLAINTEXT listener on its own port and an SSL one on another."""
    b = CoterieBroker(tmp_path / name)
    b.ssl_port = free_port()  # type: ignore[attr-defined]
    b.config.update({"listeners": f"PLAINTEXT://127.0.0.1:{b.port},"
                                  f"SSL://127.0.0.1:{b.ssl_port}", **settings})
    return b


@pytest.fixture
def tls_broker(tmp_path: Path, certs: Path) -> Iterator[CoterieBroker]:
    b = _broker(tmp_path, "data", **{"ssl.keystore.location": str(certs / "server.pem"),
                                     "tls.handshake.timeout.ms": "1500"})
    b.start()
    yield b
    b.stop()


def _tls_conn(port: int, certs: Path, client: str | None = None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if client is not None:
        ctx.load_cert_chain(str(certs / f"{client}.crt"), str(certs / f"{client}.key"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def _api_versions(sock: socket.socket) -> bytes:
    """Send ApiVersions v0 and return the answer's body (b"" if the connection closed)."""
    sock.sendall(API_VERSIONS_V0)
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    size = int.from_bytes(head, "big")
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return b""
        body += chunk
    return body


def _closed(sock: socket.socket, wait: float) -> bool:
    """Whether the peer closes the connection (end of stream, a reset or a TLS alert)
    within `wait` seconds."""
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def _ssl_client(b: CoterieBroker, certs: Path, **more: str) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{b.ssl_port}", "security.protocol": "SSL",
            "ssl.ca.location": str(certs / "ca.pem"), **more}


def test_clients_produce_consume_and_fetch_over_tls_each_listener_naming_its_address(
        tls_broker: CoterieBroker, certs: Path) -> None:
    b = tls_broker
    on_ssl = AdminClient(_ssl_client(b, certs)).list_topics(timeout=10)
    assert {(x.host, x.port) for x in on_ssl.brokers.values()} == {("127.0.0.1", b.ssl_port)}
    on_plain = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
    assert {(x.host, x.port) for x in on_plain.brokers.values()} == {("127.0.0.1", b.port)}

    p = Producer(_ssl_client(b, certs, **{"linger.ms": "5"}))
    values = [f"{i:05d}".encode() * 200 for i in range(2000)]  # 2 MB: fetches span files
    for v in values:
        p.produce("over-tls", value=v)
    assert p.flush(30) == 0
    c = Consumer(_ssl_client(b, certs, **{"group.id": "tls-group",
                                          "auto.offset.reset": "earliest"}))
    c.subscribe(["over-tls"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == values

    from kafka import KafkaConsumer
    k = KafkaConsumer("over-tls", bootstrap_servers=f"127.0.0.1:{b.ssl_port}",
                      security_protocol="SSL", ssl_cafile=str(certs / "ca.pem"),
                      auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    try:
        seen = [m.value for _, m in zip(range(len(values)), k, strict=False)]
    finally:
        k.close()
    assert seen == values


def test_inline_pem_and_an_encrypted_key(tmp_path: Path, certs: Path) -> None:
    def continued(pem: str) -> str:  # as a properties file holds it: lines go on with "\"
        return " \\\n    ".join(pem.strip().splitlines())

    chain = (certs / "server.crt").read_text() + (certs / "ca.pem").read_text()
    inline = _broker(tmp_path, "inline", **{
        "ssl.keystore.key": continued((certs / "server.key").read_text()),
        "ssl.keystore.certificate.chain": continued(chain)})
    encrypted = _broker(tmp_path, "encrypted", **{
        "ssl.keystore.location": str(certs / "server-encrypted.pem"),
        "ssl.key.password": "secret"})
    for b in (inline, encrypted):
        b.start()
        try:
            with _tls_conn(b.ssl_port, certs) as conn:
                assert _api_versions(conn)[4:6] == b"\x00\x00"  # error code NONE
        finally:
            b.stop()


def test_mutual_tls_lets_in_the_trusted_clients_only(tmp_path: Path, certs: Path) -> None:
    b = _broker(tmp_path, "mtls", **{"ssl.keystore.location": str(certs / "server.pem"),
                                     "ssl.truststore.location": str(certs / "ca.pem"),
                                     "ssl.client.auth": "required"})
    b.start()
    try:
        with _tls_conn(b.ssl_port, certs, client="client") as conn:
            assert _api_versions(conn)[4:6] == b"\x00\x00"
        for who in (None, "stranger"):  # no certificate; one from an untrusted CA
            try:
                with _tls_conn(b.ssl_port, certs, client=who) as conn:
                    assert _api_versions(conn) == b""
            except (ssl.SSLError, ConnectionError):
                pass  # refused during the handshake
        # librdkafka with the client certificate: a whole round trip.
        p = Producer(_ssl_client(b, certs, **{
            "ssl.certificate.location": str(certs / "client.crt"),
            "ssl.key.location": str(certs / "client.key")}))
        p.produce("mtls", value=b"x")
        assert p.flush(30) == 0
    finally:
        b.stop()
    # The principal the broker takes from that certificate (Kafka's default mapping).
    decoded = ssl._ssl._test_decode_cert(str(certs / "client.crt"))  # type: ignore[attr-defined]
    assert principal_of(decoded) == "User:CN=alice,OU=eng,O=coterie-test"


def test_principal_mapping_rules_name_the_principal_the_authorizer_sees(
        tmp_path: Path, certs: Path) -> None:
    """ssl.principal.mapping.rules per listener: on SSL the client certificate
    (CN=alice,OU=eng,...) is `User:ALICE@ENG`, a super user, so a DescribeAcls (DESCRIBE on
    the cluster) is answered; on STRICT no rule applies to it and it is not let in."""
    from kio.schema.describe_acls.v2.request import DescribeAclsRequest

    from tests.kafka_raw import RawConnection

    strict = free_port()
    b = _broker(tmp_path, "mapped", **{
        "ssl.keystore.location": str(certs / "server.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"), "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=([^,]*),.*$/$1@$2/U",
        "listener.name.strict.ssl.principal.mapping.rules": "RULE:^CN=nobody,.*$/x/",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ALICE@ENG"})
    b.config["listeners"] += f",STRICT://127.0.0.1:{strict}"
    b.config["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SSL:SSL,STRICT:SSL"
    b.start()
    try:
        conn = RawConnection.__new__(RawConnection)
        conn.sock, conn.correlation = _tls_conn(b.ssl_port, certs, client="client"), 0
        with conn:
            answer = conn.request(DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1))
        assert answer.error_code == 0, answer
        try:
            with _tls_conn(strict, certs, client="client") as refused:
                got = _api_versions(refused)
        except (ssl.SSLError, ConnectionError):
            got = b""  # refused in the handshake (TLS 1.3: right after it)
        assert got == b""
        # Meanwhile the broker serves others.
        with socket.create_connection(("127.0.0.1", b.port), timeout=10) as plain:
            assert _api_versions(plain)[4:6] == b"\x00\x00"
    finally:
        b.stop()


def test_misbehaving_tls_clients_are_closed_and_others_served(
        tls_broker: CoterieBroker, certs: Path) -> None:
    b = tls_broker
    plaintext = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    plaintext.sendall(API_VERSIONS_V0)  # Kafka's bytes where a TLS record belongs
    stalled = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    half = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello, cut short
    started = time.monotonic()
    # Meanwhile a well-behaved client is answered at once, on either listener.
    with _tls_conn(b.ssl_port, certs) as good:
        assert _api_versions(good)[4:6] == b"\x00\x00"
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as plain:
        assert _api_versions(plain)[4:6] == b"\x00\x00"
    assert time.monotonic() - started < 1.0
    assert _closed(plaintext, 5)
    # The stalled handshakes are closed once tls.handshake.timeout.ms (1.5 s) has passed.
    assert _closed(stalled, 10) and _closed(half, 10)
    assert time.monotonic() - started >= 1.0
    for s in (plaintext, stalled, half):
        s.close()
    with _tls_conn(b.ssl_port, certs) as again:
        assert _api_versions(again)[4:6] == b"\x00\x00"


def test_a_clients_close_notify_closes_the_connection(tls_broker: CoterieBroker,
                                                     certs: Path) -> None:
    """TLS's goodbye (close_notify) ends the client's stream: the broker closes the
    connection at once, as on a plaintext end of stream. asyncio's SSL transport (aiokafka)
    waits for that close, up to 30 s, on every connection it closes; coterie used to take
    the close_notify for "no data yet" and keep the connection open."""
    with _tls_conn(tls_broker.ssl_port, certs) as conn:
        assert _api_versions(conn)[4:6] == b"\x00\x00"
        conn.settimeout(5)
        started = time.monotonic()
        # unwrap sends close_notify, then reads until the broker's answer; the broker
        # closes the socket without a close_notify of its own.
        with contextlib.suppress(ssl.SSLEOFError, ConnectionError):
            conn.unwrap()
        assert time.monotonic() - started < 2


def test_the_java_client_over_mutual_tls(tmp_path: Path, certs: Path) -> None:
    """Kafka 4.2.1's Java client (kafka-topics' AdminClient) with a PEM keystore (its key and
    certificate) and a PEM truststore against an SSL listener that requires client
    certificates: it creates a topic and lists it; without the keystore it is refused."""
    from tests.fixtures.reference_broker import kafka_tool, load_reference_kafka

    b = _broker(tmp_path, "java-mtls", **{"ssl.keystore.location": str(certs / "server.pem"),
                                          "ssl.truststore.location": str(certs / "ca.pem"),
                                          "ssl.client.auth": "required"})
    keystore = tmp_path / "client.pem"
    keystore.write_text((certs / "client.key").read_text() + (certs / "client.crt").read_text())
    trust = (f"security.protocol=SSL\nssl.truststore.type=PEM\n"
             f"ssl.truststore.location={certs / 'ca.pem'}\n")
    with_cert = tmp_path / "mtls.properties"
    with_cert.write_text(trust + f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n")
    without = tmp_path / "no-cert.properties"
    without.write_text(trust + "default.api.timeout.ms=10000\nrequest.timeout.ms=5000\n")
    b.start()
    try:
        bootstrap = f"127.0.0.1:{b.ssl_port}"
        kafka_tool("org.apache.kafka.tools.TopicCommand", bootstrap, "--command-config",
                   str(with_cert), "--create", "--topic", "java-mtls", "--partitions", "1")
        listed = kafka_tool("org.apache.kafka.tools.TopicCommand", bootstrap,
                            "--command-config", str(with_cert), "--list")
        assert "java-mtls" in listed.split()
        lib = load_reference_kafka().fetch(log=lambda msg: None)  # kafka_tool fetched it
        refused = subprocess.run(
            ["java", "-Xmx256m", "-cp", f"{lib}/*", "org.apache.kafka.tools.TopicCommand",
             "--bootstrap-server", bootstrap, "--command-config", str(without), "--list"],
            capture_output=True, timeout=120)
        said = (refused.stdout + refused.stderr).decode(errors="replace")
        # TLS 1.3: the broker's alert comes after the client's side of the handshake.
        assert refused.returncode != 0 and "SslAuthenticationException" in said \
            and "certificate_required" in said, said[-2000:]
    finally:
        b.stop()


def test_enabled_protocols_and_cipher_suites_are_the_ones_served(tmp_path: Path,
                                                                 certs: Path) -> None:
    """`ssl.enabled.protocols` and `ssl.cipher.suites` with Kafka's names: a TLS 1.2-only
    listener with one suite negotiates that suite and nothing else; a TLS 1.3-only one
    refuses a TLS 1.2 client."""
    key = {"ssl.keystore.location": str(certs / "server.pem")}
    narrow = _broker(tmp_path, "narrow", **key, **{
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"})
    modern = _broker(tmp_path, "modern", **key, **{"ssl.enabled.protocols": "TLSv1.3"})

    def connect(port: int, versions: tuple[ssl.TLSVersion, ssl.TLSVersion],
                ciphers: str | None = None) -> ssl.SSLSocket:
        ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        ctx.minimum_version, ctx.maximum_version = versions
        if ciphers is not None:
            ctx.set_ciphers(ciphers)
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        return ctx.wrap_socket(raw, server_hostname="localhost")

    tls12 = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
    tls13 = (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    for b in (narrow, modern):
        b.start()
    try:
        with connect(narrow.ssl_port, tls12) as conn:  # type: ignore[attr-defined]
            assert conn.version() == "TLSv1.2"
            assert conn.cipher()[0] == "ECDHE-RSA-AES256-GCM-SHA384"
            assert _api_versions(conn)[4:6] == b"\x00\x00"
        for versions, ciphers in ((tls13, None), (tls12, "ECDHE-RSA-AES128-GCM-SHA256")):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                connect(narrow.ssl_port, versions, ciphers)  # type: ignore[attr-defined]
        with connect(modern.ssl_port, tls13) as conn:  # type: ignore[attr-defined]
            assert conn.version() == "TLSv1.3"
            assert _api_versions(conn)[4:6] == b"\x00\x00"
        with pytest.raises((ssl.SSLError, ConnectionError)):
            connect(modern.ssl_port, tls12)  # type: ignore[attr-defined]
    finally:
        for b in (narrow, modern):
            b.stop()
