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

* `ssl.enabled.protocols` (Kafka's default `TLSv1.2,TLSv1.3`): the versions served, among
  TLSv1.2 and TLSv1.3; an older one is refused at start (coterie serves TLS 1.2 and newer).
* `ssl.cipher.suites` (Kafka's default: the platform's): the TLS 1.2 suites served, by their
  standard names as Kafka's JVM takes them (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`) or by
  OpenSSL's (`ECDHE-RSA-AES128-GCM-SHA256`); a name neither knows is refused at start. TLS
  1.3's suites (`TLS_AES_128_GCM_SHA256`, ...) are all AEAD and Python's `ssl` cannot narrow
  them: listed ones are accepted, and a list of TLS 1.3 suites only serves TLS 1.3 only.

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
    versions = enabled_protocols(get("ssl.enabled.protocols"))
    ctx.options |= ssl.OP_NO_COMPRESSION | getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    suites = get("ssl.cipher.suites")
    if suites is not None:
        tls12 = cipher_suites(suites)
        if tls12:
            ctx.set_ciphers(":".join(tls12))
        else:  # TLS 1.3 suites only: nothing to offer a TLS 1.2 client
            versions = [v for v in versions if v is not ssl.TLSVersion.TLSv1_2]
            if not versions:
                raise TlsConfigError("ssl.cipher.suites lists TLS 1.3 suites only, but "
                                     "ssl.enabled.protocols does not enable TLSv1.3")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
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


_PROTOCOLS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_TOO_OLD = {"SSLV2", "SSLV3", "TLSV1", "TLSV1.1"}


def enabled_protocols(value: str | None) -> list[ssl.TLSVersion]:
    """`ssl.enabled.protocols` as the TLS versions to serve (Kafka's default: 1.2 and 1.3)."""
    names = [n.strip() for n in (value or "TLSv1.2,TLSv1.3").split(",") if n.strip()]
    out = []
    for name in names:
        if name.upper() in _TOO_OLD:
            raise TlsConfigError(f"ssl.enabled.protocols names {name}: coterie serves TLS 1.2 "
                                 f"and newer only (TLSv1.2, TLSv1.3)")
        version = _PROTOCOLS.get(name.upper())
        if version is None:
            raise TlsConfigError(f"ssl.enabled.protocols names {name!r}, not a TLS version "
                                 f"(TLSv1.2, TLSv1.3)")
        out.append(version)
    if not out:
        raise TlsConfigError("ssl.enabled.protocols is empty: name TLSv1.2 and/or TLSv1.3")
    return out


# OpenSSL's name of a TLS 1.2 suite, in the parts its standard (IANA) name is made of.
_OPENSSL_SUITE = re.compile(
    r"^(?:(ECDHE|DHE)-(RSA|ECDSA|DSS)-)?(?:AES(128|256)(-GCM|-CCM8|-CCM)?|(CHACHA20-POLY1305))"
    r"(?:-(SHA256|SHA384|SHA))?$")


def standard_suite_name(openssl_name: str) -> str | None:
    """The standard (IANA) name of a TLS 1.2 suite OpenSSL calls `openssl_name`, for the
    AES and ChaCha20 suites (None for the rest: they stay reachable by OpenSSL's name)."""
    m = _OPENSSL_SUITE.match(openssl_name)
    if m is None:
        return None
    kx, auth, bits, mode, chacha, mac = m.groups()
    head = f"TLS_{kx}_{auth}_WITH" if kx else "TLS_RSA_WITH"
    if chacha:
        return f"{head}_CHACHA20_POLY1305_SHA256"
    if mode == "-GCM":
        return f"{head}_AES_{bits}_GCM_{mac}"
    if mode in ("-CCM", "-CCM8"):
        return f"{head}_AES_{bits}_{mode[1:]}" if mac is None else None
    return f"{head}_AES_{bits}_CBC_{mac or 'SHA'}"


def cipher_suites(value: str) -> list[str]:
    """The OpenSSL names of the TLS 1.2 suites `ssl.cipher.suites` lists (module
    docstring); TLS 1.3 suites listed are checked and left out (always served)."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    probe.set_ciphers("ALL")
    known = probe.get_ciphers()
    tls13 = {c["name"] for c in known if c["protocol"] == "TLSv1.3"}
    by_name = {c["name"]: c["name"] for c in known if c["protocol"] != "TLSv1.3"}
    for name in list(by_name):
        standard = standard_suite_name(name)
        if standard is not None:
            by_name.setdefault(standard, name)
    out = []
    for name in (n.strip() for n in value.split(",")):
        if not name or name in tls13:
            continue
        found = by_name.get(name)
        if found is None:
            raise TlsConfigError(f"ssl.cipher.suites names {name!r}, a suite this broker's "
                                 f"TLS library does not know (give standard names such as "
                                 f"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, or OpenSSL's)")
        if found not in out:
            out.append(found)
    return out


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
