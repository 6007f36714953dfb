"""A consumer's client-side assignor in a KIP-848 consumer group (coterie's extension APIs,
docs/extensions.md): `Consumer(..., group_protocol="consumer", group_client_assignor=...)`.

Theory of operation. The member asks for its assignor by name through the heartbeat's
ServerAssignor field, as "client:<name>". When the group needs a new target, the coordinator
chooses one member to compute it; nothing in the heartbeat says which. So after every
successful heartbeat (while no round is running) the member polls
ConsumerGroupPrepareAssignment:

- UNKNOWN_MEMBER_ID: not chosen, or nothing pending: nothing to do (this is the usual
  answer; it does not mean the member was fenced, the heartbeat says that);
- STALE_MEMBER_EPOCH: the member's epoch moved meanwhile: the next heartbeat tries again;
- NONE: the group as the assignor must see it. The member builds an `AssignmentSpec` (topic
  ids mapped to names with the answer's own topic list, each member's current target as its
  `owned` partitions), runs the assignor, maps the answer back to topic ids and installs it
  with ConsumerGroupInstallAssignment. An assignor that raises, or answers with a topic the
  group does not subscribe to, installs with Error = 1 so the coordinator falls back to its
  server-side assignor at once instead of waiting for the timeout.

The round runs in its own task; heartbeats go on meanwhile. After an accepted install the
member heartbeats at once to learn its own new target.

The two APIs are not Kafka's, so kio has no codec index entry for them: requests are kio
entities from `coterie.wire.extensions`, sent on the coordinator connection with the
response class named here.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.assign.spec import AssignmentSpec, Assignor, GroupAssignment, MemberSpec, TopicSpec
from coterie.client.coordinator_link import CoordinatorLink
from coterie.client.errors import BrokerConnectionError, UnsupportedVersionError
from coterie.wire.build import build
from coterie.wire.extensions import (
    CLIENT_ASSIGNOR_PREFIX,
    CONSUMER_GROUP_INSTALL_ASSIGNMENT,
    CONSUMER_GROUP_PREPARE_ASSIGNMENT,
    EXTENSION_SCHEMAS,
)

log = logging.getLogger("coterie.client.consumer")

INSTALL_FAILED = 1  # the install's Error field when the assignor failed


def server_assignor_name(assignor: Assignor) -> str:
    """The ServerAssignor value that asks the coordinator for client-side assignment."""
    return CLIENT_ASSIGNOR_PREFIX + assignor.name


class Outcome(enum.Enum):
    NOT_SUPPORTED = "the coordinator does not offer the extension APIs"
    NOTHING = "not chosen, or nothing to assign"
    INSTALLED = "the assignment was installed"
    REFUSED = "the coordinator refused the assignment"
    FAILED = "the assignor failed; the coordinator falls back"


class UnmappableAssignment(Exception):
    """The assignor named a topic the group does not subscribe to."""


@dataclass(frozen=True, slots=True)
class PreparedGroup:
    """A PrepareAssignment answer in the assignor's terms."""

    group_epoch: int
    assignor_name: str
    spec: AssignmentSpec
    topic_ids: Mapping[str, uuid.UUID]


def prepared_group(response: Any) -> PreparedGroup:
    """The assignor's input from a PrepareAssignment answer (topic names from its own topic
    list; topic ids it does not list are left out)."""
    names = {t.topic_id: t.topic_name for t in response.topics}
    topics = {t.topic_name: TopicSpec(t.topic_name, int(t.num_partitions))
              for t in response.topics}
    members = {}
    for m in response.members:
        owned = frozenset((names[tp.topic_id], int(p)) for tp in m.topic_partitions
                          if tp.topic_id in names for p in tp.partitions)
        members[m.member_id] = MemberSpec(
            member_id=m.member_id,
            subscribed_topics=frozenset(names[t] for t in m.subscribed_topic_ids if t in names),
            instance_id=m.instance_id, rack=m.rack_id, owned=owned,
            generation=int(m.member_epoch))
    return PreparedGroup(int(response.group_epoch), response.assignor_name,
                         AssignmentSpec(members, topics),
                         {name: topic_id for topic_id, name in names.items()})


