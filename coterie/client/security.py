"""How the client library secures its connections: TLS and SASL settings under Kafka's names.

Why Kafka's names (and librdkafka's where Kafka has none): a program that already talks to a
Kafka cluster with confluent-kafka, kafka-python or Java carries its security settings as a
map of these properties; the same map works here unchanged (`security=` of `Cluster`,
`GroupMember`, `Consumer`, `LeaderElection`, `TaskDistribution`; `kafka.`-prefixed options of
the Spark source). Read by `SecuritySettings.from_properties`:

* `security.protocol`: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL.
* The CAs the broker's certificate must come from (default: the system's):
  `ssl.ca.location` (librdkafka) or `ssl.truststore.location` with `ssl.truststore.type`
  PEM (Kafka; PEM is the default here); inline: `ssl.ca.pem`, `ssl.truststore.certificates`.
* A client certificate (mutual TLS): `ssl.certificate.location` + `ssl.key.location`
  (librdkafka) or `ssl.keystore.location` with `ssl.keystore.type` PEM (Kafka: one file with
  the key and the chain); `ssl.key.password` for an encrypted key.
* `ssl.endpoint.identification.algorithm`: `https` (default), the certificate must name the
  host connected to; empty (or librdkafka's `none`): it need not.
* `sasl.mechanism` (librdkafka's `sasl.mechanisms` too): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512;
  the credentials as `sasl.username` + `sasl.password` (librdkafka) or Kafka's
  `sasl.jaas.config` (`...PlainLoginModule required username="u" password="p";`, or
  `ScramLoginModule`).

Kafka's rules: settings of a layer the protocol does not use are ignored (`ssl.*` under
PLAINTEXT, `sasl.*` under SSL); properties that are not security settings (`bootstrap.servers`,
`group.id` ...) are ignored, so a client's whole configuration may be passed. What coterie
cannot do is refused by name rather than ignored, since ignoring it would weaken the
connection or fail later, obscurely: JKS and PKCS12 stores (convert them to PEM), inline
client keys, GSSAPI and OAUTHBEARER, delegation tokens.

Pure values: no file is read until `ssl_context()` builds the TLS context (the Spark source
pickles these settings to its executors, which read the files there).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Self

from coterie.client.errors import SecuritySettingError

__all__ = ["PROTOCOLS", "SASL_MECHANISMS", "SaslCredentials", "SecuritySettings",
           "parse_jaas", "security_settings"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Settings coterie knows and cannot honour, with what to do instead.
_REFUSED = {
    "ssl.keystore.key": "inline keys are not supported; put the key and its chain in a PEM "
                        "file named by ssl.keystore.location",
    "ssl.keystore.certificate.chain": "inline certificates are not supported; use "
                                      "ssl.keystore.location",
    "ssl.key.pem": "inline keys are not supported; use ssl.key.location",
    "ssl.certificate.pem": "inline certificates are not supported; use "
                           "ssl.certificate.location",
    "ssl.keystore.password": "is for JKS and PKCS12 keystores, which are not supported; "
                             "convert the keystore to PEM (ssl.key.password is the PEM "
                             "key's password)",
}
_JAAS = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*)", re.S)
_JAAS_OPTION = re.compile(r'\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """A SASL mechanism and who logs in with it (the password is kept out of `repr`)."""

    mechanism: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """One client's security: the protocol and, when it uses them, TLS and SASL settings.

    The default is PLAINTEXT, which is what every connection was before these settings.
    """

    protocol: str = "PLAINTEXT"
    ca_location: str | None = None
    ca_pem: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    sasl: SaslCredentials | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise SecuritySettingError("security.protocol", f"must be one of "
                                       f"{', '.join(PROTOCOLS)}, not {self.protocol!r}")
        if self.uses_sasl and self.sasl is None:
            raise SecuritySettingError("sasl.mechanism", f"{self.protocol} needs SASL "
                                       "credentials (sasl.mechanism and sasl.username / "
                                       "sasl.password, or sasl.jaas.config)")
        if self.key_location is not None and self.certificate_location is None:
            raise SecuritySettingError("ssl.key.location", "needs ssl.certificate.location "
                                       "(or use ssl.keystore.location)")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> Self:
        """The settings named by Kafka's (and librdkafka's) client properties; raises
        SecuritySettingError naming the property that is missing, malformed or refused."""
        p = {str(k).strip().lower(): str(v).strip() for k, v in props.items()
             if v is not None}
        protocol = p.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise SecuritySettingError("security.protocol", f"must be one of "
                                       f"{', '.join(PROTOCOLS)}, not "
                                       f"{p['security.protocol']!r}")
        tls = _tls_fields(p) if protocol in ("SSL", "SASL_SSL") else {}
        sasl = _sasl(p) if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else None
        return cls(protocol=protocol, sasl=sasl, **tls)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client's TLS context (None without TLS): TLS 1.2 or newer, the broker's
        certificate checked against the CAs (and its name against the host unless turned
        off), the client certificate loaded when given. Reads the files now, so a missing or
        malformed one raises SecuritySettingError naming its setting."""
        if not self.uses_tls:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname and chain checked
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        if self.ca_location is None and self.ca_pem is None:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        else:  # only the CAs named, as Kafka's truststore: not the system's too
            try:
                if self.ca_location is not None:
                    ctx.load_verify_locations(cafile=self.ca_location)
                if self.ca_pem is not None:
                    ctx.load_verify_locations(cadata=self.ca_pem)
            except (OSError, ssl.SSLError) as e:
                name = ("ssl.ca.location (or ssl.truststore.location)"
                        if self.ca_location is not None else "ssl.ca.pem")
                raise SecuritySettingError(name, f"cannot be read as PEM CA certificates "
                                           f"({self.ca_location or 'inline'}): {e}") from e
        if self.certificate_location is not None:
            try:
                ctx.load_cert_chain(self.certificate_location, self.key_location,
                                    password=self.key_password)
            except (OSError, ssl.SSLError) as e:
                raise SecuritySettingError(
                    "ssl.certificate.location", "(with ssl.key.location / ssl.key.password,"
                    f" or ssl.keystore.location) cannot be loaded from "
                    f"{self.certificate_location}: {e}") from e
        return ctx


