"""TLS for the SSL listeners, configured with Kafka's PEM settings (issue 25, point 2).

Kafka's names, so that a `server.properties` written for Kafka works:

* `ssl.keystore.type=PEM` with `ssl.keystore.location`, one PEM file holding the private
  key and the certificate chain; or the same inline, `ssl.keystore.key` and
  `ssl.keystore.certificate.chain`. `ssl.key.password` decrypts an encrypted key.
* `ssl.truststore.type=PEM` with `ssl.truststore.location` (or inline
  `ssl.truststore.certificates`): the CAs client certificates are checked against.
* `ssl.client.auth`: none (the default), requested or required.
* Every setting can be given for one listener as `listener.name.<name>.ssl.…` (the
  listener's name in lower case), which wins over the broker-wide one, as on Kafka.

Python's `ssl` module does the work, at TLS 1.2 or newer with its default ciphers (no
RC4, no export ciphers, forward secrecy first), renegotiation off. JKS and PKCS12 stores are
Java's: coterie refuses them with a message that says to convert them to PEM.

A client certificate's subject names the connection's principal: `User:` and the
subject's distinguished name in RFC 2253 form, most specific part first
(`User:CN=alice,OU=eng,O=example`), as Kafka's default `ssl.principal.mapping.rules`;
other rules are coterie.broker.ssl_principal's.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

from coterie.broker.ssl_principal import PrincipalMapper

__all__ = ["TlsConfigError", "principal_of", "server_context"]


class TlsConfigError(ValueError):
    """TLS settings that cannot be used, with what is wrong."""


def _setting(props: Mapping[str, str], listener: str, key: str) -> str | None:
    """`listener.name.<listener>.<key>` if set, else `<key>`; None when neither is."""
    value = props.get(f"listener.name.{listener.lower()}.{key}")
    if value is None or value == "":
        value = props.get(key)
    return None if value is None or value == "" else value


def _pem(text: str) -> str:
    """Inline PEM as Kafka takes it in a properties file: with its line breaks, with them
    written `\\n`, or with them lost (the blocks run together on one line)."""
    text = text.replace("\\n", "\n").strip()
    if "\n" in text:
        return text + "\n"
    out = []
    for label, body in _BLOCK.findall(text):
        b64 = "".join(body.split())
        lines = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        out.append(f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n")
    if not out:
        raise TlsConfigError("an inline ssl setting is not PEM (no -----BEGIN ...----- block)")
    return "".join(out)


_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def server_context(props: Mapping[str, str], listener: str) -> ssl.SSLContext:
    """The server-side context of one SSL listener (module docstring)."""
    def get(key: str) -> str | None:
        return _setting(props, listener, key)

    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        value = (get(kind) or "PEM").upper()
        if value != "PEM":
            raise TlsConfigError(f"{kind}={value} for listener {listener}: coterie reads PEM "
                                 f"files only (convert the store with openssl or keytool)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION | getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    password = get("ssl.key.password")
    location = get("ssl.keystore.location")
    key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    try:
        if location is not None:
            ctx.load_cert_chain(location, password=password)
        elif key is not None and chain is not None:
            _load_inline_chain(ctx, _pem(key), _pem(chain), password)
        else:
            raise TlsConfigError(
                f"listener {listener} is SSL but has no key: set ssl.keystore.location (a PEM "
                f"file with the key and the certificate chain) or ssl.keystore.key and "
                f"ssl.keystore.certificate.chain")
        trust = get("ssl.truststore.location")
        inline_trust = get("ssl.truststore.certificates")
        if trust is not None:
            ctx.load_verify_locations(cafile=trust)
        elif inline_trust is not None:
            ctx.load_verify_locations(cadata=_pem(inline_trust))
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"listener {listener}: cannot load its TLS key, certificates or "
                             f"trust store: {e}") from e
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in ("none", "requested", "required"):
        raise TlsConfigError(f"ssl.client.auth={auth}: must be none, requested or required")
    if auth != "none" and trust is None and inline_trust is None:
        raise TlsConfigError(f"listener {listener} asks for client certificates "
                             f"(ssl.client.auth={auth}) but has no ssl.truststore.location "
                             f"to check them against")
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}[auth]
    return ctx


def _load_inline_chain(ctx: ssl.SSLContext, key: str, chain: str,
                       password: str | None) -> None:
    """`load_cert_chain` reads files only: the inline PEM goes through a private temporary
    file (mode 0600), removed at once."""
    fd, path = tempfile.mkstemp(prefix="coterie-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(chain)
            f.write(key)
        ctx.load_cert_chain(path, password=password)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def principal_of(peer_cert: dict[str, Any] | None,
                 mapper: PrincipalMapper | None = None) -> str:
    """The principal of a TLS connection: `User:ANONYMOUS` without a client certificate,
    as on Kafka; else `User:` and what the listener's `ssl.principal.mapping.rules`
    (coterie.broker.ssl_principal; DEFAULT: the subject itself) make of the subject.
    NoRuleApplies when no rule does (the connection is refused)."""
    if not peer_cert:
        return "User:ANONYMOUS"
    parts = []
    for rdn in reversed(peer_cert.get("subject", ())):
        parts.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    subject = ",".join(parts)
    return "User:" + (subject if mapper is None else mapper.name(subject))


# The attribute names RFC 2253 writes short (Python's ssl gives the long ones).
_SHORT = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
          "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
          "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
