"""Who may scrape `/metrics`: HTTP Basic credentials checked against the broker's own users.

Why the broker's own users: a broker that authenticates its clients (a SASL listener) holds
numbers an outsider should not read (group and topic names, lag, who is busy), and an
operator already manages its users; a second password file for the metrics would be one more
secret to rotate. So a scrape presents `Authorization: Basic base64(user:password)` and the
password is checked as SASL would check it: against the PLAIN users of the SASL listeners'
JAAS configs (coterie.broker.sasl), else against the user's SCRAM credentials
(coterie.broker.scram_credentials: the password is salted and hashed with the credential's
salt and iterations, and the StoredKey compared). The principal is then `User:<name>`, as on
the wire, and the ACLs decide what it sees (coterie.broker.metrics_http).

Runs on the scrape's thread, never on the event loop (PBKDF2 takes milliseconds): the PLAIN
users are fixed at start-up, and a SCRAM credential is one `dict.get` of a table the loop
replaces whole (`ScramCredentials` is copy-on-write), never iterated here.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Mapping

from coterie.broker.scram import MECHANISMS, ScramCredential, credential_from_password

__all__ = ["BasicAuth", "basic_credentials"]

# The longest Authorization header value looked at (anything longer is refused unread).
MAX_HEADER_CHARS = 4096


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header value; None when there is
    none or it is malformed (not Basic, not base64, not UTF-8, no colon, empty user)."""
    if not header or len(header) > MAX_HEADER_CHARS:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic" or not encoded.strip():
        return None
    try:
        text = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, colon, password = text.partition(":")
    if not colon or not user:
        return None
    return user, password


class BasicAuth:
    """Checks Basic credentials (module docstring). `plain_users`: user -> password of the
    PLAIN listeners; `scram`: (user, mechanism number) -> credential or None."""

    def __init__(self, plain_users: Mapping[str, str],
                 scram: Callable[[str, int], ScramCredential | None]) -> None:
        self.plain_users = dict(plain_users)
        self.scram = scram

    def user(self, header: str | None) -> str | None:
        """The user the header authenticates, or None."""
        found = basic_credentials(header)
        if found is None:
            return None
        user, password = found
        expected = self.plain_users.get(user)
        if expected is not None:
            if hmac.compare_digest(expected.encode(), password.encode()):
                return user
            return None
        for number in MECHANISMS.values():
            credential = self.scram(user, number)
            if credential is None:
                continue
            guess = credential_from_password(number, password, credential.iterations,
                                             credential.salt)
            if hmac.compare_digest(guess.stored_key, credential.stored_key):
                return user
            return None
        return None
