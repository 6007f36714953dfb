"""One broker's part in a cluster over PostgreSQL: its registration, its tenures, its share.

A round (`Membership.round`, every `ttl / 3` from `run`) is what the fault simulation's
brokers do (tests/unit/storage/test_lease_simulation.py), here against the database:

1. keep the registration alive (register again if it lapsed: a paused broker that wakes up
   is a new incarnation);
2. renew every lease the database still gives this node, in one statement, and count on each
   from the moment the renewal was sent (`tenure.Tenures`); give back any the database
   renewed that this broker no longer counts on (else nobody else could ever take it);
3. read the live brokers, and with `tenure.spread` take the resources that are this broker's
   and free, and release the ones another live broker should have (a returning broker gets
   its share back one round later, without a stop of the world).

The round answers what changed (`Changes`): the leases gained, for which the broker loads
what it now serves (a coordinator shard is replayed from its records, as at a restart), and
the resources lost, which it stops serving. Between rounds `lease(resource)` says whether
this broker may serve a resource right now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psycopg

from coterie.storage import brokers, leases
from coterie.storage.api import Lease, Resource
from coterie.storage.brokers import BrokerRow, Registration
from coterie.storage.database import Database
from coterie.storage.errors import RegistrationLost
from coterie.storage.tenure import Tenures, spread

__all__ = ["Changes", "Membership"]

log = logging.getLogger("coterie.cluster")


@dataclass(slots=True)
class Changes:
    """What one round changed for this broker."""

    gained: list[Lease] = field(default_factory=list)
    lost: list[Resource] = field(default_factory=list)


class Membership:
    """A broker's registration and leases (module docstring). `resources` says what the
    cluster has to serve (partitions, coordinator shards); `clock` is monotonic seconds."""

    def __init__(self, db: Database, node_id: int, host: str, port: int,
                 resources: Callable[[], Sequence[Resource]], ttl: float = 6.0,
                 clock: Callable[[], float] = time.monotonic, rack: str | None = None,
                 listeners: dict[str, tuple[str, int]] | None = None) -> None:
        self.db = db
        self.node_id = node_id
        self.address = (host, port, rack)
        self.listeners = dict(listeners or {})  # every listener's advertised address
        self.resources = resources
        self.ttl = ttl
        self.clock = clock
        self.tenures = Tenures()
        self.live: list[BrokerRow] = []
        self._registration: Registration | None = None

    async def start(self) -> None:
        """Register; NodeIdInUse while a live broker holds this node.id."""
        host, port, rack = self.address
        self._registration = await brokers.register(self.db, self.node_id, host, port,
                                                    self.ttl, rack, self.listeners)

    def lease(self, resource: Resource) -> Lease | None:
        """The lease this broker may serve `resource` under now, or None."""
        return self.tenures.lease(resource, self.clock())

    async def round(self) -> Changes:
        changes = Changes()
        db, node, ttl = self.db, self.node_id, self.ttl
        await self._keep_registered()
        sent = self.clock()
        lost, stray = self.tenures.renewed(await leases.renew_all(db, node, ttl), sent, ttl)
        changes.lost += lost
        for lease in stray:
            await leases.release(db, lease)
        self.live = await brokers.live_brokers(db)
        owners = spread(self.resources(), [b.node_id for b in self.live])
        take, give = self.tenures.moves(owners, node, self.clock())
        for r in take:
            sent = self.clock()
            try:
                got = await leases.acquire(db, r, node, ttl)
            except psycopg.errors.LockNotAvailable:
                # Its row is locked by a write that has not ended (its owner stalled
                # inside it: storage.stalled): the next round tries again, and the rest of
                # this one goes on.
                log.info("node %d: %s is still locked by its former owner's write; trying "
                         "again at the next round", node, r)
                continue
            if got is not None:
                self.tenures.granted(got, sent, ttl)
                changes.gained.append(got)
        for lease in give:
            await leases.release(db, lease)
            self.tenures.lost(lease.resource)
            changes.lost.append(lease.resource)
        return changes

    async def _keep_registered(self) -> None:
        if self._registration is None:
            await self.start()
            return
        try:
            await brokers.heartbeat(self.db, self._registration, self.ttl)
        except RegistrationLost:
            log.warning("node %d: registration lapsed (paused or cut off past %.1f s); "
                        "registering again", self.node_id, self.ttl)
            await self.start()

    async def stop(self) -> None:
        """Leave at once (a clean shutdown): every lease released, the node.id freed, so the
        other brokers take over without waiting for expiries."""
        for lease in self.tenures.held():
            await leases.release(self.db, lease)
            self.tenures.lost(lease.resource)
        if self._registration is not None:
            await brokers.deregister(self.db, self._registration)
            self._registration = None
