"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (issue 25, point 3) with real clients and exact bytes.

One broker, for the module, with a PLAINTEXT, a SASL_PLAINTEXT and a SASL_SSL listener
serving both SCRAM mechanisms and no JAAS users (a SCRAM JAAS line is given and ignored).
Its users are made over PLAINTEXT with confluent-kafka's AlterUserScramCredentials and
described; confluent-kafka and kafka-python produce and consume over SASL_PLAINTEXT and
SASL_SSL with either mechanism; a wrong password is refused with Kafka's words; a tampered
nonce or proof, byte for byte, is answered SASL_AUTHENTICATION_FAILED and the connection
closed while another client is served; Kafka's error codes of the two admin APIs; the
credentials survive a kill -9; and Kafka's own kafka-configs creates and deletes a user.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

from tests.fixtures.coterie_broker import STORAGES, CoterieBroker, free_port
from tests.fixtures.reference_broker import kafka_tool, load_reference_kafka
from tests.integration.test_tls import certs  # noqa: F401 - the session's certificates
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(180)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
FAILED = "Authentication failed during authentication due to invalid credentials with SASL " \
         "mechanism "


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory,
                 certs: Path) -> Iterator[CoterieBroker]:  # noqa: F811
    """The module's broker, its users made with confluent-kafka's admin client over the
    PLAINTEXT listener: alice (both mechanisms, 8192 iterations) and bob (SCRAM-SHA-512)."""
    b = CoterieBroker(tmp_path_factory.mktemp("scram") / "data")
    b.sasl_port, b.sasl_ssl_port = free_port(), free_port()  # type: ignore[attr-defined]
    b.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port},"
                     f"SASL_SSL://127.0.0.1:{b.sasl_ssl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.location": str(certs / "server.pem"),
    })
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    # Kafka refuses two alterations of one user in one request: one request per mechanism.
    for user, mechanism, iterations in (("alice", SHA256, 8192), ("alice", SHA512, 8192),
                                        ("bob", SHA512, 4096)):
        done = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(mechanism, iterations), f"{user}-secret".encode())])
        done[user].result(10)
    yield b
    b.stop()


def scram_login(conn: RawConnection, mechanism: str, user: str, password: str,
                tamper: str = "") -> object:
    """A SCRAM exchange over `conn` with scramp's client; `tamper` ("nonce", "proof")
    changes that part of the client-final message. The last SaslAuthenticate answer."""
    assert conn.request(SaslHandshakeRequest(mechanism=mechanism)).error_code == ErrorCode.none
    client = ScramClient([mechanism], user, password)
    first = conn.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    if first.error_code != ErrorCode.none:
        return first
    client.set_server_first(first.auth_bytes.decode())
    final = client.get_client_final()
    if tamper == "nonce":
        final = final.replace(",r=", ",r=X", 1)
    elif tamper == "proof":
        proof = final.rsplit("p=", 1)[1]
        final = final.replace(proof, ("A" if proof[0] != "A" else "B") + proof[1:])
    answer = conn.request(SaslAuthenticateRequest(auth_bytes=final.encode()))
    if answer.error_code == ErrorCode.none:
        client.set_server_final(answer.auth_bytes.decode())  # the broker knew the keys
    return answer


def _metadata(conn: RawConnection) -> object:
    return conn.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))


