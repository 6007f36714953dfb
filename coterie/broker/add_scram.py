"""`coterie serve --add-scram`: SCRAM users set when the broker starts, in the syntax of
Kafka's `kafka-storage format --add-scram`.

Why: a broker whose every listener needs SASL (no operator's PLAINTEXT listener) has no one
who could create its first user with AlterUserScramCredentials. Kafka creates such users when
it formats its storage; coterie has no format step, so it sets them at start, before it
serves: `--add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'` (repeatable), with
`iterations=` (4096 unless given, as Kafka's tool), or a `salt=` and `saltedpassword=` (both
base64) instead of the password. A user given again is set again (the same credential when
the salt is given, a new salt otherwise): the flag can stay in a service's command line.
A single broker writes the credentials to its data directory; a cluster broker to the
database, as AlterUserScramCredentials does.
"""

from __future__ import annotations

import base64
import binascii
import os
import re

from coterie.broker.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    MIN_SALT_BYTES,
    ScramCredential,
    credential_from_password,
    credential_from_salted_password,
)

__all__ = ["AddScramError", "parse_add_scram"]

DEFAULT_ITERATIONS = 4096
_SPEC = re.compile(r"^\s*([A-Za-z0-9-]+)\s*=\s*\[(.*)\]\s*$", re.S)
_FIELD = re.compile(r'\s*([a-zA-Z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|$)')


class AddScramError(ValueError):
    """An --add-scram value that cannot be used, saying why."""


def parse_add_scram(text: str) -> tuple[tuple[str, int], ScramCredential]:
    """((user, mechanism), credential) of one --add-scram value (module docstring)."""
    m = _SPEC.match(text)
    if m is None:
        raise AddScramError(f"--add-scram {text!r}: expected MECHANISM=[name=...,password=...]"
                            f", e.g. 'SCRAM-SHA-512=[name=admin,password=admin-secret]'")
    mechanism_name, body = m.group(1).upper(), m.group(2)
    mechanism = MECHANISMS.get(mechanism_name)
    if mechanism is None:
        raise AddScramError(f"--add-scram: unknown mechanism {m.group(1)!r} "
                            f"(SCRAM-SHA-256 or SCRAM-SHA-512)")
    fields: dict[str, str] = {}
    at = 0
    while at < len(body):
        f = _FIELD.match(body, at)
        if f is None or f.end() == at:
            raise AddScramError(f"--add-scram {text!r}: cannot read {body[at:]!r}")
        key, value = f.group(1).lower(), f.group(2)
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        if key in fields:
            raise AddScramError(f"--add-scram: {key} given twice")
        fields[key] = value
        at = f.end()
    unknown = set(fields) - {"name", "password", "iterations", "salt", "saltedpassword"}
    if unknown:
        raise AddScramError(f"--add-scram: unknown field(s) {', '.join(sorted(unknown))} "
                            f"(name, password, iterations, salt, saltedpassword)")
    name = fields.get("name", "")
    if not name:
        raise AddScramError("--add-scram: a name is needed (name=...)")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise AddScramError(f"--add-scram: iterations={fields['iterations']!r} is not a "
                            f"number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise AddScramError(f"--add-scram: iterations must be {MIN_ITERATIONS} to "
                            f"{MAX_ITERATIONS}, not {iterations}")
    salted = fields.get("saltedpassword")
    if "password" in fields:
        if salted is not None:
            raise AddScramError("--add-scram: give a password or a saltedpassword, not both")
        salt = _base64(fields["salt"], "salt") if "salt" in fields else os.urandom(32)
        _check_salt(salt)
        return (name, mechanism), credential_from_password(mechanism, fields["password"],
                                                           iterations, salt)
    if salted is None or "salt" not in fields:
        raise AddScramError("--add-scram: a password is needed (password=...), or a salt "
                            "and a saltedpassword")
    salt = _base64(fields["salt"], "salt")
    _check_salt(salt)
    return (name, mechanism), credential_from_salted_password(
        mechanism, salt, iterations, _base64(salted, "saltedpassword"))


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise AddScramError(f"--add-scram: {what} is not base64") from None


def _check_salt(salt: bytes) -> None:
    if len(salt) < MIN_SALT_BYTES:
        raise AddScramError("--add-scram: the salt is empty" if not salt else
                            f"--add-scram: the salt must be at least {MIN_SALT_BYTES} bytes")
