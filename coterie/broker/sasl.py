"""SASL on the SASL_PLAINTEXT and SASL_SSL listeners (issue 25, point 3): settings, the
state of one connection's authentication, and the PLAIN mechanism (SCRAM's exchange is
coterie.broker.scram, its credentials coterie.broker.scram_credentials).

Kafka's names and rules, so that a Kafka `server.properties` and every client work:

* `sasl.enabled.mechanisms` (or `listener.name.<listener>.sasl.enabled.mechanisms`): the
  mechanisms a SASL listener serves. Kafka's default is GSSAPI, which coterie does not
  serve: a SASL listener must name its mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
* SCRAM's users are the credentials set with AlterUserScramCredentials (`kafka-configs
  --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`), not a JAAS line: a
  listener serving only SCRAM needs none, and a SCRAM JAAS line Kafka's brokers read
  (`listener.name.<listener>.scram-sha-256.sasl.jaas.config=...ScramLoginModule
  required;`) is accepted and has nothing for coterie to take.
* PLAIN's users come from the JAAS line Kafka reads,
  `listener.name.<listener>.plain.sasl.jaas.config`:
  `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
  password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";` —
  each `user_<name>="<password>"` is a user (`username`/`password` are what the broker
  itself would log in with, and are not users of their own). Without that line, from the
  JAAS file Kafka takes as the JVM property `java.security.auth.login.config` (coterie: a
  setting of that name, coterie.broker.jaas): its `<listener>.KafkaServer` section, else
  its `KafkaServer` section, Kafka's order. Last, coterie also takes
  `listener.name.<listener>.sasl.jaas.config` and `sasl.jaas.config` (Kafka's broker
  ignores those two, with a warning).
* Re-authentication (KIP-368): `connections.max.reauth.ms` (per listener and mechanism as
  `listener.name.<listener>.<mechanism>.connections.max.reauth.ms`, or per listener as
  `listener.name.<listener>.connections.max.reauth.ms`; default 0, off). When positive, a
  successful SaslAuthenticate answers it as the session's lifetime, and a request served
  after the session expired closes the connection; before that the client re-authenticates
  on the same connection (SaslHandshake and SaslAuthenticate again, the same mechanism and
  principal), at most once a second, as Kafka allows. `SaslState.refusal` is that gate.
* A connection on a SASL listener is served only ApiVersions, SaslHandshake (v1; Kafka 4
  dropped v0) and SaslAuthenticate until it has authenticated; anything else closes it, as
  on Kafka. A failed authentication is answered SASL_AUTHENTICATION_FAILED and the
  connection closed `connection.failed.authentication.delay.ms` later (100 ms), so that a
  client guessing passwords cannot go faster than that per connection.
* The principal of an authenticated connection is `User:<username>`.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coterie.broker.jaas import JaasError, LoginModule, read_jaas_file, section_users

__all__ = ["JAAS_FILE", "REAUTH_MIN_INTERVAL_S", "SUPPORTED", "SaslError", "SaslSettings",
           "SaslState", "check_plain", "jaas_file", "jaas_users", "reauth_ms",
           "sasl_settings"]

# The mechanisms coterie serves.
SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_USER = re.compile(r'\buser_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
# The setting naming the JAAS file: Kafka's JVM property, as a broker setting here.
JAAS_FILE = "java.security.auth.login.config"
# Kafka's KafkaChannel refuses a re-authentication begun less than a second after the last
# one began (the handshake is then answered as on an authenticated connection).
REAUTH_MIN_INTERVAL_S = 1.0
# What a SASL listener serves before authentication: SaslHandshake, ApiVersions,
# SaslAuthenticate (Kafka's rule); during a re-authentication, SaslAuthenticate only.
_BEFORE_AUTHENTICATION = frozenset({17, 18, 36})
_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36


class SaslError(ValueError):
    """SASL settings that cannot be used, with what is wrong."""


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What one SASL listener serves."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    # connections.max.reauth.ms by mechanism: the session lifetime a successful
    # authentication is given (0: sessions do not expire).
    reauth_ms: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class SaslState:
    """One connection's authentication: its mechanism once handshaken, a SCRAM exchange
    between its two SaslAuthenticate requests, whether it is done, and whether it failed
    (the connection is closing)."""

    settings: SaslSettings
    mechanism: str | None = None
    authenticated: bool = False
    failed: bool = False
    # The SCRAM exchange under way (coterie.broker.scram.ScramExchange): after the
    # client-first message, until the client-final one.
    scram: Any = None
    # KIP-368. When the session ends (time.monotonic()); None: never (re-authentication
    # off). Only an authenticated connection with an end may re-authenticate.
    expires_at: float | None = None
    # A re-authentication's handshake was answered; its SaslAuthenticate is awaited.
    reauthenticating: bool = False
    # When the last re-authentication began (time.monotonic()), 0.0: none yet.
    reauth_started: float = 0.0
    # A re-authentication asked for another mechanism: Kafka's words, the failure its
    # SaslAuthenticate gets.
    bad_mechanism: str | None = None

    def may_reauthenticate(self, now: float) -> bool:
        """Whether a SaslHandshake at `now` begins a re-authentication (Kafka's KafkaChannel:
        a session with an end, and no re-authentication begun within the last second)."""
        return (self.authenticated and self.expires_at is not None
                and not self.reauthenticating
                and (not self.reauth_started
                     or now - self.reauth_started >= REAUTH_MIN_INTERVAL_S))

    def refusal(self, api_key: int, now: float) -> str | None:
        """Why a request with `api_key`, served at `now`, closes the connection (None: it is
        served). Before authentication only ApiVersions and the SASL requests are served;
        during a re-authentication only its SaslAuthenticate; after the session expired
        only a SaslHandshake that begins a re-authentication (Kafka closes an expired
        connection at its next request, whatever it is)."""
        if not self.authenticated:
            if api_key in _BEFORE_AUTHENTICATION:
                return None
            return f"request with api key {api_key} before SASL authentication"
        if self.reauthenticating:
            if api_key == _SASL_AUTHENTICATE:
                return None
            return f"request with api key {api_key} during SASL re-authentication"
        if self.expires_at is None or now <= self.expires_at:
            return None
        if api_key == _SASL_HANDSHAKE and self.may_reauthenticate(now):
            return None
        return (f"request with api key {api_key} after the SASL session expired "
                f"(connections.max.reauth.ms) without re-authentication")


def jaas_users(jaas: str) -> dict[str, str]:
    """The `user_<name>="<password>"` entries of a JAAS line."""
    return {name: password.replace('\\"', '"').replace("\\\\", "\\")
            for name, password in _USER.findall(jaas)}


def _get(props: Mapping[str, str], listener: str, key: str) -> str | None:
    value = props.get(f"listener.name.{listener.lower()}.{key}")
    if value is None or value == "":
        value = props.get(key)
    return None if value is None or value == "" else value


def jaas_file(props: Mapping[str, str]) -> dict[str, tuple[LoginModule, ...]] | None:
    """The sections of the JAAS file named by `java.security.auth.login.config`, None when
    it is not set; SaslError, naming the setting and the file, when it cannot be read."""
    path = (props.get(JAAS_FILE) or "").strip()
    if not path:
        return None
    try:
        return read_jaas_file(path)
    except JaasError as e:
        raise SaslError(f"{JAAS_FILE}={path}: {e}") from None


def reauth_ms(props: Mapping[str, str], listener: str, mechanism: str) -> int:
    """connections.max.reauth.ms of one mechanism of a listener, with Kafka's precedence
    (the listener's mechanism's, the listener's, the broker's); 0 or less is off."""
    name = listener.lower()
    for key in (f"listener.name.{name}.{mechanism.lower()}.connections.max.reauth.ms",
                f"listener.name.{name}.connections.max.reauth.ms",
                "connections.max.reauth.ms"):
        value = (props.get(key) or "").strip()
        if value:
            try:
                return max(0, int(value))
            except ValueError:
                raise SaslError(f"{key}={value!r} is not a number of milliseconds") from None
    return 0


def _plain_users(props: Mapping[str, str], listener: str,
                 sections: Mapping[str, tuple[LoginModule, ...]] | None) -> dict[str, str]:
    """A PLAIN listener's users, from the first place that has a JAAS config for it
    (module docstring: Kafka's order, then coterie's own fallbacks); `sections`: the JAAS
    file's."""
    name = listener.lower()
    jaas = props.get(f"listener.name.{name}.plain.sasl.jaas.config")
    if jaas:
        return jaas_users(jaas)
    if sections is not None:
        for section in (f"{name}.KafkaServer", "KafkaServer"):
            if section in sections:
                return section_users(sections[section])
    return jaas_users(_get(props, listener, "sasl.jaas.config") or "")


