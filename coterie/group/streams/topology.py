"""A streams application's topology as its members declare it (KIP-1071).

A Kafka Streams member joining a streams group (StreamsGroupHeartbeat, member epoch 0) sends
the topology of its application: the *subtopologies* (the connected parts of the processing
graph, each run as one task per input partition), what each reads and writes, and the state
it keeps. The coordinator, not the member, then works out the internal topics and how many
tasks each subtopology has (`configured_topology.py`), and assigns the tasks.

The types mirror the `Topology` field of Kafka 4.2's StreamsGroupHeartbeatRequest, field for
field and in its order, in snake case. Lists stay tuples in the order the member sent them:
Kafka compares a rejoining member's topology with the group's one field by field, order
included (`validation.topology_update`), and a value equal to what was sent keeps that
comparison honest. What the fields mean to the coordinator:

- `source_topics`: the user's input topics (the Java client leaves its repartition topics
  out of this list and sends them as `repartition_source_topics` only).
- `source_topic_regex`: patterns naming further input topics (refused by Kafka 4.2).
- `state_changelog_topics`: one internal topic per state store, partition count always 0 in
  the request (the coordinator gives it the subtopology's task count).
- `repartition_sink_topics`: the repartition topics this subtopology writes to.
- `repartition_source_topics`: the repartition topics it reads from, with a partition count
  when the application fixed one (`repartition(Repartitioned.numberOfPartitions)`), else 0.
- `copartition_groups`: sets of inputs that must have the same partition count (a join),
  given as indices into this subtopology's `source_topics`, `source_topic_regex` and
  `repartition_source_topics`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic as declared: `partitions` 0 means "the coordinator decides",
    `replication_factor` 0 means "the broker's default" (the Java client sends its
    `replication.factor` setting, -1 by default, which means the same), `topic_configs`
    the topic-level configs to create it with, as (key, value) pairs in the order sent."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Inputs of one subtopology that must be copartitioned, as indices into its
    `source_topics`, `source_topic_regex` and `repartition_source_topics` (int16 on the
    wire)."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    """One subtopology: what it reads, writes and keeps (see the module docstring)."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    def repartition_source_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.repartition_source_topics)

    def changelog_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.state_changelog_topics)


@dataclass(frozen=True, slots=True)
class Topology:
    """The whole topology and its epoch (the application's own version of it: a member
    with a lower epoch than the group's runs a stale topology)."""

    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()

    def required_topics(self) -> frozenset[str]:
        """Every topic named as an input or as state: source topics, repartition source
        topics and changelog topics (Kafka's `StreamsTopology.requiredTopics`). A change to
        any of them may change the configured topology, so the group's metadata hash is
        taken over these (plus, when regexes are allowed, the topics they match)."""
        return frozenset(self._required())

    def named_topics(self) -> tuple[str, ...]:
        """Every topic the topology names, repartition sinks included, once each in the order
        declared: what Kafka's broker checks (internal names, legal names, DESCRIBE) before
        its coordinator sees the topology."""
        names: dict[str, None] = {}
        for s in self.subtopologies:
            for name in (*s.source_topics, *s.repartition_sink_topics,
                         *s.repartition_source_names(), *s.changelog_names()):
                names.setdefault(name, None)
        return tuple(names)

    def _required(self) -> Iterator[str]:
        for s in self.subtopologies:
            yield from s.source_topics
            yield from s.repartition_source_names()
            yield from s.changelog_names()

    def by_id(self) -> dict[str, Subtopology]:
        """Subtopologies keyed by id (the last one wins if an id repeats; `validation`
        refuses such a topology)."""
        return {s.subtopology_id: s for s in self.subtopologies}
