"""A streams group's topology configured against the existing topics (KIP-1071): Kafka 4.2's
InternalTopicManager rules, scenario by scenario, then properties over random topologies.

The expected counts are worked out by hand from the rules in
coterie.group.streams.partition_counts, not taken from Kafka's tests.
"""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.group.streams.configured_topology import (
    ConfiguredTopology,
    ImagePartitionCounts,
    InternalTopic,
    configure_topology,
)
from coterie.group.streams.status import StreamsGroupStatus
from coterie.group.streams.topology import CopartitionGroup, Subtopology, TopicInfo, Topology
from coterie.group.topic_image import TopicImage
from tests.unit.group.streams.topologies import (
    CHANGELOG,
    PROPS,
    REPARTITION,
    dag_topologies,
    wordcount,
)


def status_code(result: ConfiguredTopology) -> StreamsGroupStatus | None:
    return None if result.status is None else result.status.code


# --- WordCount ---------------------------------------------------------------------------


def test_wordcount_with_its_input_asks_for_internal_topics_sized_by_the_input():
    result = configure_topology(wordcount(), {"lines": 6})
    assert result.error is None
    assert status_code(result) is StreamsGroupStatus.MISSING_INTERNAL_TOPICS
    assert result.status.detail == (
        "Internal topics are missing: wordcount-counts-repartition, "
        "wordcount-counts-store-changelog")
    assert result.topics_to_create == {
        REPARTITION: InternalTopic(REPARTITION, 6, -1, {"cleanup.policy": "delete"}),
        CHANGELOG: InternalTopic(CHANGELOG, 6, -1, {"cleanup.policy": "compact"}),
    }
    assert result.number_of_tasks() == {"0": 6, "1": 6}
    assert not result.is_ready()
    counting = result.subtopologies["1"]
    assert counting.source_topics == frozenset()
    assert set(counting.repartition_source_topics) == {REPARTITION}
    assert counting.state_changelog_topics[CHANGELOG].partitions == 6
    assert result.subtopologies["0"].repartition_sink_topics == {REPARTITION}


def test_declared_replication_factor_is_kept_and_zero_means_the_broker_default():
    assert configure_topology(wordcount(replication=3), {"lines": 2}).topics_to_create[
        CHANGELOG].replication_factor == 3
    assert configure_topology(wordcount(replication=-1), {"lines": 2}).topics_to_create[
        CHANGELOG].replication_factor == -1
    assert configure_topology(wordcount(replication=0), {"lines": 2}).topics_to_create[
        CHANGELOG].replication_factor == -1


def test_all_internal_topics_present_is_ready_with_nothing_to_create():
    topics = {"lines": 6, REPARTITION: 6, CHANGELOG: 6}
    result = configure_topology(wordcount(), topics)
    assert result.is_ready()
    assert result.status is None and result.error is None
    assert result.topics_to_create == {}
    assert result.number_of_tasks() == {"0": 6, "1": 6}


def test_tasks_are_the_largest_input_partition_count():
    topology = Topology(3, (Subtopology("0", source_topics=("a", "b", "c")),))
    result = configure_topology(topology, {"a": 2, "b": 9, "c": 4})
    assert result.is_ready()
    assert result.number_of_tasks() == {"0": 9}
    assert result.topology_epoch == 3


def test_some_internal_topics_present_lists_only_the_others():
    result = configure_topology(wordcount(), {"lines": 4, REPARTITION: 4})
    assert set(result.topics_to_create) == {CHANGELOG}
    assert result.status.detail == f"Internal topics are missing: {CHANGELOG}"


# --- missing source topics -------------------------------------------------------------------


def test_missing_source_topic_is_named_and_nothing_is_created():
    result = configure_topology(wordcount(), {})
    assert status_code(result) is StreamsGroupStatus.MISSING_SOURCE_TOPICS
    assert result.status.detail == "Source topics lines are missing."
    assert result.subtopologies is None
    assert result.topics_to_create == {}
    assert not result.is_ready()


def test_many_missing_source_topics_are_summed_up_after_three():
    topology = Topology(0, (Subtopology("0", source_topics=("e", "d", "c", "b", "a")),))
    result = configure_topology(topology, {"c": 1})
    assert result.status.detail == "Source topics a, b, d and 1 additional topics are missing."


def test_missing_source_topics_win_over_wrongly_partitioned_internal_topics():
    result = configure_topology(wordcount(), {REPARTITION: 99})
    assert status_code(result) is StreamsGroupStatus.MISSING_SOURCE_TOPICS