def sasl_settings(props: Mapping[str, str], listener: str) -> SaslSettings:
    """A SASL listener's settings (module docstring); SaslError says what is wrong."""
    named = _get(props, listener, "sasl.enabled.mechanisms") or "GSSAPI"
    mechanisms = tuple(m.strip().upper() for m in named.split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in SUPPORTED]
    if unsupported or not mechanisms:
        raise SaslError(f"listener {listener}: sasl.enabled.mechanisms={named}: coterie "
                        f"serves {', '.join(SUPPORTED)} (not {', '.join(unsupported)}); "
                        f"name the mechanisms the listener serves")
    sections = jaas_file(props)  # read even when unused: a bad file is said at start
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        users = _plain_users(props, listener, sections)
        if not users:
            name = listener.lower()
            raise SaslError(f"listener {listener} serves PLAIN but its JAAS config names no "
                            f"user: set listener.name.{name}.plain.sasl.jaas.config with "
                            f'user_<name>="<password>" entries, or give them to '
                            f"PlainLoginModule in the {name}.KafkaServer or KafkaServer "
                            f"section of the JAAS file {JAAS_FILE} names")
    return SaslSettings(mechanisms, users,
                        {m: reauth_ms(props, listener, m) for m in mechanisms})


def check_plain(token: bytes, users: Mapping[str, str]) -> tuple[str | None, str]:
    """A PLAIN token (RFC 4616: authzid NUL authcid NUL passwd): (the username, "") when
    it names a user with that password, else (None, why, as Kafka words it)."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return None, "Invalid SASL/PLAIN response: expected 3 tokens"
    try:
        authzid, username, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        return None, "Invalid SASL/PLAIN response: not UTF-8"
    if not username:
        return None, "Authentication failed: username not specified"
    if authzid and authzid != username:
        return None, ("Authentication failed: Client requested an authorization id that is "
                      "different from username")
    expected = users.get(username)
    # Compared in constant time whether or not the user exists.
    ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
    if expected is None or not ok:
        return None, "Authentication failed: Invalid username or password"
    return username, ""
