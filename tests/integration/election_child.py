"""A LeaderElection candidate in its own process, so a test can SIGKILL or SIGSTOP it.

    python -m tests.integration.election_child BOOTSTRAP GROUP LABEL SESSION_MS HEARTBEAT_MS

One JSON line per event on stdout, stamped with time.monotonic() (one clock for every process
on the machine): started, elected, demoted, and "tick" every 20 ms while `is_leader` is true,
which stands for a write the single writer guards with `is_leader`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from coterie.client.election import LeaderElection, Leadership


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)


async def main(bootstrap: str, group: str, label: str, session_ms: int, heartbeat_ms: int) -> None:
    async def lead(leadership: Leadership) -> None:
        while True:
            if election.is_leader:
                say("tick", epoch=leadership.epoch)
            await asyncio.sleep(0.02)

    election = LeaderElection(
        bootstrap, group, lead=lead, info=label, client_id=label,
        on_elected=lambda ld: say("elected", epoch=ld.epoch),
        on_demoted=lambda ld, reason: say("demoted", epoch=ld.epoch, reason=reason),
        session_timeout_ms=session_ms, heartbeat_interval_ms=heartbeat_ms,
        retry_backoff_ms=50, retry_backoff_max_ms=500)
    async with election:
        say("started")
        await election.wait_closed()


if __name__ == "__main__":
    host_port, group_id, name, session, heartbeat = sys.argv[1:6]
    asyncio.run(main(host_port, group_id, name, int(session), int(heartbeat)))
