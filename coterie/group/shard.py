"""One coordinator shard: the groups and offsets of one `__consumer_offsets` partition.

Kafka's GroupCoordinatorShard is the model: every group and offset API is a pure function of
the shard's state, `(request, now_ms) -> Result`, and a shard's state is exactly what its
partition's records say. The broker (`coterie.broker.groups`) owns one shard per partition,
routes a group id to the shard of its partition (Java's `String.hashCode`, as Kafka), appends
each result's records to that partition and only then answers.

The apply path. A result's state change has been applied when the shard returns it: the
consumer core (and offsets, here) by replaying the result's records through the same `replay`
that loads a partition after a restart; classic groups change in place and return a
snapshot record whose replay gives the same group (the replay-equals-live properties in
tests/unit/group check both). The shard keeps, per live key, the last value that reached the
log (`durable`, values only: `durable.py`); compaction writes them out as a snapshot.

The revert path. When an append fails, the broker calls `revert(group_id, records, now_ms)`,
the one undo for every group type and for offsets: the offsets the failed records touched are
put back as they reached the log, at their places in the replay order, pending transactional
ones included (`durable_offsets`, `durable_pending`), and, when the failed records changed
the group's type or membership records, its whole state is rebuilt from `durable` by replay
(parked requests of a dropped classic group are answered with the storage error).
A classic group whose failed record was a snapshot of its own generation keeps its members
and starts a new rebalance instead, as Kafka does (its in-flight rebalance is not in any
record, so rebuilding it from the log would forget who is waiting).

Transactional offsets (TxnOffsetCommit) follow the same path with one more dimension: the
result names its producer, the runtime writes the records as a transactional batch of it,
and they are replayed as that producer's pending offsets (`OffsetStore`); the transaction's
marker, written to the partition by the transaction coordinator, is replayed by
`replay_marker` and commits or drops them. The undo of a failed transactional append puts
back the pending entries that were durable (`durable_pending`).

Rules that are not one protocol's, applied through the `Group` protocol
(`coterie.group.group`): OffsetCommit / OffsetFetch fencing, OffsetDelete's subscribed-topic
check, DescribeGroups, ListGroups, DeleteGroups, ConsumerGroupDescribe of a non-consumer
group, offset expiry. Group-protocol requests (JoinGroup ... ConsumerGroupHeartbeat, the
client-side assignor extension, timers, topic changes) go to the mixed-groups router
(`coterie.group.mixed.coordinator`), which converts groups between types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.groups import ClassicGroups
from coterie.group.classic.messages import (
    DescribedGroup,
    JoinGroupResponse,
    SyncGroupResponse,
)
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.coordinator import ConsumerCoordinator
from coterie.group.consumer.messages import DescribedConsumerGroup
from coterie.group.durable import DurableView
from coterie.group.group import Group, ListedGroup, Refusal
from coterie.group.mixed.coordinator import GroupCoordinator
from coterie.group.offsets.messages import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from coterie.group.offsets.store import (
    NO_PRODUCER_ID,
    OffsetCommitRequestEntry,
    OffsetStore,
    metadata_too_large,
)
from coterie.group.records.offsets import OffsetCommitKey, OffsetCommitValue
from coterie.group.records.record import Record
from coterie.group.result import Result, TimerOp
from coterie.group.topic_image import TopicImage, TopicInfo

__all__ = ["GroupShard", "Revert", "ShardConfig", "commit_refusal"]


@dataclass(frozen=True, slots=True)
class ShardConfig:
    """The broker settings a shard's rules read (`coterie.broker.groups` maps them)."""

    classic: ClassicConfig
    consumer: ConsumerGroupConfig
    client_assignment_timeout_ms: int = 10_000
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes


@dataclass(slots=True)
class Revert:
    """What undoing a failed append did: `rebuilt` says the group's state was rebuilt from
    the log, so every live timer of the group must go before `result.timers` are armed."""

    result: Result
    rebuilt: bool


