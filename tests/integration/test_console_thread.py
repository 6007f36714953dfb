"""The broker's console runs on a thread with its own event loop (coterie.console.server's
ConsoleThread, as `coterie serve` starts it): a console page never waits on the host's loop,
and the host's loop never waits on a page. Tested in-process with a real console whose pages
wait on an unreachable cluster (the slowest page there is: the full page timeout)."""

from __future__ import annotations

import asyncio
import threading
import time

from coterie.cli.console import console_app
from coterie.console.server import ConsoleThread
from tests.fixtures.coterie_broker import free_port
from tests.integration.test_console import _get


def test_pages_and_the_host_loop_never_wait_on_each_other() -> None:
    dead, port = free_port(), free_port()

    async def host() -> tuple[float, list[int], float]:
        thread = ConsoleThread(lambda: console_app(f"127.0.0.1:{dead}", {}, 1.0),
                               "127.0.0.1", port)
        thread.start()
        try:
            statuses: list[int] = []
            askers = [threading.Thread(target=lambda: statuses.append(_get(port, "/")[0]))
                      for _ in range(4)]
            for a in askers:
                a.start()
            # The host's loop keeps its timers while four pages wait out their timeouts.
            worst, until = 0.0, time.monotonic() + 2.0
            while time.monotonic() < until:
                before = time.monotonic()
                await asyncio.sleep(0.01)
                worst = max(worst, time.monotonic() - before - 0.01)
            # And a page is answered while the host's loop is blocked outright.
            started = time.monotonic()
            asker = threading.Thread(target=lambda: statuses.append(_get(port, "/brokers")[0]))
            asker.start()
            asker.join(15)  # blocks this loop, as a stuck broker loop would
            blocked_answer = time.monotonic() - started
            for a in askers:
                a.join(15)
            return worst, statuses, blocked_answer
        finally:
            await asyncio.to_thread(thread.stop)

    worst, statuses, blocked_answer = asyncio.run(host())
    assert statuses == [503] * 5
    assert worst < 0.25, f"the host loop stalled {worst:.3f} s"
    assert blocked_answer < 10
