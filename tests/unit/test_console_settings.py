"""The console's settings: `console.listen`, the listener a broker's console reads through,
and the client properties of `coterie console --command-config`."""

from __future__ import annotations

from pathlib import Path

import pytest

from coterie.broker.config import BrokerConfig, ConfigError
from coterie.cli.console import broker_target, client_properties
from coterie.client.errors import SecuritySettingError
from coterie.console.admin_source import needs_login
from coterie.console.server import ConsoleError, parse_listen


def _config(**props: str) -> BrokerConfig:
    return BrokerConfig.load("127.0.0.1", 9092, Path("/nonexistent"), None, props)


def test_console_listen_is_host_and_port() -> None:
    assert _config().console_listen is None
    assert _config(**{"console.listen": "127.0.0.1:8080"}).console_listen == "127.0.0.1:8080"
    for bad in ("8080", "host:", "host:http", "host:70000"):
        with pytest.raises(ConfigError, match=r"console\.listen"):
            _config(**{"console.listen": bad})
    assert parse_listen("[::1]:8080") == ("::1", 8080)
    assert parse_listen(":8080") == ("0.0.0.0", 8080)
    with pytest.raises(ConsoleError):
        parse_listen("nope")


def test_the_brokers_console_prefers_its_sasl_plaintext_listener() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="a" password="a" user_a="a";')
    config = _config(**{
        "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://127.0.0.2:9093",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas})
    ports = {"PLAINTEXT": 19092, "SASL_PLAINTEXT": 19093}
    bootstrap, props = broker_target(config, config.listeners(), ports.__getitem__)
    assert bootstrap == "127.0.0.2:19093"
    assert props == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"}
    assert needs_login(props)
    plain = _config(**{"listeners": "PLAINTEXT://0.0.0.0:9092"})
    bootstrap, props = broker_target(plain, plain.listeners(), lambda _name: 9092)
    assert bootstrap == "127.0.0.1:9092" and not needs_login(props)


def test_a_broker_with_tls_listeners_only_cannot_host_its_console(tmp_path: Path) -> None:
    config = BrokerConfig(props={"listeners": "SSL://:9093"})
    with pytest.raises(ConsoleError, match="PLAINTEXT or SASL_PLAINTEXT"):
        broker_target(config, config.listeners(), lambda _name: 9093)


def test_command_config_credentials_are_dropped_under_sasl() -> None:
    props = client_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                               "sasl.username": "shared", "sasl.password": "secret"})
    assert props == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    with pytest.raises(SecuritySettingError):
        client_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"})
    assert client_properties({}) == {}
