"""Kafka's listener settings read into coterie's listeners (coterie.broker.listeners) and
the principal a client certificate names (coterie.broker.tls.principal_of)."""

from __future__ import annotations

import ssl

import pytest

from coterie.broker.config import BrokerConfig, ConfigError
from coterie.broker.listeners import Listener, ListenerError, listeners_from
from coterie.broker.tls import (
    TlsConfigError,
    cipher_suites,
    enabled_protocols,
    principal_of,
    standard_suite_name,
)


def test_without_listeners_the_command_line_address_is_the_one_plaintext_listener():
    assert listeners_from({}, "0.0.0.0", 9092) == [
        Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092, "0.0.0.0", 9092)]
    assert listeners_from({"advertised.host": "broker1", "advertised.port": "19092"},
                          "127.0.0.1", 9092) == [
        Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092, "broker1", 19092)]


def test_listeners_win_over_the_command_line_and_map_names_to_protocols():
    got = listeners_from({
        "listeners": "INTERNAL://127.0.0.1:9092, EXTERNAL://:9093,ssl://[::1]:9094",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL,SSL:SSL",
        "advertised.listeners": "EXTERNAL://kafka.example.com:443",
    }, "ignored", 1)
    assert got == [
        Listener("INTERNAL", "PLAINTEXT", "127.0.0.1", 9092, "127.0.0.1", 9092),
        Listener("EXTERNAL", "SSL", "", 9093, "kafka.example.com", 443),
        Listener("SSL", "SSL", "::1", 9094, "::1", 9094),
    ]
    assert [lst.tls for lst in got] == [False, True, True]


def test_the_default_map_knows_the_four_protocols_by_name():
    got = listeners_from({"listeners": "PLAINTEXT://:1,SSL://:2,SASL_PLAINTEXT://:3,"
                                       "SASL_SSL://:4"}, "h", 0)
    assert [(lst.name, lst.protocol, lst.sasl) for lst in got] == [
        ("PLAINTEXT", "PLAINTEXT", False), ("SSL", "SSL", False),
        ("SASL_PLAINTEXT", "SASL_PLAINTEXT", True), ("SASL_SSL", "SASL_SSL", True)]


@pytest.mark.parametrize(("props", "message"), [
    ({"listeners": "PLAINTEXT://localhost"}, "is not NAME://host:port"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "names a listener twice"),
    ({"listeners": "A://:9092,B://:9092",
      "listener.security.protocol.map": "A:PLAINTEXT,B:SSL"}, "uses a port twice"),
    ({"listeners": "CLIENT://:9092"}, "has no security protocol"),
    ({"listeners": "A://:9092", "listener.security.protocol.map": "A:TLS"},
     "is not NAME:PROTOCOL"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:9093"},
     "which is not one of listeners"),
    ({"listeners": "PLAINTEXT://:99999"}, "no valid port"),
])
def test_bad_listener_settings_say_what_is_wrong(props, message):
    with pytest.raises(ListenerError, match=message):
        listeners_from(props, "h", 0)


def test_the_broker_refuses_unserved_sasl_and_ssl_without_a_key_at_start(tmp_path):
    with pytest.raises(ConfigError, match="serves PLAIN"):  # Kafka's default is GSSAPI
        BrokerConfig.load("h", 1, tmp_path, overrides={"listeners": "SASL_SSL://:9093"})
    with pytest.raises(ConfigError, match="has no key"):
        BrokerConfig.load("h", 1, tmp_path, overrides={"listeners": "SSL://:9093"})
    with pytest.raises(ConfigError, match="PEM files only"):
        BrokerConfig.load("h", 1, tmp_path, overrides={
            "listeners": "SSL://:9093", "ssl.keystore.type": "JKS",
            "ssl.keystore.location": "/x.jks"})
    with pytest.raises(ConfigError, match="cannot load"):
        BrokerConfig.load("h", 1, tmp_path, overrides={
            "listeners": "SSL://:9093", "ssl.keystore.location": str(tmp_path / "none.pem")})


def test_a_certificates_subject_is_the_principal_most_specific_part_first():
    cert = {"subject": ((("organizationName", "coterie-test"),),
                        (("organizationalUnitName", "eng"),),
                        (("commonName", "alice, the first"),))}
    assert principal_of(cert) == "User:CN=alice\\, the first,OU=eng,O=coterie-test"
    assert principal_of(None) == "User:ANONYMOUS"
    assert principal_of({}) == "User:ANONYMOUS"


def test_tls_versions_and_suites_are_read_with_kafkas_names():
    assert enabled_protocols(None) == [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]
    assert enabled_protocols(" TLSv1.3 ") == [ssl.TLSVersion.TLSv1_3]
    for old in ("TLSv1.1", "TLSv1,TLSv1.2", "SSLv3"):
        with pytest.raises(TlsConfigError, match=r"TLS 1\.2 and newer only"):
            enabled_protocols(old)
    with pytest.raises(TlsConfigError, match="not a TLS version"):
        enabled_protocols("TLSv9")
    # Kafka's (the JVM's standard) names and OpenSSL's name the same suites; TLS 1.3's are
    # always served.
    assert cipher_suites("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ECDHE-RSA-AES256-GCM-SHA384,"
                         "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,"
                         "TLS_AES_128_GCM_SHA256") == [
        "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"]
    assert standard_suite_name("ECDHE-RSA-AES128-SHA") == "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"
    assert standard_suite_name("AES256-GCM-SHA384") == "TLS_RSA_WITH_AES_256_GCM_SHA384"
    assert standard_suite_name("DHE-RSA-AES128-CCM8") == "TLS_DHE_RSA_WITH_AES_128_CCM8"
    assert standard_suite_name("ECDHE-ARIA256-GCM-SHA384") is None
    with pytest.raises(TlsConfigError, match="does not know"):
        cipher_suites("TLS_RSA_WITH_RC4_128_MD5")


def test_the_broker_refuses_tls_settings_it_cannot_honour_at_start(tmp_path):
    ssl_listener = {"listeners": "SSL://:9093", "ssl.keystore.location": "/x.pem"}
    with pytest.raises(ConfigError, match=r"TLS 1\.2 and newer only"):
        BrokerConfig.load("h", 1, tmp_path, overrides={
            **ssl_listener, "ssl.enabled.protocols": "TLSv1.1,TLSv1.2"})
    with pytest.raises(ConfigError, match=r"TLS 1\.3 suites only"):
        BrokerConfig.load("h", 1, tmp_path, overrides={
            **ssl_listener, "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"})
