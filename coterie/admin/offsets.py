"""A group's offsets: committed, log start and end, lag; resetting and deleting them.

Where each number comes from, as in Kafka's AdminClient: committed offsets from OffsetFetch to
the group's coordinator (share groups: DescribeShareGroupOffsets, whose start offset is the
share group's "committed" position), log start and end offsets from ListOffsets to each
partition's leader (read-uncommitted, as `kafka-consumer-groups` asks: the end is the high
watermark), and lag = end - committed, or None where nothing is committed.

Resets follow `kafka-consumer-groups --reset-offsets`: only an inactive group (Empty, or no
group at all) may be reset, since a live member would overwrite the new offsets with its next
commit; the new offsets are written by OffsetCommit with generation -1 and an empty member id
(what AdminClient.alterConsumerGroupOffsets sends: a commit from outside the group), or, for a
share group, by AlterShareGroupOffsets. Offsets outside the log are clamped into
[log start, log end], as Kafka's tool does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.admin.client import AdminClient, AdminError
from coterie.admin.groups import (
    GroupDescription,
    GroupNotFoundError,
    TopicPartition,
    describe_group,
)
from coterie.client.versions import ApiKey

__all__ = ["EARLIEST", "LATEST", "GroupOffsets", "OffsetChange", "PartitionLag", "ResetSpec",
           "apply_reset", "committed_offsets", "delete_groups", "delete_offsets",
           "group_offsets", "log_offsets", "plan_reset"]

LATEST = -1
EARLIEST = -2


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition of a group: its committed offset, log end offset, lag and owner."""

    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    lag: int | None
    member_id: str | None = None
    client_id: str | None = None
    host: str | None = None


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    group: GroupDescription
    partitions: tuple[PartitionLag, ...]

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag is not None)


@dataclass(frozen=True, slots=True)
class ResetSpec:
    """Where to move offsets: `kind` is earliest, latest, datetime (value: epoch ms),
    shift (value: a signed count) or offset (value: the offset)."""

    kind: str
    value: int = 0


@dataclass(frozen=True, slots=True)
class OffsetChange:
    topic: str
    partition: int
    current: int | None
    new: int


def _failed(api: str, group_id: str, code: ErrorCode, message: str | None = None) -> AdminError:
    if code == ErrorCode.group_id_not_found:
        return GroupNotFoundError(f"group {group_id!r} does not exist")
    detail = f": {message}" if message else ""
    return AdminError(f"{api} of group {group_id!r} failed with {code.name.upper()}{detail}")


# -- committed offsets -----------------------------------------------------------------------
async def committed_offsets(admin: AdminClient, group_id: str) -> dict[TopicPartition, int]:
    """The offsets a consumer or classic group committed (OffsetFetch, every topic)."""
    def error_of(r: Any) -> ErrorCode:
        return r.groups[0].error_code if r.groups else ErrorCode.none

    response, _ = await admin.to_coordinator(group_id, ApiKey.OFFSET_FETCH, {
        "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1,
                    "topics": None}],
        "require_stable": False}, error_of)
    group = response.groups[0]
    if group.error_code != ErrorCode.none:
        raise _failed("OffsetFetch", group_id, group.error_code)
    out = {}
    for t in group.topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.none and p.committed_offset >= 0:
                out[TopicPartition(t.name, int(p.partition_index))] = int(p.committed_offset)
    return out


async def share_offsets(admin: AdminClient, group_id: str
                        ) -> dict[TopicPartition, tuple[int, int | None]]:
    """A share group's start offset and lag per partition (DescribeShareGroupOffsets)."""
    def error_of(r: Any) -> ErrorCode:
        return r.groups[0].error_code if r.groups else ErrorCode.none

    response, _ = await admin.to_coordinator(group_id, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, {
        "groups": [{"group_id": group_id, "topics": None}]}, error_of)
    group = response.groups[0]
    if group.error_code != ErrorCode.none:
        raise _failed("DescribeShareGroupOffsets", group_id, group.error_code,
                      group.error_message)
    out = {}
    for t in group.topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.none and p.start_offset >= 0:
                lag = int(p.lag) if getattr(p, "lag", -1) >= 0 else None
                out[TopicPartition(t.topic_name, int(p.partition_index))] = (
                    int(p.start_offset), lag)
    return out


