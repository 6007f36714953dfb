"""The statuses a streams group reports to its members (StreamsGroupHeartbeatResponse.Status).

A streams heartbeat that cannot be given (all of) an assignment is not an error: the member
keeps heartbeating and shows the status to the application, which may act on it (create the
missing source topics, shut down). The codes are Kafka 4.2's (an int8 on the wire), the
detail is free text for people; where a detail names topics it lists them as Kafka does, at
most three and then "and N additional topics", so that logs read alike on both brokers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class StreamsGroupStatus(IntEnum):
    """StreamsGroupHeartbeatResponse's StatusCode values (Kafka 4.2)."""

    STALE_TOPOLOGY = 0
    """The member's topology epoch is lower than the group's."""
    MISSING_SOURCE_TOPICS = 1
    """A source topic does not exist, or a source topic regex matches no topic."""
    INCORRECTLY_PARTITIONED_TOPICS = 2
    """Topics that must be copartitioned are not, or an existing internal topic has another
    partition count than the topology needs."""
    MISSING_INTERNAL_TOPICS = 3
    """Internal topics must still be created (the coordinator asks for them)."""
    SHUTDOWN_APPLICATION = 4
    """A member asked the whole application to shut down."""
    ASSIGNMENT_DELAYED = 5
    """The assignment waits for the group's initial rebalance delay."""


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """One status of a heartbeat response: the code and its human-readable detail."""

    code: StreamsGroupStatus
    detail: str


SHOWN_TOPICS = 3
"""How many topic names a detail lists before summing up the rest (Kafka's number)."""


def topic_list(topics: Iterable[str]) -> str:
    """Topic names for a status detail, sorted: "a, b, c and 2 additional topics"."""
    names = sorted(topics)
    if not names:
        return "<none>"
    shown = ", ".join(names[:SHOWN_TOPICS])
    rest = len(names) - SHOWN_TOPICS
    return shown if rest <= 0 else f"{shown} and {rest} additional topics"


def missing_source_topics(topics: Iterable[str], regexes: Iterable[str] = ()) -> GroupStatus:
    """Source topics that do not exist (and, where regexes are allowed, regexes that match
    no topic): the group has nothing to assign until the application's inputs exist."""
    topics, regexes = list(topics), sorted(regexes)
    parts = []
    if topics:
        parts.append(f"Source topics {topic_list(topics)} are missing.")
    if regexes:
        parts.append(f"Source topic regexes {', '.join(regexes)} match no topic.")
    return GroupStatus(StreamsGroupStatus.MISSING_SOURCE_TOPICS, " ".join(parts))


def missing_internal_topics(topics: Iterable[str]) -> GroupStatus:
    """Internal topics the coordinator has still to create."""
    return GroupStatus(StreamsGroupStatus.MISSING_INTERNAL_TOPICS,
                       f"Internal topics are missing: {topic_list(topics)}")


def incorrectly_partitioned(detail: str) -> GroupStatus:
    return GroupStatus(StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS, detail)


def stale_topology(member_epoch: int, group_epoch: int) -> GroupStatus:
    """The member runs an older topology than the group was initialised with; it gets tasks
    of the group's topology all the same, so the application should be upgraded."""
    return GroupStatus(StreamsGroupStatus.STALE_TOPOLOGY,
                       f"The member's topology epoch {member_epoch} is behind the "
                       f"group's topology epoch {group_epoch}.")


def shutdown_application(member_id: str) -> GroupStatus:
    """Sent to every member once one asked (ShutdownApplication) for the whole application
    to stop after a fatal error."""
    return GroupStatus(StreamsGroupStatus.SHUTDOWN_APPLICATION,
                       f"Streams group member {member_id} encountered a fatal error and "
                       "requested a shutdown for the entire application.")


def assignment_delayed() -> GroupStatus:
    """The group waits out its initial rebalance delay before the first assignment, so that
    members starting together are assigned together."""
    return GroupStatus(StreamsGroupStatus.ASSIGNMENT_DELAYED,
                       "Assignment delayed due to the configured initial rebalance delay.")