def test_users_are_described_and_kafkas_errors_answered(scram_broker: CoterieBroker) -> None:
    admin = AdminClient({"bootstrap.servers": scram_broker.bootstrap})
    everyone = admin.describe_user_scram_credentials().result(10)  # users null: all of them
    described = {user: {(i.mechanism, i.iterations) for i in d.scram_credential_infos}
                 for user, d in everyone.items()}
    assert described["alice"] == {(SHA256, 8192), (SHA512, 8192)}
    assert described["bob"] == {(SHA512, 4096)}
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    refused = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("few", ScramCredentialInfo(SHA256, 1024), b"x"),
        UserScramCredentialDeletion("nobody", SHA256)])
    with pytest.raises(KafkaException, match="Too few iterations"):
        refused["few"].result(10)
    with pytest.raises(KafkaException, match="does not exist"):
        refused["nobody"].result(10)

    with RawConnection(scram_broker.host, scram_broker.port) as conn:
        upsert = ScramCredentialUpsertion(name="dave", mechanism=1, iterations=4096,
                                          salt=b"s" * 16, salted_password=b"p" * 32)
        answer = conn.request(AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion(name="dave", mechanism=2),
                       ScramCredentialDeletion(name="", mechanism=1)),
            upsertions=(upsert, ScramCredentialUpsertion(
                name="erin", mechanism=3, iterations=4096, salt=b"s" * 16,
                salted_password=b"p"), ScramCredentialUpsertion(
                name="fay", mechanism=2, iterations=16385, salt=b"s" * 16,
                salted_password=b"p"))))
        assert {r.user: r.error_code for r in answer.results} == {
            "dave": ErrorCode.duplicate_resource, "": ErrorCode.unacceptable_credential,
            "erin": ErrorCode.unsupported_sasl_mechanism,
            "fay": ErrorCode.unacceptable_credential}
        described = conn.request(DescribeUserScramCredentialsRequest(
            users=(UserName(name="bob"), UserName(name="bob"), UserName(name="dave"))))
        assert [(r.user, r.error_code, r.error_message) for r in described.results] == [
            ("bob", ErrorCode.duplicate_resource, "Cannot describe SCRAM credentials for the "
                                                   "same user twice in a single request: bob"),
            ("dave", ErrorCode.resource_not_found,
             "Attempt to describe a user credential that does not exist: dave")]


def _client(port: int, certs: Path, protocol: str, mechanism: str,  # noqa: F811
            password: str = "alice-secret", **more: object) -> dict[str, object]:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password,
            **more}
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    return conf


@pytest.mark.parametrize(("protocol", "mechanism"), [("SASL_PLAINTEXT", "SCRAM-SHA-512"),
                                                     ("SASL_SSL", "SCRAM-SHA-256")])
def test_clients_log_in_with_scram_and_produce_and_consume(
        scram_broker: CoterieBroker, certs: Path, protocol: str,  # noqa: F811
        mechanism: str) -> None:
    b = scram_broker
    port = b.sasl_port if protocol == "SASL_PLAINTEXT" else b.sasl_ssl_port
    topic = f"scram-{protocol.lower()}"
    p = Producer(_client(port, certs, protocol, mechanism))
    for i in range(100):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer(_client(port, certs, protocol, mechanism, **{"group.id": "unused"}))
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(100)]

    from kafka import KafkaConsumer
    extra = {"ssl_cafile": str(certs / "ca.pem")} if protocol == "SASL_SSL" else {}
    k = KafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{port}", security_protocol=protocol,
                      sasl_mechanism=mechanism, sasl_plain_username="bob" if
                      mechanism == "SCRAM-SHA-512" else "alice",
                      sasl_plain_password="bob-secret" if mechanism == "SCRAM-SHA-512"
                      else "alice-secret", auto_offset_reset="earliest",
                      consumer_timeout_ms=10_000, **extra)
    try:
        seen = [m.value for _, m in zip(range(100), k, strict=False)]  # no 101st wait
    finally:
        k.close()
    assert seen == got


def test_a_wrong_password_is_refused_with_kafkas_words(scram_broker: CoterieBroker,
                                                       certs: Path) -> None:  # noqa: F811
    errors: list = []
    p = Producer(_client(scram_broker.sasl_port, certs, "SASL_PLAINTEXT", "SCRAM-SHA-512",
                         password="guess", error_cb=errors.append))
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)  # serves the error callback
    assert any(FAILED + "SCRAM-SHA-512" in e.str() for e in errors), errors