def security_settings(value: SecuritySettings | Mapping[str, object] | None
                      ) -> SecuritySettings:
    """What the APIs' `security=` argument accepts: settings, a map of Kafka's property names,
    or None (PLAINTEXT)."""
    if value is None:
        return SecuritySettings()
    if isinstance(value, SecuritySettings):
        return value
    if isinstance(value, Mapping):
        return SecuritySettings.from_properties(value)
    raise TypeError(f"security must be SecuritySettings or a mapping of Kafka client "
                    f"properties, not {type(value).__name__}")


def _refuse(p: Mapping[str, str], prefix: str) -> None:
    for name, why in _REFUSED.items():
        if name.startswith(prefix) and p.get(name):
            raise SecuritySettingError(name, why)


def _store_type(p: Mapping[str, str], name: str) -> None:
    kind = p.get(name, "PEM").upper()
    if kind != "PEM":
        raise SecuritySettingError(name, f"must be PEM, not {p[name]!r} (JKS and PKCS12 are "
                                   "not supported: convert the store to PEM)")


def _tls_fields(p: Mapping[str, str]) -> dict[str, object]:
    _refuse(p, "ssl.")
    out: dict[str, object] = {}
    ca = p.get("ssl.ca.location") or None
    truststore = p.get("ssl.truststore.location") or None
    if truststore is not None:
        _store_type(p, "ssl.truststore.type")
        if ca is not None and ca != truststore:
            raise SecuritySettingError("ssl.truststore.location", "and ssl.ca.location name "
                                       "different files: give one of them")
        ca = truststore
    out["ca_location"] = ca
    inline = [v for v in (p.get("ssl.ca.pem"), p.get("ssl.truststore.certificates")) if v]
    out["ca_pem"] = "\n".join(v.replace("\\n", "\n") for v in inline) or None

    cert = p.get("ssl.certificate.location") or None
    key = p.get("ssl.key.location") or None
    keystore = p.get("ssl.keystore.location") or None
    if keystore is not None:
        _store_type(p, "ssl.keystore.type")
        if cert is not None or key is not None:
            raise SecuritySettingError("ssl.keystore.location", "and ssl.certificate.location"
                                       " / ssl.key.location both name a client certificate: "
                                       "give one of them")
        cert = keystore
    if key is not None and cert is None:
        raise SecuritySettingError("ssl.key.location", "needs ssl.certificate.location (or "
                                   "use ssl.keystore.location)")
    out["certificate_location"] = cert
    out["key_location"] = key
    out["key_password"] = p.get("ssl.key.password") or None

    algorithm = p.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ("https", "", "none"):
        raise SecuritySettingError("ssl.endpoint.identification.algorithm", "must be https "
                                   f"or empty (or none), not {algorithm!r}")
    out["check_hostname"] = algorithm == "https"
    return out