def install_members(assignment: GroupAssignment,
                    topic_ids: Mapping[str, uuid.UUID]) -> list[dict[str, Any]]:
    """The install request's Members from an assignor's answer (by topic id)."""
    out = []
    for member_id in sorted(assignment.members):
        by_topic: dict[uuid.UUID, list[int]] = {}
        for name, partition in assignment.members[member_id].partitions:
            topic_id = topic_ids.get(name)
            if topic_id is None:
                raise UnmappableAssignment(f"the assignor gave {member_id} partition "
                                           f"{name}-{partition} of a topic nobody subscribes to")
            by_topic.setdefault(topic_id, []).append(int(partition))
        out.append({"member_id": member_id, "partitions": [
            {"topic_id": t, "partitions": sorted(by_topic[t])}
            for t in sorted(by_topic, key=str)]})
    return out


class ClientAssignorRunner:
    """Runs the client-side assignment rounds of one member (module docstring)."""

    def __init__(self, assignor: Assignor, link: CoordinatorLink, group_id: str,
                 request_timeout_ms: float) -> None:
        self.assignor = assignor
        self.group_id = group_id
        self.request_timeout_ms = request_timeout_ms
        self.installed = 0  # accepted installs, for tests and logs
        self._link = link

    async def _call(self, api_key: int, fields: Mapping[str, Any]) -> Any:
        request_cls, _ = EXTENSION_SCHEMAS[(api_key, 0)]
        conn = await self._link.connection()
        offered = conn.broker_ranges.get(api_key)
        if offered is None or not offered[0] <= 0 <= offered[1]:
            raise UnsupportedVersionError(f"{conn.address} does not offer api key {api_key}")
        try:
            return await conn.send(build(request_cls, fields), timeout_ms=self.request_timeout_ms)
        except BrokerConnectionError:
            self._link.drop(conn, "failed")
            raise

    async def run_round(self, member_id: str, member_epoch: int) -> Outcome:
        """Poll PrepareAssignment once; if chosen, compute and install (module docstring).
        Raises BrokerConnectionError when the coordinator cannot be reached."""
        try:
            prepared = await self._call(CONSUMER_GROUP_PREPARE_ASSIGNMENT, {
                "group_id": self.group_id, "member_id": member_id,
                "member_epoch": member_epoch})
        except UnsupportedVersionError:
            return Outcome.NOT_SUPPORTED
        if prepared.error_code != ErrorCode.none:
            if prepared.error_code not in (ErrorCode.unknown_member_id,
                                           ErrorCode.stale_member_epoch):
                log.info("group %s: PrepareAssignment answered %s (%s)", self.group_id,
                         prepared.error_code.name, prepared.error_message)
            return Outcome.NOTHING
        group = prepared_group(prepared)
        members: list[dict[str, Any]] = []
        error = 0
        try:
            members = install_members(self.assignor.assign(group.spec), group.topic_ids)
        except Exception as e:  # the user's assignor: any failure means "fall back"
            log.warning("group %s: client-side assignor %s failed for group epoch %d: %r; "
                        "the coordinator falls back to its own", self.group_id,
                        self.assignor.name, group.group_epoch, e)
            error = INSTALL_FAILED
        answer = await self._call(CONSUMER_GROUP_INSTALL_ASSIGNMENT, {
            "group_id": self.group_id, "member_id": member_id, "member_epoch": member_epoch,
            "group_epoch": group.group_epoch, "error": error, "members": members})
        if error:
            return Outcome.FAILED
        if answer.error_code != ErrorCode.none:
            log.warning("group %s: the coordinator refused the assignment of group epoch %d "
                        "(%s): %s", self.group_id, group.group_epoch, answer.error_code.name,
                        answer.error_message)
            return Outcome.REFUSED
        self.installed += 1
        log.info("group %s: installed the %s assignment of group epoch %d for %d members",
                 self.group_id, self.assignor.name, group.group_epoch, len(members))
        return Outcome.INSTALLED