def test_a_short_salt_is_taken_and_its_user_logs_in(scram_broker: CoterieBroker,
                                                    certs: Path) -> None:  # noqa: F811
    """Kafka takes any salt an admin client sends: librdkafka's admin test (0081) sets the
    4-byte "salt", with NUL bytes too, and the user must then be able to log in."""
    admin = AdminClient({"bootstrap.servers": scram_broker.bootstrap})
    for user, salt in (("gil", b"salt"), ("hal", b"s\0l\0")):
        done = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(SHA256, 4096), f"{user}-secret".encode(), salt)])
        done[user].result(10)
        conf = _client(scram_broker.sasl_port, certs, "SASL_PLAINTEXT", "SCRAM-SHA-256",
                       password=f"{user}-secret")
        p = Producer({**conf, "sasl.username": user})
        p.produce("short-salt", value=user.encode())
        assert p.flush(30) == 0


@pytest.mark.parametrize("tamper", ["nonce", "proof"])
def test_a_tampered_exchange_is_refused_and_others_are_served(scram_broker: CoterieBroker,
                                                              tamper: str) -> None:
    b = scram_broker
    with RawConnection(b.host, b.sasl_port) as other, RawConnection(b.host, b.sasl_port) as bad:
        assert scram_login(other, "SCRAM-SHA-256", "alice", "alice-secret").error_code == \
            ErrorCode.none
        failed = scram_login(bad, "SCRAM-SHA-256", "alice", "alice-secret", tamper=tamper)
        assert (failed.error_code, failed.error_message, failed.auth_bytes) == (
            ErrorCode.sasl_authentication_failed, FAILED + "SCRAM-SHA-256", b"")
        assert [x.port for x in _metadata(other).brokers] == [b.sasl_port]  # meanwhile
        started = time.monotonic()
        assert bad.is_closed_by_peer(wait=5)
        assert time.monotonic() - started < 2
        assert [x.port for x in _metadata(other).brokers] == [b.sasl_port]
    # An unknown user fails at the first message, as on Kafka; a mechanism the user has no
    # credential for is an unknown user.
    for mechanism, user in (("SCRAM-SHA-512", "nobody"), ("SCRAM-SHA-256", "bob")):
        with RawConnection(b.host, b.sasl_port) as conn:
            failed = scram_login(conn, mechanism, user, "whatever")
            assert (failed.error_code, failed.error_message) == (
                ErrorCode.sasl_authentication_failed, FAILED + mechanism)
            assert conn.is_closed_by_peer(wait=5)


def test_credentials_survive_a_kill_9(scram_broker: CoterieBroker) -> None:
    b = scram_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "kill9", ScramCredentialInfo(SHA512, 4096), b"kill9-secret")])["kill9"].result(10)
    b.restart_after_kill9()
    with RawConnection(b.host, b.sasl_port) as conn:
        assert scram_login(conn, "SCRAM-SHA-512", "kill9", "kill9-secret").error_code == \
            ErrorCode.none
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("kill9", SHA512)]
                                       )["kill9"].result(10)
    with RawConnection(b.host, b.sasl_port) as conn:
        assert scram_login(conn, "SCRAM-SHA-512", "kill9", "kill9-secret").error_code == \
            ErrorCode.sasl_authentication_failed
    assert "kill9-secret" not in (b.data_dir / "scram-credentials.json").read_text()