# -- log offsets -----------------------------------------------------------------------------
async def log_offsets(admin: AdminClient, partitions: Iterable[TopicPartition],
                      spec: int = LATEST) -> dict[TopicPartition, int]:
    """ListOffsets for `partitions` at `spec` (LATEST, EARLIEST or a timestamp in ms), each
    asked of its leader. A partition without an answer (no leader, unknown, or no record at
    or after the timestamp) is left out."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    meta = await admin.cluster.metadata(sorted({tp.topic for tp in wanted}),
                                        deadline=admin.deadline())
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in wanted:
        topic = meta.topics.get(tp.topic)
        if topic is None:
            continue
        for p in topic.partitions:
            if p.partition == tp.partition and p.leader_id in meta.brokers:
                by_leader[p.leader_id].append(tp)
    out: dict[TopicPartition, int] = {}
    for leader, tps in by_leader.items():
        topics: dict[str, list[dict[str, int]]] = defaultdict(list)
        for tp in tps:
            topics[tp.topic].append({"partition_index": tp.partition,
                                     "current_leader_epoch": -1, "timestamp": spec})
        response = await admin.to_node(meta.brokers[leader], ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        for t in response.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none and p.offset >= 0:
                    out[TopicPartition(t.name, int(p.partition_index))] = int(p.offset)
    return out


# -- a group's offsets and lag ---------------------------------------------------------------
async def group_offsets(admin: AdminClient, group_id: str) -> GroupOffsets:
    """The group, and per partition it owns or committed: committed offset, end, lag and
    owner (what `kafka-consumer-groups --describe` shows), sorted by topic and partition."""
    group = await describe_group(admin, group_id)
    owners = {tp: m for m in group.members for tp in m.assignment}
    share_lags: dict[TopicPartition, int | None] = {}
    if group.type == "share":
        shares = await share_offsets(admin, group_id)
        committed = {tp: start for tp, (start, _) in shares.items()}
        share_lags = {tp: lag for tp, (_, lag) in shares.items()}
    else:
        committed = await committed_offsets(admin, group_id)
    partitions = sorted(set(owners) | set(committed))
    ends = await log_offsets(admin, partitions, LATEST)
    rows = []
    for tp in partitions:
        owner = owners.get(tp)
        done, end = committed.get(tp), ends.get(tp)
        lag = max(0, end - done) if done is not None and end is not None else None
        if share_lags.get(tp) is not None:
            lag = share_lags[tp]  # the coordinator's: records acknowledged past the start
        rows.append(PartitionLag(tp.topic, tp.partition, done, end, lag,
                                 owner.member_id if owner else None,
                                 owner.client_id if owner else None,
                                 owner.host if owner else None))
    return GroupOffsets(group, tuple(rows))


# -- reset -----------------------------------------------------------------------------------
async def _group_or_none(admin: AdminClient, group_id: str) -> GroupDescription | None:
    try:
        return await describe_group(admin, group_id)
    except GroupNotFoundError:
        return None


async def plan_reset(admin: AdminClient, group_id: str,
                     topics: Mapping[str, tuple[int, ...] | None] | None,
                     spec: ResetSpec) -> list[OffsetChange]:
    """The new offsets a reset would commit, changing nothing. `topics`: topic -> partitions
    (None: all of its partitions); None: every topic the group has committed offsets for
    (`--all-topics`). Refused (AdminError) for a group that is not inactive."""
    group = await _group_or_none(admin, group_id)
    if group is not None and not group.is_inactive:
        raise AdminError(f"assignments can only be reset if the group {group_id!r} is "
                         f"inactive, but the current state is {group.state} "
                         f"({len(group.members)} members)")
    admin.start_operation()
    if group is not None and group.type == "share":
        current = {tp: start for tp, (start, _) in (await share_offsets(admin, group_id)).items()}
    else:
        current = await committed_offsets(admin, group_id)
    if topics is None:
        scope = sorted(current)
    else:
        meta = await admin.cluster.metadata(sorted(topics), deadline=admin.deadline())
        scope = []
        for name, parts in topics.items():
            topic = meta.topics.get(name)
            if topic is None or topic.error != ErrorCode.none:
                raise AdminError(f"topic {name!r} does not exist")
            known = {p.partition for p in topic.partitions}
            for p in parts if parts is not None else sorted(known):
                if p not in known:
                    raise AdminError(f"topic {name!r} has no partition {p}")
                scope.append(TopicPartition(name, p))
        scope.sort()
    if not scope:
        return []
    starts = await log_offsets(admin, scope, EARLIEST)
    ends = await log_offsets(admin, scope, LATEST)
    at_time = (await log_offsets(admin, scope, spec.value) if spec.kind == "datetime" else {})
    changes = []
    for tp in scope:
        start, end = starts.get(tp), ends.get(tp)
        if start is None or end is None:
            raise AdminError(f"no leader answered for {tp.topic}-{tp.partition}")
        now = current.get(tp)
        if spec.kind == "earliest":
            new = start
        elif spec.kind == "latest":
            new = end
        elif spec.kind == "datetime":
            new = at_time.get(tp, end)
        elif spec.kind == "offset":
            new = spec.value
        elif spec.kind == "shift":
            if now is None:
                raise AdminError(f"cannot shift the offset of {tp.topic}-{tp.partition}: the "
                                 f"group has no committed offset there")
            new = now + spec.value
        else:
            raise AdminError(f"unknown reset kind {spec.kind!r}")
        changes.append(OffsetChange(tp.topic, tp.partition, now, min(max(new, start), end)))
    return changes


async def apply_reset(admin: AdminClient, group_id: str,
                      changes: Iterable[OffsetChange]) -> None:
    """Commit `changes` (a plan from `plan_reset`) as the group's offsets."""
    admin.start_operation()
    changes = list(changes)
    if not changes:
        return
    group = await _group_or_none(admin, group_id)
    by_topic: dict[str, list[OffsetChange]] = defaultdict(list)
    for c in changes:
        by_topic[c.topic].append(c)
    if group is not None and group.type == "share":
        await _alter_share(admin, group_id, by_topic)
        return

    def error_of(r: Any) -> ErrorCode:
        codes = [p.error_code for t in r.topics for p in t.partitions]
        return codes[0] if codes else ErrorCode.none

    response, _ = await admin.to_coordinator(group_id, ApiKey.OFFSET_COMMIT, {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": t, "partitions": [
            {"partition_index": c.partition, "committed_offset": c.new,
             "committed_leader_epoch": -1, "committed_metadata": ""} for c in cs]}
            for t, cs in by_topic.items()]}, error_of)
    for t in response.topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                raise _failed("OffsetCommit", group_id, p.error_code,
                              f"{t.name}-{p.partition_index}")


