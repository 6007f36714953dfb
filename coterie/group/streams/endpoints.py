"""Interactive Queries: which partitions each member's endpoint serves
(StreamsGroupHeartbeatResponse.PartitionsByUserEndpoint; Kafka's EndpointToPartitionsManager).

A task (subtopology s, partition p) reads partition p of each of s's source and repartition
source topics that has that many partitions; a member's endpoint serves those partitions of
its active tasks as active, of its standby tasks as standby. Several members of one process
(stream threads) share an endpoint: their partitions are merged under it, so that a client
reading the list into a map loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from coterie.group.records.tasks import Tasks
from coterie.group.streams.member import StreamsMember
from coterie.group.streams.messages import Endpoint, EndpointPartitions
from coterie.group.streams.topology import Topology
from coterie.group.topic_image import TopicImage


def endpoint_partitions(members: Iterable[StreamsMember], topology: Topology | None,
                        image: TopicImage) -> tuple[EndpointPartitions, ...]:
    by_endpoint: dict[Endpoint, tuple[dict[str, set[int]], dict[str, set[int]]]] = {}
    inputs: Mapping[str, tuple[str, ...]] = {} if topology is None else {
        s.subtopology_id: (*s.source_topics, *s.repartition_source_names())
        for s in topology.subtopologies}
    for m in members:
        ep = m.metadata.user_endpoint
        if ep is None:
            continue
        active, standby = by_endpoint.setdefault(ep, ({}, {}))
        _add(active, m.assigned.active, inputs, image)
        _add(standby, m.assigned.standby, inputs, image)
    return tuple(EndpointPartitions(ep, _flat(a), _flat(s))
                 for ep, (a, s) in sorted(by_endpoint.items(),
                                          key=lambda kv: (kv[0].host, kv[0].port)))


def _add(out: dict[str, set[int]], tasks: Tasks, inputs: Mapping[str, tuple[str, ...]],
         image: TopicImage) -> None:
    for sid, partitions in tasks.items():
        for topic in inputs.get(sid, ()):
            info = image.by_name.get(topic)
            if info is None:
                continue
            out.setdefault(topic, set()).update(p for p in partitions if p < info.partitions)


def _flat(parts: dict[str, set[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)
