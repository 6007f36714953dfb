"""Producer ids: unique for the life of the data directory, across restarts and crashes.

An idempotent producer is known to every partition by its producer id, and the partitions'
duplicate detection survives a restart (coterie.log.producer_state). So an id must never be
handed out twice, not even after a kill -9: a second producer with a recycled id would have
its first batches taken for the old one's retries.

Kafka's controller hands brokers blocks of 1000 ids and records each block in its metadata
log before any id of it is used. coterie keeps the same shape on one node: the first id of
the next block is written (atomically, fsynced) to `producer-ids` in the data directory
before any id of the current block is given out. After a crash the ids left in the block
that was in use are skipped, never reused; the cost is a gap, as in Kafka.
"""

from __future__ import annotations

from pathlib import Path

from coterie.log.errors import StorageError
from coterie.log.files import atomic_write

BLOCK_SIZE = 1000
FILE_NAME = "producer-ids"
# Kafka's producer ids are non-negative int64s; -1 means "none" on the wire.
MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdAllocator:
    """Hands out producer ids from durable blocks of BLOCK_SIZE."""

    def __init__(self, data_dir: Path, block_size: int = BLOCK_SIZE) -> None:
        self._path = data_dir / FILE_NAME
        self._block_size = block_size
        self._next = self._read()
        self._block_end = self._next  # nothing reserved yet: the first id reserves a block

    def _read(self) -> int:
        try:
            text = self._path.read_text().strip()
        except FileNotFoundError:
            return 0
        try:
            value = int(text)
        except ValueError:
            raise StorageError(
                f"{self._path} holds {text[:40]!r}, not the next producer id block; "
                "restore it or remove it only if no producer of this broker may still retry"
            ) from None
        if value < 0:
            raise StorageError(f"{self._path} holds a negative producer id ({value})")
        return value

    def next_id(self) -> int:
        """A producer id never given out before by this data directory."""
        if self._next >= self._block_end:
            end = self._next + self._block_size
            if end > MAX_PRODUCER_ID:
                raise StorageError("producer ids are exhausted")
            atomic_write(self._path, f"{end}\n".encode())
            self._block_end = end
        pid = self._next
        self._next += 1
        return pid
