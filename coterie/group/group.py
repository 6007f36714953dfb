"""What every group type offers the shard: the `Group` protocol.

A coordinator shard holds groups of several types under one id namespace, in one registry
(`GroupShard.groups`: classic groups, KIP-848 consumer groups, KIP-1071 streams groups,
KIP-932 share groups). The rules that are not one protocol's but "a group's" live in the shard
(`coterie.group.shard`): OffsetCommit / OffsetFetch fencing, OffsetDelete's subscribed-topic
check, ListGroups, DeleteGroups, offset expiry, the undo of a failed append; the broker's
group events read every group the same way. Each of them asks a group the questions below,
so a new group type is one new implementation of this protocol (and a `GroupKind` that
serves it, `coterie.group.kind`), not edits where those rules are applied.

A shard without a group of some id still answers those requests (a standalone consumer's
commits, say): the shard's own code covers "no group".
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from coterie.group.records.record import Record


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused for the whole group: the error code and Kafka's message."""

    code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One ListGroups entry; `state` as Kafka spells it for that group type."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str


class Group(Protocol):
    """One group of any type, as the shard's group-independent rules see it."""

    group_id: str

    @property
    def group_type(self) -> str:
        """"classic", "consumer", ... (ListGroups' and DescribeGroups' type names)."""
        ...

    @property
    def changes_without_records(self) -> bool:
        """Whether the group can change without writing a record (a classic join phase
        does): observers look at it after every operation, not only after writes."""
        ...

    def has_members(self) -> bool:
        ...

    def listing(self) -> ListedGroup | None:
        """The group's ListGroups entry; None for a group that is going away (Dead)."""
        ...

    def commit_refusal(self, member_id: str, epoch: int, instance_id: str | None,
                       version: int, transactional: bool = False) -> Refusal | None:
        """OffsetCommit fencing: why this member may not commit, or None. `epoch` is the
        request's generation id or member epoch; `version` the OffsetCommit version;
        `transactional` for TxnOffsetCommit, which Kafka fences a little differently."""
        ...

    def fetch_refusal(self, member_id: str | None, epoch: int) -> Refusal | None:
        """OffsetFetch (v9+, with a member id or epoch) fencing, or None."""
        ...

    def offset_delete_refusal(self) -> Refusal | None:
        """OffsetDelete of the group's offsets refused as a whole (Kafka 4.2's
        validateOffsetDelete), or None: the partitions are then checked one by one."""
        ...

    def subscribed_topics(self) -> set[str]:
        """Topics the group's members subscribe to (OffsetDelete refuses to delete their
        offsets); empty when it has no members."""
        ...

    def offsets_expire_from(self) -> int | None:
        """Offset expiry (KIP-211): None while the group keeps its offsets whatever their
        age (it has members); otherwise the time from which retention runs, or runs from
        each offset's commit time if that is later (-1: from the commit time alone)."""
        ...

    def deletion(self) -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups: NON_EMPTY_GROUP (and no records) for a group that may not go, else
        NONE and the tombstones that delete it, in an order replay accepts (not applied:
        the shard replays them)."""
        ...

    def dropped(self, error: ErrorCode) -> list[tuple[Hashable, Any]]:
        """The group is thrown away to be rebuilt from its records (a failed append): the
        answers, carrying `error`, to the requests it parked (token, answer)."""
        ...

    def event_snapshot(self) -> Any:
        """The group as group events compare it (`coterie.group.events`): a value with a
        `derive` that turns the previous snapshot into events."""
        ...

    def event_fingerprint(self) -> Hashable:
        """Equal whenever `event_snapshot()` would be, and cheap: most operations change
        nothing, and then no snapshot is taken."""
        ...
