"""OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete as the shard sees them:
version-free values.

The broker's handlers build these from any wire version and turn the answers back into that
version's response; every rule between the two (fencing, metadata size, unknown partitions,
subscribed topics) is the shard's (`coterie.group.shard`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from coterie.group.records.offsets import OffsetCommitValue


@dataclass(frozen=True, slots=True)
class CommitPartition:
    """One partition's commit. `metadata` None is stored as "" (Kafka does the same)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    """`epoch` is the generation id (classic) or member epoch (consumer); -1 from outside
    group management. `retention_ms` -1 means the broker's offsets.retention.minutes (only
    OffsetCommit v2-v4 carry another)."""

    group_id: str
    member_id: str
    epoch: int
    partitions: tuple[CommitPartition, ...]
    instance_id: str | None = None
    version: int = 9
    retention_ms: int = -1

    def refused(self, code: ErrorCode) -> OffsetCommitResponse:
        """The answer when the whole request is refused: every partition carries `code`."""
        return OffsetCommitResponse(tuple(code for _ in self.partitions))


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    """One code per partition of the request, in its order."""

    codes: tuple[ErrorCode, ...]

    def with_error(self, error: ErrorCode) -> OffsetCommitResponse:
        """The answer when the commit's records could not be made durable: the partitions
        that were to be committed carry `error`; those refused before keep their code."""
        return replace(self, codes=tuple(error if c == ErrorCode.none else c
                                         for c in self.codes))


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """Offsets committed inside `producer_id`'s transaction. `generation` is the generation
    id (classic) or member epoch (consumer); -1 (with an empty member id) from a producer
    that does not pass its consumer's group metadata, as before TxnOffsetCommit v3."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[CommitPartition, ...]
    generation: int = -1
    member_id: str = ""
    instance_id: str | None = None
    version: int = 3
    # Set by the broker: the transaction coordinator must verify the transaction before
    # the shard goes on (`GroupShard.txn_offset_commit` asks, then takes `verified`: a
    # refusal for every partition, or None).
    verify: bool = False
    verified: ErrorCode | None = None

    def refused(self, code: ErrorCode) -> TxnOffsetCommitResponse:
        """The answer when the whole request is refused: every partition carries `code`."""
        return TxnOffsetCommitResponse(tuple(code for _ in self.partitions))


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitResponse:
    """One code per requested partition, in its order."""

    codes: tuple[ErrorCode, ...]

    def with_error(self, error: ErrorCode) -> TxnOffsetCommitResponse:
        """The answer when the records could not be made durable."""
        return TxnOffsetCommitResponse(tuple(
            error if c == ErrorCode.none else c for c in self.codes))


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    value: OffsetCommitValue | None  # None: nothing committed
    # An open transaction has committed this partition and the fetch asked for stable
    # offsets only: UNSTABLE_OFFSET_COMMIT, the client retries.
    unstable: bool = False


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    """`partitions` None asks for every committed offset of the group. `member_id` and
    `member_epoch` are set by KIP-848 consumers (OffsetFetch v9+)."""

    group_id: str
    partitions: tuple[tuple[str, int], ...] | None = None
    member_id: str | None = None
    member_epoch: int = -1
    require_stable: bool = False

    def refused(self, code: ErrorCode) -> OffsetFetchResponse:
        return OffsetFetchResponse(code)


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: ErrorCode
    offsets: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    partitions: tuple[tuple[str, int], ...]

    def refused(self, code: ErrorCode) -> OffsetDeleteResponse:
        return OffsetDeleteResponse(code)


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    """A group-level error, or one code per requested partition, in its order."""

    error: ErrorCode
    codes: tuple[ErrorCode, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupRequest:
    """One group of a DeleteGroups request; the answer is its error code."""

    group_id: str

    def refused(self, code: ErrorCode) -> ErrorCode:
        return code
