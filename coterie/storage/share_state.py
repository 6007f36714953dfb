"""Where the durable state of KIP-932 share partitions is kept: the seam, and its rules.

Why a seam of its own: a share group's progress on a partition (which records are delivered,
acknowledged, archived, how often each was delivered) must outlive the broker serving it.
The share-partition state machine (elsewhere) describes that progress as opaque records, a
snapshot now and then and updates in between; this seam only keeps them, in the order
written, per (group, topic id, partition). Kafka keeps them in `__share_group_state`, written
by a share coordinator; coterie has no share coordinator (docs/share-state-storage.md): the
broker leading the data partition writes its share state itself, conditional on that
partition's lease, and a new leader loads it after a failover. Two implementations sit
behind it and are tested against one contract (tests/storage/test_share_state_store.py):
files in the data directory for one broker (`files_share_state.py`) and PostgreSQL for a
cluster (`postgres_share_state.py`).

The rules every implementation keeps:

- **Entries are opaque bytes**, returned exactly as written, in write order.
- **A write is durable when it returns**, as durable as a committed offset on that storage:
  the state machine acknowledges records to the client after `append` returns.
- **Writes are conditional on the partition's lease** (`Resource.partition(tp)`): on
  PostgreSQL, checked in the write's own transaction, LeaseLost and nothing written when it
  is no longer held at its epoch; on files, one broker holds every lease for ever, so the
  lease is accepted and not checked (as `files_log.FilesLog`). A lease of another resource
  is the caller's bug (ValueError) on both.
- **A write is all or nothing**: after a crash, a load sees each append and each replace
  either whole or not at all (on files, a torn last append is dropped when loaded).
- **Reads and deletes need no lease**: any broker describes a group's share offsets, and
  deleting a group's state is an administrator's action, not a leader's. So is `reset`
  (AlterShareGroupOffsets through a broker that does not lead the partition).
- **Writes are fenced by the state epoch too**: each partition's stored state has a state
  epoch (0 until written otherwise). `append` and `replace` carry the writer's (its copy's)
  and are refused with StateEpochFenced, nothing written, when a newer one is stored; a
  `replace` may raise it (the leader's own reset). `reset` stores its new one, and is
  refused when it is not newer than the stored one. So a leader's copy loaded before an
  administrator's reset can never write over it: its first write fails and it loads again.
- **An empty list is no state**: a partition whose stored list is empty (never written,
  replaced by nothing, deleted) is not among `partitions_of`, and loads as [].
- **Group ids** are any non-empty string without NUL ("\\0", which PostgreSQL's text cannot
  hold), up to Kafka's 32,767 UTF-8 bytes; anything else is refused with ValueError before
  anything is touched (`check_group_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from coterie.common.limits import MAX_STRING_BYTES
from coterie.storage.api import Lease, Resource, TopicIdPartition

__all__ = ["ShareStateStore", "check_group_id", "check_lease"]


@runtime_checkable
class ShareStateStore(Protocol):
    """The durable state of share partitions: per (group, topic id, partition), a list of
    opaque entries (a snapshot, then the updates since), in the order written."""

    async def load(self, group_id: str, tp: TopicIdPartition) -> list[bytes]:
        """The entries stored for `group_id` on `tp`, in write order; [] when none.

        Why: a broker that becomes the partition's leader (at start-up, after a failover)
        rebuilds the share partition's state from them before serving ShareFetch; any
        broker reads them to answer DescribeShareGroupOffsets. Needs no lease."""
        ...

    async def append(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                     lease: Lease, *, state_epoch: int = 0) -> None:
        """Add `entries` after the ones stored, all or nothing, durably before returning,
        if `lease` (the partition's) is still held; LeaseLost, and nothing written, if not.
        StateEpochFenced, nothing written, when the stored state epoch is above
        `state_epoch` (module docstring).

        Why: each state change (records acquired, acknowledged, released) is written as a
        small update rather than the whole state; the acknowledgement is answered to the
        client only once it returns. The lease keeps a deposed leader, paused past its
        tenure, from writing over the new leader's state."""
        ...

    async def replace(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                      lease: Lease, *, state_epoch: int = 0) -> None:
        """Make `entries` the whole stored list, atomically (a reader, or a load after a
        crash, sees the old list or the new one, never a mix), under `lease` and
        `state_epoch` as `append`; `state_epoch` is then the stored one. An empty `entries`
        leaves no state (as `delete` of the partition, but fenced).

        Why: updates pile up; the state machine writes a snapshot of the whole state now
        and then, and the updates it makes obsolete go with it, so that a load replays a
        bounded history."""
        ...

    async def reset(self, group_id: str, tp: TopicIdPartition, entries: Sequence[bytes],
                    state_epoch: int) -> None:
        """Make `entries` (a new snapshot) the whole stored list with `state_epoch`, as
        `replace` does but with no lease; StateEpochFenced, nothing written, unless
        `state_epoch` is above the stored one.

        Why: AlterShareGroupOffsets is answered by the group's coordinator, which in a
        cluster need not lead the partition (Kafka's share coordinator writes a new state
        epoch the same way). The group has no members; the state epoch keeps the leader's
        old copy, if it still has one, from writing over the reset."""
        ...

    async def delete(self, group_id: str, tp: TopicIdPartition | None = None) -> None:
        """Drop the state of `group_id` on `tp`, or on every partition when `tp` is None;
        nothing to drop is fine. Unconditional: no lease.

        Why: DeleteShareGroupOffsets (one group's state on some partitions) and deleting a
        share group (all of it) are administrators' actions, answered by whichever broker
        received them, not by the partitions' leaders."""
        ...

    async def partitions_of(self, group_id: str) -> list[TopicIdPartition]:
        """The partitions on which `group_id` has state (a non-empty list), sorted by
        topic id and partition.

        Why: describing a group's share offsets (DescribeShareGroupOffsets without a topic
        list) and deleting them need to know where the group has state, without scanning
        every partition of the cluster."""
        ...


def check_group_id(group_id: str) -> bytes:
    """The UTF-8 bytes of a group id the stores can keep (module docstring); ValueError for
    one they cannot: empty, holding NUL, not encodable (a lone surrogate), or longer than
    Kafka's string limit."""
    if not isinstance(group_id, str) or not group_id:
        raise ValueError(f"a share group's id must be a non-empty string, not {group_id!r}")
    if "\0" in group_id:
        raise ValueError("a share group's id cannot hold NUL ('\\0')")
    try:
        encoded = group_id.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"a share group's id must be valid Unicode: {e}") from e
    if len(encoded) > MAX_STRING_BYTES:
        raise ValueError(f"a share group's id is at most {MAX_STRING_BYTES} UTF-8 bytes, not "
                         f"{len(encoded)}")
    return encoded


def check_lease(tp: TopicIdPartition, lease: Lease) -> None:
    """A write's lease must be its partition's (Resource.partition): another resource's
    lease, however valid, says nothing about who leads `tp` (ValueError: the caller's bug)."""
    if lease.resource != Resource.partition(tp):
        raise ValueError(f"share state of {tp} written under the lease of {lease.resource}, "
                         f"not of {Resource.partition(tp)}")