# --- internal topics with the wrong partition count ------------------------------------------


def test_existing_repartition_topic_with_another_count_is_incorrectly_partitioned():
    result = configure_topology(wordcount(), {"lines": 6, REPARTITION: 3})
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert result.status.detail == (
        f"Existing topic {REPARTITION} has 3 partitions, but the topology needs 6.")
    assert result.subtopologies is None
    assert result.topics_to_create == {}


def test_existing_changelog_with_another_count_is_incorrectly_partitioned():
    result = configure_topology(wordcount(), {"lines": 6, REPARTITION: 6, CHANGELOG: 12})
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert CHANGELOG in result.status.detail


def test_input_growing_after_internal_topics_exist_makes_them_incorrectly_partitioned():
    result = configure_topology(wordcount(), {"lines": 8, REPARTITION: 6, CHANGELOG: 6})
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS


# --- copartitioning ----------------------------------------------------------------------------


def join(left: int, right: int) -> tuple[Topology, dict[str, int]]:
    """A stream-table join of two input topics, which must be copartitioned."""
    topology = Topology(1, (Subtopology(
        "0", source_topics=("left", "right"),
        state_changelog_topics=(TopicInfo("app-table-changelog"),),
        copartition_groups=(CopartitionGroup(source_topics=(0, 1)),)),))
    return topology, {"left": left, "right": right}


def test_copartitioned_source_topics_that_disagree_are_incorrectly_partitioned():
    result = configure_topology(*join(3, 4))
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert result.status.detail == (
        "Topics that must be copartitioned have different partition counts: "
        "[{left=3, right=4}]")
    assert result.topics_to_create == {}


def test_copartitioned_source_topics_that_agree_are_configured():
    result = configure_topology(*join(4, 4))
    assert result.number_of_tasks() == {"0": 4}
    assert result.topics_to_create["app-table-changelog"].partitions == 4


def rekeyed_join(fixed: int = 0) -> Topology:
    """A stream re-keyed (repartitioned) then joined with a table read from its topic: the
    repartition topic must take the table topic's partition count, not the stream's."""
    return Topology(1, (
        Subtopology("0", source_topics=("clicks",), repartition_sink_topics=("app-rekey",)),
        Subtopology("1", source_topics=("users",),
                    repartition_source_topics=(TopicInfo("app-rekey", fixed),),
                    state_changelog_topics=(TopicInfo("app-users-changelog"),),
                    copartition_groups=(CopartitionGroup(
                        source_topics=(0,), repartition_source_topics=(0,)),)),
    ))


def test_flexible_repartition_topic_takes_the_count_of_the_topic_it_joins():
    result = configure_topology(rekeyed_join(), {"clicks": 8, "users": 4})
    assert result.topics_to_create["app-rekey"].partitions == 4
    assert result.number_of_tasks() == {"0": 8, "1": 4}
    assert result.topics_to_create["app-users-changelog"].partitions == 4


def test_fixed_repartition_topic_that_disagrees_with_its_join_partner():
    result = configure_topology(rekeyed_join(fixed=6), {"clicks": 8, "users": 4})
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert result.status.detail == (
        "Repartition topic [app-rekey] has [6] partitions, but the topics it must be "
        "copartitioned with have [4].")


def test_fixed_repartition_topic_that_agrees_with_its_join_partner():
    result = configure_topology(rekeyed_join(fixed=4), {"clicks": 8, "users": 4})
    assert result.topics_to_create["app-rekey"].partitions == 4


def test_existing_flexible_repartition_topic_with_the_join_count_is_ready():
    topics = {"clicks": 8, "users": 4, "app-rekey": 4, "app-users-changelog": 4}
    assert configure_topology(rekeyed_join(), topics).is_ready()


def repartition_only_join(left: int, right: int, other: int = 0) -> Topology:
    """Two re-keyed streams joined: a copartition group of repartition topics only. `other`
    adds an unrelated repartition topic with that fixed count, elsewhere in the topology."""
    subtopologies = [
        Subtopology("0", source_topics=("a",), repartition_sink_topics=("app-left",)),
        Subtopology("1", source_topics=("b",), repartition_sink_topics=("app-right",)),
        Subtopology("2", repartition_source_topics=(TopicInfo("app-left", left),
                                                    TopicInfo("app-right", right)),
                    copartition_groups=(CopartitionGroup(repartition_source_topics=(0, 1)),)),
    ]
    if other:
        subtopologies += [
            Subtopology("3", source_topics=("c",), repartition_sink_topics=("app-other",)),
            Subtopology("4", repartition_source_topics=(TopicInfo("app-other", other),)),
        ]
    return Topology(1, tuple(subtopologies))


