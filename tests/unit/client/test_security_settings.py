"""The client's security settings (coterie.client.security) from Kafka's and librdkafka's
property names, each mistake named by its property; the TLS context they build; and the
SASL exchanges (coterie.client.sasl), SCRAM checked against scramp's server side."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from scramp import ScramException, ScramMechanism

from coterie.client.errors import SaslAuthenticationError, SecuritySettingError
from coterie.client.sasl import PlainExchange, ScramExchange, sasl_exchange
from coterie.client.security import (
    SaslCredentials,
    SecuritySettings,
    parse_jaas,
    security_settings,
)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="alice-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="bob" password="p\\"w";')


def test_plaintext_is_the_default_and_other_properties_are_ignored() -> None:
    s = SecuritySettings.from_properties({"bootstrap.servers": "h:1", "group.id": "g"})
    assert s == SecuritySettings() and not s.uses_tls and not s.uses_sasl
    assert s.ssl_context() is None
    assert security_settings(None) == s
    assert security_settings(s) is s
    # Kafka ignores the settings of a layer the protocol does not use.
    assert SecuritySettings.from_properties({"ssl.ca.location": "/x", "sasl.mechanism": "X"}) \
        == s


def test_ssl_with_librdkafka_names() -> None:
    s = SecuritySettings.from_properties({
        "security.protocol": "ssl", "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/c.crt", "ssl.key.location": "/c.key",
        "ssl.key.password": "key-secret", "ssl.endpoint.identification.algorithm": "none"})
    assert (s.protocol, s.ca_location, s.certificate_location, s.key_location,
            s.key_password, s.check_hostname) == ("SSL", "/ca.pem", "/c.crt", "/c.key",
                                                  "key-secret", False)
    assert s.uses_tls and not s.uses_sasl and s.sasl is None
    assert "key-secret" not in repr(s)


def test_ssl_with_kafka_names() -> None:
    s = SecuritySettings.from_properties({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem", "ssl.keystore.type": "pem",
        "ssl.keystore.location": "/client.pem", "ssl.endpoint.identification.algorithm": ""})
    assert (s.ca_location, s.certificate_location, s.key_location, s.check_hostname) == (
        "/ca.pem", "/client.pem", None, False)
    inline = SecuritySettings.from_properties({
        "security.protocol": "SSL", "ssl.truststore.certificates": "-----BEGIN X\\nY"})
    assert inline.ca_pem == "-----BEGIN X\nY" and inline.check_hostname


def test_sasl_with_username_and_password_or_jaas() -> None:
    plain = SecuritySettings.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "plain",
        "sasl.username": "alice", "sasl.password": "alice-secret"})
    assert plain.sasl == SaslCredentials("PLAIN", "alice", "alice-secret")
    assert "alice-secret" not in repr(plain)
    jaas = SecuritySettings.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "ssl.ca.location": "/ca.pem"})
    assert jaas.sasl == SaslCredentials("PLAIN", "alice", "alice-secret")
    assert jaas.uses_tls and jaas.uses_sasl and jaas.ca_location == "/ca.pem"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        scram = SecuritySettings.from_properties({
            "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.jaas.config": SCRAM_JAAS})
        assert scram.sasl == SaslCredentials(mechanism, "bob", 'p"w')


def test_parse_jaas() -> None:
    assert parse_jaas(' a.B required  x=1 y = "two words"  ;') == (
        "a.B", {"x": "1", "y": "two words"})


@pytest.mark.parametrize(("props", "named"), [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS",
      "ssl.truststore.location": "/t.jks"}, "ssl.truststore.type"),
    ({"security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
      "ssl.keystore.location": "/k.p12"}, "ssl.keystore.type"),
    ({"security.protocol": "SSL", "ssl.keystore.password": "x"}, "ssl.keystore.password"),
    ({"security.protocol": "SSL", "ssl.keystore.key": "-----BEGIN"}, "ssl.keystore.key"),
    ({"security.protocol": "SSL", "ssl.key.pem": "-----BEGIN"}, "ssl.key.pem"),
    ({"security.protocol": "SSL", "ssl.key.location": "/k"}, "ssl.key.location"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/a",
      "ssl.certificate.location": "/b"}, "ssl.keystore.location"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/a",
      "ssl.ca.location": "/b"}, "ssl.truststore.location"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
     "ssl.endpoint.identification.algorithm"),
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}, "sasl.mechanisms"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.username"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a"},
     "sasl.password"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a",
      "sasl.password": "b", "sasl.jaas.config": PLAIN_JAAS}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
      "sasl.jaas.config": PLAIN_JAAS}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "PlainLoginModule username=a"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": PLAIN_JAAS.rstrip(";")}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": SCRAM_JAAS.replace(";", " tokenauth=true;")}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": PLAIN_JAAS.replace('username="alice" ', "")}, "sasl.username"),
])
def test_mistakes_name_the_property(props: dict[str, str], named: str) -> None:
    with pytest.raises(SecuritySettingError) as info:
        SecuritySettings.from_properties(props)
    assert info.value.setting == named
    assert str(info.value).startswith(named)
    assert isinstance(info.value, ValueError)


def test_security_must_be_settings_or_a_mapping() -> None:
    with pytest.raises(TypeError, match="mapping of Kafka client properties"):
        security_settings("SSL")  # type: ignore[arg-type]


def test_the_tls_context(tmp_path: Path) -> None:
    ctx = SecuritySettings(protocol="SSL").ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    relaxed = SecuritySettings(protocol="SASL_SSL", check_hostname=False,
                               sasl=SaslCredentials("PLAIN", "a", "b")).ssl_context()
    assert relaxed is not None and not relaxed.check_hostname
    assert relaxed.verify_mode == ssl.CERT_REQUIRED  # the chain is still checked
    with pytest.raises(SecuritySettingError, match=r"^ssl\.ca\.location.*missing\.pem"):
        SecuritySettings(protocol="SSL", ca_location=str(tmp_path / "missing.pem")).ssl_context()
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(SecuritySettingError, match=r"^ssl\.certificate\.location"):
        SecuritySettings(protocol="SSL",
                         certificate_location=str(tmp_path / "junk.pem")).ssl_context()


def test_plain_sends_one_token() -> None:
    exchange = sasl_exchange(SaslCredentials("PLAIN", "alice", "s3cret"))
    assert isinstance(exchange, PlainExchange)
    assert exchange.first() == b"\0alice\0s3cret"
    assert exchange.answer(b"") is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_scramps_server(mechanism: str) -> None:
    """The client's exchange against scramp's server side, in process: the right password
    gets through and the server's proof is checked; a server that does not know the
    password (its proof is wrong) is refused even if it would let the client in."""
    m = ScramMechanism(mechanism)
    stored = m.make_auth_info("pencil", iteration_count=4096)

    def run_exchange(client_password: str, server_info: tuple) -> None:
        users: list[str] = []
        server = m.make_server(lambda user: users.append(user) or server_info)
        client = sasl_exchange(SaslCredentials(mechanism, "user,=x", client_password))
        assert isinstance(client, ScramExchange) and client.mechanism == mechanism
        first = client.first()
        assert first.startswith(b"n,,n=user=2C=3Dx,r=")  # no channel binding; escaped name
        server.set_client_first(first.decode())
        assert users == ["user,=x"]
        final = client.answer(server.get_server_first().encode())
        assert final is not None
        server.set_client_final(final.decode())
        assert client.answer(server.get_server_final().encode()) is None

    run_exchange("pencil", stored)
    with pytest.raises(ScramException):
        run_exchange("wrong", stored)  # the server refuses the client's proof
    impostor = m.make_auth_info("other", iteration_count=4096)
    client = sasl_exchange(SaslCredentials(mechanism, "u", "pencil"))
    server = m.make_server(lambda _user: impostor)
    server.set_client_first(client.first().decode())
    final = client.answer(server.get_server_first().encode())
    assert final is not None
    # The impostor cannot check the proof; it answers with its own signature anyway.
    with pytest.raises(ScramException):
        server.set_client_final(final.decode())
    with pytest.raises(SaslAuthenticationError, match=mechanism):
        client.answer(b"v=bm90IHRoZSByaWdodCBzaWduYXR1cmU=")
    with pytest.raises(SaslAuthenticationError, match="already over"):
        client.answer(b"v=")
