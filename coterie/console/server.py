"""Running the console: on the caller's event loop (`coterie console`) or in a thread of its
own with its own event loop (inside `coterie serve`, `console.listen`).

Why a thread inside the broker: a console page may describe a 10,000-member group, fetch
offsets of every partition and render megabytes of HTML; none of that may delay a heartbeat.
In its own thread and loop the console is one more Kafka client of the broker: it reaches it
through its listener, as any client does, and a slow page only ever waits on its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from aiohttp import web

from coterie.console.app import ConsoleApp

log = logging.getLogger("coterie.console")


class ConsoleError(RuntimeError):
    """The console could not start (its address is in use, not HOST:PORT ...)."""


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:8080` for IPv6) -> (host, port); ConsoleError when it is not."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConsoleError(f"console.listen must be HOST:PORT, not {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class ConsoleServer:
    """The console's HTTP server on the running event loop."""

    def __init__(self, console: ConsoleApp, host: str, port: int) -> None:
        self.console, self.host, self.port = console, host, port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.console.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            self._runner = None
            raise ConsoleError(
                f"console cannot listen on {self.host}:{self.port}: {e.strerror or e}") from e
        sockets = site._server.sockets if site._server else ()
        if sockets and self.port == 0:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"


class ConsoleThread:
    """A ConsoleServer on a daemon thread with its own event loop."""

    def __init__(self, make_console, host: str, port: int) -> None:
        # `make_console` builds the ConsoleApp inside the thread, so that everything it
        # creates (aiohttp's objects, the sources' connections) belongs to the thread's loop.
        self._make_console = make_console
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="coterie-console", daemon=True)
        self.server: ConsoleServer | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Start and wait until it listens; raises ConsoleError when it cannot."""
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ConsoleError("the console did not start in time")
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:
            if not self._ready.is_set():
                self._error = e if isinstance(e, ConsoleError) else ConsoleError(str(e))
                self._ready.set()
            else:
                log.exception("console: stopped by an error")

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self.server = ConsoleServer(self._make_console(), self.host, self.port)
        await self.server.start()
        self.port = self.server.port
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await self.server.stop()

    def stop(self, timeout: float = 10.0) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout)
