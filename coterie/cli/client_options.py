"""What every client command of `coterie` shares: where the cluster is, its security
settings, and how a failure ends the command.

`--bootstrap-server HOST:PORT` (Kafka's tools' name; default 127.0.0.1:9092) and
`--command-config FILE` (a Kafka client .properties file: `security.protocol`, `ssl.*`,
`sasl.*`, as Kafka's tools take it) on every command. `run_client` runs a command's
coroutine and turns the errors a script must be able to tell apart into one line on stderr
and exit code 1 (never a traceback): an unreachable cluster, an unknown topic, a broker's
error code, a bad security setting.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from coterie.broker.config import parse_properties
from coterie.client.errors import ClientError

T = TypeVar("T")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def fail(message: str, code: int = 1) -> None:
    click.echo(f"coterie: error: {message}", err=True)
    sys.exit(code)


def client_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add --bootstrap-server and --command-config to a command."""
    command = click.option(
        "--command-config", "command_config", type=click.Path(path_type=Path), default=None,
        help="A Kafka client .properties file (security.protocol, ssl.*, sasl.*).")(command)
    return click.option(
        "--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
        metavar="HOST:PORT", help="A broker of the cluster (comma-separated for several).",
    )(command)


def load_command_config(path: Path | None) -> dict[str, str]:
    """The properties of `--command-config` (empty without one); exits 1 if unreadable."""
    if path is None:
        return {}
    try:
        return parse_properties(path.read_text())
    except OSError as e:
        fail(f"cannot read --command-config {path}: {e.strerror or e}")
    except ValueError as e:
        fail(f"--command-config {path}: {e}")
    return {}


def run_client(coro: Coroutine[Any, Any, T]) -> T:
    """Run a client coroutine; ClientError (and a bad bootstrap address) end the command
    with its message and exit code 1, Ctrl-C with 130."""
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except ClientError as e:
        fail(str(e))
    except ValueError as e:  # a bootstrap address that is not HOST:PORT, a bad setting
        fail(str(e))
    except OSError as e:
        fail(str(e.strerror or e))
    raise AssertionError("unreachable")
