"""The client's side of a SASL exchange, token by token, apart from the connection that
carries the tokens (`Connection` sends each in a SaslAuthenticate request).

Why apart: the mechanisms are pure functions of the credentials and the server's
challenges, so they are tested without a broker (SCRAM against scramp's server side), and the
connection only loops "send the token, hand the answer back" until the exchange is done.

* PLAIN (RFC 4616): one token, `\\0username\\0password` (no authorization id, as Kafka's
  clients send it); the server's answer is empty.
* SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, 7677) through `scramp` (pinned, as the broker's
  side): client-first, then client-final for the server-first, then the server-final
  message is checked, which proves the broker knows the password too; a server-final that
  does not is an authentication failure even though the broker said yes. No channel binding
  (`n,,`), as Kafka.
"""

from __future__ import annotations

from typing import Protocol

from scramp import ScramClient, ScramException

from coterie.client.errors import SaslAuthenticationError
from coterie.client.security import SaslCredentials

__all__ = ["SaslExchange", "sasl_exchange"]


class SaslExchange(Protocol):
    """One authentication, as the connection drives it."""

    mechanism: str

    def first(self) -> bytes:
        """The first token to send."""
        ...

    def answer(self, challenge: bytes) -> bytes | None:
        """The next token for the server's answer to the last one, or None: done."""
        ...


class PlainExchange:
    """SASL/PLAIN: one token and done."""

    def __init__(self, credentials: SaslCredentials) -> None:
        self.mechanism = "PLAIN"
        self._token = (b"\0" + credentials.username.encode() + b"\0"
                       + credentials.password.encode())

    def first(self) -> bytes:
        return self._token

    def answer(self, challenge: bytes) -> bytes | None:
        return None


class ScramExchange:
    """SASL/SCRAM-SHA-256 or -512: client-first, client-final, then the server's proof."""

    def __init__(self, credentials: SaslCredentials, *, nonce: str | None = None) -> None:
        self.mechanism = credentials.mechanism
        try:
            self._client = ScramClient([credentials.mechanism], credentials.username,
                                       credentials.password, c_nonce=nonce)
        except ScramException as e:
            raise SaslAuthenticationError(f"{self.mechanism}: cannot use the credentials: "
                                          f"{e}") from e
        self._step = 0

    def first(self) -> bytes:
        self._step = 1
        return self._client.get_client_first().encode()

    def answer(self, challenge: bytes) -> bytes | None:
        try:
            message = challenge.decode()
            if self._step == 1:
                self._client.set_server_first(message)
                self._step = 2
                return self._client.get_client_final().encode()
            if self._step == 2:
                self._client.set_server_final(message)
                self._step = 3
                return None
        except (ScramException, UnicodeDecodeError) as e:
            self._step = 3
            raise SaslAuthenticationError(f"{self.mechanism}: the broker's answer does not "
                                          f"check out: {e}") from e
        raise SaslAuthenticationError(f"{self.mechanism}: the exchange is already over")


def sasl_exchange(credentials: SaslCredentials) -> SaslExchange:
    """A fresh exchange for `credentials` (one per connection)."""
    if credentials.mechanism == "PLAIN":
        return PlainExchange(credentials)
    return ScramExchange(credentials)
