"""What a consumer's membership helpers may ask of the consumer: `PartitionOwner`.

A `Consumer` takes part in a group through one of two helpers: `ConsumerRebalanceProtocol`
(the classic protocol's embedded "consumer" protocol, eager or cooperative) or
`ConsumerGroupMember` (KIP-848). Both decide *which* partitions the consumer gives up and
takes on; the consumer owns *how* (commit before revoking, the rebalance listener, the
fetcher). This protocol is that boundary, so neither helper reaches into the consumer, and
the revoke -> assign -> listener sequence exists once, in `take_assignment`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from coterie.client.cluster import Cluster, ClusterMetadata
from coterie.client.subscription import TopicPartition, TopicSubscription


class PartitionOwner(Protocol):
    group_id: str
    rack: str | None
    cluster: Cluster

    @property
    def subscription(self) -> TopicSubscription:
        """The consumer's current subscription (topics or a pattern)."""
        ...

    @property
    def closing(self) -> bool:
        """Whether the consumer is being closed (a cooperative revoke then gives up all)."""
        ...

    def owned(self) -> frozenset[TopicPartition]:
        """The partitions the consumer owns now."""
        ...

    async def revoke(self, partitions: Iterable[tuple[str, int]], *, commit: bool,
                     lost: bool) -> None:
        """Give partitions up: stop fetching them, commit their positions first if `commit`
        (and auto-commit is on and they are not `lost`), tell the listener (revoked, or lost),
        and forget them."""
        ...

    async def take_assignment(self, revoked: frozenset[TopicPartition],
                              added: frozenset[TopicPartition],
                              assigned: frozenset[TopicPartition],
                              still_wanted: Callable[[], bool] | None = None) -> bool:
        """Move to a new assignment: revoke `revoked` (committing), then, unless
        `still_wanted` says otherwise by then (fenced or closing while revoking), take on
        `added`, fetch for all of `assigned` and tell the listener what was added. Returns
        whether the new partitions were taken on."""
        ...

    async def metadata_for(self, topics: Sequence[str] | None) -> ClusterMetadata:
        """Metadata of `topics` (None: all), which also updates the fetcher's leaders."""
        ...

    async def resolve_pattern(self) -> None:
        """Match a pattern subscription against the cluster's topics (no-op otherwise)."""
        ...

    def request_rejoin(self, reason: str) -> None:
        """Ask the group membership for another rebalance (KIP-429's follow-up)."""
        ...
