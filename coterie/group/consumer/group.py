"""A KIP-848 consumer group's state, built only by applying records.

Rules. Every change to a group goes through one of the `apply_*` methods, each of which
applies one persisted record; the coordinator's handlers compute records and apply them
through the same path a coordinator uses when it loads `__consumer_offsets` after a restart.
So the state after a handler and the state rebuilt from the log cannot drift apart.

What a group holds:
- three epochs: the group epoch (bumped whenever the group needs a new assignment:
  subscriptions changed, subscribed topics changed, a member left or was fenced), the target
  assignment epoch (the group epoch the current target was computed for), and each member's
  epoch (the target epoch it has reconciled to);
- members, and static members by instance id;
- the target assignment (member id -> partitions) and which member holds which partition at
  which epoch (`partition_epochs`, one array per topic: a partition is held from the moment
  a member is given it until the member reports it gave it back, or leaves);
- regular expressions members subscribe with, and the topics each currently resolves to
  (a regex new to the group has no resolution until the coordinator's resolution runs);
- counters derived from the members (subscribed topic names, regexes, server assignors) so
  questions about the whole group do not walk every member.

The group state is derived, never stored: EMPTY without members; ASSIGNING while the group
epoch is ahead of the target epoch; RECONCILING while some member is not STABLE at the target
epoch; otherwise STABLE. (DEAD is a group that no longer exists.)

Mixed groups: a member with `classic` metadata is a classic-protocol member; it is counted by
`num_classic_members`, takes part in target assignment like any other member, and its
JoinGroup/SyncGroup handlers (`mixed/classic_members.py`) drive the same reconciliation.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.group.consumer.client_assignment import PendingRound
from coterie.group.consumer.events import ConsumerMemberView, ConsumerSnapshot
from coterie.group.consumer.member import LEAVE_EPOCH, ConsumerMember
from coterie.group.consumer.messages import Requester
from coterie.group.consumer.partition_epochs import PartitionEpochs
from coterie.group.group import ListedGroup, Refusal
from coterie.group.records.consumer import (
    NO_PARTITIONS,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    Partitions,
)
from coterie.group.records.record import Record


class ConsumerGroupState(enum.Enum):
    """The derived group state; values are the names Kafka reports to admin clients."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ReplayError(RuntimeError):
    """Records that contradict the state they are applied to (a corrupt or misordered log,
    or a coordinator bug): Kafka refuses to load such a partition, and so does coterie."""


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """The topics a regex matched, against which metadata version, and when."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


class ConsumerGroup:
    """One consumer group (module docstring has the rules)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.targets: dict[str, Partitions] = {}
        self.partition_epochs = PartitionEpochs()
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        # The volatile table: what no record holds. Lost with the object on a restart or a
        # rebuild after a failed append (when the group's timers go too) and re-derived:
        # - the regexes a resolution has been asked for and not yet run (Kafka's scheduled
        #   "<group>-regex" task), or None: the next heartbeat asks again;
        self.regex_refresh: frozenset[str] | None = None
        # - who last asked for a resolution (Requester, when the broker authorizes): the
        #   topics a resolution keeps are those they may describe;
        self.regex_requester: Requester | None = None
        # - the pending client-side assignment round (coterie extension), or None: the next
        #   heartbeat opens a new one while the target is behind the group epoch;
        self.client_round: PendingRound | None = None
        # - set on a rebuilt group: its next heartbeat compares its metadata hash with the
        #   current topics (a topic change whose epoch bump was the write that failed would
        #   otherwise never be seen again);
        self.recheck_metadata = False
        # - the deadlines of its classic-protocol members' join and sync timers, by member
        #   (mixed/classic_members.py): after a rebuild only session timers are armed.
        self.classic_join_deadlines: dict[str, int] | None = None
        self.classic_sync_deadlines: dict[str, int] | None = None
        self._topic_refs: Counter[str] = Counter()
        self._regex_refs: Counter[str] = Counter()
        self._assignor_refs: Counter[str] = Counter()
        self._classic_members = 0

    # == the Group protocol (coterie.group.group): rules the shard applies to any group ======
    group_type = "consumer"
    changes_without_records = False  # only records change it: observers skip other calls

    def has_members(self) -> bool:
        return bool(self.members)

    def listing(self) -> ListedGroup | None:
        return ListedGroup(self.group_id, "consumer", self.state().value, "consumer")

    def commit_refusal(self, member_id: str, epoch: int, instance_id: str | None,
                       version: int, transactional: bool = False) -> Refusal | None:
        """OffsetCommit into a consumer group (Kafka 4.2): a negative epoch into an empty
        group is an admin tool's or an assign()-only consumer's; otherwise the member must
        exist, use OffsetCommit v9+ unless it speaks the classic protocol (TxnOffsetCommit
        has no such version rule), and name its current epoch (its generation, for a
        classic member)."""
        if epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return Refusal(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not a member of group {self.group_id}.")
        if not transactional and not member.uses_classic_protocol and version < 9:
            return Refusal(ErrorCode.unsupported_version,
                           "OffsetCommit version 9 or above must be used by members using "
                           "the modern group protocol")
        return _epoch_refusal(epoch, member.member_epoch, member.uses_classic_protocol)

    def fetch_refusal(self, member_id: str | None, epoch: int) -> Refusal | None:
        """OffsetFetch v9+ by one of the group's members: the member must exist and name its
        current epoch (its generation, for a classic member)."""
        if member_id is None and epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return Refusal(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not a member of group {self.group_id}.")
        return _epoch_refusal(epoch, member.member_epoch, member.uses_classic_protocol)

    def offset_delete_refusal(self) -> Refusal | None:
        """A consumer group's offsets may be deleted (partition by partition)."""
        return None

    def offsets_expire_from(self) -> int | None:
        """A group with members keeps its offsets; an empty one's expire by commit time
        (Kafka's consumer groups do not track when they became empty)."""
        return None if self.members else -1

    def deletion(self) -> tuple[ErrorCode, list[Record]]:
        """Only a group without members may be deleted: its tombstones, in an order replay
        accepts (leftover targets, regex resolutions, the target epoch, the group)."""
        if self.members:
            return ErrorCode.non_empty_group, []
        gid = self.group_id
        records = [Record(ConsumerGroupTargetAssignmentMemberKey(gid, mid), None)
                   for mid in sorted(self.targets)]
        records += [Record(ConsumerGroupRegularExpressionKey(gid, r), None)
                    for r in sorted(self.resolved_regexes)]
        records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(gid), None))
        records.append(Record(ConsumerGroupMetadataKey(gid), None))
        return ErrorCode.none, records

    def dropped(self, error: ErrorCode) -> list[tuple[Hashable, Any]]:
        """A consumer group parks no request."""
        return []

    def event_snapshot(self) -> ConsumerSnapshot:
        return ConsumerSnapshot(
            state=self.state().value, group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            members={mid: ConsumerMemberView(
                m.client_id, m.instance_id, m.member_epoch, m.state.name.lower(),
                m.holds(), len(self.target_of(mid)))
                for mid, m in self.members.items()})

    def event_fingerprint(self) -> Hashable:
        """Members are immutable values replaced on every change; tuples compare their
        items by identity first, so this is cheap."""
        return (self.group_epoch, self.assignment_epoch, tuple(self.members.values()))

    # == derived views =======================================================================
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        epoch = self.assignment_epoch
        if all(m.is_reconciled_to(epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members[member_id]

    def target_of(self, member_id: str) -> Partitions:
        return self.targets.get(member_id, NO_PARTITIONS)

    def regexes_in_use(self) -> Iterable[str]:
        return self._regex_refs.keys()

    def regex_users(self, regex: str) -> int:
        return self._regex_refs.get(regex, 0)

    def has_regexes(self) -> bool:
        """Whether some member subscribes with a regex."""
        return bool(self._regex_refs)

    def last_regex_refresh_ms(self) -> int | None:
        """When the group's regexes were last resolved, None if none is. They are resolved
        together, so one time stands for all (Kafka takes the first one's); the oldest is
        taken, in case resolutions written one by one (older coterie) are loaded."""
        if not self.resolved_regexes:
            return None
        return min(r.timestamp_ms for r in self.resolved_regexes.values())

    def last_regex_version(self) -> int:
        """The topic-image version the group's regexes were last resolved against (the
        oldest, as above); 0 when none is resolved, as in Kafka."""
        if not self.resolved_regexes:
            return 0
        return min(r.version for r in self.resolved_regexes.values())

    def num_classic_members(self) -> int:
        return self._classic_members

    def subscription_of(self, member: ConsumerMember,
                        regexes: dict[str, ResolvedRegex] | None = None) -> frozenset[str]:
        """The topic names a member subscribes to: its names plus what its regex resolved to
        (in `regexes`, default the group's)."""
        regex = member.subscribed_topic_regex
        if regex is None:
            return member.subscribed_topic_names
        resolved = (self.resolved_regexes if regexes is None else regexes).get(regex)
        if resolved is None or not resolved.topics:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | resolved.topics

    def subscribed_topics(self) -> set[str]:
        """Every topic name some member subscribes to, directly or through a regex."""
        topics = set(self._topic_refs)
        for regex in self._regex_refs:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                topics |= resolved.topics
        return topics

    def preferred_assignor(self, configured: tuple[str, ...],
                           removed: Iterable[ConsumerMember] = (),
                           added: Iterable[ConsumerMember] = ()) -> str:
        """The server assignor most members ask for (after replacing `removed` members by
        `added` ones); ties, and a group where nobody asks, go to the configured order,
        whose first entry is the default."""
        refs = self._assignor_refs.copy()
        for m in removed:
            if m.server_assignor is not None:
                refs[m.server_assignor] -= 1
        for m in added:
            if m.server_assignor is not None:
                refs[m.server_assignor] += 1
        counts = [(name, n) for name, n in refs.items() if n > 0]
        if not counts:
            return configured[0]
        rank = {name: i for i, name in enumerate(configured)}
        return min(counts, key=lambda kv: (-kv[1], rank.get(kv[0], len(rank)), kv[0]))[0]

    def regex_users_after(self, regex: str, removed: Iterable[ConsumerMember] = (),
                          added: Iterable[ConsumerMember] = ()) -> int:
        """How many members would subscribe with `regex` after the change."""
        n = self._regex_refs.get(regex, 0)
        n -= sum(1 for m in removed if m.subscribed_topic_regex == regex)
        n += sum(1 for m in added if m.subscribed_topic_regex == regex)
        return n

    def subscribed_topics_after(self, removed: Iterable[ConsumerMember] = (),
                                added: Iterable[ConsumerMember] = (),
                                regexes: dict[str, ResolvedRegex] | None = None) -> set[str]:
        """`subscribed_topics` as it would be after replacing `removed` members by `added`
        ones, with the regex resolutions in `regexes` (default the group's)."""
        removed, added = list(removed), list(added)
        names = self._topic_refs.copy()
        regex_refs = self._regex_refs.copy()
        for m, delta in [(m, -1) for m in removed] + [(m, 1) for m in added]:
            for name in m.subscribed_topic_names:
                names[name] += delta
            if m.subscribed_topic_regex is not None:
                regex_refs[m.subscribed_topic_regex] += delta
        resolved = self.resolved_regexes if regexes is None else regexes
        topics = {name for name, n in names.items() if n > 0}
        for regex, n in regex_refs.items():
            if n > 0 and regex in resolved:
                topics |= resolved[regex].topics
        return topics

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a record can change, for comparing two groups (live and replayed, or
        before and after a refused request)."""
        return (self.group_id, self.group_epoch, self.metadata_hash, self.assignment_epoch,
                dict(self.members), dict(self.static_members), dict(self.targets),
                dict(self.partition_epochs), dict(self.resolved_regexes))

    # == applying records ====================================================================
    def apply_group_metadata(self, value: ConsumerGroupMetadataValue) -> None:
        self.group_epoch = value.epoch
        self.metadata_hash = value.metadata_hash

    def apply_target_epoch(self, value: ConsumerGroupTargetAssignmentMetadataValue | None) -> None:
        if value is None:
            if self.targets:
                raise ReplayError(f"target assignment of {self.group_id} deleted while it "
                                  f"still has {len(self.targets)} members")
            self.assignment_epoch = -1
        else:
            self.assignment_epoch = value.assignment_epoch

    def apply_target_member(self, member_id: str,
                            value: ConsumerGroupTargetAssignmentMemberValue | None) -> None:
        if value is None:
            self.targets.pop(member_id, None)
        else:
            self.targets[member_id] = value.partitions

    def apply_member_metadata(self, member_id: str,
                              value: ConsumerGroupMemberMetadataValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is None:
                return
            if old.member_epoch != LEAVE_EPOCH:
                raise ReplayError(f"member {member_id} of {self.group_id} deleted before its "
                                  "current assignment was")
            if member_id in self.targets:
                raise ReplayError(f"member {member_id} of {self.group_id} deleted before its "
                                  "target assignment was")
            self._unref(old)
            del self.members[member_id]
            return
        new = (old or ConsumerMember(member_id)).with_metadata(value)
        if old is not None:
            self._unref(old)
        self._ref(new)
        self.members[member_id] = new

    def apply_current_assignment(self, member_id: str,
                                 value: ConsumerGroupCurrentMemberAssignmentValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is None:
                return
            new = replace(old, member_epoch=LEAVE_EPOCH, previous_member_epoch=LEAVE_EPOCH,
                          assigned=NO_PARTITIONS, pending_revocation=NO_PARTITIONS)
        else:
            new = (old or ConsumerMember(member_id)).with_assignment(value)
        if old is not None:
            self._release(old)
        self._hold(new)
        self.members[member_id] = new

    def apply_regex(self, regex: str, value: ConsumerGroupRegularExpressionValue | None) -> None:
        if value is None:
            self.resolved_regexes.pop(regex, None)
        else:
            self.resolved_regexes[regex] = ResolvedRegex(
                frozenset(value.topics), value.version, value.timestamp_ms)

    # == bookkeeping =========================================================================
    def _ref(self, member: ConsumerMember) -> None:
        self._topic_refs.update(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            self._regex_refs[member.subscribed_topic_regex] += 1
        if member.server_assignor is not None:
            self._assignor_refs[member.server_assignor] += 1
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if member.classic is not None:
            self._classic_members += 1

    def _unref(self, member: ConsumerMember) -> None:
        self._topic_refs.subtract(member.subscribed_topic_names)
        for name in member.subscribed_topic_names:
            if self._topic_refs[name] <= 0:
                del self._topic_refs[name]
        for counter, key in ((self._regex_refs, member.subscribed_topic_regex),
                             (self._assignor_refs, member.server_assignor)):
            if key is not None:
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]
        if member.instance_id is not None and (
                self.static_members.get(member.instance_id) == member.member_id):
            del self.static_members[member.instance_id]
        if member.classic is not None:
            self._classic_members -= 1

    def _release(self, member: ConsumerMember) -> None:
        epochs = self.partition_epochs
        for tp in member.holds():
            held = epochs.pop(tp, None)
            if held != member.member_epoch:
                raise ReplayError(f"{self.group_id}: cannot release {tp} at epoch "
                                  f"{member.member_epoch}, it is held at epoch {held}")

    def _hold(self, member: ConsumerMember) -> None:
        epochs = self.partition_epochs
        for tp in member.holds():
            held = epochs.get(tp)
            if held is not None:
                raise ReplayError(f"{self.group_id}: {member.member_id} cannot take {tp}, "
                                  f"another member holds it at epoch {held}")
            epochs[tp] = member.member_epoch


def _epoch_refusal(received: int, expected: int, classic_member: bool) -> Refusal | None:
    if received == expected:
        return None
    if classic_member:
        return Refusal(ErrorCode.illegal_generation,
                       f"The received generation id {received} does not match the expected "
                       f"member epoch {expected}.")
    return Refusal(ErrorCode.stale_member_epoch,
                   f"The received member epoch {received} does not match the expected member "
                   f"epoch {expected}.")