def _sasl(p: Mapping[str, str]) -> SaslCredentials:
    name = "sasl.mechanism" if "sasl.mechanism" in p else "sasl.mechanisms"
    mechanism = p.get(name, "").upper()
    if not mechanism:
        raise SecuritySettingError("sasl.mechanism", "is required with SASL_PLAINTEXT and "
                                   "SASL_SSL (Kafka's default, GSSAPI, is not supported): "
                                   f"{', '.join(SASL_MECHANISMS)}")
    if mechanism not in SASL_MECHANISMS:
        raise SecuritySettingError(name, f"must be one of {', '.join(SASL_MECHANISMS)}, "
                                   f"not {p[name]!r}")
    jaas = p.get("sasl.jaas.config") or None
    username = p.get("sasl.username") or None
    password = p.get("sasl.password")
    if jaas is not None:
        if username is not None or p.get("sasl.password"):
            raise SecuritySettingError("sasl.jaas.config", "and sasl.username / "
                                       "sasl.password both give credentials: give one of them")
        username, password = _jaas_credentials(jaas, mechanism)
    if username is None:
        raise SecuritySettingError("sasl.username", f"is required for {mechanism} (or give "
                                   "sasl.jaas.config)")
    if password is None:
        raise SecuritySettingError("sasl.password", f"is required for {mechanism} (or give "
                                   "sasl.jaas.config)")
    return SaslCredentials(mechanism, username, password)


def parse_jaas(line: str) -> tuple[str, dict[str, str]]:
    """Kafka's one-entry JAAS line, `<LoginModule> required key="value" ...;`, as (login
    module, options). Raises SecuritySettingError (sasl.jaas.config) if it is not one."""
    m = _JAAS.fullmatch(line)
    if m is None:
        raise SecuritySettingError("sasl.jaas.config", "must read '<LoginModule class> "
                                   "required username=\"...\" password=\"...\";'")
    module, rest = m.group(1), m.group(3)
    options: dict[str, str] = {}
    pos = 0
    while True:
        opt = _JAAS_OPTION.match(rest, pos)
        if opt is None:
            break
        quoted = opt.group(2)
        value = (quoted.replace('\\"', '"').replace("\\\\", "\\") if quoted is not None
                 else opt.group(3))
        options[opt.group(1)] = value
        pos = opt.end()
    if rest[pos:].strip() != ";":
        raise SecuritySettingError("sasl.jaas.config", "must hold one login module and end "
                                   f"with ';' (cannot read {rest[pos:].strip()[:40]!r})")
    return module, options


def _jaas_credentials(jaas: str, mechanism: str) -> tuple[str | None, str | None]:
    module, options = parse_jaas(jaas)
    expected = _LOGIN_MODULES[mechanism]
    if module != expected:
        raise SecuritySettingError("sasl.jaas.config", f"names {module}, but "
                                   f"sasl.mechanism {mechanism} needs {expected}")
    if options.get("tokenauth", "false").lower() == "true":
        raise SecuritySettingError("sasl.jaas.config", "tokenauth=true: delegation tokens "
                                   "are not supported")
    return options.get("username"), options.get("password")
