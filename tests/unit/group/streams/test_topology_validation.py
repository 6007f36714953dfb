"""The checks on a StreamsGroupHeartbeat's declared topology: Kafka 4.2's (its request
handler's and its coordinator's, in that order) and coterie's for what Kafka 4.2 crashes on
or cannot serve; the topology a joining member may bring; the group statuses' codes."""

from __future__ import annotations

import pytest
from hypothesis import given
from kio.schema.errors import ErrorCode

from coterie.group.streams.status import (
    StreamsGroupStatus,
    assignment_delayed,
    shutdown_application,
    stale_topology,
    topic_list,
)
from coterie.group.streams.topology import CopartitionGroup, Subtopology, TopicInfo, Topology
from coterie.group.streams.validation import (
    KAFKA_INTERNAL_TOPICS,
    TopologyError,
    TopologyUpdate,
    check_topology_presence,
    is_valid_topic_name,
    topology_update,
    validate_topology,
)
from tests.unit.group.streams.topologies import PROPS, dag_topologies, wordcount

INVALID = ErrorCode.streams_invalid_topology


def one(subtopology: Subtopology, epoch: int = 1) -> Topology:
    return Topology(epoch, (subtopology,))


def refused(topology: Topology, **kwargs) -> TopologyError:
    error = validate_topology(topology, **kwargs)
    assert error is not None
    return error


def test_wordcount_is_valid():
    assert validate_topology(wordcount()) is None


# --- Kafka 4.2's checks -------------------------------------------------------------------------


def test_kafka_internal_topics_are_refused():
    error = refused(one(Subtopology("0", source_topics=("__consumer_offsets", "x"),
                                    repartition_sink_topics=("__transaction_state",))))
    assert error.code == INVALID
    assert error.message == ("Kafka's internal topics __consumer_offsets,__transaction_state "
                             "cannot be used in a Kafka Streams topology.")


def test_the_brokers_own_internal_topics_are_passed_in():
    topology = one(Subtopology("0", source_topics=("__group_events",)))
    assert validate_topology(topology) is None
    error = refused(topology, internal_topics=KAFKA_INTERNAL_TOPICS | {"__group_events"})
    assert "__group_events" in error.message


@pytest.mark.parametrize("name", ["", ".", "..", "has space", "x" * 250, "é"])
def test_illegal_topic_names_are_refused(name):
    assert not is_valid_topic_name(name)
    error = refused(one(Subtopology("0", source_topics=("fine", name))))
    assert error.code == INVALID
    assert error.message == f"Topic names {name} are not legal topic names."


def test_illegal_names_are_listed_in_first_use_order_once():
    topology = one(Subtopology(
        "0", source_topics=("b!",), repartition_sink_topics=("a!",),
        state_changelog_topics=(TopicInfo("b!"),)))
    assert refused(topology).message == "Topic names b!,a! are not legal topic names."


def test_internal_topics_are_checked_before_illegal_names():
    topology = one(Subtopology("0", source_topics=("bad name", "__consumer_offsets")))
    assert "internal topics __consumer_offsets" in refused(topology).message


def test_legal_topic_names():
    assert is_valid_topic_name("a.b_c-D9")
    assert is_valid_topic_name("x" * 249)


def test_source_topic_regex_is_not_supported_by_default():
    error = refused(one(Subtopology("0", source_topic_regex=("events-.*",))))
    assert error.code == ErrorCode.invalid_request
    assert error.message == "Regular expressions for source topics are not supported yet."


def test_source_topic_regex_when_allowed_must_compile():
    assert validate_topology(one(Subtopology("0", source_topic_regex=("events-.*",))),
                             allow_regex=True) is None
    error = refused(one(Subtopology("0", source_topic_regex=("events-(",))), allow_regex=True)
    assert error.code == INVALID
    assert "`events-(`" in error.message


