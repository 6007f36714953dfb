"""The JAAS file (`java.security.auth.login.config`), where a listener's PLAIN users come
from, `connections.max.reauth.ms` by listener and mechanism, and the gate of a connection
whose SASL session ends (KIP-368): pure functions, no broker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coterie.broker.config import BrokerConfig, ConfigError
from coterie.broker.jaas import PLAIN_LOGIN_MODULE, JaasError, parse_jaas, section_users
from coterie.broker.sasl import (
    REAUTH_MIN_INTERVAL_S,
    SaslError,
    SaslSettings,
    SaslState,
    reauth_ms,
    sasl_settings,
)

FILE = r"""
// Kafka's example, with Java's comments and both quotes.
KafkaServer {
    org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED
        user_nobody="not a PLAIN user";
    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin"
        password="admin-secret"   /* the broker's own login */
        user_admin="admin-secret"
        user_alice='alice "quoted" \\ secret'
        user_eve=bare-word;
};
sasl_ssl.KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required
    user_bob="bob-secret"; };
Client { org.apache.zookeeper.server.auth.DigestLoginModule optional user_x="y"; };
KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule sufficient
    user_admin="ignored: the first entry naming a user wins" user_late="late"; };
"""
PLAIN_LINE = f'{PLAIN_LOGIN_MODULE} required user_carol="carol-secret";'


def test_a_jaas_file_is_read_as_java_reads_it() -> None:
    sections = parse_jaas(FILE)
    assert list(sections) == ["KafkaServer", "sasl_ssl.KafkaServer", "Client"]
    server = sections["KafkaServer"]
    assert [(m.name.rsplit(".", 1)[1], m.flag) for m in server] == [
        ("ScramLoginModule", "required"), ("PlainLoginModule", "required"),
        ("PlainLoginModule", "sufficient")]
    assert server[1].options["password"] == "admin-secret"
    assert section_users(server) == {"admin": "admin-secret",
                                     "alice": 'alice "quoted" \\ secret',
                                     "eve": "bare-word", "late": "late"}
    assert section_users(sections["Client"]) == {}
    assert parse_jaas("") == {} and parse_jaas("Empty { };") == {"Empty": ()}


@pytest.mark.parametrize(("text", "why"), [
    ("KafkaServer {\n  org.Module required user_a=\"x\"\n};",
     "line 3: expected an option of org.Module or ';', found '}'"),
    ("KafkaServer {\n org.Module mandatory;\n};", "line 2: org.Module needs a flag"),
    ("KafkaServer {\n org.Module required user_a=\"x;\n};", "line 2: a quoted value is not "
                                                          "closed"),
    ("KafkaServer { org.Module required; }", "the file ends where ';' after"),
    ("KafkaServer org.Module required; };", "line 1: expected '{' after section name"),
    ("/* never closed\nKafkaServer { };", "line 1: a /* comment is not closed"),
    ("KafkaServer { org.Module required user_a=; };", "expected the value of option user_a"),
])
def test_a_malformed_file_is_refused_with_its_line(text: str, why: str) -> None:
    with pytest.raises(JaasError, match=re.escape(why)):
        parse_jaas(text)


def _props(tmp_path: Path, text: str = FILE, **more: str) -> dict[str, str]:
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(text)
    return {"sasl.enabled.mechanisms": "PLAIN",
            "java.security.auth.login.config": str(path), **more}


def test_plain_users_come_in_kafkas_order(tmp_path: Path) -> None:
    props = _props(tmp_path)
    # The listener's own section of the file, else its KafkaServer section.
    assert sasl_settings(props, "SASL_SSL").plain_users == {"bob": "bob-secret"}
    assert set(sasl_settings(props, "SASL_PLAINTEXT").plain_users) == \
        {"admin", "alice", "eve", "late"}
    # The listener's mechanism property wins over the file.
    props["listener.name.sasl_ssl.plain.sasl.jaas.config"] = PLAIN_LINE
    assert sasl_settings(props, "SASL_SSL").plain_users == {"carol": "carol-secret"}
    # coterie's own fallbacks (Kafka ignores them) come after the file ...
    props["sasl.jaas.config"] = PLAIN_LINE
    assert "carol" not in sasl_settings(props, "SASL_PLAINTEXT").plain_users
    # ... and are used when the file has no section for the listener.
    only_client = _props(tmp_path, "Client { org.M required; };",
                         **{"sasl.jaas.config": PLAIN_LINE})
    assert sasl_settings(only_client, "SASL_SSL").plain_users == {"carol": "carol-secret"}
    # A section without a PlainLoginModule has no PLAIN user: refused at start, saying where.
    scram_only = _props(tmp_path, "KafkaServer { org.apache.kafka.common.security.scram."
                                  "ScramLoginModule required; };")
    with pytest.raises(SaslError, match=r"sasl_ssl\.KafkaServer or KafkaServer section"):
        sasl_settings(scram_only, "SASL_SSL")


def test_a_missing_or_malformed_file_stops_the_start(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.conf")
    with pytest.raises(ConfigError, match=re.escape(
            f"java.security.auth.login.config={missing}: cannot read the JAAS file {missing}")):
        BrokerConfig.load("127.0.0.1", 9092, tmp_path / "data",
                          overrides={"java.security.auth.login.config": missing})
    bad = _props(tmp_path, "KafkaServer {\n org.M required user_a=\"x\"\n")
    with pytest.raises(ConfigError, match=r"kafka_server_jaas\.conf: the file ends where"):
        BrokerConfig.load("127.0.0.1", 9092, tmp_path / "data", overrides=bad)
    # Read at start even when no listener takes its users (a SCRAM-only listener).
    scram = {**bad, "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    with pytest.raises(ConfigError, match=r"kafka_server_jaas\.conf"):
        BrokerConfig.load("127.0.0.1", 9092, tmp_path / "data", overrides=scram)


def test_connections_max_reauth_ms_by_listener_and_mechanism() -> None:
    props = {"connections.max.reauth.ms": "60000",
             "listener.name.sasl_ssl.connections.max.reauth.ms": "30000",
             "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": "1500"}
    assert reauth_ms(props, "SASL_SSL", "SCRAM-SHA-512") == 1500
    assert reauth_ms(props, "SASL_SSL", "PLAIN") == 30000
    assert reauth_ms(props, "SASL_PLAINTEXT", "PLAIN") == 60000
    assert reauth_ms({}, "SASL_SSL", "PLAIN") == 0  # Kafka's default: off
    assert reauth_ms({"connections.max.reauth.ms": "-5"}, "X", "PLAIN") == 0
    with pytest.raises(SaslError, match="not a number of milliseconds"):
        reauth_ms({"connections.max.reauth.ms": "soon"}, "X", "PLAIN")
    settings = sasl_settings({**props, "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"},
                             "SASL_SSL")
    assert settings.reauth_ms == {"SCRAM-SHA-256": 30000, "SCRAM-SHA-512": 1500}


def test_the_gate_of_a_session_that_ends() -> None:
    state = SaslState(SaslSettings(("PLAIN",)))
    # Before authentication: ApiVersions and the SASL requests only.
    assert state.refusal(18, 0.0) is None and state.refusal(17, 0.0) is None
    assert "before SASL authentication" in (state.refusal(3, 0.0) or "")
    state.authenticated, state.mechanism = True, "PLAIN"
    # A session without an end: everything, and no re-authentication.
    assert state.refusal(3, 1e9) is None and not state.may_reauthenticate(1e9)
    state.expires_at = 10.0
    assert state.refusal(3, 10.0) is None
    assert "after the SASL session expired" in (state.refusal(3, 10.001) or "")
    assert "after the SASL session expired" in (state.refusal(18, 10.001) or "")
    assert state.refusal(17, 10.001) is None  # a handshake re-authenticates, even late
    state.reauth_started = 9.5  # the last re-authentication began half a second ago
    assert not state.may_reauthenticate(10.0)
    assert state.refusal(17, 10.001) is not None  # so this handshake is not one
    assert state.may_reauthenticate(9.5 + REAUTH_MIN_INTERVAL_S)
    state.reauthenticating = True  # during one: its SaslAuthenticate only
    assert state.refusal(36, 99.0) is None
    assert "during SASL re-authentication" in (state.refusal(17, 9.0) or "")
