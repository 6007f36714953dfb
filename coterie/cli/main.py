"""The `coterie` command line."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import sys
from pathlib import Path

import click

from coterie.broker.add_scram import AddScramError, parse_add_scram
from coterie.broker.config import BrokerConfig, ConfigError
from coterie.broker.scram import ScramCredential
from coterie.cli.console import broker_leases, start_broker_console
from coterie.cli.console import console as console_command
from coterie.console.server import ConsoleError


def _fail(message: str) -> None:
    click.echo(f"coterie: error: {message}", err=True)
    sys.exit(1)


@click.group()
def main() -> None:
    """coterie: a Kafka-wire-compatible broker built around the group coordinator."""


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=9092, show_default=True, type=int, help="Port to listen on.")
@click.option("--data-dir", default="./data", show_default=True,
              type=click.Path(path_type=Path), help="Where logs and state are kept.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="A Kafka-style .properties file with broker settings.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set one property (repeatable); wins over --config.")
@click.option("--storage", default=None, metavar="URI",
              help="Keep everything durable in PostgreSQL (postgresql://...): one broker of a "
                   "cluster on that database (docs/cluster.md). Default: local files.")
@click.option("--node-id", default=None, type=int,
              help="This broker's node.id (each broker of a cluster needs its own).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.option("--add-scram", "add_scram", multiple=True, metavar="SPEC",
              help="Set a SCRAM user before serving, as Kafka's kafka-storage format does: "
                   "'SCRAM-SHA-512=[name=admin,password=admin-secret]' (repeatable).")
def serve(host: str, port: int, data_dir: Path, config_file: Path | None,
          overrides: tuple[str, ...], storage: str | None, node_id: int | None,
          log_level: str, add_scram: tuple[str, ...]) -> None:
    """Run a broker until interrupted."""
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    props = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            _fail(f"--override wants KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    if storage is not None:
        props["storage"] = storage
    if node_id is not None:
        props["node.id"] = str(node_id)
    try:
        config = BrokerConfig.load(host, port, data_dir, config_file, props)
    except ConfigError as e:
        _fail(str(e))
    users = {}
    for spec in add_scram:
        try:
            key, credential = parse_add_scram(spec)
        except AddScramError as e:
            _fail(str(e))
        users[key] = credential
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(config, users))


async def _serve(config: BrokerConfig,
                 users: dict[tuple[str, int], ScramCredential] | None = None) -> None:
    from coterie.broker.cluster import ClusterStartError
    from coterie.broker.server import Broker
    from coterie.log.errors import LogError

    try:
        broker = await Broker.create(config)
    except ClusterStartError as e:
        _fail(str(e))
    except LogError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"cannot use data dir {config.data_dir}: {e.strerror or e}")
    try:
        await broker.set_scram_credentials(users or {})
    except (OSError, LogError) as e:
        with contextlib.suppress(Exception):
            await broker.stop()
        _fail(f"cannot set the --add-scram users: {e}")
    try:
        await broker.start()
    except ClusterStartError as e:
        await broker.stop()
        _fail(str(e))
    except OSError as e:
        broker.logs.close()
        reason = "address already in use" if e.errno == errno.EADDRINUSE else (e.strerror or e)
        where = config.props.get("listeners") or f"{config.host}:{config.port}"
        _fail(f"cannot listen on {where}: {reason}")
    try:
        # Its own thread and event loop: a console page never waits on, or delays, the
        # broker's loop; it reads the broker through a listener like any client, and the
        # cluster's leases (on PostgreSQL) through a database connection of its own.
        console = start_broker_console(config, broker.listener_specs, broker.listener_port,
                                       broker_leases(config))
    except ConsoleError as e:
        await broker.stop()
        _fail(str(e))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if console is not None:
        click.echo(f"coterie: console at {console.server.url if console.server else ''}",
                   err=True)
    for spec in broker.listener_specs:
        host, port = broker.services.address(spec.name)
        click.echo(f"coterie: serving {spec.name} ({spec.protocol}) on "
                   f"{spec.host or '*'}:{broker.listener_port(spec.name)}; connect with "
                   f"bootstrap.servers={host}:{port}", err=True)
    serve_task = asyncio.create_task(broker.serve_forever())
    await stop.wait()
    logging.getLogger("coterie.broker").info("shutting down")
    serve_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await serve_task
    if console is not None:
        await asyncio.to_thread(console.stop)
    await broker.stop()


main.add_command(console_command)


def _register_operator_commands() -> None:
    """The operator commands (`coterie groups ...`, `coterie topics ...`, `coterie produce`,
    `coterie consume`), imported here so that `coterie serve` does not load them."""
    from coterie.cli.consume import consume
    from coterie.cli.groups import groups
    from coterie.cli.produce import produce
    from coterie.cli.timeline import timeline
    from coterie.cli.topics import topics

    groups.add_command(timeline)
    for command in (groups, topics, produce, consume):
        main.add_command(command)


_register_operator_commands()
