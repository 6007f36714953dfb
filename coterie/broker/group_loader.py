"""Loading the groups at start-up: every record of `__consumer_offsets`, replayed in order.

Every partition is read back and every item replayed into its shard through the same path a
live result takes (`GroupShard.replay`; transactional offset records with their producer,
and transaction markers): that is what makes replay equal live. The loop yields to the event
loop between chunks, so other requests are answered meanwhile (group APIs with
COORDINATOR_LOAD_IN_PROGRESS). A record that contradicts the state, or bytes that do not
decode, stop the load: like Kafka, coterie refuses to serve groups from a log it cannot
trust.
"""

from __future__ import annotations

import asyncio

from coterie.broker.offsets_topic import OffsetsLog, TxnMarker, TxnRecord
from coterie.broker.shard_router import ShardRouter
from coterie.group import GroupShard


async def load_shards(router: ShardRouter, offsets_log: OffsetsLog,
                      shards: list[GroupShard] | None = None) -> tuple[int, int]:
    """Replay every partition (or those of `shards`) into its shard; returns (records
    replayed, records of unknown types skipped)."""
    count = skipped = 0
    for shard in router.shards if shards is None else shards:
        for chunk in offsets_log.read(shard.partition):
            for item in chunk:
                if item is None:
                    skipped += 1
                    continue
                if isinstance(item, TxnMarker):
                    shard.replay_marker(item.producer_id, item.commit)
                elif isinstance(item, TxnRecord):
                    shard.replay(item.record, item.producer_id)
                else:
                    shard.replay(item)
                count += 1
            await asyncio.sleep(0)
    return count, skipped
