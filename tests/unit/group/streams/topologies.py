"""Topologies for the streams-group tests: Kafka Streams' WordCount, and random ones."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from coterie.group.streams.topology import CopartitionGroup, Subtopology, TopicInfo, Topology

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

REPARTITION = "wordcount-counts-repartition"
CHANGELOG = "wordcount-counts-store-changelog"


def wordcount(repartition_partitions: int = 0, replication: int = 0) -> Topology:
    """Kafka Streams' WordCount: subtopology 0 splits lines into words and repartitions them
    by word; subtopology 1 counts them in a store backed by a changelog."""
    return Topology(1, (
        Subtopology("0", source_topics=("lines",), repartition_sink_topics=(REPARTITION,)),
        Subtopology(
            "1",
            repartition_source_topics=(TopicInfo(REPARTITION, repartition_partitions,
                                                 replication, (("cleanup.policy", "delete"),)),),
            state_changelog_topics=(TopicInfo(CHANGELOG, 0, replication,
                                              (("cleanup.policy", "compact"),)),)),
    ))


@st.composite
def dag_topologies(draw: st.DrawFn) -> tuple[Topology, dict[str, int]]:
    """A topology whose subtopologies form a DAG through repartition topics (j -> i, j < i),
    each with at least one input, every source topic existing; optional fixed repartition
    counts, changelogs, copartition groups, and internal topics that already exist (with
    the right count or not). Subtopologies come in a random order."""
    n = draw(st.integers(1, 5))
    edges = sorted(draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
                                .filter(lambda e: e[0] < e[1]), max_size=6)))
    topics: dict[str, int] = {}
    subtopologies = []
    for i in range(n):
        fed = any(dst == i for _, dst in edges)
        sources = tuple(f"in-{i}-{k}" for k in range(draw(st.integers(0 if fed else 1, 3))))
        for s in sources:
            topics[s] = draw(st.integers(1, 8))
        reads = tuple(TopicInfo(f"app-rep-{src}-{i}", draw(st.sampled_from((0, 0, 0, 2, 5))))
                      for src, dst in edges if dst == i)
        writes = tuple(f"app-rep-{i}-{dst}" for src, dst in edges if src == i)
        changelogs = tuple(TopicInfo(f"app-store-{i}-{k}-changelog")
                           for k in range(draw(st.integers(0, 2))))
        groups: tuple[CopartitionGroup, ...] = ()
        if len(sources) + len(reads) > 1 and draw(st.booleans()):
            groups = (CopartitionGroup(
                tuple(draw(st.sets(st.integers(0, len(sources) - 1))) if sources else ()),
                (),
                tuple(draw(st.sets(st.integers(0, len(reads) - 1))) if reads else ())),)
        subtopologies.append(Subtopology(str(i), sources, (), changelogs, writes, reads, groups))
    internal = [t.name for s in subtopologies
                for t in (*s.repartition_source_topics, *s.state_changelog_topics)]
    for name in draw(st.lists(st.sampled_from(internal), unique=True)) if internal else ():
        topics[name] = draw(st.integers(1, 8))
    return Topology(1, tuple(draw(st.permutations(subtopologies)))), topics