def test_repartition_only_group_without_fixed_counts_takes_the_largest():
    result = configure_topology(repartition_only_join(0, 0), {"a": 3, "b": 5})
    assert result.topics_to_create["app-left"].partitions == 5
    assert result.topics_to_create["app-right"].partitions == 5
    assert result.number_of_tasks()["2"] == 5


def test_repartition_only_group_takes_its_fixed_count():
    result = configure_topology(repartition_only_join(2, 0), {"a": 3, "b": 5})
    assert result.topics_to_create["app-left"].partitions == 2
    assert result.topics_to_create["app-right"].partitions == 2


def test_repartition_only_group_with_disagreeing_fixed_counts():
    result = configure_topology(repartition_only_join(2, 7), {"a": 3, "b": 5})
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert result.status.detail == (
        "Copartitioned repartition topics have different fixed partition counts: "
        "[{app-left=2, app-right=7}]")


def test_an_unrelated_fixed_repartition_topic_does_not_size_a_group():
    """Kafka 4.2 would take app-other's 9 for the group (its fixed set is topology-wide);
    here the group has no fixed topic and takes the largest of its own."""
    result = configure_topology(repartition_only_join(0, 0, other=9), {"a": 3, "b": 5, "c": 1})
    assert result.topics_to_create["app-left"].partitions == 5
    assert result.topics_to_create["app-other"].partitions == 9


# --- repartition topic partition counts --------------------------------------------------------


def test_repartition_count_fixed_by_the_topology_sizes_downstream():
    result = configure_topology(wordcount(repartition_partitions=3), {"lines": 6})
    assert result.topics_to_create[REPARTITION].partitions == 3
    assert result.number_of_tasks() == {"0": 6, "1": 3}
    assert result.topics_to_create[CHANGELOG].partitions == 3


