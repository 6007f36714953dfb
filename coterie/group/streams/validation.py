"""The checks a declared topology must pass before the coordinator takes it in.

Kafka 4.2 checks a StreamsGroupHeartbeat's topology in three places, and coterie does the
same checks in the same order (`validate_topology`):

1. The broker's request handler (KafkaApis): no topic of the topology (source, repartition
   sink, repartition source, changelog) may be one of Kafka's internal topics, and every
   name must be a legal topic name. Both STREAMS_INVALID_TOPOLOGY, the names listed
   comma-separated in first-use order.
2. The coordinator service, before the request reaches the group: source topic regexes are
   refused with INVALID_REQUEST ("not supported yet"), and a changelog topic must not carry
   a partition count (STREAMS_INVALID_TOPOLOGY).
3. The group (GroupMetadataManager): a topology may be brought in only when joining (epoch
   0, and then it must be there: `check_topology_presence`), and a group keeps the topology
   it was initialised with: an older epoch is STALE_TOPOLOGY, another topology at the same
   or a newer epoch is refused with INVALID_REQUEST (`topology_update`).

Kafka 4.2 trusts the rest of the topology, and crashes on some of it (an internal error
answer, UNKNOWN_SERVER_ERROR): a copartition group index out of range, a subtopology id or
an internal topic given twice, a topic config key given twice, a negative topology epoch.
Others it takes in and then never serves: a topic that is both a source topic and a
repartition topic is reported missing forever (it is never created, being a source topic),
a topic read by two subtopologies gives its partitions to two tasks, a negative repartition
partition count is taken as fixed (and -1 asks CreateTopics for the broker's default).
coterie refuses all of these with STREAMS_INVALID_TOPOLOGY and a message that says what is
wrong, after Kafka's own checks, so that a topology Kafka refuses is refused here for the
same reason. `allow_regex` lets regexes through (checked to compile with RE2, as
consumer-group regexes are) for a coordinator that resolves them; Kafka 4.2 does not.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from kio.schema.errors import ErrorCode

from coterie.group.consumer.regex import InvalidRegex, compile_regex
from coterie.group.streams.topology import Subtopology, Topology

KAFKA_INTERNAL_TOPICS: frozenset[str] = frozenset({
    "__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's internal topics (`Topic.isInternal`). The broker passes its own list
(`coterie.log.names.INTERNAL_TOPICS`, which adds coterie's `__group_events`); the group
layer may not import the log layer, hence the parameter."""

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")

JOIN_EPOCH = 0


@dataclass(frozen=True, slots=True)
class TopologyError:
    """Why a heartbeat's topology is refused: the error code of the whole response and its
    message. Nothing of the request has been applied."""

    code: ErrorCode
    message: str


def invalid_topology(message: str) -> TopologyError:
    return TopologyError(ErrorCode.streams_invalid_topology, message)


def is_valid_topic_name(name: str) -> bool:
    """Kafka's `Topic.isValid`: 1 to 249 of [a-zA-Z0-9._-], and not "." or ".."."""
    return (0 < len(name) <= MAX_TOPIC_NAME_LENGTH and name not in (".", "..")
            and _LEGAL_TOPIC_NAME.fullmatch(name) is not None)


def validate_topology(topology: Topology, *,
                      internal_topics: Collection[str] = KAFKA_INTERNAL_TOPICS,
                      allow_regex: bool = False) -> TopologyError | None:
    """The first reason to refuse `topology`, or None: Kafka 4.2's checks in its order, then
    coterie's (see the module docstring)."""
    names = list(dict.fromkeys(_topic_names(topology)))
    internal = [n for n in names if n in internal_topics]
    if internal:
        return invalid_topology(f"Kafka's internal topics {','.join(internal)} cannot be used "
                                "in a Kafka Streams topology.")
    bad = [n for n in names if not is_valid_topic_name(n)]
    if bad:
        return invalid_topology(f"Topic names {','.join(bad)} are not legal topic names.")
    for s in topology.subtopologies:
        if s.source_topic_regex and not allow_regex:
            return TopologyError(ErrorCode.invalid_request,
                                 "Regular expressions for source topics are not supported yet.")
    for s in topology.subtopologies:
        for t in s.state_changelog_topics:
            if t.partitions != 0:
                return invalid_topology(
                    f"Changelog topic {t.name} must have an undefined partition count, but it "
                    f"is set to {t.partitions}.")
    return structural_error(topology, check_regexes=allow_regex)


def _topic_names(topology: Topology) -> Iterator[str]:
    """Every topic name of the topology, in the order Kafka's handler lists them."""
    for s in topology.subtopologies:
        yield from s.source_topics
        yield from s.repartition_sink_topics
        yield from s.repartition_source_names()
        yield from s.changelog_names()


def structural_error(topology: Topology, *, check_regexes: bool = True) -> TopologyError | None:
    """coterie's checks only: what Kafka 4.2 does not check but crashes on or cannot serve.
    `configured_topology` runs them too, so that it gives an error, not an exception, for
    any topology, validated or not."""
    if topology.epoch < 0:
        return invalid_topology(
            f"The topology epoch must not be negative, but it is {topology.epoch}.")
    seen_ids: set[str] = set()
    for s in topology.subtopologies:
        if s.subtopology_id in seen_ids:
            return invalid_topology(
                f"Subtopology {s.subtopology_id} is declared more than once.")
        seen_ids.add(s.subtopology_id)
        error = (_regex_error(s) if check_regexes else None) or _subtopology_error(s)
        if error is not None:
            return error
    return _collision_error(topology)


