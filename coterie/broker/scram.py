"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka serves them: the
credential a server keeps, and the server's side of one connection's exchange.

Why `scramp` does the exchange: the message grammar, the nonce and channel-binding checks
and the proof's constant-time comparison are where a hand-written SCRAM goes wrong; scramp
(pinned) is a small, widely used implementation of exactly RFC 5802/7677. What is Kafka's
own is around it:

* **The credential** is what RFC 5802 has a server keep: salt, iteration count, StoredKey
  and ServerKey. Kafka's admin clients send the *salted password* (Hi(password, salt, i))
  in AlterUserScramCredentials, never the password; `credential_from_salted_password`
  turns it into the two keys, as Kafka's controller does, and the salted password is not
  kept either.
* **Extensions.** Kafka's clients may add `name=value` attributes after the nonce of the
  client-first message (`tokenauth=true` for a delegation token). coterie has no delegation
  tokens: `tokenauth=true` fails as Kafka fails an unknown token; other extensions are
  ignored, as Kafka ignores them (they stay in the AuthMessage the proof covers).
* **Failures** all read the same to the client (`ScramFailed`; the handler answers Kafka's
  generic "Authentication failed during authentication due to invalid credentials with
  SASL mechanism ..."): an unknown user fails at the client-first message, as on Kafka; a
  wrong password, a tampered proof or a tampered nonce at the client-final message.
* **The GS2 header** must be `n,,` (or `y,,`): Kafka's clients send no authorization id and
  no channel binding, and the `-PLUS` mechanisms are not served.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

import scramp.core
from scramp import ScramException, ScramMechanism

__all__ = ["MAX_ITERATIONS", "MECHANISMS", "MIN_ITERATIONS", "MIN_SALT_BYTES",
           "ScramCredential", "ScramExchange", "ScramFailed", "credential_from_password",
           "credential_from_salted_password", "mechanism_name"]

# Kafka's ScramMechanism types (the int8 of AlterUserScramCredentials and
# DescribeUserScramCredentials; 0 is UNKNOWN), by mechanism name.
MECHANISMS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_HASHES = {1: hashlib.sha256, 2: hashlib.sha512}
# Kafka's bounds of a credential's iterations (both mechanisms' minimum is 4096; Kafka's
# controller refuses more than 16384).
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
# Kafka's brokers take the salt an admin client sends whatever its length (librdkafka's
# admin test sets the 4-byte "salt" and logs in with it), and a credential accepted must be
# one that can log in. scramp (pinned) refuses salts under 12 bytes wherever it meets one
# (NIST SP 800-132's advice for the salts it makes): its floor is lowered to one byte, so an
# empty salt, which no client sends, is still refused, and nothing else is.
MIN_SALT_BYTES = 1
scramp.core.Salt.MIN_LENGTH = MIN_SALT_BYTES


class ScramFailed(Exception):
    """The exchange failed: wrong password, unknown user, tampered or malformed message.
    Its text is for the broker's log only; the client is told Kafka's generic words."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of one user's password for one mechanism (RFC 5802 §2.2)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def mechanism_name(mechanism: int) -> str | None:
    """The name of Kafka's mechanism type `mechanism` (None: UNKNOWN or not SCRAM)."""
    for name, number in MECHANISMS.items():
        if number == mechanism:
            return name
    return None


def credential_from_salted_password(mechanism: int, salt: bytes, iterations: int,
                                    salted_password: bytes) -> ScramCredential:
    """The credential of a salted password, as RFC 5802 derives its keys:
    StoredKey = H(HMAC(SaltedPassword, "Client Key")),
    ServerKey = HMAC(SaltedPassword, "Server Key")."""
    digest = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    return ScramCredential(bytes(salt), iterations, digest(client_key).digest(),
                           hmac.new(salted_password, b"Server Key", digest).digest())


def credential_from_password(mechanism: int, password: str, iterations: int,
                             salt: bytes) -> ScramCredential:
    """The credential of a password (Hi() is PBKDF2 with the mechanism's HMAC): what a
    client's salted password comes to; for tests and tools."""
    name = _HASHES[mechanism]().name
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salt, iterations, salted)


class ScramExchange:
    """The server's side of one SCRAM exchange: `step` is given the client-first message,
    then the client-final one, and answers the server-first and server-final messages.
    `username` is set once the client has proved it knows the password."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 server_nonce: str | None = None) -> None:
        """`lookup(user)`: the user's credential for this mechanism, or None. A fixed
        `server_nonce` is for tests against RFC 7677's example."""
        self._lookup = lookup
        self._asked: str | None = None
        self._server = ScramMechanism(mechanism).make_server(self._auth_info,
                                                             s_nonce=server_nonce)
        self._steps = 0
        self.username: str | None = None

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int] | None:
        self._asked = user
        found = self._lookup(user)
        if found is None:
            return None
        return found.salt, found.stored_key, found.server_key, found.iterations

    def step(self, token: bytes) -> bytes:
        """The server's answer to the client's next message; ScramFailed if it fails."""
        self._steps += 1
        try:
            message = token.decode()
            if self._steps == 1:
                return self._first(message).encode()
            if self._steps == 2:
                self._server.set_client_final(message)
                answer = self._server.get_server_final()
                self.username = self._asked
                return answer.encode()
        except (ScramException, ValueError) as e:
            raise ScramFailed(str(e)) from None
        raise ScramFailed("the SCRAM exchange is already over")

    def _first(self, message: str) -> str:
        header, bare, extensions = _split_extensions(message)
        if extensions.get("tokenauth", "").lower() == "true":
            raise ScramFailed("delegation tokens are not served (tokenauth=true)")
        self._server.set_client_first(header + bare)
        if extensions:
            # The proof covers the client-first message as sent, extensions included
            # (Kafka's ClientFirstMessage.clientFirstMessageBare); scramp saw it without
            # them because it does not parse multi-letter attributes.
            self._server.client_first_bare = message[len(header):]
        return self._server.get_server_first()


def _split_extensions(message: str) -> tuple[str, str, dict[str, str]]:
    """A client-first message as (its GS2 header, its bare part without Kafka's
    extensions, the extensions): an extension is an attribute named by more than one
    letter, which RFC 5802's own attributes never are."""
    first = message.find(",")
    second = message.find(",", first + 1) if first >= 0 else -1
    if second < 0:
        raise ScramFailed("malformed client-first message: no GS2 header")
    kept: list[str] = []
    extensions: dict[str, str] = {}
    for attribute in message[second + 1:].split(","):
        name, equals, value = attribute.partition("=")
        if equals and len(name) > 1:
            extensions[name] = value
        else:
            kept.append(attribute)
    return message[:second + 1], ",".join(kept), extensions
