"""Blocks of producer ids, handed to brokers so that no id is ever given twice in a cluster.

Why blocks, recorded as rows: every InitProducerId needs an id no other broker gave out,
and asking the database each time would put a round trip on it. Like Kafka's controller
(AllocateProducerIds), the database hands a broker a block of ids at a time; the broker gives
them out from memory and asks for the next block when it runs dry. Each block is a row (who
got it, when), so an operator can tell which broker issued an id. Blocks are contiguous and
allocated under a table lock, so two brokers asking at once get the next two blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from coterie.storage.database import Database

__all__ = ["DEFAULT_BLOCK_SIZE", "ProducerIdBlock", "allocate_block"]

DEFAULT_BLOCK_SIZE = 1000  # Kafka's block size


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids [first_id, first_id + size), this broker's to give out."""

    first_id: int
    size: int

    @property
    def end(self) -> int:
        return self.first_id + self.size


async def allocate_block(db: Database, node_id: int,
                         size: int = DEFAULT_BLOCK_SIZE) -> ProducerIdBlock:
    """The next block of `size` producer ids, recorded as given to `node_id`."""
    if size <= 0:
        raise ValueError(f"a producer-id block needs a positive size, not {size}")
    async with db.transaction() as conn:
        # EXCLUSIVE mode lets readers look at the blocks but orders the allocators.
        await conn.execute("LOCK TABLE producer_id_blocks IN EXCLUSIVE MODE")
        cur = await conn.execute(
            "INSERT INTO producer_id_blocks (first_id, block_size, node_id) "
            "SELECT coalesce((SELECT first_id + block_size FROM producer_id_blocks "
            "                 ORDER BY first_id DESC LIMIT 1), 0), %s, %s "
            "RETURNING first_id", (size, node_id))
        row = await cur.fetchone()
    assert row is not None
    return ProducerIdBlock(int(row[0]), size)
