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
  `listener.name.<listener>.plain.sasl.jaas.config` (or `listener.name.<listener>.sasl.
  jaas.config`, or `sasl.jaas.config`):
  `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
  password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";` —
  each `user_<name>="<password>"` is a user (`username`/`password` are what the broker
  itself would log in with, and are not users of their own).
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

__all__ = ["SUPPORTED", "SaslError", "SaslSettings", "SaslState", "check_plain",
           "jaas_users", "sasl_settings"]

# The mechanisms coterie serves.
SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_USER = re.compile(r'\buser_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SaslError(ValueError):
    """SASL settings that cannot be used, with what is wrong."""


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What one SASL listener serves."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)


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


def jaas_users(jaas: str) -> dict[str, str]:
    """The `user_<name>="<password>"` entries of a JAAS line."""
    return {name: password.replace('\\"', '"').replace("\\\\", "\\")
            for name, password in _USER.findall(jaas)}


def _get(props: Mapping[str, str], listener: str, key: str) -> str | None:
    value = props.get(f"listener.name.{listener.lower()}.{key}")
    if value is None or value == "":
        value = props.get(key)
    return None if value is None or value == "" else value


def sasl_settings(props: Mapping[str, str], listener: str) -> SaslSettings:
    """A SASL listener's settings (module docstring); SaslError says what is wrong."""
    named = _get(props, listener, "sasl.enabled.mechanisms") or "GSSAPI"
    mechanisms = tuple(m.strip().upper() for m in named.split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in SUPPORTED]
    if unsupported or not mechanisms:
        raise SaslError(f"listener {listener}: sasl.enabled.mechanisms={named}: coterie "
                        f"serves {', '.join(SUPPORTED)} (not {', '.join(unsupported)}); "
                        f"name the mechanisms the listener serves")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        jaas = (props.get(f"listener.name.{listener.lower()}.plain.sasl.jaas.config")
                or _get(props, listener, "sasl.jaas.config") or "")
        users = jaas_users(jaas)
        if not users:
            raise SaslError(f"listener {listener} serves PLAIN but its JAAS config names no "
                            f"user: set listener.name.{listener.lower()}.plain.sasl.jaas."
                            f'config with user_<name>="<password>" entries')
    return SaslSettings(mechanisms, users)


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
