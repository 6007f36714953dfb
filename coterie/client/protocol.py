"""The extension point of the group member: an embedded protocol.

Seed 1 splits group management in two. The coordinator only manages membership: who is in
the group, which generation it is in, who leads it, which protocol every member supports.
What the members share - partitions, tasks, leadership - is decided by one member, the
leader, from the metadata every member sent in JoinGroup, and handed out as opaque bytes in
SyncGroup. An `EmbeddedProtocol` is that member-side logic; `GroupMember` runs the
membership protocol around it. The consumer, `LeaderElection` and `TaskDistribution` are
embedded protocols.

Call sequence, for one member (every hook is a coroutine, awaited by the member's own task,
one at a time, never concurrently with another hook of the same member):

    metadata()                      before every JoinGroup: [(protocol name, bytes), ...]
    assign(generation, members)     only on the member the coordinator made leader
    on_assignment(generation, b)    after SyncGroup succeeded: this member's bytes
    ... heartbeats run in the background ...
    on_revoke(generation)           the generation is ending cleanly: a rebalance began, the
                                    user asked to rejoin, or the member is closing
      or
    on_lost(generation)             the generation is gone: the coordinator no longer knows
                                    this member in it (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID),
                                    the session lease ran out, or a fatal error
    metadata() ...                  and round again

Guarantees the member gives a protocol:
- every successful `on_assignment` is followed by exactly one `on_revoke` or `on_lost` for
  that generation before the next `metadata()` and before the member closes;
- `on_revoke` is called while the coordinator still has this member in that generation, so
  work can be handed over (offsets committed, say); after `on_lost` others may already own
  what this member had. The default `on_lost` calls `on_revoke`, as Kafka's consumer does;
- `metadata()`, `assign()` and `on_assignment()` raising stops the member with a
  `MetadataError` / `AssignorError` / `AssignmentError` (a bad assignment is reported to the
  user once, not retried in a loop); `on_revoke` / `on_lost` raising is logged and the member
  carries on.

Timing: heartbeats continue while a hook runs, but the member's own task is busy, so a
rebalance is noticed (and `on_revoke` called) only once the running hook returns. Keep hooks
short; start long work as tasks and cancel them in `on_revoke` / `on_lost`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Generation:
    """One completed JoinGroup as this member saw it."""

    generation_id: int
    member_id: str
    leader_id: str
    protocol_type: str
    protocol_name: str
    group_instance_id: str | None = None

    @property
    def is_leader(self) -> bool:
        """Is this member the one the coordinator chose to compute the assignment?"""
        return self.member_id == self.leader_id


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member of the generation, as the leader's JoinGroup response lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


class EmbeddedProtocol(abc.ABC):
    """Member-side logic of one protocol type ("consumer", "connect", your own)."""

    #: The group's protocol type: every member of a group must use the same one.
    protocol_type: str = ""

    @abc.abstractmethod
    async def metadata(self) -> Sequence[tuple[str, bytes]]:
        """The protocols this member supports, most preferred first, each with the metadata
        the leader will see for it. Called before every JoinGroup, so it may change."""

    @abc.abstractmethod
    async def assign(self, generation: Generation,
                     members: Sequence[JoinedMember]) -> Mapping[str, bytes]:
        """Leader only: member id -> assignment bytes for every member of `generation`
        (members missing from the result get empty bytes). `members` carry their metadata
        for `generation.protocol_name`."""

    @abc.abstractmethod
    async def on_assignment(self, generation: Generation, assignment: bytes) -> None:
        """This member's share for `generation`. Raise to report bytes it cannot use."""

    async def on_revoke(self, generation: Generation) -> None:  # noqa: B027 - optional hook
        """The generation ends cleanly; release what `on_assignment` gave this member."""

    async def on_lost(self, generation: Generation) -> None:
        """The generation is gone; others may already own this member's share."""
        await self.on_revoke(generation)
