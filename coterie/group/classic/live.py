"""What a classic group holds that no record holds: its volatile table.

A classic group's durable state is its last `GroupMetadataValue` (generation, protocol,
leader, members with their subscription for the chosen protocol and their assignment),
which `ClassicGroup.apply` replays. Everything else it knows is live only, in Kafka too, and
lives here, beside the durable part:

- the join phase (`JoinPhase`): while the group is PreparingRebalance, the membership the
  next generation is being formed from (members joining, leaving, sending new metadata; a
  leader chosen when the old one goes), whether it started from Empty (the initial rebalance
  delay) and the latest that delay may run to. It becomes durable only when the phase ends
  and its record is written;
- the parked JoinGroup and SyncGroup requests, by member id (the broker's tokens);
- the member ids handed out by MEMBER_ID_REQUIRED and not yet used (KIP-394);
- the members of the current generation that have not sent SyncGroup yet;
- whether the leader's assignment of the current generation arrived (`assigned`): a record
  whose assignments are all empty cannot tell "Stable, everyone assigned nothing" from
  "awaiting the leader", so the record says the latter and this says the former.

The drop rule: when an append fails, or the coordinator restarts, the group is rebuilt from
its records and this table starts empty; parked requests are answered with the storage
error (or lost with their connections), and what must be re-derived is
(`ClassicGroups.after_load`: members' sessions, the sync phase of a CompletingRebalance
group), as Kafka's coordinator does after a failover.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coterie.group.classic.membership import Membership


@dataclass(slots=True)
class JoinPhase:
    """A join phase in progress (the group is PreparingRebalance): `draft` is the membership
    it forms, a copy of the durable one that joins and leaves change."""

    draft: Membership
    from_empty: bool
    # Out of Empty: the latest the initial rebalance delay may run to (its rebalance
    # timeout), once the phase's timer is armed; None otherwise.
    initial_deadline: int | None = None
    # A member joined during the initial delay: the delay runs once more.
    new_member_added: bool = False


@dataclass(slots=True)
class ClassicLive:
    """The volatile table of one classic group (module docstring)."""

    join_phase: JoinPhase | None = None
    joins: dict[str, Hashable] = field(default_factory=dict)  # parked JoinGroups
    syncs: dict[str, Hashable] = field(default_factory=dict)  # parked SyncGroups
    pending_members: set[str] = field(default_factory=set)  # MEMBER_ID_REQUIRED ids
    pending_sync: set[str] = field(default_factory=set)  # not synced this generation
    assigned: bool = False  # the leader's assignment of this generation arrived
