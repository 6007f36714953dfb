"""Client-side assignors for KIP-848 consumer groups (a coterie extension): the pending
rounds, who computes them, and what an installed assignment must satisfy.

Why. KIP-848 lets a member compute the group's assignment with its own assignor: the
coordinator asks one member (ConsumerGroupPrepareAssignment), the member installs the result
(ConsumerGroupInstallAssignment). Apache Kafka never shipped that part; coterie offers it
with API keys outside Kafka's range (docs/extensions.md).

Rules.
- Asking. ConsumerGroupHeartbeat v0/v1 has no ClientAssignors field, so a member asks for a
  client-side assignor through ServerAssignor with the reserved prefix: "client:<name>". The
  group uses client-side assignment when its preferred assignor (the one most members ask
  for, as for server assignors) is such a name. It is persisted like any server assignor
  name, in the member metadata record.
- A round. When the group epoch moves past the target epoch and the group's assignor is
  client-side, the coordinator does not compute the target in the heartbeat: it opens a
  round for that group epoch (in memory only), chooses one member (`choose_member`: the
  first by member id among consumer-protocol members that ask for that assignor and are not
  away as static members), arms a timer, and meanwhile keeps reconciling every member
  towards the old target. A newer group epoch replaces the round (a new choice, a new timer).
- Bootstrap. A group that has never had a target (target epoch 0) gets its first one from
  the server-side fallback at once: a member reconciled to target epoch 0 would be told
  epoch 0, which means "join" on the wire. Every later epoch goes through the client.
- Preparing. The chosen member learns it is chosen by polling PrepareAssignment; anyone
  else, or anyone while nothing is pending, is told UNKNOWN_MEMBER_ID (the KIP's answer to
  "not the chosen one"), which a client treats as "nothing to do".
- Installing. The install must come from the chosen member at its current epoch, for the
  pending group epoch; otherwise it is refused and the round goes on (its timer still bounds
  it). An install from the right member is then either:
    * an error (Error != 0): the coordinator falls back to the server-side assignor at once;
    * invalid (`validate`): refused with INVALID_REQUEST naming the problem, and the
      coordinator falls back at once;
    * valid: it becomes the target through `compute_target`, exactly the records a
      server-side assignor would produce, so replay and reconciliation are unchanged.
- Fallback. On timeout, on an error install, on an invalid install, and when no member can
  be chosen, the target is computed by the first configured server assignor
  (group.consumer.assignors, default uniform).
- After a restart the rounds are gone (they are not persisted): the group is still ahead of
  its target, so the next heartbeat opens a new round.

Pure: no I/O and no clock; time comes in as `now_ms`, deadlines go out as timers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coterie.assign.spec import AssignmentSpec, GroupAssignment, MemberAssignment
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.member import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerMember
from coterie.group.consumer.messages import TopicPartitions
from coterie.group.records.consumer import Partitions
from coterie.group.timers import TimerKey
from coterie.group.topic_image import TopicImage
from coterie.wire.extensions import CLIENT_ASSIGNOR_PREFIX

DEFAULT_TIMEOUT_MS = 10_000  # group.consumer.client.assignment.timeout.ms
INSTALL_OK = 0  # the install request's Error field when the assignor succeeded


def is_client_assignor(name: str | None) -> bool:
    """Whether a ServerAssignor value asks for a client-side assignor ("client:<name>")."""
    return (name is not None and name.startswith(CLIENT_ASSIGNOR_PREFIX)
            and len(name) > len(CLIENT_ASSIGNOR_PREFIX))


def client_assignor_name(name: str) -> str:
    """"client:range" -> "range": the name the member's own assignor goes by."""
    return name[len(CLIENT_ASSIGNOR_PREFIX):]


# == messages ===================================================================================

@dataclass(frozen=True, slots=True)
class PrepareAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int

    def refused(self, code: ErrorCode) -> PrepareAssignmentResponse:
        return PrepareAssignmentResponse(code)


@dataclass(frozen=True, slots=True)
class PreparedMember:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: tuple[uuid.UUID, ...]
    target: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class PreparedTopic:
    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class PrepareAssignmentResponse:
    """What the chosen member needs to run its assignor; on an error only `error` and
    `error_message` are set."""

    error: ErrorCode
    error_message: str | None = None
    group_epoch: int = 0
    assignor_name: str = ""
    members: tuple[PreparedMember, ...] = ()
    topics: tuple[PreparedTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class InstalledMember:
    member_id: str
    partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class InstallAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    error: int = INSTALL_OK
    members: tuple[InstalledMember, ...] = ()

    def refused(self, code: ErrorCode) -> InstallAssignmentResponse:
        return InstallAssignmentResponse(code)


@dataclass(frozen=True, slots=True)
class InstallAssignmentResponse:
    error: ErrorCode
    error_message: str | None = None


# == rounds =====================================================================================

@dataclass(frozen=True, slots=True)
class PendingRound:
    """A group epoch waiting for the chosen member's assignment."""

    group_id: str
    group_epoch: int
    assignor: str  # "client:<name>"
    member_id: str  # the chosen member
    deadline_ms: int

    @property
    def timer_key(self) -> TimerKey:
        return TimerKey(ConsumerTimer.CONSUMER_CLIENT_ASSIGNMENT, self.group_id,
                        epoch=self.group_epoch)


def can_compute(member: ConsumerMember, assignor: str) -> bool:
    """Whether `member` can be asked to run `assignor`: it asks for it, speaks the consumer
    protocol (it can poll PrepareAssignment), and is present (not a static member away)."""
    return (member.server_assignor == assignor and not member.uses_classic_protocol
            and member.member_epoch not in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH))


