"""Every error the storage layer raises, in one place.

The broker maps each class to one Kafka error code, so the classes are split by what the
client is told, not by where in the code they happen. All derive from LogError so a handler
can catch "anything the log refused" in one clause.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class: the log refused or failed an operation."""


class CorruptRecordError(LogError):
    """A record batch failed a header, length or CRC check (Kafka: CORRUPT_MESSAGE)."""


class InvalidRecordError(LogError):
    """A well-formed record the log may not hold (a record without a key in a compacted
    topic): INVALID_RECORD."""


class RecordTooLargeError(LogError):
    """A batch is larger than the topic's max.message.bytes (Kafka: MESSAGE_TOO_LARGE)."""


class OffsetOutOfRangeError(LogError):
    """A fetch asked for an offset outside [log start, log end] (Kafka: OFFSET_OUT_OF_RANGE)."""


class BelowCopyError(LogError):
    """A read of offsets a cluster broker's copy no longer (or never) held: they are in the
    database, between its log start and the copy's start (coterie.broker.cluster reads
    them there). Never reaches a client as such."""

    def __init__(self, offset: int, local_start: int) -> None:
        super().__init__(f"offset {offset} lies below this copy's start {local_start}")
        self.offset = offset
        self.local_start = local_start


class StorageError(LogError):
    """The data directory cannot be used: not writable, locked by another broker, or broken
    metadata. The message is meant to be shown to an operator on one line."""


class InvalidConfigError(LogError, ValueError):
    """A topic or broker log setting has an unknown name or an unusable value."""


class InvalidTopicError(LogError):
    """A topic name breaks Kafka's naming rules."""


class TopicExistsError(LogError):
    """CreateTopics for a name that is already taken."""


class UnknownTopicError(LogError):
    """An operation named a topic this broker does not host."""


class InvalidPartitionsError(LogError):
    """A partition count that is not positive, or CreatePartitions that does not grow."""


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's batch does not follow its last sequence number (Kafka:
    OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpochError(LogError):
    """A producer wrote with an epoch older than the partition has seen (Kafka:
    INVALID_PRODUCER_EPOCH)."""


class InvalidTxnStateError(LogError):
    """A producer wrote a plain batch while its transaction is open (Kafka:
    INVALID_TXN_STATE)."""
