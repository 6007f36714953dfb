"""The cluster's leases for the brokers page, read from the cluster's PostgreSQL database.

Why the database and not the Kafka protocol: no Kafka request lists leases, so only a console
that can reach the database shows them: the console a broker of a cluster on PostgreSQL
serves (`coterie serve --storage postgresql://... --override console.listen=...`). `coterie
console --bootstrap-server` has no database and keeps saying that leases are not shown.

Why a short-lived connection of the console's own, opened on the console's thread for each
read, and not the broker's connections or its event loop: the console must never delay the
broker (issue 28: a console request never blocks the broker's event loop). Asking the
broker's loop (`run_coroutine_threadsafe`) would either read `ClusterNode.picture`, which has
no expiry times, or query through the broker's round connection, queueing behind (and ahead
of) the lease renewals that keep the broker's partitions; a connection of its own shares
nothing with the broker but the database server. Its cost is a connection per brokers page
(milliseconds on a local server), which an operator's page views can afford; a
`statement_timeout` and the connect timeout bound it, and its `application_name` is not a
broker's (coterie.storage.stalled never takes it for a stalled broker session).
"""

from __future__ import annotations

from coterie.console.views import Lease, LeaseReader
from coterie.storage.database import Database
from coterie.storage.leases import LeaseRow, every_lease

# Topics whose partitions are coordinator shards, and which coordinator's.
COORDINATOR_TOPICS = {"__consumer_offsets": "group", "__transaction_state": "transaction"}


def lease_view(row: LeaseRow) -> Lease:
    if row.resource.kind == "partition" and row.partition is not None:
        label = f"{row.topic or row.resource.name.rpartition('-')[0]}-{row.partition}"
        coordinator = COORDINATOR_TOPICS.get(row.topic or "")
    else:
        label, coordinator = f"{row.resource.kind} {row.resource.name}", None
    return Lease(label, row.owner, row.epoch, row.expires_in_ms, coordinator, row.topic)


def _order(lease: Lease) -> tuple[int, str, int]:
    # Coordinator shards first, then topics by name, partitions by number (t-2 before t-10).
    topic, _, number = lease.resource.rpartition("-")
    return (0 if lease.coordinator else 1, topic or lease.resource,
            int(number) if number.isdigit() else -1)


def database_leases(dsn: str, *, timeout_s: float = 5.0,
                    application_name: str = "coterie console") -> LeaseReader:
    """A LeaseReader over the database at `dsn` (module docstring); it raises psycopg's
    errors (and OSError) when the database cannot be read within `timeout_s`."""

    async def read() -> tuple[Lease, ...]:
        ms = max(100, round(timeout_s * 1000))
        db = await Database.connect(dsn, connect_timeout=timeout_s,
                                    settings={"statement_timeout": f"{ms}ms",
                                              "default_transaction_read_only": "on"},
                                    application_name=application_name)
        try:
            rows = await every_lease(db)
        finally:
            await db.close()
        return tuple(sorted((lease_view(r) for r in rows), key=_order))

    return read
