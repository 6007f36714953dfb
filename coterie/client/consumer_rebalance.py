"""The consumer's embedded protocol: protocol type "consumer", eager or cooperative (KIP-429).

Seed 1 puts partition assignment in the consumers: each member sends a subscription per
assignor it supports (JoinGroup metadata), the coordinator picks one assignor every member
supports, the leader runs it and each member receives its partitions (SyncGroup). The bytes
are Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment
(`coterie.wire.consumer_protocol`), so this member sits in one group with librdkafka,
kafka-python and Java consumers.

Subscription (v3, for every configured assignor, preferred first): the topic names (a
pattern resolved against the cluster first), the partitions owned right now (KIP-429; empty
after an eager revocation), the generation they come from, the rack, and the assignor's user
data (sticky: the previous assignment; cooperative-sticky: the generation).

Eager or cooperative. Kafka's rule: a consumer rebalances cooperatively only if *every* one of
its assignors supports it (so a consumer listing ["cooperative-sticky", "range"] during an
upgrade stays eager). Then:

    eager         on_revoke: revoke everything (commit first with auto commit), rejoin
                  on_assignment: everything in the assignment is new
    cooperative   on_revoke: revoke nothing (only topics that left the subscription)
                  on_assignment: revoke owned - assigned (commit them first), add assigned -
                  owned; if anything was revoked, rejoin at once: the follow-up rebalance
                  hands the revoked partitions to their new owner (KIP-429 step 2.3)
    both          on_lost: drop everything, no commit (others may own it already)

"Revoke" always starts with `Assignment.start_revoking` (no more fetches, buffers dropped,
nothing delivered) before any await, then commits, then calls the listener's
`on_partitions_revoked`, and only then forgets the partitions; so no record of a partition
reaches the user after that callback returned, and the commit holds the final position.

Leader side: decode every member's subscription, fetch metadata for the union of their
topics, run the chosen assignor (`coterie.assign.classic_leader.lead`, rack-aware where brokers
have racks) and, for cooperative assignors, check KIP-429's invariant (no partition goes to a
new owner in the same round it is revoked from the old one). The leader remembers the
partition counts it assigned with; the consumer's metadata refresh compares them and rejoins
when a subscribed topic grows, appears or vanishes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from kio.schema.errors import ErrorCode

from coterie.assign.classic_leader import JoinedMember as LeaderMember
from coterie.assign.classic_leader import build_spec, lead, subscribed_union
from coterie.assign.spec import Assignor
from coterie.client.cluster import ClusterMetadata
from coterie.client.partition_owner import PartitionOwner
from coterie.client.protocol import EmbeddedProtocol, Generation, JoinedMember
from coterie.client.subscription import AssignmentChange, TopicPartition
from coterie.wire.consumer_protocol import (
    PROTOCOL_TYPE,
    Subscription,
    decode_assignment,
    encode_subscription,
)

log = logging.getLogger("coterie.client.consumer")


def partition_counts(md: ClusterMetadata, topics: Sequence[str]) -> dict[str, int]:
    """Topic -> partition count for the `topics` that exist (0 for those that do not)."""
    out = {}
    for name in topics:
        t = md.topics.get(name)
        ok = t is not None and t.error == ErrorCode.none and t.partitions
        out[name] = len(t.partitions) if ok and t is not None else 0
    return out


def partition_racks(md: ClusterMetadata, topics: Sequence[str],
                    ) -> dict[str, dict[int, frozenset[str]]]:
    """Topic -> partition -> racks of its replicas (empty when no broker names a rack)."""
    racks = {node_id: node.rack for node_id, node in md.brokers.items() if node.rack}
    if not racks:
        return {}
    out: dict[str, dict[int, frozenset[str]]] = {}
    for name in topics:
        t = md.topics.get(name)
        if t is None:
            continue
        out[name] = {p.partition: frozenset(racks[r] for r in p.replicas if r in racks)
                     for p in t.partitions}
    return out


def check_cooperative(members: Sequence[LeaderMember], plan: Mapping[str, bytes]) -> None:
    """KIP-429's invariant for one round: a partition revoked from one member is not given to
    another in the same round. Raises ValueError naming the partitions that would be."""
    spec, _ = build_spec(members, {})
    revoked: set[tuple[str, int]] = set()
    added: set[tuple[str, int]] = set()
    for member_id, member in spec.members.items():
        got = decode_assignment(plan.get(member_id, b"")).partitions
        revoked |= member.owned - got
        added |= got - member.owned
    both = revoked & added
    if both:
        raise ValueError(f"the cooperative assignor moved {sorted(both)} directly to a new "
                         "owner; they must be revoked first")


class ConsumerRebalanceProtocol(EmbeddedProtocol):
    """The member-side "consumer" protocol of one `Consumer` (see the module docstring)."""

    protocol_type = PROTOCOL_TYPE

    def __init__(self, consumer: PartitionOwner, assignors: Sequence[Assignor]) -> None:
        self.consumer = consumer
        self.assignors: list[Assignor] = list(assignors)
        self.cooperative = all(a.cooperative for a in self.assignors)
        #: The generation whose partitions the consumer holds: commits go out in its name.
        #: Kept through a cooperative rejoin (the coordinator accepts commits of the current
        #: generation while it rebalances), cleared when the partitions are given up.
        self.generation: Generation | None = None
        self.last_generation_id = -1  # sent in subscriptions (v2+, sticky user data)
        self.last_assigned: frozenset[TopicPartition] = frozenset()
        #: Leader only: partition counts of the group's topics at the last assignment.
        self.snapshot: dict[str, int] | None = None
        self.lock = asyncio.Lock()

    def assignor(self, name: str) -> Assignor:
        for a in self.assignors:
            if a.name == name:
                return a
        raise ValueError(f"the coordinator chose assignor {name!r}, which this consumer does "
                         f"not offer ({[a.name for a in self.assignors]})")

    def _user_data(self, assignor: Assignor) -> bytes | None:
        encode = getattr(assignor, "subscription_user_data", None)
        if encode is None or (not assignor.cooperative and self.last_generation_id < 0):
            return None  # a sticky member sends nothing before its first assignment
        return bytes(encode(self.last_assigned, self.last_generation_id))

    # -- hooks --------------------------------------------------------------------------------
    async def metadata(self) -> Sequence[tuple[str, bytes]]:
        c = self.consumer
        await c.resolve_pattern()
        topics = tuple(sorted(c.subscription.topics))
        owned = c.owned()
        return [(a.name, encode_subscription(Subscription(
            topics=topics, user_data=self._user_data(a), owned_partitions=owned,
            generation_id=self.last_generation_id, rack_id=c.rack)))
            for a in self.assignors]

    async def assign(self, generation: Generation,
                     members: Sequence[JoinedMember]) -> Mapping[str, bytes]:
        c = self.consumer
        assignor = self.assignor(generation.protocol_name)
        joined = [LeaderMember(m.member_id, m.group_instance_id, m.metadata) for m in members]
        topics = sorted(subscribed_union(joined))
        md = await c.metadata_for(topics)
        counts = partition_counts(md, topics)
        plan = lead(assignor, joined, {t: n for t, n in counts.items() if n},
                    partition_racks(md, topics))
        if assignor.cooperative:
            check_cooperative(joined, plan)
        self.snapshot = counts
        log.info("group %s: generation %d: %s assigned %d partition(s) of %d topic(s) to %d "
                 "member(s)", c.group_id, generation.generation_id, assignor.name,
                 sum(counts.values()), len(topics), len(members))
        return plan

    async def on_assignment(self, generation: Generation, assignment: bytes) -> None:
        decoded = decode_assignment(assignment)  # raises: the member reports AssignmentError
        c = self.consumer
        async with self.lock:
            self.generation = generation
            self.last_generation_id = generation.generation_id
            new = frozenset(TopicPartition(*tp) for tp in decoded.partitions)
            self.last_assigned = new
            change = AssignmentChange.between(c.owned(), new)
            # Cooperative: `revoked` are partitions moving elsewhere (eager: none, all went
            # in on_revoke).
            await c.take_assignment(change.revoked, change.added, new)
            log.info("group %s: generation %d: %d partition(s) kept, %d added, %d revoked",
                     c.group_id, generation.generation_id, len(change.kept),
                     len(change.added), len(change.revoked))
            if change.revoked and self.cooperative:
                c.request_rejoin("KIP-429 follow-up rebalance: partitions were revoked")

    async def on_revoke(self, generation: Generation) -> None:
        c = self.consumer
        async with self.lock:
            owned = c.owned()
            if self.cooperative and not c.closing:
                gone = frozenset(tp for tp in owned if not c.subscription.matches(tp.topic))
                if gone:
                    await c.revoke(gone, commit=True, lost=False)
                return
            if owned:
                await c.revoke(owned, commit=True, lost=False)
            self.generation = None

    async def on_lost(self, generation: Generation) -> None:
        c = self.consumer
        async with self.lock:
            owned = c.owned()
            if owned:
                await c.revoke(owned, commit=False, lost=True)
            self.generation = None
            self.last_generation_id = -1
            self.last_assigned = frozenset()
