"""Ending a broker's database session that stalled half-way through sending a statement.

Why this exists: a write holds its partition's and its lease's rows locked until it commits,
so that a take-over waits for it. The server ends a transaction whose client went quiet
*between* statements (`idle_in_transaction_session_timeout`, which every broker session
sets), but not one whose client stopped *inside* a statement's messages: psycopg sends a
statement as Parse, Bind, Execute, Sync in one go, and a broker paused (SIGSTOP) or cut off
while the Bind of a large write is on its way leaves the server reading the rest of it
(`state = 'active'`, `wait_event = 'ClientRead'`) with no timer running, the locks of the
statements before it held for as long as the pause lasts. Every other broker's acquire of
those leases then waits on the row lock, and the stalled broker's partitions are never taken
over. (tests/storage/test_stalled_sessions.py shows the server doing so.)

So each broker, at every round, ends the sessions of coterie brokers (named by their
`application_name`) that have been reading one statement for longer than a lease time. A
healthy broker sends a statement in milliseconds; one that takes a lease time to do it has
lost its leases by then anyway (its renewals go unanswered as long), so nothing it could
still commit is lost: its write was not committed, the transaction rolls back, and it finds
its connection closed when it wakes up and opens a new one.

Ending another role's session needs that role's membership or `pg_signal_backend`; brokers
sharing one role (the usual set-up) may always do it. Where it is refused the broker says so
once and the stall lasts until the stopped broker wakes or its connection drops.
"""

from __future__ import annotations

from dataclasses import dataclass

from coterie.storage.database import Database

__all__ = ["APPLICATION_PREFIX", "Stalled", "application_name", "end_stalled_sessions"]

APPLICATION_PREFIX = "coterie node "

_END_STALLED = """
SELECT pid, application_name,
       extract(epoch FROM clock_timestamp() - state_change)::float8,
       pg_terminate_backend(pid)
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND application_name LIKE %(prefix)s
  AND state = 'active' AND wait_event = 'ClientRead'
  AND state_change < clock_timestamp() - %(after)s * interval '1 second'
"""


def application_name(node_id: int) -> str:
    """The `application_name` of a broker's sessions: how the others recognise them (and
    how an operator does, in pg_stat_activity)."""
    return f"{APPLICATION_PREFIX}{node_id}"


@dataclass(frozen=True, slots=True)
class Stalled:
    """A session found stalled, and whether the server agreed to end it."""

    pid: int
    application_name: str
    stalled_s: float
    ended: bool


async def end_stalled_sessions(db: Database, after_s: float) -> list[Stalled]:
    """End every coterie broker session that has been reading one statement's messages for
    more than `after_s` seconds (by the database's clock); returns them. Raises
    psycopg.errors.InsufficientPrivilege when this role may not end them."""
    async with db.session() as conn:
        cur = await conn.execute(_END_STALLED, {"prefix": APPLICATION_PREFIX + "%",
                                                "after": after_s})
        rows = await cur.fetchall()
    return [Stalled(int(pid), str(name), float(age), bool(ended))
            for pid, name, age, ended in rows]
