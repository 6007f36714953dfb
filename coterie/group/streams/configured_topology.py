"""A streams group's topology configured against the topics that exist (Kafka 4.2's
InternalTopicManager.configureTopics, ConfiguredTopology and ConfiguredSubtopology).

Members declare *what* their application reads, writes and keeps; the coordinator decides
*how big* it all is, because only it sees the cluster's topics and every member must agree:
how many tasks each subtopology has (one per partition of its largest input), how many
partitions each repartition and changelog topic needs, which of them must still be created,
and whether the group can be served at all. It does so again whenever the group's topology
or the topics it depends on change (the caller keeps the metadata hash that tells).

`configure_topology` is pure: a topology and a picture of the topics (name -> partition
count) in, a `ConfiguredTopology` out, one of:
- ready: every subtopology configured, nothing to create, no status;
- waiting for internal topics: every subtopology configured, `topics_to_create` lists what
  the coordinator must create (name, partitions, replication factor, configs), status
  MISSING_INTERNAL_TOPICS; the group is not assigned tasks until they exist;
- not configurable now: status MISSING_SOURCE_TOPICS or INCORRECTLY_PARTITIONED_TOPICS, no
  subtopologies, nothing to create (creating internal topics for an input that may still
  change would fix their partition counts too early);
- invalid: `error` (STREAMS_INVALID_TOPOLOGY), which Kafka answers the heartbeat with; no
  topics could ever serve this topology.

The steps and their order are Kafka's: source topics must exist; then partition counts
(`partition_counts`); then existing internal topics must have the counts decided; then what
is missing is listed. Regexes (refused by Kafka 4.2's request checks, see `validation`) are
resolved here for a coordinator that lets them through: each matches the whole name of
existing topics other than the topology's own internal topics, a regex matching nothing
counts as a missing source topic, and the matched topics act as source topics (in
copartition groups too).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from coterie.group.consumer.regex import resolve
from coterie.group.streams.partition_counts import (
    Inputs,
    InvalidTopology,
    Unconfigurable,
    changelog_counts,
    copartitioned_counts,
    repartition_counts,
    task_count,
)
from coterie.group.streams.status import (
    GroupStatus,
    incorrectly_partitioned,
    missing_internal_topics,
    missing_source_topics,
)
from coterie.group.streams.topology import Subtopology, TopicInfo, Topology
from coterie.group.streams.validation import TopologyError, invalid_topology, structural_error
from coterie.group.topic_image import TopicImage

DEFAULT_REPLICATION_FACTOR = -1
"""CreateTopics' "the broker's default"; a declared replication factor of 0 becomes this."""


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic as the topology needs it, in the shape CreateTopics takes:
    `replication_factor` -1 for the broker's default."""

    name: str
    partitions: int
    replication_factor: int = DEFAULT_REPLICATION_FACTOR
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfiguredSubtopology:
    """One subtopology with its size: `number_of_tasks` is the partition count of its
    largest input; `source_topics` includes the topics its regexes matched."""

    subtopology_id: str
    number_of_tasks: int
    source_topics: frozenset[str]
    repartition_source_topics: Mapping[str, InternalTopic]
    repartition_sink_topics: frozenset[str]
    state_changelog_topics: Mapping[str, InternalTopic]


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """The outcome of configuring a topology (see the module docstring for the four
    shapes). `subtopologies` is keyed and ordered by subtopology id."""

    topology_epoch: int
    subtopologies: Mapping[str, ConfiguredSubtopology] | None = None
    topics_to_create: Mapping[str, InternalTopic] = field(default_factory=dict)
    status: GroupStatus | None = None
    error: TopologyError | None = None

    def is_ready(self) -> bool:
        """Whether tasks can be assigned: configured, nothing missing, nothing wrong."""
        return self.status is None and self.error is None and self.subtopologies is not None

    def number_of_tasks(self) -> dict[str, int]:
        """Tasks per subtopology id (empty when not configured): the assignor's input."""
        return {sid: s.number_of_tasks for sid, s in (self.subtopologies or {}).items()}


def configure_topology(topology: Topology, topics: Mapping[str, int]) -> ConfiguredTopology:
    """`topology` configured against `topics` (every existing topic's partition count, by
    name). Never raises: a topology that cannot be configured gives an `error`."""
    epoch = topology.epoch
    problem = structural_error(topology)
    if problem is not None:
        return ConfiguredTopology(epoch, error=problem)
    subtopologies = sorted(topology.subtopologies, key=lambda s: s.subtopology_id)
    matched = _resolve_regexes(topology, topics)
    missing = sorted({t for s in subtopologies for t in s.source_topics if t not in topics})
    unmatched = [r for s in subtopologies for r in s.source_topic_regex
                 if not matched[s.subtopology_id][r]]
    if missing or unmatched:
        return ConfiguredTopology(epoch, status=missing_source_topics(missing, unmatched))
    inputs = {s.subtopology_id: _inputs(s, matched[s.subtopology_id]) for s in subtopologies}
    try:
        decided = _decide(subtopologies, inputs, matched, topics)
        configured = {s.subtopology_id: _configured(s, inputs[s.subtopology_id], topics,
                                                    decided) for s in subtopologies}
        to_create = _to_create(configured, topics)
    except InvalidTopology as exc:
        return ConfiguredTopology(epoch, error=invalid_topology(exc.message))
    except Unconfigurable as exc:
        return ConfiguredTopology(epoch, status=exc.status)
    return ConfiguredTopology(epoch, configured, to_create,
                              missing_internal_topics(to_create) if to_create else None)


