"""Broker registration: which brokers are alive, where clients reach them, one per node.id.

Why a lease per broker: Metadata and DescribeCluster must list the live brokers, and a broker
that died must drop out by itself. A broker registers with a time to live and heartbeats
within it; a row whose `expires_at` (database time) has passed is a dead broker. A second
broker started with a node.id that a live broker holds is refused (NodeIdInUse), saying who
holds it: two brokers answering as one node would confuse every client. Once the first one's
registration has expired, the node.id is free again (a restarted broker takes it back).

Each registration gets a new `incarnation` (a random UUID): a heartbeat names it, so a paused
old process whose registration was replaced cannot keep the new one alive.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from coterie.storage.database import Database
from coterie.storage.errors import NodeIdInUse, RegistrationLost

__all__ = ["BrokerRow", "Registration", "deregister", "heartbeat", "live_brokers", "register"]


@dataclass(frozen=True, slots=True)
class Registration:
    """A broker's proof of registration, for its heartbeats."""

    node_id: int
    incarnation: uuid.UUID


@dataclass(frozen=True, slots=True)
class BrokerRow:
    """A live broker as Metadata lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None
    # Each listener's advertised (host, port) by listener name (schema version 4); a broker
    # registered without them has only `host`/`port`.
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)

    def address(self, listener: str) -> tuple[str, int] | None:
        """Where a client that came in on `listener` reaches this broker; None when this
        broker has no such listener (Kafka leaves it out of that client's metadata)."""
        if not self.listeners:
            return self.host, self.port
        return self.listeners.get(listener)


_REGISTER = """
INSERT INTO brokers AS b (node_id, host, port, rack, listeners, incarnation, registered_at,
                         expires_at)
VALUES (%(node)s, %(host)s, %(port)s, %(rack)s, %(listeners)s::jsonb, %(incarnation)s,
        clock_timestamp(), clock_timestamp() + %(ttl)s * interval '1 second')
ON CONFLICT (node_id) DO UPDATE
    SET host = EXCLUDED.host, port = EXCLUDED.port, rack = EXCLUDED.rack,
        listeners = EXCLUDED.listeners,
        incarnation = EXCLUDED.incarnation, registered_at = EXCLUDED.registered_at,
        expires_at = EXCLUDED.expires_at
    WHERE b.expires_at <= clock_timestamp()
RETURNING incarnation
"""


async def register(db: Database, node_id: int, host: str, port: int, ttl: float,
                   rack: str | None = None,
                   listeners: dict[str, tuple[str, int]] | None = None) -> Registration:
    """Register this broker as `node_id` at host:port (and each listener's address) for
    `ttl` seconds. Raises NodeIdInUse while another registration of the node.id is live."""
    incarnation = uuid.uuid4()
    named = json.dumps({name: [h, p] for name, (h, p) in (listeners or {}).items()})
    async with db.session() as conn:
        cur = await conn.execute(_REGISTER, {"node": node_id, "host": host, "port": port,
                                             "rack": rack, "listeners": named,
                                             "incarnation": incarnation, "ttl": ttl})
        row = await cur.fetchone()
        if row is None:
            cur = await conn.execute(
                "SELECT host, port, extract(epoch FROM expires_at - clock_timestamp()) "
                "FROM brokers WHERE node_id = %s", (node_id,))
            holder = await cur.fetchone()
    if row is None:
        where = f"{holder[0]}:{holder[1]}" if holder else "another address"
        left = f" (its registration expires in {float(holder[2]):.1f} s)" if holder else ""
        raise NodeIdInUse(f"node.id {node_id} is registered by a live broker at {where}{left}; "
                          "give each broker its own node.id")
    return Registration(node_id, incarnation)


async def heartbeat(db: Database, registration: Registration, ttl: float) -> None:
    """Keep a registration alive for `ttl` more seconds. Raises RegistrationLost when it
    expired or was replaced: the broker must register again."""
    async with db.session() as conn:
        cur = await conn.execute(
            "UPDATE brokers SET expires_at = clock_timestamp() + %s * interval '1 second' "
            "WHERE node_id = %s AND incarnation = %s AND expires_at > clock_timestamp()",
            (ttl, registration.node_id, registration.incarnation))
    if cur.rowcount != 1:
        raise RegistrationLost(f"the registration of node.id {registration.node_id} expired "
                               "or was replaced")


async def deregister(db: Database, registration: Registration) -> None:
    """Leave the cluster now (a clean shutdown), freeing the node.id at once."""
    async with db.session() as conn:
        await conn.execute("DELETE FROM brokers WHERE node_id = %s AND incarnation = %s",
                           (registration.node_id, registration.incarnation))


async def live_brokers(db: Database) -> list[BrokerRow]:
    """The brokers whose registration has not expired, by node.id."""
    async with db.session() as conn:
        cur = await conn.execute(
            "SELECT node_id, host, port, rack, listeners FROM brokers "
            "WHERE expires_at > clock_timestamp() ORDER BY node_id")
        rows = await cur.fetchall()
    return [BrokerRow(int(n), h, int(p), r,
                      {name: (str(a[0]), int(a[1])) for name, a in (named or {}).items()})
            for n, h, p, r, named in rows]