def chain(order: tuple[int, ...] = (0, 1, 2)) -> Topology:
    """input -> [0] -> app-r1 -> [1] -> app-r2 -> [2] (which also reads small), declared in
    `order`."""
    subtopologies = [
        Subtopology("0", source_topics=("input",), repartition_sink_topics=("app-r1",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-r1"),),
                    repartition_sink_topics=("app-r2",)),
        Subtopology("2", source_topics=("small",),
                    repartition_source_topics=(TopicInfo("app-r2"),),
                    state_changelog_topics=(TopicInfo("app-agg-changelog"),)),
    ]
    return Topology(1, tuple(subtopologies[i] for i in order))


def test_repartition_count_comes_through_a_chain_of_subtopologies():
    result = configure_topology(chain(), {"input": 5, "small": 2})
    assert result.topics_to_create["app-r1"].partitions == 5
    assert result.topics_to_create["app-r2"].partitions == 5
    assert result.number_of_tasks() == {"0": 5, "1": 5, "2": 5}
    assert result.topics_to_create["app-agg-changelog"].partitions == 5


def test_chain_result_does_not_depend_on_declaration_order():
    topics = {"input": 5, "small": 2}
    expected = configure_topology(chain(), topics)
    for order in ((2, 1, 0), (1, 2, 0), (2, 0, 1)):
        assert configure_topology(chain(order), topics) == expected


def test_writer_with_an_undecided_repartition_input_waits_for_it():
    """Subtopology 1 reads small (2) and app-r1 (from input, 8) and writes app-r2: app-r2
    takes 8, whatever the order (Kafka 4.2 may take 2 when it visits 1 before 0)."""
    topology = Topology(1, (
        Subtopology("1", source_topics=("small",),
                    repartition_source_topics=(TopicInfo("app-r1"),),
                    repartition_sink_topics=("app-r2",)),
        Subtopology("0", source_topics=("input",), repartition_sink_topics=("app-r1",)),
        Subtopology("2", repartition_source_topics=(TopicInfo("app-r2"),)),
    ))
    result = configure_topology(topology, {"small": 2, "input": 8})
    assert result.topics_to_create["app-r2"].partitions == 8


def test_loop_with_an_input_is_resolved():
    topology = Topology(1, (
        Subtopology("0", source_topics=("input",),
                    repartition_source_topics=(TopicInfo("app-back"),),
                    repartition_sink_topics=("app-forth",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-forth"),),
                    repartition_sink_topics=("app-back",)),
    ))
    result = configure_topology(topology, {"input": 4})
    assert result.topics_to_create["app-forth"].partitions == 4
    assert result.topics_to_create["app-back"].partitions == 4


def test_loop_without_an_input_is_an_invalid_topology():
    topology = Topology(1, (
        Subtopology("0", source_topics=("input",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-x"),),
                    repartition_sink_topics=("app-y",)),
        Subtopology("2", repartition_source_topics=(TopicInfo("app-y"),),
                    repartition_sink_topics=("app-x",)),
    ))
    result = configure_topology(topology, {"input": 4})
    assert result.error.code == ErrorCode.streams_invalid_topology
    assert "app-x, app-y" in result.error.message
    assert result.subtopologies is None and result.status is None


def test_writer_without_any_input_is_an_invalid_topology():
    topology = Topology(1, (
        Subtopology("0", repartition_sink_topics=("app-r",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-r"),)),
    ))
    result = configure_topology(topology, {})
    assert result.error.code == ErrorCode.streams_invalid_topology
    assert "app-r" in result.error.message


def test_repartition_topic_nobody_writes_is_an_invalid_topology():
    topology = Topology(1, (Subtopology(
        "0", source_topics=("input",), repartition_source_topics=(TopicInfo("app-orphan"),)),))
    result = configure_topology(topology, {"input": 4})
    assert result.error.code == ErrorCode.streams_invalid_topology
    assert "app-orphan" in result.error.message


def test_subtopology_without_inputs_is_an_invalid_topology():
    topology = Topology(1, (Subtopology("0", source_topics=("input",)), Subtopology("1")))
    result = configure_topology(topology, {"input": 4})
    assert result.error.code == ErrorCode.streams_invalid_topology
    assert result.error.message == "Subtopology 1 has no source topics."


# --- changelog topics --------------------------------------------------------------------------


def test_changelog_topics_take_the_task_count():
    topology = Topology(1, (Subtopology(
        "0", source_topics=("a", "b"),
        state_changelog_topics=(TopicInfo("app-s1-changelog"), TopicInfo("app-s2-changelog"))),))
    result = configure_topology(topology, {"a": 3, "b": 7})
    assert result.number_of_tasks() == {"0": 7}
    assert {t.partitions for t in result.topics_to_create.values()} == {7}
    assert set(result.topics_to_create) == {"app-s1-changelog", "app-s2-changelog"}


def test_source_topic_reused_as_changelog_is_not_created():
    """A source table may use its input topic as its changelog (Streams' optimisation)."""
    topology = Topology(1, (Subtopology(
        "0", source_topics=("users",), state_changelog_topics=(TopicInfo("users"),)),))
    result = configure_topology(topology, {"users": 5})
    assert result.is_ready()
    assert result.subtopologies["0"].state_changelog_topics["users"].partitions == 5


def test_source_changelog_smaller_than_the_task_count_is_incorrectly_partitioned():
    topology = Topology(1, (Subtopology(
        "0", source_topics=("users", "orders"), state_changelog_topics=(TopicInfo("users"),)),))
    result = configure_topology(topology, {"users": 5, "orders": 10})
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS


# --- source topic regexes ----------------------------------------------------------------------


def regex_topology(*regexes: str, groups: tuple[CopartitionGroup, ...] = ()) -> Topology:
    return Topology(1, (Subtopology(
        "0", source_topic_regex=regexes,
        state_changelog_topics=(TopicInfo("app-store-changelog"),),
        copartition_groups=groups),))


def test_source_topic_regex_reads_the_topics_it_matches():
    topics = {"events-a": 2, "events-b": 6, "other": 50, "xevents-c": 50}
    result = configure_topology(regex_topology("events-.*"), topics)
    assert result.subtopologies["0"].source_topics == {"events-a", "events-b"}
    assert result.number_of_tasks() == {"0": 6}
    assert result.topics_to_create["app-store-changelog"].partitions == 6


def test_source_topic_regex_matching_nothing_is_a_missing_source():
    result = configure_topology(regex_topology("events-.*"), {"other": 1})
    assert status_code(result) is StreamsGroupStatus.MISSING_SOURCE_TOPICS
    assert result.status.detail == "Source topic regexes events-.* match no topic."


def test_source_topic_regex_does_not_read_the_topologys_own_internal_topics():
    result = configure_topology(regex_topology(".*"), {"in": 3, "app-store-changelog": 3})
    assert result.subtopologies["0"].source_topics == {"in"}
    assert result.is_ready()


def test_source_topic_regex_in_a_copartition_group():
    groups = (CopartitionGroup(source_topic_regex=(0,)),)
    result = configure_topology(regex_topology("t-.*", groups=groups), {"t-1": 2, "t-2": 3})
    assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert "[{t-1=2, t-2=3}]" in result.status.detail


def test_literal_and_regex_sources_missing_together():
    topology = Topology(1, (Subtopology("0", source_topics=("lines",),
                                        source_topic_regex=("x-.*",)),))
    result = configure_topology(topology, {})
    assert result.status.detail == (
        "Source topics lines are missing. Source topic regexes x-.* match no topic.")


# --- robustness and the coordinator's picture of topics ----------------------------------------


def test_structurally_broken_topology_gives_an_error_not_an_exception():
    topology = Topology(1, (Subtopology(
        "0", source_topics=("a",), copartition_groups=(CopartitionGroup(source_topics=(0, 1)),)),))
    result = configure_topology(topology, {"a": 1})
    assert result.error.code == ErrorCode.streams_invalid_topology
    assert "index 1" in result.error.message


def test_topic_image_as_partition_counts():
    image = TopicImage.of({"lines": (uuid.uuid4(), 6), REPARTITION: (uuid.uuid4(), 6),
                           CHANGELOG: (uuid.uuid4(), 6)})
    counts = ImagePartitionCounts(image)
    assert dict(counts) == {"lines": 6, REPARTITION: 6, CHANGELOG: 6}
    assert "nope" not in counts
    assert configure_topology(wordcount(), counts).is_ready()


def test_empty_topology_is_ready():
    result = configure_topology(Topology(0), {})
    assert result.is_ready()
    assert result.number_of_tasks() == {}


# --- properties over random topologies ---------------------------------------------------------


def input_count(result: ConfiguredTopology, sid: str, topic: str, topics: dict[str, int]) -> int:
    if topic in topics:
        return topics[topic]
    return result.subtopologies[sid].repartition_source_topics[topic].partitions


@PROPS
@given(dag_topologies())
def test_tasks_are_the_largest_input_and_changelogs_match_them(case):
    topology, topics = case
    result = configure_topology(topology, topics)
    assert result.error is None
    if result.subtopologies is None:
        assert status_code(result) is StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS
        return
    for s in topology.subtopologies:
        configured = result.subtopologies[s.subtopology_id]
        inputs = (*s.source_topics, *s.repartition_source_names())
        assert configured.number_of_tasks == max(
            input_count(result, s.subtopology_id, t, topics) for t in inputs)
        for changelog in configured.state_changelog_topics.values():
            assert changelog.partitions == configured.number_of_tasks


@PROPS
@given(dag_topologies())
def test_nothing_listed_to_create_already_exists(case):
    topology, topics = case
    result = configure_topology(topology, topics)
    assert not set(result.topics_to_create) & set(topics)
    internal = {t.name for s in topology.subtopologies
                for t in (*s.repartition_source_topics, *s.state_changelog_topics)}
    assert set(result.topics_to_create) <= internal
    assert (status_code(result) is StreamsGroupStatus.MISSING_INTERNAL_TOPICS) == bool(
        result.topics_to_create)


@PROPS
@given(dag_topologies())
def test_creating_what_is_asked_for_makes_the_group_ready_with_the_same_tasks(case):
    topology, topics = case
    result = configure_topology(topology, topics)
    if result.subtopologies is None:
        return
    created = {**topics, **{t.name: t.partitions for t in result.topics_to_create.values()}}
    again = configure_topology(topology, created)
    assert again.is_ready()
    assert again.number_of_tasks() == result.number_of_tasks()


@PROPS
@given(dag_topologies(), st.randoms(use_true_random=False))
def test_declaration_order_does_not_matter(case, rnd):
    topology, topics = case
    shuffled = list(topology.subtopologies)
    rnd.shuffle(shuffled)
    assert configure_topology(Topology(1, tuple(shuffled)), topics) == configure_topology(
        topology, topics)


@PROPS
@given(dag_topologies(), st.data())
def test_a_missing_source_topic_is_always_reported(case, data):
    topology, topics = case
    sources = sorted(t for s in topology.subtopologies for t in s.source_topics)
    gone = data.draw(st.sampled_from(sources))
    result = configure_topology(topology, {t: n for t, n in topics.items() if t != gone})
    assert status_code(result) is StreamsGroupStatus.MISSING_SOURCE_TOPICS
    assert gone in result.status.detail
    assert result.topics_to_create == {}
