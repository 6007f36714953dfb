"""A declared topology as its record (`StreamsGroupTopologyValue`) and back.

The record keeps what the member sent, field for field (the record types mirror Kafka's
generated record classes, the topology types the request's), so that converting either way
loses nothing and a topology read back compares equal to the one a member declares
(`validation.topology_update` compares them).
"""

from __future__ import annotations

from coterie.group.records import streams as rec
from coterie.group.streams.topology import CopartitionGroup, Subtopology, TopicInfo, Topology


def topology_value(topology: Topology) -> rec.StreamsGroupTopologyValue:
    return rec.StreamsGroupTopologyValue(topology.epoch, tuple(
        rec.Subtopology(
            s.subtopology_id, s.source_topics, s.source_topic_regex,
            tuple(_record_info(t) for t in s.state_changelog_topics),
            s.repartition_sink_topics,
            tuple(_record_info(t) for t in s.repartition_source_topics),
            tuple(rec.CopartitionGroup(g.source_topics, g.source_topic_regex,
                                       g.repartition_source_topics)
                  for g in s.copartition_groups))
        for s in topology.subtopologies))


def topology_of(value: rec.StreamsGroupTopologyValue) -> Topology:
    return Topology(value.epoch, tuple(
        Subtopology(
            s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
            tuple(_info(t) for t in s.state_changelog_topics),
            tuple(s.repartition_sink_topics),
            tuple(_info(t) for t in s.repartition_source_topics),
            tuple(CopartitionGroup(tuple(g.source_topics), tuple(g.source_topic_regex),
                                   tuple(g.repartition_source_topics))
                  for g in s.copartition_groups))
        for s in value.subtopologies))


def _record_info(t: TopicInfo) -> rec.TopicInfo:
    return rec.TopicInfo(t.name, t.partitions, t.replication_factor, t.topic_configs)


def _info(t: rec.TopicInfo) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor, tuple(t.topic_configs))
