"""The lease rule of `coterie.storage.leases`, in memory, with the time passed in.

PostgreSQL decides who may write by one rule, evaluated on the database's clock inside each
statement (`coterie.storage.leases`, `postgres_log`):

* `acquire` succeeds when the lease is free, released, expired, or already the caller's; every
  success is a new tenure at the next epoch;
* `renew` extends a live tenure (same owner, same epoch) without changing its epoch;
* `release` frees a tenure at once;
* a write is accepted only while its tenure is live: the row names the writer at the writer's
  epoch and has not expired.

`LeaseTable` is that rule over a dictionary, with `now` an argument instead of a clock read:
the fault simulation of brokers and leases (tests/unit/storage/test_lease_simulation.py)
drives it in virtual time, millions of steps, and it is the same rule the SQL states, so what
the simulation shows of the rule holds for the database. Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from coterie.storage.api import Lease, Resource

__all__ = ["LeaseTable"]


@dataclass(slots=True)
class _Row:
    owner: int | None
    epoch: int
    expires_at: float


class LeaseTable:
    """Leases by resource, as the `leases` table holds them."""

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows: dict[Resource, _Row] = {}

    def acquire(self, resource: Resource, node_id: int, now: float,
                ttl: float) -> Lease | None:
        row = self._rows.get(resource)
        if row is None:
            self._rows[resource] = _Row(node_id, 1, now + ttl)
            return Lease(resource, node_id, 1)
        if row.owner is None or row.owner == node_id or row.expires_at <= now:
            row.owner, row.epoch, row.expires_at = node_id, row.epoch + 1, now + ttl
            return Lease(resource, node_id, row.epoch)
        return None

    def renew(self, lease: Lease, now: float, ttl: float) -> bool:
        row = self._live(lease, now)
        if row is None:
            return False
        row.expires_at = now + ttl
        return True

    def renew_all(self, node_id: int, now: float, ttl: float) -> list[Lease]:
        held = []
        for resource, row in sorted(self._rows.items()):
            if row.owner == node_id and row.expires_at > now:
                row.expires_at = now + ttl
                held.append(Lease(resource, node_id, row.epoch))
        return held

    def release(self, lease: Lease, now: float) -> bool:
        row = self._rows.get(lease.resource)
        if row is None or row.owner != lease.owner or row.epoch != lease.epoch:
            return False
        row.owner, row.expires_at = None, now
        return True

    def holder(self, resource: Resource, now: float) -> Lease | None:
        row = self._rows.get(resource)
        if row is None or row.owner is None or row.expires_at <= now:
            return None
        return Lease(resource, row.owner, row.epoch)

    def expire(self, resource: Resource, now: float) -> None:
        """Let the lease's time run out now, as when its owner stops renewing it (what the
        storage tests do to a database row instead of waiting out a ttl)."""
        row = self._rows.get(resource)
        if row is not None:
            row.expires_at = min(row.expires_at, now)

    def may_write(self, lease: Lease, now: float) -> bool:
        """The fencing rule every write is conditional on."""
        return self._live(lease, now) is not None

    def _live(self, lease: Lease, now: float) -> _Row | None:
        row = self._rows.get(lease.resource)
        if (row is None or row.owner != lease.owner or row.epoch != lease.epoch
                or row.expires_at <= now):
            return None
        return row