def test_changelog_topic_with_a_partition_count_is_refused():
    error = refused(one(Subtopology("0", source_topics=("in",),
                                    state_changelog_topics=(TopicInfo("app-changelog", 4),))))
    assert error.code == INVALID
    assert error.message == ("Changelog topic app-changelog must have an undefined partition "
                             "count, but it is set to 4.")


# --- what Kafka 4.2 crashes on or cannot serve ------------------------------------------------


def test_negative_topology_epoch_is_refused():
    assert refused(one(Subtopology("0", source_topics=("in",)), epoch=-1)).code == INVALID


def test_subtopology_declared_twice_is_refused():
    topology = Topology(1, (Subtopology("0", source_topics=("a",)),
                            Subtopology("0", source_topics=("b",))))
    assert refused(topology).message == "Subtopology 0 is declared more than once."


@pytest.mark.parametrize("group, what", [
    (CopartitionGroup(source_topics=(0, 2)), "source topic index 2, but the subtopology has 2"),
    (CopartitionGroup(source_topics=(-1,)), "source topic index -1"),
    (CopartitionGroup(source_topic_regex=(0,)), "source topic regex index 0"),
    (CopartitionGroup(repartition_source_topics=(1,)), "repartition source topic index 1"),
])
def test_copartition_group_index_out_of_range_is_refused(group, what):
    topology = Topology(1, (
        Subtopology("0", source_topics=("a", "b"), repartition_source_topics=(TopicInfo("r"),),
                    copartition_groups=(CopartitionGroup(source_topics=(0, 1)), group)),
        Subtopology("1", source_topics=("c",), repartition_sink_topics=("r",)),
    ))
    error = refused(topology)
    assert error.code == INVALID
    assert error.message.startswith("Copartition group 1 of subtopology 0 refers to ")
    assert what in error.message


def test_repartition_topic_declared_twice_with_different_counts_is_refused():
    topology = one(Subtopology("0", source_topics=("a",), repartition_source_topics=(
        TopicInfo("app-r", 3), TopicInfo("app-r", 4))))
    assert refused(topology).message == (
        "Subtopology 0 declares repartition source topic app-r more than once.")


def test_negative_repartition_partition_count_is_refused():
    topology = one(Subtopology("0", repartition_source_topics=(TopicInfo("app-r", -2),)))
    assert "negative partition count (-2)" in refused(topology).message


def test_topic_config_given_twice_is_refused():
    topology = one(Subtopology("0", source_topics=("a",), state_changelog_topics=(
        TopicInfo("app-c", topic_configs=(("retention.ms", "1"), ("retention.ms", "2"))),)))
    assert refused(topology).message == (
        "Topic app-c of subtopology 0 sets config retention.ms more than once.")


def test_repartition_topic_that_is_also_a_source_topic_is_refused():
    topology = Topology(1, (
        Subtopology("0", source_topics=("in", "app-r"),
                    repartition_source_topics=(TopicInfo("app-r"),)),
        Subtopology("1", source_topics=("other",), repartition_sink_topics=("app-r",)),
    ))
    error = refused(topology)
    assert error.code == INVALID
    assert error.message == (
        "Repartition topic app-r of subtopology 0 is also declared as a source topic.")


def test_changelog_that_is_also_a_repartition_topic_is_refused():
    topology = one(Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-x",),
                               state_changelog_topics=(TopicInfo("app-x"),)))
    assert "is also a repartition topic" in refused(topology).message


def test_changelog_that_is_another_subtopologys_source_is_refused():
    topology = Topology(1, (
        Subtopology("0", source_topics=("users",)),
        Subtopology("1", source_topics=("orders",), state_changelog_topics=(TopicInfo("users"),)),
    ))
    assert refused(topology).message == (
        "Changelog topic users of subtopology 1 is a source topic of subtopology 0.")


def test_source_topic_reused_as_its_own_changelog_is_valid():
    assert validate_topology(one(Subtopology(
        "0", source_topics=("users",), state_changelog_topics=(TopicInfo("users"),)))) is None