async def _alter_share(admin: AdminClient, group_id: str,
                       by_topic: Mapping[str, list[OffsetChange]]) -> None:
    response, _ = await admin.to_coordinator(group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS, {
        "group_id": group_id,
        "topics": [{"topic_name": t, "partitions": [
            {"partition_index": c.partition, "start_offset": c.new} for c in cs]}
            for t, cs in by_topic.items()]}, lambda r: r.error_code)
    if response.error_code != ErrorCode.none:
        raise _failed("AlterShareGroupOffsets", group_id, response.error_code,
                      response.error_message)
    for t in response.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                raise _failed("AlterShareGroupOffsets", group_id, p.error_code,
                              p.error_message or f"{t.topic_name}-{p.partition_index}")


# -- delete ----------------------------------------------------------------------------------
async def delete_offsets(admin: AdminClient, group_id: str,
                         topics: Mapping[str, tuple[int, ...] | None]
                         ) -> dict[TopicPartition, ErrorCode]:
    """Delete the group's committed offsets of `topics` (None: every partition of that topic
    the group committed); the outcome per partition (GROUP_SUBSCRIBED_TO_TOPIC where a live
    member still reads the topic). Share groups: per topic, as DeleteShareGroupOffsets."""
    group = await describe_group(admin, group_id)
    admin.start_operation()
    if group.type == "share":
        response, _ = await admin.to_coordinator(
            group_id, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]},
            lambda r: r.error_code)
        if response.error_code != ErrorCode.none:
            raise _failed("DeleteShareGroupOffsets", group_id, response.error_code,
                          response.error_message)
        # Share offsets are deleted per topic: partition -1 stands for the whole topic.
        return {TopicPartition(t.topic_name, -1): t.error_code for t in response.responses}
    committed = await committed_offsets(admin, group_id)
    asked: list[TopicPartition] = []
    for name, parts in topics.items():
        if parts is None:
            asked += [tp for tp in committed if tp.topic == name]
        else:
            asked += [TopicPartition(name, p) for p in parts]
    if not asked:
        raise AdminError(f"group {group_id!r} has no committed offsets for "
                         f"{', '.join(sorted(topics))}")
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(set(asked)):
        by_topic[tp.topic].append(tp.partition)
    response, _ = await admin.to_coordinator(group_id, ApiKey.OFFSET_DELETE, {
        "group_id": group_id,
        "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]}
                   for t, ps in by_topic.items()]}, lambda r: r.error_code)
    if response.error_code != ErrorCode.none:
        raise _failed("OffsetDelete", group_id, response.error_code)
    return {TopicPartition(t.name, int(p.partition_index)): p.error_code
            for t in response.topics for p in t.partitions}


async def delete_groups(admin: AdminClient, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
    """DeleteGroups, each to its coordinator: the outcome per group (NON_EMPTY_GROUP for a
    group with members, GROUP_ID_NOT_FOUND for none)."""
    admin.start_operation()
    out = {}
    for group_id in group_ids:
        def error_of(r: Any) -> ErrorCode:
            return r.results[0].error_code if r.results else ErrorCode.none

        response, _ = await admin.to_coordinator(group_id, ApiKey.DELETE_GROUPS,
                                                 {"groups_names": [group_id]}, error_of)
        out[group_id] = error_of(response)
    return out
