"""How an operator command reaches a cluster, and how its failures become exit codes.

The options are those of Kafka's tools, so that a command line moves between them unchanged:
`--bootstrap-server HOST:PORT` (default 127.0.0.1:9092) and `--command-config FILE`, a
Kafka client properties file whose security settings (`security.protocol`, `ssl.*`,
`sasl.*`, `sasl.jaas.config`) secure every connection (`coterie.client.security`); plus
`--timeout SECONDS`, the bound on the whole command, so that an unreachable cluster ends the
command instead of retrying for ever.

Exit codes a script can rely on (docs/operations.md):
  0  done;
  1  the cluster said no or could not be reached: an unknown group or topic, a group that is
     not inactive, an authentication failure, no broker within --timeout ... with one line
     `coterie: error: ...` on stderr, never a traceback;
  2  the command line is wrong (click's usage errors, a --command-config file that does
     not exist among them);
  130  interrupted (Ctrl-C).

`cluster_options` is for the admin commands (`groups`, `topics`, `console`), which bound the
whole command by --timeout; `bootstrap_options` gives only the two connection options, for
`produce`, `consume` and `groups timeline`, whose waits are their own options.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from coterie.admin.client import AdminClient, AdminError
from coterie.broker.config import parse_properties
from coterie.client.errors import ClientError

T = TypeVar("T")

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print `coterie: error: message` on stderr and exit (1 unless told otherwise)."""
    click.echo(f"coterie: error: {message}", err=True)
    sys.exit(code)


def bootstrap_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--bootstrap-server and --command-config, passed on as `bootstrap` and
    `command_config`."""
    command = click.option(
        "--command-config", "command_config", default=None,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A Kafka client properties file (security.protocol, ssl.*, sasl.*).")(command)
    return click.option(
        "--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
        metavar="HOST:PORT", help="The cluster to connect to (comma-separated for several).",
    )(command)


def load_command_config(path: Path | None) -> dict[str, str]:
    """The properties of `--command-config` (empty without one); exits 1 if unreadable."""
    if path is None:
        return {}
    try:
        return parse_properties(path.read_text())
    except OSError as e:
        fail(f"cannot read --command-config {path}: {e.strerror or e}")
    except (UnicodeDecodeError, ValueError) as e:
        fail(f"--command-config {path}: {e}")


def run_client(coro: Coroutine[Any, Any, T]) -> T:
    """Run a client coroutine; ClientError (and a bad bootstrap address) end the command
    with its message and exit code 1, Ctrl-C with 130."""
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        fail("interrupted", EXIT_INTERRUPTED)
    except ClientError as e:
        fail(str(e))
    except ValueError as e:  # a bootstrap address that is not HOST:PORT, a bad setting
        fail(str(e))
    except OSError as e:
        fail(str(e.strerror or e))


def cluster_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--bootstrap-server, --command-config and --timeout, passed on as `connection`."""
    @bootstrap_options
    @click.option("--timeout", "timeout_s", default=30.0, show_default=True,
                  type=click.FloatRange(min=0.1), metavar="SECONDS",
                  help="Give up (exit 1) when the cluster has not answered within this time.")
    @functools.wraps(command)
    def wrapper(*args: Any, bootstrap: str, command_config: Path | None, timeout_s: float,
                **kwargs: Any) -> Any:
        return command(*args, connection=Connection(bootstrap, command_config, timeout_s),
                       **kwargs)
    return wrapper


def output_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--output", "-o", "output", default="table", show_default=True,
                        type=click.Choice(["table", "json"]),
                        help="A table for people, or JSON for scripts.")(command)


class Connection:
    """What a command needs to open an AdminClient."""

    def __init__(self, bootstrap: str, command_config: Path | None, timeout_s: float) -> None:
        self.bootstrap = bootstrap
        self.command_config = command_config
        self.timeout_s = timeout_s

    def properties(self) -> dict[str, str]:
        return load_command_config(self.command_config)

    def run(self, work: Callable[[AdminClient], Awaitable[T]]) -> T:
        """Run `work` with an AdminClient; every failure exits 1 with one line on stderr."""
        props = self.properties()

        async def main() -> T:
            async with AdminClient(self.bootstrap, security=props,
                                   timeout_s=self.timeout_s) as admin:
                async with asyncio.timeout(self.timeout_s * 2):
                    return await work(admin)

        try:
            return asyncio.run(main())
        except AdminError as e:
            fail(str(e))
        except TimeoutError:
            fail(f"no answer from {self.bootstrap} within {self.timeout_s:g} s")
        except ClientError as e:
            fail(f"{e} (bootstrap server {self.bootstrap})")
        except ValueError as e:  # a malformed --bootstrap-server, a bad security setting
            fail(str(e))
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except Exception as e:  # never a traceback for an operator: name what happened
            fail(f"unexpected {type(e).__name__}: {e}")