def _regex_error(s: Subtopology) -> TopologyError | None:
    for pattern in s.source_topic_regex:
        try:
            compile_regex(pattern)
        except InvalidRegex as exc:
            return invalid_topology(
                f"Source topic regex `{pattern}` of subtopology {s.subtopology_id} is not a "
                f"valid regular expression: {exc}.")
    return None


def _subtopology_error(s: Subtopology) -> TopologyError | None:
    """One subtopology on its own: internal topics and config keys given once, partition
    counts not negative, copartition group indices inside the lists they index."""
    sid = s.subtopology_id
    for kind, infos in (("repartition source", s.repartition_source_topics),
                        ("changelog", s.state_changelog_topics)):
        twice = _repeated(t.name for t in infos)
        if twice:
            return invalid_topology(
                f"Subtopology {sid} declares {kind} topic {twice} more than once.")
    for t in s.repartition_source_topics:
        if t.partitions < 0:
            return invalid_topology(
                f"Repartition topic {t.name} of subtopology {sid} has a negative partition "
                f"count ({t.partitions}).")
    for t in (*s.repartition_source_topics, *s.state_changelog_topics):
        twice = _repeated(k for k, _ in t.topic_configs)
        if twice:
            return invalid_topology(
                f"Topic {t.name} of subtopology {sid} sets config {twice} more than once.")
    for i, group in enumerate(s.copartition_groups):
        for field, indices, size in (
                ("source topic", group.source_topics, len(s.source_topics)),
                ("source topic regex", group.source_topic_regex, len(s.source_topic_regex)),
                ("repartition source topic", group.repartition_source_topics,
                 len(s.repartition_source_topics))):
            out = [x for x in indices if not 0 <= x < size]
            if out:
                return invalid_topology(
                    f"Copartition group {i} of subtopology {sid} refers to {field} index "
                    f"{out[0]}, but the subtopology has {size}.")
    return None


def _repeated(values: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)
    return None


def _collision_error(topology: Topology) -> TopologyError | None:
    """Across subtopologies: a topic feeds one subtopology only (Kafka Streams itself
    registers a topic with one source node), and an internal topic is never also a source
    topic, nor a changelog also a repartition topic. The one overlap Kafka Streams makes on
    purpose is kept: a changelog topic that is a source topic of its own subtopology (a
    source table whose input topic doubles as its changelog)."""
    reader: dict[str, str] = {}
    sources: set[str] = set()
    repartition: set[str] = set()
    for s in topology.subtopologies:
        sources.update(s.source_topics)
        repartition.update(s.repartition_source_names())
        repartition.update(s.repartition_sink_topics)
        for name in dict.fromkeys((*s.source_topics, *s.repartition_source_names())):
            other = reader.setdefault(name, s.subtopology_id)
            if other != s.subtopology_id:
                return invalid_topology(
                    f"Topic {name} is read by subtopologies {other} and {s.subtopology_id}; "
                    "a topic can feed one subtopology only.")
    for s in topology.subtopologies:
        for name in s.repartition_source_names():
            if name in sources:
                return invalid_topology(
                    f"Repartition topic {name} of subtopology {s.subtopology_id} is also "
                    "declared as a source topic.")
        for name in s.changelog_names():
            if name in repartition:
                return invalid_topology(
                    f"Changelog topic {name} of subtopology {s.subtopology_id} is also a "
                    "repartition topic.")
            if name in sources and name not in s.source_topics:
                return invalid_topology(
                    f"Changelog topic {name} of subtopology {s.subtopology_id} is a source "
                    f"topic of subtopology {reader[name]}.")
    return None


def check_topology_presence(member_epoch: int, topology: Topology | None) -> TopologyError | None:
    """A topology is sent when (re-)joining and only then (Kafka 4.2's request checks)."""
    if member_epoch == JOIN_EPOCH and topology is None:
        return TopologyError(ErrorCode.invalid_request,
                             "A member (re-)joining must send its topology.")
    if member_epoch != JOIN_EPOCH and topology is not None:
        return TopologyError(ErrorCode.invalid_request,
                             "A topology may only be sent when (re-)joining.")
    return None


class TopologyUpdate(Enum):
    """What a joining member's topology does to its group's."""

    INITIALIZE = "initialize"
    """The group has none yet: the member's becomes the group's."""
    UNCHANGED = "unchanged"
    """The member declares the group's topology."""
    STALE = "stale"
    """The member's epoch is lower: the group keeps its topology and the member is told
    (STALE_TOPOLOGY) on every heartbeat."""


def topology_update(current: Topology | None,
                    declared: Topology) -> TopologyUpdate | TopologyError:
    """Kafka 4.2 keeps the topology a group was first given: a member joining with another
    one at the same or a higher epoch is refused (INVALID_REQUEST), so that no member runs
    tasks of a topology the others do not have. Topologies are compared as Kafka does:
    subtopologies by id, in any order; each subtopology's fields as sent, order included."""
    if current is None:
        return TopologyUpdate.INITIALIZE
    if declared.epoch < current.epoch:
        return TopologyUpdate.STALE
    if declared.epoch == current.epoch and declared.by_id() == current.by_id():
        return TopologyUpdate.UNCHANGED
    return TopologyError(ErrorCode.invalid_request,
                         "Topology updates are not supported yet.")