def test_topic_read_by_two_subtopologies_is_refused():
    topology = Topology(1, (Subtopology("0", source_topics=("in",)),
                            Subtopology("1", source_topics=("in",))))
    assert refused(topology).message == (
        "Topic in is read by subtopologies 0 and 1; a topic can feed one subtopology only.")


def test_kafkas_checks_come_before_coterie_ones():
    topology = Topology(1, (Subtopology("0", source_topics=("in",)),
                            Subtopology("0", source_topics=("in",),
                                        state_changelog_topics=(TopicInfo("c", 1),))))
    assert refused(topology).message.startswith("Changelog topic c must have an undefined")


@PROPS
@given(dag_topologies())
def test_validation_never_raises_and_accepts_generated_topologies(case):
    assert validate_topology(case[0]) is None


# --- the topology a member brings --------------------------------------------------------------


def test_joining_member_must_bring_a_topology():
    error = check_topology_presence(0, None)
    assert error.code == ErrorCode.invalid_request
    assert check_topology_presence(0, wordcount()) is None


@pytest.mark.parametrize("epoch", [1, 7, -1, -2])
def test_only_a_joining_member_brings_a_topology(epoch):
    assert check_topology_presence(epoch, None) is None
    assert check_topology_presence(epoch, wordcount()).code == ErrorCode.invalid_request


def test_first_topology_initializes_the_group():
    assert topology_update(None, wordcount()) is TopologyUpdate.INITIALIZE


def test_same_topology_in_another_subtopology_order_is_unchanged():
    group = wordcount()
    member = Topology(group.epoch, tuple(reversed(group.subtopologies)))
    assert topology_update(group, member) is TopologyUpdate.UNCHANGED


def test_lower_epoch_is_stale():
    group = Topology(3, wordcount().subtopologies)
    assert topology_update(group, Topology(2, ())) is TopologyUpdate.STALE
    status = stale_topology(2, 3)
    assert status.code is StreamsGroupStatus.STALE_TOPOLOGY
    assert "2" in status.detail and "3" in status.detail


@pytest.mark.parametrize("member", [
    Topology(1, wordcount().subtopologies[:1]),  # same epoch, other content
    Topology(2, wordcount().subtopologies),  # newer epoch, same content
    Topology(1, (Subtopology("0", source_topics=("lines",),
                             repartition_sink_topics=("wordcount-counts-repartition",)),
                 Subtopology("1", repartition_source_topics=(
                     TopicInfo("wordcount-counts-repartition"),)))),
])
def test_another_topology_is_not_supported_yet(member):
    error = topology_update(wordcount(), member)
    assert isinstance(error, TopologyError)
    assert error.code == ErrorCode.invalid_request


def test_list_order_inside_a_subtopology_matters_as_in_kafka():
    group = one(Subtopology("0", source_topics=("a", "b")))
    member = one(Subtopology("0", source_topics=("b", "a")))
    assert isinstance(topology_update(group, member), TopologyError)


# --- statuses ------------------------------------------------------------------------------------


def test_status_codes_are_kafkas():
    assert {s.name: s.value for s in StreamsGroupStatus} == {
        "STALE_TOPOLOGY": 0, "MISSING_SOURCE_TOPICS": 1, "INCORRECTLY_PARTITIONED_TOPICS": 2,
        "MISSING_INTERNAL_TOPICS": 3, "SHUTDOWN_APPLICATION": 4, "ASSIGNMENT_DELAYED": 5}


def test_other_statuses():
    assert shutdown_application("m-1").code is StreamsGroupStatus.SHUTDOWN_APPLICATION
    assert "m-1" in shutdown_application("m-1").detail
    assert assignment_delayed().code is StreamsGroupStatus.ASSIGNMENT_DELAYED


def test_topic_list_shows_three_then_sums_up():
    assert topic_list([]) == "<none>"
    assert topic_list(["b", "a"]) == "a, b"
    assert topic_list(["a", "b", "c"]) == "a, b, c"
    assert topic_list(["e", "d", "c", "b", "a"]) == "a, b, c and 2 additional topics"
