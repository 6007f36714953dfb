"""SASL/SCRAM's server side (coterie.broker.scram) and its credential rules and store
(coterie.broker.scram_credentials), without a broker: RFC 7677's example exchange byte for
byte, scramp's own client against the server for both mechanisms, the refusals (unknown
user, wrong password, a tampered nonce or proof, tokenauth), Kafka's extensions, and
Kafka's checks of AlterUserScramCredentials."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from scramp import ScramClient

from coterie.broker.sasl import SaslError, sasl_settings
from coterie.broker.scram import (
    MECHANISMS,
    ScramCredential,
    ScramExchange,
    ScramFailed,
    credential_from_password,
)
from coterie.broker.scram_credentials import SCRAM_FILE, ScramCredentials, Upsertion, plan

SHA256, SHA512 = MECHANISMS["SCRAM-SHA-256"], MECHANISMS["SCRAM-SHA-512"]
SALT = b"0123456789abcdef"

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_exchange() -> ScramExchange:
    cred = credential_from_password(SHA256, "pencil", 4096, RFC_SALT)
    return ScramExchange("SCRAM-SHA-256", lambda u: cred if u == "user" else None,
                         server_nonce=RFC_SERVER_NONCE)


def test_rfc_7677_example_byte_for_byte() -> None:
    exchange = _rfc_exchange()
    assert exchange.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert exchange.username is None
    assert exchange.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert exchange.username == "user"
    with pytest.raises(ScramFailed):
        exchange.step(RFC_CLIENT_FINAL)  # over


@pytest.mark.parametrize("final", [
    RFC_CLIENT_FINAL.replace(b"r=rOprNGfwEbeRWgbNEkqO%hvYD", b"r=rOprNGfwEbeRWgbNEkqO%hvYX"),
    RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),
    RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # claims channel binding "y,,"
    RFC_CLIENT_FINAL[:-10],  # a proof cut short
    b"\xff\xfe",
], ids=["tampered-nonce", "tampered-proof", "tampered-binding", "short-proof", "not-utf8"])
def test_a_tampered_client_final_fails(final: bytes) -> None:
    exchange = _rfc_exchange()
    exchange.step(RFC_CLIENT_FIRST)
    with pytest.raises(ScramFailed):
        exchange.step(final)
    assert exchange.username is None


@pytest.mark.parametrize("first", [
    b"n,,n=nobody,r=abc",  # an unknown user fails at once, as on Kafka
    b"n,a=user,n=user,r=abc",  # an authorization id: Kafka's clients never send one
    b"p=tls-unique,,n=user,r=abc",  # channel binding: -PLUS is not served
    b"n,,n=user,r=abc,tokenauth=true",  # a delegation token: coterie has none
    b"nonsense", b"",
])
def test_a_refused_client_first(first: bytes) -> None:
    with pytest.raises(ScramFailed):
        _rfc_exchange().step(first)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scramp_client_logs_in_and_a_wrong_password_does_not(mechanism: str) -> None:
    cred = credential_from_password(MECHANISMS[mechanism], "alice-secret", 4096, SALT)
    for password, ok in (("alice-secret", True), ("guess", False)):
        client = ScramClient([mechanism], "alice", password)
        server = ScramExchange(mechanism, {"alice": cred}.get)
        server_first = server.step(client.get_client_first().encode())
        client.set_server_first(server_first.decode())
        final = client.get_client_final().encode()
        if not ok:
            with pytest.raises(ScramFailed):
                server.step(final)
            continue
        client.set_server_final(server.step(final).decode())  # checks the server's proof
        assert server.username == "alice"


def test_extensions_other_than_tokenauth_are_covered_by_the_proof_and_ignored() -> None:
    cred = credential_from_password(SHA512, "alice-secret", 4096, SALT)
    client = ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    first = client.get_client_first() + ",tokenauth=false,foo=bar"
    server = ScramExchange("SCRAM-SHA-512", {"alice": cred}.get)
    server_first = server.step(first.encode())
    client.set_server_first(server_first.decode())
    client.client_first_bare += ",tokenauth=false,foo=bar"  # what the client signs
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    assert server.username == "alice"


@pytest.mark.parametrize("salt", [b"salt", b"s\0l\0", b"x"])
def test_a_short_salt_logs_in(salt: bytes) -> None:
    """Kafka keeps any salt an admin client sends, so its user must be able to log in: the
    exchange serves salts shorter than scramp's own floor of 12 bytes."""
    cred = credential_from_password(SHA256, "password", 4096, salt)
    client = ScramClient(["SCRAM-SHA-256"], "alice", "password")
    server = ScramExchange("SCRAM-SHA-256", {"alice": cred}.get)
    server_first = server.step(client.get_client_first().encode())
    assert f",s={base64.b64encode(salt).decode()},".encode() in server_first
    client.set_server_first(server_first.decode())
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    assert server.username == "alice"