def commit_refusal(group: Group | None, group_id: str, member_id: str, epoch: int,
                   instance_id: str | None, version: int) -> Refusal | None:
    """OffsetCommit fencing (Kafka 4.2). Without a group: a commit claiming a generation is
    GROUP_ID_NOT_FOUND from v9 on (ILLEGAL_GENERATION before); one with a negative
    generation is a standalone consumer's or an admin tool's, and goes ahead."""
    if group is not None:
        return group.commit_refusal(member_id, epoch, instance_id, version)
    if epoch < 0:
        return None
    if version >= 9:
        return Refusal(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    return Refusal(ErrorCode.illegal_generation, ErrorCode.illegal_generation.name)


class GroupShard:
    """The groups and offsets of one __consumer_offsets partition (module docstring)."""

    def __init__(self, partition: int, config: ShardConfig,
                 new_member_id: Callable[[str], str],
                 new_consumer_member_id: Callable[[], str]) -> None:
        self.partition = partition
        self.config = config
        self.coordinator = GroupCoordinator(
            ClassicGroups(config.classic, new_member_id),
            ConsumerCoordinator(config.consumer, new_consumer_member_id,
                                client_assignment_timeout_ms=config
                                .client_assignment_timeout_ms))
        self.offsets = OffsetStore()
        # What reached the log: what a failed append is undone to (`durable.py`).
        self.durable = DurableView()

    @property
    def classic(self) -> ClassicGroups:
        return self.coordinator.classic

    @property
    def consumer(self) -> ConsumerCoordinator:
        return self.coordinator.consumer

    def group(self, group_id: str) -> Group | None:
        """The group holding `group_id`, of whichever type."""
        return self.coordinator.group(group_id)

    # == the record path ======================================================================
    def replay(self, record: Record, producer_id: int = NO_PRODUCER_ID) -> None:
        """Apply one record read from the partition (loading): the same code live results
        go through. `producer_id` is its batch's (set for transactional offset commits)."""
        self._apply(record, producer_id)
        self.durable.committed([record], producer_id)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """Apply a transaction marker written to this partition (loading, or live once the
        transaction coordinator wrote it): `producer_id`'s pending offsets are committed or
        dropped."""
        self.offsets.replay_marker(producer_id, commit)
        self.durable.marker(producer_id, commit)

    def _apply(self, record: Record, producer_id: int = NO_PRODUCER_ID) -> None:
        if isinstance(record.key, OffsetCommitKey):
            self.offsets.replay(record, producer_id)
        else:
            self.coordinator.replay(record)

    def committed(self, records: list[Record],
                  producer: tuple[int, int] | None = None) -> None:
        """`records` (applied already) reached the log (in a transactional batch of
        `producer`, if set)."""
        self.durable.committed(records, NO_PRODUCER_ID if producer is None else producer[0])

    def has_open_transactions(self) -> bool:
        """Whether some transaction has pending offsets here (compaction waits: a snapshot
        of live values cannot hold them)."""
        return bool(self.durable.offsets.open_transactions())

    def revert(self, group_id: str, records: list[Record], now_ms: int,
               producer: tuple[int, int] | None = None) -> Revert:
        """Undo what `records` (of `group_id`, applied already) did, after their append
        failed: the one undo, for every group type and for offsets. What they touched is
        rebuilt from what is durable (`durable.py`): the group's offsets are copied back
        from the durable ones (committed and pending, with their replay positions); the
        group itself is dropped and replayed from its durable records, and its type
        re-derives what no record holds (`after_rebuild`). Requests the dropped group had
        parked are answered with the storage error."""
        result = Result()
        if any(isinstance(r.key, OffsetCommitKey) for r in records):
            self.offsets.copy_group(self.durable.offsets, group_id)
        if all(isinstance(r.key, OffsetCommitKey) for r in records):
            return Revert(result, rebuilt=False)
        error = ErrorCode.coordinator_not_available
        dropped = self.classic.groups.pop(group_id, None)
        if dropped is not None:
            result.completed += dropped.parked_answers(
                lambda mid: JoinGroupResponse(error, member_id=mid),
                lambda mid: SyncGroupResponse(error))
        self.consumer.groups.pop(group_id, None)
        result.timers += self.coordinator.classic_members.forget_group(group_id)
        for record in self.durable.group_records(group_id):
            self.coordinator.replay(record)
        if group_id in self.classic.groups:
            result.merge(self.classic.after_rebuild(group_id, now_ms))
        if group_id in self.consumer.groups:
            result.merge(self.consumer.after_rebuild(group_id, now_ms))
        return Revert(result, rebuilt=True)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        return self.coordinator.timers_after_load(now_ms)

    # == OffsetCommit / OffsetFetch / OffsetDelete ============================================
    def offset_commit(self, req: OffsetCommitRequest, now_ms: int) -> Result:
        """Fencing for the whole request first (every partition gets the refusal's code);
        then, per partition, UNKNOWN_TOPIC_OR_PARTITION for one the broker does not have and
        OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes; the rest are committed.
        An explicit retention (v2-v4) becomes the offsets' expire timestamp."""
        refusal = commit_refusal(self.group(req.group_id), req.group_id, req.member_id,
                                 req.epoch, req.instance_id, req.version)
        if refusal is not None:
            return Result(OffsetCommitResponse(tuple(refusal.code for _ in req.partitions)))
        expire = now_ms + req.retention_ms if req.retention_ms >= 0 else -1
        topics = self.consumer.image.by_name
        codes: list[ErrorCode] = []
        entries: list[OffsetCommitRequestEntry] = []
        for p in req.partitions:
            info = topics.get(p.topic)
            if info is None or not 0 <= p.partition < info.partitions:
                codes.append(ErrorCode.unknown_topic_or_partition)
            elif metadata_too_large(p.metadata, self.config.offset_metadata_max_bytes):
                codes.append(ErrorCode.offset_metadata_too_large)
            else:
                codes.append(ErrorCode.none)
                entries.append(OffsetCommitRequestEntry(
                    topic=p.topic, partition=p.partition, offset=p.offset,
                    leader_epoch=p.leader_epoch, metadata=p.metadata,
                    expire_timestamp_ms=expire))
        records = self.offsets.commit(req.group_id, entries, now_ms)
        return self._applied(Result(OffsetCommitResponse(tuple(codes)), records))

    def txn_offset_commit(self, req: TxnOffsetCommitRequest, now_ms: int) -> Result:
        """TxnOffsetCommit (Kafka 4.2): fencing as for OffsetCommit with the transactional
        differences (`Group.commit_refusal`); a consumer group's stale member epoch is
        ILLEGAL_GENERATION here. Without a group, a negative generation creates a simple
        group's offsets and any other is ILLEGAL_GENERATION. The offsets stay pending until
        the transaction's marker; the result names the producer, whose batch holds them."""
        group = self.group(req.group_id)
        refusal: ErrorCode | None = None
        if group is None:
            if req.generation >= 0:
                refusal = ErrorCode.illegal_generation
        else:
            found = group.commit_refusal(req.member_id, req.generation, req.instance_id,
                                         req.version, transactional=True)
            if found is not None:
                refusal = (ErrorCode.illegal_generation
                           if found.code == ErrorCode.stale_member_epoch else found.code)
        if refusal is not None:
            return Result(TxnOffsetCommitResponse(tuple(refusal for _ in req.partitions)))
        topics = self.consumer.image.by_name
        codes: list[ErrorCode] = []
        entries: list[OffsetCommitRequestEntry] = []
        for p in req.partitions:
            info = topics.get(p.topic)
            if info is None or not 0 <= p.partition < info.partitions:
                codes.append(ErrorCode.unknown_topic_or_partition)
            elif metadata_too_large(p.metadata, self.config.offset_metadata_max_bytes):
                codes.append(ErrorCode.offset_metadata_too_large)
            else:
                codes.append(ErrorCode.none)
                entries.append(OffsetCommitRequestEntry(
                    topic=p.topic, partition=p.partition, offset=p.offset,
                    leader_epoch=p.leader_epoch, metadata=p.metadata))
        records = self.offsets.commit(req.group_id, entries, now_ms)
        result = Result(TxnOffsetCommitResponse(tuple(codes)), records,
                        producer=(req.producer_id, req.producer_epoch))
        for record in records:
            self._apply(record, req.producer_id)
        return result

    def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        """A consumer group's member must name itself and its epoch (v9+); anyone else may
        read. `partitions` None: every committed offset, sorted by topic and partition.
        With `require_stable`, a partition an open transaction has committed is
        UNSTABLE_OFFSET_COMMIT (the client asks again); without, it shows the last
        committed offset, as in Kafka."""
        group = self.group(req.group_id)
        if group is not None:
            refusal = group.fetch_refusal(req.member_id, req.member_epoch)
            if refusal is not None:
                return OffsetFetchResponse(refusal.code)
        gid = req.group_id

        def answer(topic: str, partition: int, value: OffsetCommitValue | None) -> FetchedOffset:
            if req.require_stable and self.offsets.has_pending(gid, topic, partition):
                return FetchedOffset(topic, partition, None, unstable=True)
            return FetchedOffset(topic, partition, value)

        if req.partitions is None:
            offsets = tuple(answer(t, p, v)
                            for (t, p), v in sorted(self.offsets.fetch_all(gid).items()))
        else:
            offsets = tuple(answer(t, p, self.offsets.fetch(gid, t, p))
                            for t, p in req.partitions)
        return OffsetFetchResponse(ErrorCode.none, offsets)

    def offset_delete(self, req: OffsetDeleteRequest) -> Result:
        """GROUP_ID_NOT_FOUND for an id with neither a group nor offsets; a partition of a
        topic the group's members subscribe to is GROUP_SUBSCRIBED_TO_TOPIC; the others'
        offsets are deleted (tombstones only for those that exist)."""
        group = self.group(req.group_id)
        if group is None and not self.offsets.has_offsets(req.group_id):
            return Result(OffsetDeleteResponse(ErrorCode.group_id_not_found))
        subscribed = group.subscribed_topics() if group is not None else set()
        codes = tuple(ErrorCode.group_subscribed_to_topic if t in subscribed
                      else ErrorCode.none for t, _ in req.partitions)
        wanted = [tp for tp, code in zip(req.partitions, codes, strict=True)
                  if code == ErrorCode.none]
        records = self.offsets.delete(req.group_id, wanted)
        return self._applied(Result(OffsetDeleteResponse(ErrorCode.none, codes), records))

    def expire_offsets(self, now_ms: int) -> list[Record]:
        """Tombstones (applied) for offsets whose retention ran out (KIP-211; the rule per
        group type is `Group.offsets_expire_from`)."""
        since: dict[str, int | None] = {}
        for group_id in self.offsets.groups():
            group = self.group(group_id)
            if group is not None:
                since[group_id] = group.offsets_expire_from()
        records = self.offsets.expire(now_ms, self.config.offsets_retention_ms, since)
        for record in records:
            self._apply(record)
        return records

    def _applied(self, result: Result) -> Result:
        """Apply a result's offset records by replay (see the module docstring)."""
        for record in result.records:
            self._apply(record)
        return result

    # == DescribeGroups / ListGroups / DeleteGroups / ConsumerGroupDescribe ===================
    def describe_group(self, group_id: str, version: int) -> DescribedGroup:
        """DescribeGroups describes classic groups only (Kafka 4.x): a consumer group is
        Dead before v6, GROUP_ID_NOT_FOUND "not a classic group" from v6. A group with only
        committed offsets is an Empty classic group; no group at all is Dead, or from v6
        GROUP_ID_NOT_FOUND."""
        if not group_id:
            return DescribedGroup(ErrorCode.invalid_group_id, group_id, "", "", "")
        if group_id in self.consumer.groups:
            if version >= 6:
                return DescribedGroup(ErrorCode.group_id_not_found, group_id, "Dead", "", "",
                                      error_message=f"Group {group_id} is not a classic group.")
            return DescribedGroup(ErrorCode.none, group_id, "Dead", "", "")
        described = self.classic.describe(group_id)
        if described.state != "Dead":
            return described
        if self.offsets.has_offsets(group_id):
            return DescribedGroup(described.error, group_id, "Empty", described.protocol_type,
                                  described.protocol, described.members)
        if version >= 6:
            return DescribedGroup(ErrorCode.group_id_not_found, group_id, "Dead", "", "",
                                  error_message=f"Group {group_id} not found.")
        return described

    def list_groups(self, states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group of the shard (an id with only committed offsets lists as an Empty
        classic group, as in Kafka), filtered by state and type, both case-insensitive."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        entries = [g for g in (group.listing() for group in self.coordinator.groups())
                   if g is not None]
        listed = {e.group_id for e in entries}
        entries += [ListedGroup(gid, "", "Empty", "classic")
                    for gid in sorted(self.offsets.groups() - listed)]
        return [e for e in entries
                if (not wanted_states or e.state.lower() in wanted_states)
                and (not wanted_types or e.group_type in wanted_types)]

    def delete_group(self, group_id: str, now_ms: int) -> Result:
        """DeleteGroups for one group: only an empty one goes (NON_EMPTY_GROUP), with its
        offsets; an id with only offsets loses them; an unknown one is GROUP_ID_NOT_FOUND.
        The response is the group's error code."""
        code, records = self.coordinator.delete_group(group_id, now_ms)
        if code == ErrorCode.group_id_not_found and self.offsets.has_offsets(group_id):
            code = ErrorCode.none
        if code != ErrorCode.none:
            return Result(code)
        tombstones = self.offsets.delete_group(group_id)
        for record in tombstones:
            self._apply(record)
        return Result(code, records + tombstones)

    def describe_consumer_group(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe: a classic group, or an id with only committed offsets
        (Kafka keeps that as an empty classic group), is "not a consumer group"."""
        if not group_id:
            return DescribedConsumerGroup(ErrorCode.invalid_group_id, group_id)
        if group_id not in self.consumer.groups and (
                group_id in self.classic.groups or self.offsets.has_offsets(group_id)):
            return DescribedConsumerGroup(ErrorCode.group_id_not_found, group_id,
                                          f"Group {group_id} is not a consumer group.")
        return self.consumer.describe([group_id])[0]

    # == topics ===============================================================================
    def on_metadata_change(self, topics: Mapping[str, tuple[Any, int] | TopicInfo]
                           | TopicImage,
                           now_ms: int, version: int | None = None) -> Result:
        return self.coordinator.on_metadata_change(topics, now_ms, version)
