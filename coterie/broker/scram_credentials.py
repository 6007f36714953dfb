"""The SCRAM credentials of a broker's users, and Kafka's rules for changing them.

One credential per (user, mechanism), as on Kafka (coterie.broker.scram.ScramCredential:
salt, iterations, StoredKey, ServerKey; never the password). A single broker keeps them in
`scram-credentials.json` in its data directory, replaced atomically at every change, so a
change acknowledged to the client survives a kill -9. A broker of a cluster keeps them in
the database (coterie.storage.scram_rows) and `adopt`s the database's set at each of its
rounds, as Kafka's brokers each hold the credential records of the metadata log.

`plan` applies Kafka's checks of an AlterUserScramCredentials request (its controller's
ScramControlManager): one alteration per user per request, a non-empty user, a known
mechanism, 4096 to 16384 iterations. Whether a deletion finds a credential is the store's
to say (here, or the database for a cluster).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from coterie.broker.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    MIN_SALT_BYTES,
    ScramCredential,
    credential_from_salted_password,
    mechanism_name,
)
from coterie.log.files import atomic_write

__all__ = ["SCRAM_FILE", "Plan", "ScramCredentials", "Upsertion", "plan"]

SCRAM_FILE = "scram-credentials.json"
Key = tuple[str, int]  # (user, Kafka's mechanism type)
DUPLICATE = "A user credential cannot be altered twice in the same request"
NOT_FOUND = "Attempt to delete a user credential that does not exist"


@dataclass(frozen=True, slots=True)
class Upsertion:
    """One ScramCredentialUpsertion of a request, as the wire gives it."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(slots=True)
class Plan:
    """What a request changes: the credentials to set and to delete (checked), and each
    refused user's error, in Kafka's answer order (deletions, upsertions, then errors)."""

    upserts: dict[Key, ScramCredential] = field(default_factory=dict)
    deletions: list[Key] = field(default_factory=list)
    errors: dict[str, tuple[ErrorCode, str]] = field(default_factory=dict)

    def results(self) -> list[dict[str, object]]:
        """The AlterUserScramCredentials results (one per user)."""
        done = [(user, ErrorCode.none, None) for user, _ in self.deletions]
        done += [(user, ErrorCode.none, None) for user, _ in self.upserts]
        done += [(user, code, message) for user, (code, message) in self.errors.items()]
        return [{"user": u, "error_code": c, "error_message": m} for u, c, m in done]

    def not_found(self, missing: Iterable[Key]) -> None:
        """The deletions that found nothing become RESOURCE_NOT_FOUND."""
        for key in missing:
            if key in self.deletions:
                self.deletions.remove(key)
                self.errors[key[0]] = (ErrorCode.resource_not_found, NOT_FOUND)


def _refusal(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism_name(mechanism) is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def plan(deletions: Iterable[tuple[str, int]], upsertions: Iterable[Upsertion]) -> Plan:
    """Kafka's checks of one request (module docstring), in Kafka's order: every deletion,
    then every upsertion; a user named twice is DUPLICATE_RESOURCE, whatever else."""
    out = Plan()
    deleting: dict[str, Key] = {}
    upserting: dict[str, tuple[Key, ScramCredential]] = {}
    for name, mechanism in deletions:
        if name in out.errors:
            continue
        if deleting.pop(name, None) is not None:
            out.errors[name] = (ErrorCode.duplicate_resource, DUPLICATE)
            continue
        refused = _refusal(name, mechanism)
        if refused is not None:
            out.errors[name] = refused
        else:
            deleting[name] = (name, mechanism)
    for u in upsertions:
        if u.name in out.errors:
            continue
        if deleting.pop(u.name, None) is not None or upserting.pop(u.name, None) is not None:
            out.errors[u.name] = (ErrorCode.duplicate_resource, DUPLICATE)
            continue
        refused = _refusal(u.name, u.mechanism)
        if refused is None and u.iterations < MIN_ITERATIONS:
            refused = ErrorCode.unacceptable_credential, "Too few iterations"
        elif refused is None and u.iterations > MAX_ITERATIONS:
            refused = ErrorCode.unacceptable_credential, "Too many iterations"
        elif refused is None and len(u.salt) < MIN_SALT_BYTES:
            # coterie's own refusal (Kafka takes any salt, and no client sends an empty
            # one): the exchange serves every salt of at least MIN_SALT_BYTES (scram.py).
            refused = (ErrorCode.unacceptable_credential, "The salt must not be empty")
        if refused is not None:
            out.errors[u.name] = refused
            continue
        upserting[u.name] = ((u.name, u.mechanism), credential_from_salted_password(
            u.mechanism, u.salt, u.iterations, u.salted_password))
    out.deletions = list(deleting.values())
    out.upserts = dict(upserting.values())
    return out


class ScramCredentials:
    """Every user's credentials (module docstring). `get` is what an exchange asks."""

    def __init__(self, data_dir: Path, in_data_dir: bool = True) -> None:
        """`in_data_dir`: a single broker's, kept in the data directory; else a cluster
        broker's, given by the database (`adopt`)."""
        self._path = data_dir / SCRAM_FILE
        self._credentials: dict[Key, ScramCredential] = {}
        if in_data_dir and self._path.exists():
            self._credentials = _decode(json.loads(self._path.read_text()))

    def get(self, user: str, mechanism: int) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def users(self) -> list[str]:
        """Every user with a credential, once each, in name order."""
        return sorted({user for user, _ in self._credentials})

    def of(self, user: str) -> dict[int, ScramCredential]:
        """A user's credentials, by mechanism."""
        return {m: c for (u, m), c in sorted(self._credentials.items()) if u == user}

    def apply(self, changes: Plan) -> None:
        """A single broker: make `changes` (checked) durable, then current. A deletion of a
        credential there is not is turned into its error first (`Plan.not_found`)."""
        changes.not_found([k for k in changes.deletions if k not in self._credentials])
        if not changes.deletions and not changes.upserts:
            return
        updated = dict(self._credentials)
        for key in changes.deletions:
            del updated[key]
        updated.update(changes.upserts)
        # Readable by the broker's user only: StoredKey and ServerKey allow an offline
        # guess of the password, and ServerKey impersonating the broker to its clients.
        atomic_write(self._path, json.dumps(_encode(updated), sort_keys=True).encode(),
                     mode=0o600)
        self._credentials = updated

    def adopt(self, stored: Mapping[Key, ScramCredential]) -> None:
        """A cluster broker: the database's credentials (all of them) become this broker's.
        Kept in memory only: the database is where they last."""
        self._credentials = dict(stored)


def _encode(credentials: Mapping[Key, ScramCredential]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for (user, mechanism), c in credentials.items():
        out.setdefault(user, {})[mechanism_name(mechanism) or str(mechanism)] = {
            "salt": base64.b64encode(c.salt).decode(), "iterations": c.iterations,
            "stored_key": base64.b64encode(c.stored_key).decode(),
            "server_key": base64.b64encode(c.server_key).decode()}
    return out


def _decode(stored: Mapping[str, Mapping[str, Mapping]]) -> dict[Key, ScramCredential]:
    return {(user, MECHANISMS[name]): ScramCredential(
                base64.b64decode(c["salt"]), int(c["iterations"]),
                base64.b64decode(c["stored_key"]), base64.b64decode(c["server_key"]))
            for user, by_mechanism in stored.items() for name, c in by_mechanism.items()}