def _upsert(name: str = "alice", mechanism: int = SHA256, iterations: int = 8192,
            salt: bytes = SALT) -> Upsertion:
    return Upsertion(name, mechanism, iterations, salt, b"salted")


def test_kafkas_checks_of_an_alteration() -> None:
    changes = plan([("gone", SHA256), ("twice", SHA256), ("twice", SHA512)],
                   [_upsert(), _upsert("twice"), _upsert(""), _upsert("m", 0),
                    _upsert("few", iterations=4095), _upsert("many", iterations=16385),
                    _upsert("salt", salt=b""), _upsert("short", salt=b"salt"),
                    _upsert("max", SHA512, 16384),
                    _upsert("dup"), _upsert("dup", SHA512)])
    assert changes.deletions == [("gone", SHA256)]
    # Kafka takes a salt of any length (librdkafka's admin test sends 4 bytes); coterie
    # refuses only an empty one.
    assert set(changes.upserts) == {("alice", SHA256), ("max", SHA512), ("short", SHA256)}
    errors = {user: code for user, (code, _) in changes.errors.items()}
    assert errors == {"twice": ErrorCode.duplicate_resource, "": ErrorCode.unacceptable_credential,
                      "m": ErrorCode.unsupported_sasl_mechanism,
                      "few": ErrorCode.unacceptable_credential,
                      "many": ErrorCode.unacceptable_credential,
                      "salt": ErrorCode.unacceptable_credential,
                      "dup": ErrorCode.duplicate_resource}
    assert changes.errors["few"][1] == "Too few iterations"
    assert changes.errors["dup"][1] == ("A user credential cannot be altered twice in the "
                                        "same request")


def test_the_store_is_durable_and_keeps_no_password(tmp_path: Path) -> None:
    store = ScramCredentials(tmp_path)
    changes = plan([("nobody", SHA256)], [_upsert(), _upsert("bob", SHA512)])
    store.apply(changes)
    results = {r["user"]: r["error_code"] for r in changes.results()}
    assert results == {"alice": ErrorCode.none, "bob": ErrorCode.none,
                       "nobody": ErrorCode.resource_not_found}
    again = ScramCredentials(tmp_path)
    assert again.users() == ["alice", "bob"]
    assert again.get("alice", SHA256) == store.get("alice", SHA256)
    assert isinstance(again.get("bob", SHA512), ScramCredential)
    assert again.get("bob", SHA256) is None
    assert b"salted" not in (tmp_path / SCRAM_FILE).read_bytes()
    assert (tmp_path / SCRAM_FILE).stat().st_mode & 0o777 == 0o600
    again.apply(plan([("alice", SHA256)], []))
    assert ScramCredentials(tmp_path).users() == ["bob"]
    assert ScramCredentials(tmp_path, in_data_dir=False).users() == []  # a cluster's: adopted


def test_a_scram_only_listener_needs_no_jaas_users() -> None:
    settings = sasl_settings({"sasl.enabled.mechanisms": "SCRAM-SHA-256,scram-sha-512"},
                             "SASL_SSL")
    assert settings.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert sasl_settings({
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
        "SASL_SSL").mechanisms == ("SCRAM-SHA-512",)
    with pytest.raises(SaslError, match="names no user"):  # PLAIN still needs its users
        sasl_settings({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}, "SASL_SSL")
