"""Which shard coordinates a group: one `GroupShard` per `__consumer_offsets` partition.

Kafka maps a group id to a partition by Java's `String.hashCode` modulo the partition count
(`coterie.common.partitioning`), and coterie does the same, so a group's records sit where
Kafka would put them. The hash is a Python loop over the id, and every request needs it:
the shard of recently seen ids is remembered (cleared whole when full).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from coterie.common.partitioning import partition_for
from coterie.group import Group, GroupShard, ShardConfig

# How many group ids' shards are remembered.
_SHARD_CACHE_MAX = 65_536


class ShardRouter:
    """The shards of one broker, and the shard of a group id (module docstring)."""

    def __init__(self, partitions: int, config: ShardConfig,
                 new_member_id: Callable[[str], str],
                 new_consumer_member_id: Callable[[], str]) -> None:
        self._make = lambda i: GroupShard(i, config, new_member_id, new_consumer_member_id)
        self.shards = [self._make(i) for i in range(partitions)]
        self._shard_of: dict[str, GroupShard] = {}
        # The shards this broker coordinates: every one on a single broker (None); in a
        # cluster, those whose __consumer_offsets partition it leads (coterie.broker.cluster).
        self.owned: set[int] | None = None

    def served(self) -> list[GroupShard]:
        """The shards this broker coordinates now."""
        owned = self.owned
        return self.shards if owned is None else [s for s in self.shards if s.partition in owned]

    def replace(self, partition: int) -> GroupShard:
        """A new, empty shard in place of `partition`'s (before loading it again, or after
        giving it up)."""
        self.shards[partition] = shard = self._make(partition)
        self._shard_of.clear()
        return shard

    def shard_for(self, group_id: str) -> GroupShard:
        shard = self._shard_of.get(group_id)
        if shard is None:
            if len(self._shard_of) >= _SHARD_CACHE_MAX:
                self._shard_of.clear()
            shard = self._shard_of[group_id] = self.shards[
                partition_for(group_id, len(self.shards))]
        return shard

    def groups(self) -> Iterator[Group]:
        """Every group of every shard this broker coordinates."""
        for shard in self.served():
            yield from shard.groups.values()

    def __len__(self) -> int:
        return len(self.shards)
