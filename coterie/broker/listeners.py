"""The broker's listeners, read from Kafka's settings: `listeners`, `advertised.listeners`
and `listener.security.protocol.map` (issue 25).

Why Kafka's names and rules: an operator's `server.properties` and every client's idea of
"bootstrap on one listener, get that listener's addresses back" must work unchanged. So:

* `listeners` is a comma-separated list of `NAME://host:port`. A name is the listener's
  (any word; PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL name their own protocol), and
  `listener.security.protocol.map` (`NAME:PROTOCOL,...`; by default each protocol maps to
  itself) gives its security protocol. An empty host listens on every interface, as does
  0.0.0.0; port 0 takes a free port. Names and ports are unique.
* `advertised.listeners` says what clients are told to connect to, per listener name (each
  one of `listeners`); a listener not in it is advertised at its own address, an empty or
  0.0.0.0 host there as 127.0.0.1 (coterie does not guess a host name).
* When `listeners` is not set, the broker has one PLAINTEXT listener on `--host`/`--port`,
  advertised at `advertised.host`/`advertised.port` when given: coterie's settings before
  listeners existed. When it is set, it wins over `--host`/`--port`.

A client's requests are answered with the addresses of the listener it came in on
(Metadata, FindCoordinator, DescribeCluster), as on Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PROTOCOLS", "Listener", "ListenerError", "listeners_from"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
_ENTRY = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.]*\]|[^:/\[\]]*):(\d+)$")


class ListenerError(ValueError):
    """A listener setting that cannot be used, with what is wrong in it."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener: where it listens, how it is secured, what it advertises."""

    name: str  # upper case, as Kafka compares them
    protocol: str  # one of PROTOCOLS
    host: str  # "" listens on every interface
    port: int  # 0: a free one, chosen when it listens
    advertised_host: str
    advertised_port: int  # 0: the port it got

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _entries(text: str, what: str) -> list[tuple[str, str, int]]:
    out = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        m = _ENTRY.match(item)
        if m is None:
            raise ListenerError(f"{what}: {item!r} is not NAME://host:port")
        host = m.group(2)
        if host.startswith("["):
            host = host[1:-1]
        port = int(m.group(3))
        if port > 65535:
            raise ListenerError(f"{what}: {item!r} has no valid port")
        out.append((m.group(1).upper(), host, port))
    return out


def _protocol_map(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: {item!r} is not "
                                f"NAME:PROTOCOL with PROTOCOL one of {', '.join(PROTOCOLS)}")
        if name in out:
            raise ListenerError(f"listener.security.protocol.map names {name} twice")
        out[name] = protocol
    return out


def _advertisable(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def listeners_from(props: Mapping[str, str], host: str, port: int) -> list[Listener]:
    """The broker's listeners from its properties (module docstring); `host`/`port` are
    the command line's, used only when `listeners` is not set. ListenerError says what is
    wrong."""
    given = props.get("listeners", "").strip()
    if not given:
        return [Listener("PLAINTEXT", "PLAINTEXT", host, port, props.get("advertised.host", host),
                         int(props.get("advertised.port", port)))]
    protocols = _protocol_map(props.get("listener.security.protocol.map") or DEFAULT_MAP)
    entries = _entries(given, "listeners")
    names = [name for name, _, _ in entries]
    if len(set(names)) != len(names):
        raise ListenerError(f"listeners names a listener twice: {given}")
    ports = [p for _, _, p in entries if p]
    if len(set(ports)) != len(ports):
        raise ListenerError(f"listeners uses a port twice: {given}")
    advertised: dict[str, tuple[str, int]] = {}
    for name, a_host, a_port in _entries(props.get("advertised.listeners", ""),
                                         "advertised.listeners"):
        if name not in names:
            raise ListenerError(f"advertised.listeners names {name}, which is not one of "
                                f"listeners ({', '.join(names)})")
        if name in advertised:
            raise ListenerError(f"advertised.listeners names {name} twice")
        advertised[name] = (_advertisable(a_host), a_port)
    out = []
    for name, l_host, l_port in entries:
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerError(f"listener {name} has no security protocol: add it to "
                                f"listener.security.protocol.map")
        a_host, a_port = advertised.get(name, (_advertisable(l_host), l_port))
        out.append(Listener(name, protocol, l_host, l_port, a_host, a_port))
    return out
