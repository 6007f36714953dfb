"""The groups' housekeeping: offsets whose retention ran out, and what a reload replays.

Run on the broker's housekeeping tick: `expire_offsets` asks every shard which offsets have
expired (KIP-211; the rule per group type is `Group.offsets_expire_from`) and writes their
tombstones; `compact` bounds what a reload of `__consumer_offsets` replays
(`OffsetsLog.compact`: on the broker, roll partitions with much history for the log
cleaner).
"""

from __future__ import annotations

from collections.abc import Callable

from coterie.broker.group_writer import ResultWriter
from coterie.broker.offsets_topic import OffsetsLog
from coterie.broker.shard_router import ShardRouter
from coterie.group import Record, Result


class GroupHousekeeping:
    """Offset expiry and compaction for every shard (module docstring)."""

    def __init__(self, router: ShardRouter, offsets_log: OffsetsLog, writer: ResultWriter,
                 clock: Callable[[], int]) -> None:
        self.router = router
        self.log = offsets_log
        self.writer = writer
        self.now_ms = clock

    def expire_offsets(self) -> int:
        """Delete the offsets whose retention ran out; returns how many."""
        expired = 0
        now = self.now_ms()
        for shard in self.router.served():
            records = shard.expire_offsets(now)
            by_group: dict[str, list[Record]] = {}
            for r in records:
                by_group.setdefault(r.key.group_id, []).append(r)
            for group_id, rs in by_group.items():
                self.writer.run(group_id, Result(records=rs))
            expired += len(records)
        return expired

    def compact(self, min_segments: int = 2) -> int:
        """Returns how many partitions were compacted or rolled. A partition with open
        transactions waits: their pending offsets belong in their producers' transactional
        batches, which a snapshot of live values cannot restate."""
        now = self.now_ms()
        return sum(self.log.compact(shard.partition, shard.durable, now, min_segments)
                   for shard in self.router.served() if not shard.has_open_transactions())