def choose_member(members: Mapping[str, ConsumerMember], assignor: str) -> str | None:
    """The member to compute the assignment: the first by member id that `can_compute`, so
    the choice is deterministic (and replays the same way in tests); None if nobody can."""
    for member_id in sorted(members):
        if can_compute(members[member_id], assignor):
            return member_id
    return None


# == the prepare answer =========================================================================

def prepare_answer(pending: PendingRound, members: Mapping[str, ConsumerMember],
                   subscriptions: Mapping[str, frozenset[str]],
                   targets: Mapping[str, Partitions],
                   image: TopicImage) -> PrepareAssignmentResponse:
    """The group as the chosen member's assignor must see it: every member (its epoch,
    instance id, rack, the ids of the existing topics it subscribes to, its current target)
    and every existing subscribed topic with its id, name and partition count."""
    topic_names: set[str] = set()
    out_members = []
    for member_id in sorted(members):
        m = members[member_id]
        existing = sorted(name for name in subscriptions[member_id] if name in image.by_name)
        topic_names.update(existing)
        out_members.append(PreparedMember(
            member_id=member_id, member_epoch=m.member_epoch, instance_id=m.instance_id,
            rack_id=m.rack_id,
            subscribed_topic_ids=tuple(image.by_name[n].topic_id for n in existing),
            target=_by_topic(targets.get(member_id, frozenset()))))
    topics = tuple(PreparedTopic(image.by_name[n].topic_id, n, image.by_name[n].partitions)
                   for n in sorted(topic_names))
    return PrepareAssignmentResponse(
        ErrorCode.none, group_epoch=pending.group_epoch,
        assignor_name=client_assignor_name(pending.assignor), members=tuple(out_members),
        topics=topics)


def _by_topic(partitions: Partitions) -> tuple[TopicPartitions, ...]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in partitions:
        by_topic.setdefault(topic_id, []).append(p)
    return tuple(TopicPartitions(t, tuple(sorted(by_topic[t]))) for t in sorted(by_topic))


# == validating an install ======================================================================

class InvalidAssignment(Exception):
    """An installed assignment the coordinator refuses; the message names the problem."""


_MAX_LISTED = 5


def _listed(items: Iterable[str]) -> str:
    items = sorted(items)
    shown = ", ".join(items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def validate(installed: Iterable[InstalledMember], members: Mapping[str, ConsumerMember],
             subscriptions: Mapping[str, frozenset[str]],
             image: TopicImage) -> dict[str, frozenset[tuple[str, int]]]:
    """Check an installed assignment against the group and return it by topic name (member
    id -> partitions; members it leaves out get nothing). Raises InvalidAssignment unless
    every partition of every existing subscribed topic goes to exactly one member, only to
    a member subscribed to its topic, and the assignment names only members, topics and
    partitions that exist."""
    owner: dict[tuple[str, int], str] = {}
    out: dict[str, frozenset[tuple[str, int]]] = {}
    for entry in installed:
        mid = entry.member_id
        if mid not in members:
            raise InvalidAssignment(f"member {mid!r} is not a member of the group")
        if mid in out:
            raise InvalidAssignment(f"member {mid!r} is listed twice")
        mine: set[tuple[str, int]] = set()
        for tps in entry.partitions:
            name = image.name_of(tps.topic_id)
            if name is None:
                raise InvalidAssignment(f"topic id {tps.topic_id} (given to member {mid!r}) "
                                        "does not exist")
            if name not in subscriptions[mid]:
                raise InvalidAssignment(f"member {mid!r} is given partitions of topic "
                                        f"{name!r}, which it does not subscribe to")
            count = image.by_name[name].partitions
            for p in tps.partitions:
                tp = (name, int(p))
                if not 0 <= tp[1] < count:
                    raise InvalidAssignment(f"partition {name}-{p} (given to member {mid!r}) "
                                            f"does not exist: {name} has {count} partitions")
                previous = owner.get(tp)
                if previous == mid:
                    raise InvalidAssignment(f"partition {name}-{p} is assigned twice to "
                                            f"member {mid!r}")
                if previous is not None:
                    raise InvalidAssignment(f"partition {name}-{p} is assigned twice: to "
                                            f"member {previous!r} and to member {mid!r}")
                owner[tp] = mid
                mine.add(tp)
        out[mid] = frozenset(mine)
    subscribed = set().union(*subscriptions.values()) if subscriptions else set()
    missing = [f"{name}-{p}" for name in sorted(subscribed) if name in image.by_name
               for p in range(image.by_name[name].partitions) if (name, p) not in owner]
    if missing:
        raise InvalidAssignment(f"{len(missing)} partition(s) are not assigned: "
                                f"{_listed(missing)}")
    return out


class InstalledAssignor:
    """An 'assignor' that answers with an installed assignment, so a valid install goes
    through `compute_target` like any server-side assignor's answer (same records)."""

    cooperative = False

    def __init__(self, name: str, assignment: Mapping[str, frozenset[tuple[str, int]]]) -> None:
        self.name = name
        self._assignment = assignment

    def assign(self, spec: AssignmentSpec) -> GroupAssignment:
        return GroupAssignment({mid: MemberAssignment(self._assignment.get(mid, frozenset()))
                                for mid in spec.members})