def test_kafka_configs_creates_and_deletes_a_user(scram_broker: CoterieBroker) -> None:
    """Kafka's kafka-configs (ConfigCommand) sets, describes and deletes a SCRAM credential.
    Its --describe of users asks DescribeClientQuotas first (coterie has no quotas and
    describes none) and then the credentials: the line is Kafka's."""
    b = scram_broker
    out = kafka_tool("kafka.admin.ConfigCommand", b.bootstrap, "--alter", "--add-config",
                     "SCRAM-SHA-256=[iterations=8192,password=carol-secret]",
                     "--entity-type", "users", "--entity-name", "carol")
    assert "Completed updating config for user carol" in out, out
    described = kafka_tool("kafka.admin.ConfigCommand", b.bootstrap, "--describe",
                           "--entity-type", "users", "--entity-name", "carol")
    assert described.strip() == \
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192"
    every = kafka_tool("kafka.admin.ConfigCommand", b.bootstrap, "--describe",
                       "--entity-type", "users")
    assert "user-principal 'carol'" in every and "user-principal 'alice'" in every, every
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    carol = admin.describe_user_scram_credentials(["carol"])["carol"].result(10)
    assert [(i.mechanism, i.iterations) for i in carol.scram_credential_infos] == [
        (SHA256, 8192)]
    with RawConnection(b.host, b.sasl_port) as conn:
        assert scram_login(conn, "SCRAM-SHA-256", "carol", "carol-secret").error_code == \
            ErrorCode.none
    kafka_tool("kafka.admin.ConfigCommand", b.bootstrap, "--alter", "--delete-config",
               "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "carol")
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(10)


def test_the_java_client_authenticates_with_scram_sha_512_over_sasl_ssl(
        scram_broker: CoterieBroker, certs: Path, tmp_path: Path) -> None:  # noqa: F811
    """Kafka 4.2.1's Java client (kafka-topics' AdminClient) over SASL_SSL with
    SCRAM-SHA-512, configured as a Java client is (a JAAS line, a PEM truststore, the
    default hostname check against the server certificate): it creates a topic and lists
    it; with a wrong password it gets nothing done."""
    b = scram_broker
    bootstrap = f"127.0.0.1:{b.sasl_ssl_port}"

    def config(password: str) -> str:
        path = tmp_path / f"client-{password}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="alice" password="{password}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={certs / 'ca.pem'}\n")
        return str(path)

    good = config("alice-secret")
    kafka_tool("org.apache.kafka.tools.TopicCommand", bootstrap, "--command-config", good,
               "--create", "--topic", "java-scram", "--partitions", "2")
    listed = kafka_tool("org.apache.kafka.tools.TopicCommand", bootstrap, "--command-config",
                        good, "--list")
    assert "java-scram" in listed.split()
    lib = load_reference_kafka().fetch(log=lambda msg: None)  # kafka_tool fetched it
    refused = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{lib}/*", "org.apache.kafka.tools.TopicCommand",
         "--bootstrap-server", bootstrap, "--command-config", config("wrong"), "--list"],
        capture_output=True, timeout=120)
    said = (refused.stdout + refused.stderr).decode(errors="replace")
    assert refused.returncode != 0 and FAILED + "SCRAM-SHA-512" in said, said[-2000:]


@pytest.mark.parametrize("storage", STORAGES, indirect=True)
def test_add_scram_lets_a_sasl_only_broker_have_its_first_user(tmp_path: Path,
                                                               coterie_factory) -> None:
    """A broker whose only listener needs SCRAM, with an authorizer: its first user comes
    from `coterie serve --add-scram` (Kafka's `kafka-storage format --add-scram` syntax),
    logs in and administers the broker; it survives a kill -9 and a restart with the flag
    again; a spec that cannot be read stops the broker at start, saying why. On both
    storages (a cluster broker writes the user to the database)."""
    b = coterie_factory(config={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"}, start=False)
    b.config.update({"listeners": f"SASL_PLAINTEXT://127.0.0.1:{b.port}",
                     "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    b.args = ["--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret,"
                             "iterations=8192]"]
    conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
            "sasl.password": "admin-secret"}
    b.start()
    try:
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("first", 1, 1)])["first"].result(10)
        described = admin.describe_user_scram_credentials(["admin"])["admin"].result(10)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
            (SHA512, 8192)]
        b.restart_after_kill9()
        assert "first" in AdminClient(conf).list_topics(timeout=10).topics
        wrong = AdminClient({**conf, "sasl.password": "nope"})
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=3)
    finally:
        b.stop()
    bad = subprocess.run([sys.executable, "-m", "coterie", "serve", "--port", str(free_port()),
                          "--data-dir", str(tmp_path / "bad"), "--add-scram",
                          "SCRAM-SHA-512=[name=admin]"], capture_output=True, timeout=60)
    assert bad.returncode == 1
    assert b"a password is needed" in bad.stderr
