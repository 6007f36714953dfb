"""What the storage raises, as types the broker can map to Kafka error codes.

Why typed errors: the broker answers each differently. A lost lease is
NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR (another broker serves the partition now); an
unreachable database is a retriable error; a newer schema stops the broker at start-up.
"""

from __future__ import annotations

__all__ = [
    "Diverged",
    "LeaseLost",
    "NodeIdInUse",
    "OffsetOutOfRange",
    "RegistrationLost",
    "SchemaTooNew",
    "StateEpochFenced",
    "StorageError",
    "UnknownPartition",
    "UnknownTopic",
]


class StorageError(Exception):
    """Base of every error coterie.storage raises on purpose."""


class SchemaTooNew(StorageError):
    """The database's schema is newer than this coterie knows: a newer coterie migrated it.
    Writing to it could corrupt what the newer code relies on, so the broker refuses to
    start."""

    def __init__(self, database_version: int, known_version: int) -> None:
        super().__init__(
            f"database schema is version {database_version}, this coterie knows up to "
            f"{known_version}: upgrade coterie")
        self.database_version = database_version
        self.known_version = known_version


class LeaseLost(StorageError):
    """The writer no longer holds the lease (owner and epoch) its write was conditional on:
    the lease expired, was released, or another broker took it. Nothing was written."""


class StateEpochFenced(StorageError):
    """A share partition's stored state has a newer state epoch than the write's: an
    administrator reset it (AlterShareGroupOffsets through a broker not leading the
    partition) since the writer loaded its copy. Nothing was written; the writer must load
    the state again (Kafka's FENCED_STATE_EPOCH)."""


class Diverged(StorageError):
    """An append named the offset it expected to start at (the writer's own copy of the
    log's end), and the stored log ends elsewhere: the writer's copy is not the stored log
    (a write of its own failed before, or another owner wrote meanwhile). Nothing was
    written; the writer must reload the partition before it appends again."""


class RegistrationLost(StorageError):
    """A broker's registration expired or was replaced; it must register again (and, since
    its leases may have been taken meanwhile, acquire them again)."""


class NodeIdInUse(StorageError):
    """Another live broker is registered with this node.id."""


class UnknownTopic(StorageError):
    """No topic of that name or id."""


class UnknownPartition(StorageError):
    """No such partition of a known topic."""


class OffsetOutOfRange(StorageError):
    """An offset outside the log's [log start, log end]."""
