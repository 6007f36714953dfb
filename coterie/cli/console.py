"""`coterie console`: the web console against any cluster; and the console a broker serves on
`console.listen` (started by `coterie serve`).

Both read the cluster through the Kafka protocol as a client (`coterie.console.admin_source`).
The broker's console connects to the broker's own listener: a SASL_PLAINTEXT listener when
the broker has one (users then log in to the console as users of the cluster, and see what
its ACLs let them describe), else a PLAINTEXT one. A broker with only TLS listeners cannot
host its console (it would need a client certificate or trust store of its own): run
`coterie console --command-config` beside it instead (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Mapping
from pathlib import Path

import click

from coterie.broker.config import BrokerConfig
from coterie.broker.listeners import Listener
from coterie.cli.connect import Connection, fail
from coterie.client.cluster import parse_bootstrap
from coterie.client.security import SASL_MECHANISMS, security_settings
from coterie.console.admin_source import needs_login, source_factory
from coterie.console.app import ConsoleApp
from coterie.console.lease_source import database_leases
from coterie.console.server import ConsoleError, ConsoleServer, ConsoleThread, parse_listen
from coterie.console.views import LeaseReader


def console_app(bootstrap: str, props: Mapping[str, str], page_timeout_s: float,
                leases: LeaseReader | None = None) -> ConsoleApp:
    login = needs_login(props)
    return ConsoleApp(source_factory(bootstrap, props, timeout_s=page_timeout_s,
                                     leases=leases),
                      needs_login=login, page_timeout_s=page_timeout_s + 2)


def client_properties(props: Mapping[str, str]) -> dict[str, str]:
    """A --command-config file's settings, checked the way the client reads them; with SASL
    the user name and password come from each console user instead, so the file's are
    dropped (and a placeholder user stands in for the check)."""
    out = dict(props)
    if needs_login(out):
        for key in ("sasl.username", "sasl.password", "sasl.jaas.config"):
            out.pop(key, None)
        security_settings({**out, "sasl.username": "u", "sasl.password": "p"})
    else:
        security_settings(out)
    return out


@click.command("console")
@click.option("--bootstrap-server", "bootstrap", default="127.0.0.1:9092", show_default=True,
              metavar="HOST:PORT", help="The cluster to show (comma-separated for several).")
@click.option("--command-config", "command_config", default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="A Kafka client properties file (security.protocol, ssl.*, sasl.mechanism); "
                   "with SASL, console users log in with their own cluster credentials.")
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Where the console serves its pages.")
@click.option("--timeout", "timeout_s", default=10.0, show_default=True,
              type=click.FloatRange(min=0.5), metavar="SECONDS",
              help="A page whose cluster reads take longer says the cluster is unreachable.")
def console(bootstrap: str, command_config: Path | None, listen: str,
            timeout_s: float) -> None:
    """Serve the web console of a Kafka-compatible cluster (coterie or Kafka)."""
    props = Connection(bootstrap, command_config, timeout_s).properties()
    try:
        parse_bootstrap(bootstrap)
        props = client_properties(props)
        host, port = parse_listen(listen)
    except (ValueError, ConsoleError) as e:  # SecuritySettingError is a ValueError
        fail(str(e))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(console_app(bootstrap, props, timeout_s), host, port))


async def _run(app: ConsoleApp, host: str, port: int) -> None:
    server = ConsoleServer(app, host, port)
    try:
        await server.start()
    except ConsoleError as e:
        fail(str(e))
    click.echo(f"coterie: console at {server.url}", err=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


# -- the broker's own console ------------------------------------------------------------------
def _connect_host(spec: Listener) -> str:
    if spec.host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if spec.host == "::":
        return "::1"
    return spec.host


def broker_target(config: BrokerConfig, specs: list[Listener], port_of
                  ) -> tuple[str, dict[str, str]]:
    """(bootstrap, client properties) of the listener the broker's console reads through."""
    by_protocol = {s.protocol: s for s in reversed(specs)}  # the first of each protocol
    spec = by_protocol.get("SASL_PLAINTEXT") or by_protocol.get("PLAINTEXT")
    if spec is None:
        raise ConsoleError("console.listen needs a PLAINTEXT or SASL_PLAINTEXT listener to "
                           "read the broker through; with TLS listeners only, run "
                           "`coterie console --command-config` beside the broker")
    host = _connect_host(spec)
    bootstrap = f"[{host}]:{port_of(spec.name)}" if ":" in host else f"{host}:{port_of(spec.name)}"
    if spec.protocol == "PLAINTEXT":
        return bootstrap, {"security.protocol": "PLAINTEXT"}
    name = spec.name.lower()
    enabled = config.props.get(f"listener.name.{name}.sasl.enabled.mechanisms") \
        or config.props.get("sasl.enabled.mechanisms", "")
    mechanisms = [m.strip().upper() for m in enabled.split(",") if m.strip()]
    usable = [m for m in mechanisms if m in SASL_MECHANISMS]
    if not usable:
        raise ConsoleError(f"listener {spec.name} serves no mechanism the console logs in "
                           f"with ({', '.join(SASL_MECHANISMS)})")
    return bootstrap, {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": usable[0]}


def start_broker_console(config: BrokerConfig, specs: list[Listener], port_of,
                         leases: LeaseReader | None = None) -> ConsoleThread | None:
    """The console of `console.listen` in a thread of its own, or None when not set.
    `leases` reads the cluster's leases for the brokers page (a broker on PostgreSQL:
    `broker_leases`). Raises ConsoleError when it cannot start."""
    listen = config.console_listen
    if listen is None:
        return None
    host, port = parse_listen(listen)
    bootstrap, props = broker_target(config, specs, port_of)
    thread = ConsoleThread(lambda: console_app(bootstrap, props, 10.0, leases), host, port)
    thread.start()
    return thread


def broker_leases(config: BrokerConfig) -> LeaseReader | None:
    """What the broker's console reads the cluster's leases with: on PostgreSQL storage, a
    connection of the console's own to the cluster's database (why not the broker's: see
    coterie.console.lease_source); None on local files (a lone broker has no leases)."""
    dsn = config.storage
    if dsn is None:
        return None
    return database_leases(dsn, application_name=f"coterie console of node {config.node_id}")
