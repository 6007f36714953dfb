"""One coordinator shard: the groups and offsets of one `__consumer_offsets` partition.

Kafka's GroupCoordinatorShard is the model: every group and offset API is a pure function of
the shard's state, `(request, now_ms) -> Result`, and a shard's state is exactly what its
partition's records say. The broker (`coterie.broker.groups`) owns one shard per partition,
routes a group id to the shard of its partition (Java's `String.hashCode`, as Kafka), appends
each result's records to that partition and only then answers.

The one door. `handle(request, now_ms)` is how every group API reaches the shard, whatever
the group type: the shard serves the APIs of "any group" itself (offset commit, fetch and
delete, transactional commits, DeleteGroups) and hands the others to the `GroupKind`
registered for them (`coterie.group.registry`: the mixed kind serves JoinGroup ...
ConsumerGroupHeartbeat, DescribeGroups and ConsumerGroupDescribe, the client-side assignor
extension). Timers (`on_timer`), records (`replay`), a finished load (`timers_after_load`),
topic changes (`on_topics_changed`) and group configs (`set_group_config`) go through it
too, routed by the timer's kind and the record's key class.

The one registry. `groups` holds every group of the shard, of any type, under one id
namespace; each group type sees its own through `typed_groups.GroupsOf`, and the rules of
"any group" read them through the `Group` protocol (`coterie.group.group`).

The apply path. A result's state change has been applied when the shard returns it, by
replaying the result's records through the same `replay` that loads a partition after a
restart (a classic group's durable membership too: `classic/group.py`); what no record
holds is each group's volatile table. The durable view (`durable.py`) keeps what reached the
log.

The one undo. When an append fails, the broker calls `revert(group_id, records, now_ms)`:
what the records touched is rebuilt from the durable view (the group's offsets are copied
back, the group is replayed from its durable records and its kind re-derives its volatile
table, answering what it had parked with the storage error).

Transactional offsets (TxnOffsetCommit) follow the same path with one more dimension: the
result names its producer, the runtime writes the records as a transactional batch of it,
and they are replayed as that producer's pending offsets (`OffsetStore`); the transaction's
marker, written to the partition by the transaction coordinator, is replayed by
`replay_marker` and commits or drops them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.config import ShardConfig
from coterie.group.durable import DurableView
from coterie.group.group import Group, ListedGroup, Refusal
from coterie.group.kind import GroupKind, Handler, ShardContext
from coterie.group.limits import invalid_group_id
from coterie.group.offsets.messages import (
    DeleteGroupRequest,
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
from coterie.group.registry import REGISTERED, Registration
from coterie.group.result import Result, TimerOp, VerifyTransaction
from coterie.group.timers import TimerKey
from coterie.group.topic_image import TopicImage, TopicInfo, Topics

__all__ = ["GroupShard", "Revert", "ShardConfig", "commit_refusal"]


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
                 new_consumer_member_id: Callable[[], str],
                 registrations: tuple[Registration, ...] = REGISTERED) -> None:
        """`registrations`: the group kinds it serves (`registry.REGISTERED`; tests add
        one of their own)."""
        self.partition = partition
        self.config = config
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.topics = Topics()
        # What reached the log: what a failed append is undone to (`durable.py`).
        self.durable = DurableView()
        ctx = ShardContext(partition, config, self.groups, self.offsets, self.topics,
                           new_member_id, new_consumer_member_id)
        self.kinds: list[GroupKind] = [r.build(ctx) for r in registrations]
        self._handlers: dict[type, Handler] = {
            OffsetCommitRequest: self.offset_commit,
            TxnOffsetCommitRequest: self.txn_offset_commit,
            OffsetFetchRequest: lambda req, now: Result(self.offset_fetch(req)),
            OffsetDeleteRequest: lambda req, now: self.offset_delete(req),
            DeleteGroupRequest: lambda req, now: self.delete_group(req.group_id, now),
        }
        self._by_key: dict[type, GroupKind] = {}
        self._by_timer: dict[type, GroupKind] = {}
        for kind in self.kinds:
            self._handlers.update(kind.requests())
            self._by_key.update(dict.fromkeys(kind.record_keys, kind))
            self._by_timer.update(dict.fromkeys(kind.timer_kinds, kind))

    @property
    def image(self) -> TopicImage:
        """The broker's topics as this shard knows them."""
        return self.topics.image

    # == the door ============================================================================
    def handle(self, request: Any, now_ms: int) -> Any:
        """Any group API (module docstring): its `Result` (None only for the settled
        heartbeat the core cannot answer on its short path)."""
        return self._handlers[type(request)](request, now_ms)

    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        return self._by_timer[type(key.kind)].on_timer(key, now_ms)

    def set_group_config(self, group_id: str, config: Mapping[str, Any]) -> None:
        """A group's own settings changed (or were loaded): every kind takes what it knows."""
        for kind in self.kinds:
            kind.set_group_config(group_id, config)

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
            self._by_key[type(record.key)].replay(record)

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
        failed: the one undo, for every group type and for offsets (module docstring)."""
        result = Result()
        if any(isinstance(r.key, OffsetCommitKey) for r in records):
            self.offsets.copy_group(self.durable.offsets, group_id)
        if all(isinstance(r.key, OffsetCommitKey) for r in records):
            return Revert(result, rebuilt=False)
        dropped = self.groups.pop(group_id, None)
        if dropped is not None:
            result.completed += dropped.dropped(ErrorCode.coordinator_not_available)
        rebuilt = self.durable.group_records(group_id)
        for record in rebuilt:
            self._apply(record)
        if rebuilt:
            kind = self._by_key[type(rebuilt[0].key)]
            result.merge(kind.after_rebuild(group_id, records, now_ms))
        return Revert(result, rebuilt=True)

    def timers_after_load(self, now_ms: int) -> list[TimerOp]:
        """Loading is done: every kind's deadlines (none is durable)."""
        return [op for kind in self.kinds for op in kind.timers_after_load(now_ms)]

    # == topics ===============================================================================
    def next_image_version(self) -> int:
        return self.topics.next_version()

    def on_topics_changed(self, topics: Mapping[str, tuple[Any, int] | TopicInfo]
                          | TopicImage, now_ms: int, version: int | None = None) -> Result:
        """The broker's current topics (name -> (topic id, partition count)), or a picture
        built once for every shard: the new picture, and what each kind does about it."""
        previous = self.topics.image
        if not isinstance(topics, TopicImage):
            topics = TopicImage.of(topics, self.topics.next_version() if version is None
                                   else version)
        self.topics.image = topics
        result = Result()
        for kind in self.kinds:
            result.merge(kind.on_topics(previous, now_ms))
        return result

    # == OffsetCommit / OffsetFetch / OffsetDelete ============================================
    def offset_commit(self, req: OffsetCommitRequest, now_ms: int) -> Result:
        """Fencing for the whole request first (every partition gets the refusal's code);
        then, per partition, UNKNOWN_TOPIC_OR_PARTITION for one the broker does not have and
        OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes; the rest are committed.
        An explicit retention (v2-v4) becomes the offsets' expire timestamp. A group id no
        record can hold (empty, or longer than 32,767 bytes) is INVALID_GROUP_ID before
        anything else."""
        if invalid_group_id(req.group_id):
            return Result(req.refused(ErrorCode.invalid_group_id))
        refusal = commit_refusal(self.groups.get(req.group_id), req.group_id, req.member_id,
                                 req.epoch, req.instance_id, req.version)
        if refusal is not None:
            return Result(OffsetCommitResponse(tuple(refusal.code for _ in req.partitions)))
        expire = now_ms + req.retention_ms if req.retention_ms >= 0 else -1
        topics = self.topics.image.by_name
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
        the transaction's marker; the result names the producer, whose batch holds them.

        The order, Kafka's: a group id no record can hold is INVALID_GROUP_ID; then the
        transaction coordinator must agree that the transaction may write here (it is ongoing
        with this producer and holds this partition, or, from v5, adds it): the first call
        asks for that (`Result.verify`), and the runtime calls again with its answer
        (`req.verified`), a refusal of every partition or None; then the group's fencing."""
        if invalid_group_id(req.group_id):
            return Result(req.refused(ErrorCode.invalid_group_id))
        if req.verify:
            return Result(verify=VerifyTransaction(
                req.transactional_id, req.producer_id, req.producer_epoch, self.partition,
                req.version))
        if req.verified is not None:
            return Result(req.refused(req.verified))
        group = self.groups.get(req.group_id)
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
        topics = self.topics.image.by_name
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
        group = self.groups.get(req.group_id)
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
        """GROUP_ID_NOT_FOUND for an id with neither a group nor offsets; a group whose
        offsets may not be deleted at all (`Group.offset_delete_refusal`: a share group)
        refuses the whole request; a partition of a topic the group's members subscribe to
        is GROUP_SUBSCRIBED_TO_TOPIC; the others' offsets are deleted (tombstones only for
        those that exist)."""
        group = self.groups.get(req.group_id)
        if group is None and not self.offsets.has_offsets(req.group_id):
            return Result(OffsetDeleteResponse(ErrorCode.group_id_not_found))
        refusal = None if group is None else group.offset_delete_refusal()
        if refusal is not None:
            return Result(OffsetDeleteResponse(refusal.code))
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
            group = self.groups.get(group_id)
            if group is not None:
                since[group_id] = group.offsets_expire_from()
        records = self.offsets.expire(now_ms, self.config.offsets_retention_ms, since)
        for record in records:
            self._apply(record)
        return records

    def _applied(self, result: Result) -> Result:
        """Apply a result's records by replay (see the module docstring)."""
        for record in result.records:
            self._apply(record)
        return result

    # == ListGroups / DeleteGroups ============================================================
    def list_groups(self, states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group of the shard (an id with only committed offsets lists as an Empty
        classic group, as in Kafka), filtered by state and type, both case-insensitive."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        entries = [g for g in (group.listing() for group in self.groups.values())
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
        group = self.groups.get(group_id)
        if group is None:
            code = (ErrorCode.none if self.offsets.has_offsets(group_id)
                    else ErrorCode.group_id_not_found)
            records: list[Record] = []
        else:
            code, records = group.deletion()
        if code != ErrorCode.none:
            return Result(code)
        for record in records:
            self._apply(record)
        tombstones = self.offsets.delete_group(group_id)
        for record in tombstones:
            self._apply(record)
        return Result(code, records + tombstones)
