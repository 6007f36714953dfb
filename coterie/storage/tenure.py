"""What a broker believes it owns, and who should own what.

The database decides who may write (`coterie.storage.leases`); but a broker also answers
without writing (a settled member's heartbeat, a fetch), and must stop doing so once another
broker may have taken over. So each broker keeps its own view of its tenures, and a tenure
ends in that view no later than it can end in the database: its end is counted from the
moment the acquire or renew was *sent*, on the broker's monotonic clock, less a margin for
the two clocks' rates (`Tenures`). A broker paused past its lease (SIGSTOP, a long GC-like
stall) finds on waking that its monotonic clock moved on, and answers NOT_COORDINATOR /
NOT_LEADER_OR_FOLLOWER until it has renewed. The fault simulation checks the consequence:
a broker that believes it owns a resource is, at that instant, its holder in the database at
the same epoch, so two brokers never both serve one.

`spread` says which live broker should own each resource: rendezvous hashing bounded by an
even share of each topic, so that every broker leads its part of every topic; when a broker
returns it takes back its share (each broker acquires what is its own and releases what is
another live broker's, one resource at a time, without a stop of the world).

Pure: time comes in as an argument, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from coterie.storage.api import Lease, Resource

__all__ = ["Tenures", "spread"]

# The share of a lease's time-to-live a broker does not count on: it covers the difference
# between its clock's rate and the database's.
SAFETY = 0.1


class Tenures:
    """One broker's leases, each with the local time until which it may act on it."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[Resource, tuple[Lease, float]] = {}

    def granted(self, lease: Lease, sent_at: float, ttl: float) -> None:
        """An acquire or renew of `lease` sent at local time `sent_at` succeeded."""
        self._held[lease.resource] = (lease, sent_at + ttl * (1 - SAFETY))

    def lost(self, resource: Resource) -> None:
        self._held.pop(resource, None)

    def lease(self, resource: Resource, now: float) -> Lease | None:
        """The lease this broker may act on now, or None (not its own, or maybe expired)."""
        held = self._held.get(resource)
        if held is None or now >= held[1]:
            return None
        return held[0]

    def held(self) -> list[Lease]:
        return [lease for lease, _ in self._held.values()]

    def renewed(self, renewed: Iterable[Lease], sent_at: float,
                ttl: float) -> tuple[list[Resource], list[Lease]]:
        """Take in the answer of a renewal of every lease this node holds, sent at
        `sent_at`: the tenures it renewed run on from then; the ones it did not are lost
        (first list). The second list is what the store renewed that this broker no longer
        counts on (after a fenced write, say): those must be released, or they would be
        renewed forever and nobody else could take them."""
        fresh = {lease.resource: lease for lease in renewed}
        lost = []
        for lease in self.held():
            if fresh.get(lease.resource) == lease:
                self.granted(lease, sent_at, ttl)
            else:
                self.lost(lease.resource)
                lost.append(lease.resource)
        stray = [lease for lease in fresh.values()
                 if self._held.get(lease.resource, (None,))[0] != lease]
        return lost, stray

    def moves(self, owners: Mapping[Resource, int], node_id: int,
              now: float) -> tuple[list[Resource], list[Lease]]:
        """By `owners` (`spread` over the live brokers): the resources this broker should
        take (its own, not served now), and the leases it should hand back (served now,
        another live broker's)."""
        take, give = [], []
        for resource, owner in owners.items():
            mine = self.lease(resource, now)
            if owner == node_id and mine is None:
                take.append(resource)
            elif owner != node_id and mine is not None:
                give.append(mine)
        return take, give


def _weight(node_id: int, resource: Resource) -> bytes:
    return hashlib.blake2b(f"{node_id}/{resource.kind}/{resource.name}".encode(),
                           digest_size=8).digest()


def _family(resource: Resource) -> tuple[str, str]:
    """What resources are balanced together: a topic's partitions (a partition lease's name
    is "<topic id>-<partition>"), else every resource of one kind."""
    if resource.kind == "partition":
        return resource.kind, resource.name.rsplit("-", 1)[0]
    return resource.kind, ""


def spread(resources: Iterable[Resource], live: Iterable[int]) -> dict[Resource, int]:
    """Which of the `live` brokers should own each resource: each resource's brokers ranked
    by rendezvous weight, and each broker given its even share of every topic's partitions
    (a 6-partition topic on 3 brokers: 2 each; 7: 3, 2 and 2), so that a topic's load, and
    Kafka's tools' picture of it, is spread over every broker. Every broker computes the
    same answer from the same resources and live brokers."""
    nodes = sorted(set(live))
    if not nodes:
        return {}
    families: dict[tuple[str, str], list[Resource]] = {}
    for r in resources:
        families.setdefault(_family(r), []).append(r)
    owners: dict[Resource, int] = {}
    for members in families.values():
        unique = sorted(set(members))
        # Each broker leads `base` of the family, and `extra` of them one more.
        base, extra = divmod(len(unique), len(nodes))
        load = dict.fromkeys(nodes, 0)
        for r in unique:
            ranked = sorted(nodes, key=lambda n, r=r: _weight(n, r), reverse=True)
            owner = next(n for n in ranked
                         if load[n] < base or (load[n] == base and extra > 0))
            if load[owner] == base:
                extra -= 1
            load[owner] += 1
            owners[r] = owner
    return owners
