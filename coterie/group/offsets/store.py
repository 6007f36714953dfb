"""Committed offsets per group, as a pure state machine over coordinator records.

The store's state is defined only by the records replayed into it: `commit`, `delete`,
`delete_group` and `expire` compute the records that *would* make a change and leave the
store untouched. The caller appends those records to `__consumer_offsets` and, once they are
durable, replays them. Start-up recovery replays the same records from the log through the
same `replay`, so live state and recovered state cannot drift apart, and an append that fails
leaves no trace in memory.

Offsets committed inside a transaction (TxnOffsetCommit) are written in a transactional
batch of their producer and replayed with its producer id: they wait as *pending* offsets of
that producer, invisible to `fetch`, until the transaction's marker is replayed
(`replay_marker`): a commit moves them into the committed offsets, an abort drops them (as
Kafka's OffsetMetadataManager does). When both a plain and a transactional commit exist for
a partition, the one written later to the log wins: each value remembers the position of its
record in replay order.

Nothing here reads the clock: callers pass `now_ms`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from coterie.group.records.offsets import OffsetCommitKey, OffsetCommitValue
from coterie.group.records.record import Record

__all__ = [
    "NO_EXPIRE_TIMESTAMP",
    "NO_PRODUCER_ID",
    "OffsetCommitRequestEntry",
    "OffsetStore",
    "metadata_too_large",
]

# Sentinel for "no explicit expiry; expire by offsets.retention.minutes" (Kafka uses -1 too).
NO_EXPIRE_TIMESTAMP = -1
# The producer id of a record written outside any transaction (Kafka's NO_PRODUCER_ID).
NO_PRODUCER_ID = -1

_Key = tuple[str, str, int]  # (group id, topic, partition)


@dataclass(frozen=True, slots=True)
class OffsetCommitRequestEntry:
    """One partition's commit, decoupled from the wire request version it arrived in.

    `metadata` None is stored as "" (what Kafka does with a null committed metadata).
    `expire_timestamp_ms` is only set for OffsetCommit v1 commit timestamps or v2-v4
    retention times; -1 means the group-level retention rule applies.
    """

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    expire_timestamp_ms: int = NO_EXPIRE_TIMESTAMP


def metadata_too_large(metadata: str | None, max_bytes: int) -> bool:
    """Whether committed metadata exceeds `offset.metadata.max.bytes`.

    Despite the config's name, Kafka compares Java's `String.length()` with the limit, i.e.
    the number of UTF-16 code units, not UTF-8 bytes. We match that so the same commits are
    accepted and refused as on Kafka: a character outside the BMP counts 2, anything else 1.
    Null metadata is never too large.
    """
    if metadata is None:
        return False
    utf16_units = len(metadata.encode("utf-16-le", "surrogatepass")) // 2
    return utf16_units > max_bytes


class OffsetStore:
    """Committed offsets of every group this coordinator owns.

    Only `replay` mutates. Everything else either reads or returns records to be appended.
    """

    def __init__(self) -> None:
        self._offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        # Where each committed value's record came in the replay order (later wins).
        self._positions: dict[_Key, int] = {}
        # Pending transactional offsets: producer id -> key -> (value, position).
        self._pending: dict[int, dict[_Key, tuple[OffsetCommitValue, int]]] = {}
        # group id -> producer ids with pending offsets for it.
        self._open: dict[str, set[int]] = {}
        self._position = 0

    # ---------------------------------------------------------------------------- mutation

    def replay(self, record: Record, producer_id: int = NO_PRODUCER_ID) -> None:
        """Apply one durable record; `producer_id` is that of the batch it was written in
        (NO_PRODUCER_ID outside a transaction). Records that are not about offsets are
        ignored.

        Ignoring rather than rejecting other record kinds lets the loader feed every record
        of `__consumer_offsets` to each state machine without routing logic.
        """
        key = record.key
        if not isinstance(key, OffsetCommitKey):
            return
        value = record.value
        self._position += 1
        k = (key.group_id, key.topic, key.partition)
        if value is None:
            # A tombstone removes the committed offset and any pending one (Kafka does both).
            self._remove(k)
            for producer in list(self._open.get(key.group_id, ())):
                pending = self._pending.get(producer)
                if pending is not None:
                    pending.pop(k, None)
            return
        if not isinstance(value, OffsetCommitValue):
            raise TypeError(f"OffsetCommitKey with a {type(value).__name__} value")
        if producer_id == NO_PRODUCER_ID:
            self._put(k, value, self._position)
            return
        self._pending.setdefault(producer_id, {})[k] = (value, self._position)
        self._open.setdefault(key.group_id, set()).add(producer_id)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """Apply a transaction marker (COMMIT or ABORT) of `producer_id` written to this
        partition: its pending offsets become committed ones, unless a later record already
        committed the partition, or vanish."""
        pending = self._pending.pop(producer_id, None)
        if pending is None:
            return
        for group_id, _, _ in pending:
            producers = self._open.get(group_id)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self._open[group_id]
        if not commit:
            return
        for k, (value, position) in pending.items():
            if position > self._positions.get(k, 0):
                self._put(k, value, position)

    def _put(self, k: _Key, value: OffsetCommitValue, position: int) -> None:
        group_id, topic, partition = k
        self._offsets.setdefault(group_id, {})[(topic, partition)] = value
        self._positions[k] = position

    def _remove(self, k: _Key) -> None:
        group_id, topic, partition = k
        self._positions.pop(k, None)
        group = self._offsets.get(group_id)
        if group is None:
            return
        group.pop((topic, partition), None)
        if not group:
            # Drop emptied groups so `groups()`/`has_offsets` reflect only real data,
            # and so replaying a log and running live give identical states.
            del self._offsets[group_id]

    def copy_group(self, source: OffsetStore, group_id: str) -> None:
        """Make `group_id`'s committed and pending offsets here exactly `source`'s, replay
        positions included (the undo of a failed append: `source` is the durable view's
        store, fed only what reached the log; every other group is the same in both).
        Positions stay comparable: `source` has seen a subset of the records this store
        replayed, in the same order."""
        for topic, partition in list(self._offsets.get(group_id, {})):
            self._remove((group_id, topic, partition))
        touched = self._open.pop(group_id, set()) | source._open.get(group_id, set())
        for producer in touched:
            pending = self._pending.get(producer, {})
            for k in [k for k in pending if k[0] == group_id]:
                del pending[k]
            theirs = source._pending.get(producer)
            if theirs is None:
                self._pending.pop(producer, None)
                continue
            mine = self._pending.setdefault(producer, {})
            mine.update((k, entry) for k, entry in theirs.items() if k[0] == group_id)
        if group_id in source._open:
            self._open[group_id] = set(source._open[group_id])
        for (topic, partition), value in source._offsets.get(group_id, {}).items():
            k = (group_id, topic, partition)
            self._put(k, value, source._positions[k])
        self._position = max(self._position, source._position)

    def records(self) -> Iterator[Record]:
        """Every committed offset as its record (what a compaction keeps)."""
        for group_id, offsets in self._offsets.items():
            for (topic, partition), value in offsets.items():
                yield Record(OffsetCommitKey(group_id, topic, partition), value)

    def count(self) -> int:
        """How many committed offsets there are."""
        return len(self._positions)

    def state(self) -> tuple[dict[str, dict[tuple[str, int], OffsetCommitValue]],
                             dict[int, dict[_Key, OffsetCommitValue]]]:
        """Committed offsets by group and pending ones by producer, without positions (for
        comparing two stores)."""
        return ({g: dict(o) for g, o in self._offsets.items()},
                {p: {k: v for k, (v, _) in d.items()} for p, d in self._pending.items() if d})

    # ---------------------------------------------------------------------------- commands

    def commit(
        self,
        group_id: str,
        commits: Iterable[OffsetCommitRequestEntry],
        now_ms: int,
    ) -> list[Record]:
        """Records that store `commits` for `group_id`, stamped with `now_ms`.

        Validation (generation, metadata size, authorization) is the caller's job; this only
        shapes the records. If a partition appears twice the later entry wins on replay, as
        it would on Kafka.
        """
        return [
            Record(
                OffsetCommitKey(group_id, entry.topic, entry.partition),
                OffsetCommitValue(
                    offset=entry.offset,
                    leader_epoch=entry.leader_epoch,
                    metadata="" if entry.metadata is None else entry.metadata,
                    commit_timestamp_ms=now_ms,
                    expire_timestamp_ms=entry.expire_timestamp_ms,
                ),
            )
            for entry in commits
        ]

    def delete(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> list[Record]:
        """Tombstones for those of `partitions` that have a committed or a pending
        transactional offset (once each; Kafka writes one for either).

        Tombstoning a non-existent key would be harmless but would grow the log for nothing.
        """
        group = self._offsets.get(group_id, {})
        records: list[Record] = []
        seen: set[tuple[str, int]] = set()
        for topic, partition in partitions:
            tp = (topic, partition)
            if (tp in group or self.has_pending(group_id, topic, partition)) and tp not in seen:
                seen.add(tp)
                records.append(Record(OffsetCommitKey(group_id, topic, partition), None))
        return records

    def delete_group(self, group_id: str) -> list[Record]:
        """Tombstones for every committed offset of `group_id`, and for the partitions that
        have only a pending transactional offset (one tombstone per partition)."""
        partitions = list(self._offsets.get(group_id, {}))
        seen = set(partitions)
        for producer in sorted(self._open.get(group_id, ())):
            for g, topic, partition in self._pending.get(producer, {}):
                if g == group_id and (topic, partition) not in seen:
                    seen.add((topic, partition))
                    partitions.append((topic, partition))
        return [Record(OffsetCommitKey(group_id, topic, partition), None)
                for topic, partition in partitions]

    def expire(
        self,
        now_ms: int,
        retention_ms: int,
        empty_since_ms: Mapping[str, int | None],
    ) -> list[Record]:
        """Tombstones for offsets whose retention has run out (KIP-211, Kafka 2.1+).

        `empty_since_ms` says, per group the coordinator knows of, when it became empty, or
        None if it has members. A group with offsets but absent from the mapping has no group
        state at all: its offsets come from standalone (assign()-mode) consumers or admin
        tools.

        - Groups with members never lose offsets, whatever their expire timestamps: the
          consumers are live and may still need them (Kafka skips such groups entirely).
        - Otherwise an offset with an explicit expire timestamp (legacy OffsetCommit v1-v4)
          expires when `now_ms` reaches it.
        - Otherwise it expires `retention_ms` after the later of its commit and the moment
          the group became empty (just the commit for standalone offsets). An offset with
          a pending transactional commit waits for the transaction to end. Kafka bases it
          on the empty-since time alone; taking the later of the two never expires an offset
          sooner than `retention_ms` after it was written, e.g. one committed by an admin
          tool to an already-empty group.
        """
        records: list[Record] = []
        for group_id, offsets in self._offsets.items():
            if group_id in empty_since_ms:
                empty_since = empty_since_ms[group_id]
                if empty_since is None:
                    continue
            else:
                empty_since = None
            for (topic, partition), value in offsets.items():
                if value.expire_timestamp_ms != NO_EXPIRE_TIMESTAMP:
                    expires_at = value.expire_timestamp_ms
                else:
                    base = value.commit_timestamp_ms
                    if empty_since is not None:
                        base = max(base, empty_since)
                    expires_at = base + retention_ms
                if expires_at <= now_ms and not self.has_pending(group_id, topic, partition):
                    records.append(Record(OffsetCommitKey(group_id, topic, partition), None))
        return records

    # ---------------------------------------------------------------------------- queries

    def fetch(self, group_id: str, topic: str, partition: int) -> OffsetCommitValue | None:
        """The committed offset of one partition, or None if there is none."""
        return self._offsets.get(group_id, {}).get((topic, partition))

    def fetch_all(self, group_id: str) -> dict[tuple[str, int], OffsetCommitValue]:
        """All committed offsets of `group_id` by (topic, partition); a copy, safe to keep."""
        return dict(self._offsets.get(group_id, {}))

    def groups(self) -> set[str]:
        """Ids of the groups that have at least one committed or pending offset (Kafka
        creates a simple group for either)."""
        return set(self._offsets) | set(self._open)

    def has_offsets(self, group_id: str) -> bool:
        """Whether `group_id` has any committed or pending offset (e.g. to list or keep a
        group)."""
        return group_id in self._offsets or group_id in self._open

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction has committed an offset for this partition (an
        OffsetFetch with require_stable gets UNSTABLE_OFFSET_COMMIT for it)."""
        k = (group_id, topic, partition)
        return any(k in self._pending.get(p, {}) for p in self._open.get(group_id, ()))

    def open_transactions(self) -> set[int]:
        """Producer ids with pending offsets in this store."""
        return set(self._pending)

    def pending(self, producer_id: int) -> dict[_Key, OffsetCommitValue]:
        """`producer_id`'s pending offsets by (group, topic, partition); a copy."""
        return {k: v for k, (v, _) in self._pending.get(producer_id, {}).items()}