def _resolve_regexes(topology: Topology,
                     topics: Mapping[str, int]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Subtopology id -> regex -> the existing topics it matches, the topology's own
    internal topics left out (a pattern such as `.*` must not read them back)."""
    if not any(s.source_topic_regex for s in topology.subtopologies):
        return {s.subtopology_id: {} for s in topology.subtopologies}
    internal = {n for s in topology.subtopologies
                for n in (*s.repartition_source_names(), *s.repartition_sink_topics,
                          *s.changelog_names())}
    candidates = [t for t in topics if t not in internal]
    return {s.subtopology_id: {r: resolve(r, candidates) for r in s.source_topic_regex}
            for s in topology.subtopologies}


def _inputs(s: Subtopology, matched: Mapping[str, tuple[str, ...]]) -> Inputs:
    """What `s` reads: its named source topics, then those its regexes matched, once each;
    and its repartition topics."""
    regex_topics = (t for r in s.source_topic_regex for t in matched[r])
    return Inputs(tuple(dict.fromkeys((*s.source_topics, *regex_topics))),
                  s.repartition_source_names())


def _decide(subtopologies: list[Subtopology], inputs: Mapping[str, Inputs],
            matched: Mapping[str, Mapping[str, tuple[str, ...]]],
            topics: Mapping[str, int]) -> dict[str, int]:
    """The partition count of every internal topic, in Kafka's three steps."""
    decided = repartition_counts(subtopologies, inputs, topics)
    fixed = {t.name for s in subtopologies for t in s.repartition_source_topics
             if t.partitions != 0}
    flexible = {t.name for s in subtopologies for t in s.repartition_source_topics
                if t.partitions == 0}
    groups = list(_copartition_groups(subtopologies, matched))
    decided = copartitioned_counts(groups, fixed, flexible, topics, decided)
    decided.update(changelog_counts(subtopologies, inputs, topics, decided))
    return decided


def _copartition_groups(subtopologies: list[Subtopology],
                        matched: Mapping[str, Mapping[str, tuple[str, ...]]],
                        ) -> Iterator[frozenset[str]]:
    """Each copartition group as topic names (indices checked by `structural_error`)."""
    for s in subtopologies:
        regex_topics = matched[s.subtopology_id]
        for group in s.copartition_groups:
            yield frozenset((
                *(s.source_topics[i] for i in group.source_topics),
                *(t for i in group.source_topic_regex
                  for t in regex_topics[s.source_topic_regex[i]]),
                *(s.repartition_source_topics[i].name for i in group.repartition_source_topics),
            ))


def _configured(s: Subtopology, inputs: Inputs, topics: Mapping[str, int],
                decided: Mapping[str, int]) -> ConfiguredSubtopology:
    tasks = task_count(inputs, topics, decided)
    if tasks is None:  # changelog_counts refuses such a subtopology first
        raise InvalidTopology(f"Subtopology {s.subtopology_id} has no source topics.")
    return ConfiguredSubtopology(
        s.subtopology_id, tasks, frozenset(inputs.sources),
        {t.name: _internal(t, decided) for t in s.repartition_source_topics},
        frozenset(s.repartition_sink_topics),
        {t.name: _internal(t, decided) for t in s.state_changelog_topics})


def _internal(info: TopicInfo, decided: Mapping[str, int]) -> InternalTopic:
    """A declared count is kept (a fixed repartition topic); 0 takes the decided one."""
    return InternalTopic(
        info.name, info.partitions if info.partitions != 0 else decided[info.name],
        info.replication_factor if info.replication_factor != 0
        else DEFAULT_REPLICATION_FACTOR,
        dict(info.topic_configs))


def _to_create(configured: Mapping[str, ConfiguredSubtopology],
               topics: Mapping[str, int]) -> dict[str, InternalTopic]:
    """The internal topics that do not exist yet, by name. One that exists must already
    have the partition count decided: the coordinator never changes a topic's count."""
    wanted: dict[str, InternalTopic] = {}
    for s in configured.values():
        wanted.update(s.repartition_source_topics)
        wanted.update(s.state_changelog_topics)
    for name in sorted(wanted):
        if name in topics and topics[name] != wanted[name].partitions:
            raise Unconfigurable(incorrectly_partitioned(
                f"Existing topic {name} has {topics[name]} partitions, but the topology "
                f"needs {wanted[name].partitions}."))
    return {name: wanted[name] for name in sorted(wanted) if name not in topics}


class ImagePartitionCounts(Mapping[str, int]):
    """The coordinator's `TopicImage` seen as name -> partition count, without a copy."""

    __slots__ = ("_by_name",)

    def __init__(self, image: TopicImage) -> None:
        self._by_name = image.by_name

    def __getitem__(self, name: str) -> int:
        return self._by_name[name].partitions

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)
