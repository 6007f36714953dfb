"""The pure halves of a consumer's client-side assignor (coterie.client.consumer_client_assignor):
a PrepareAssignment answer becomes the assignor's AssignmentSpec (topic ids to names, current
targets as owned partitions), the assignor's answer becomes the install's members (names back to
ids), and the Consumer refuses settings that do not fit together."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from coterie.assign.range import RangeAssignor
from coterie.assign.spec import GroupAssignment, MemberAssignment
from coterie.client import Consumer
from coterie.client.consumer_client_assignor import (
    UnmappableAssignment,
    install_members,
    prepared_group,
    server_assignor_name,
)
from coterie.wire.build import build
from coterie.wire.extensions import ConsumerGroupPrepareAssignmentResponse

FOO, BAR, GONE = (uuid.UUID(int=n) for n in (1, 2, 3))


def answer() -> object:
    return build(ConsumerGroupPrepareAssignmentResponse, {
        "error_code": ErrorCode.none, "group_epoch": 7, "assignor_name": "range",
        "members": [
            {"member_id": "a", "member_epoch": 6, "instance_id": "i-a", "rack_id": "r1",
             "subscribed_topic_ids": [FOO, BAR],
             "topic_partitions": [{"topic_id": FOO, "partitions": [0, 1]},
                                  {"topic_id": GONE, "partitions": [0]}]},
            {"member_id": "b", "member_epoch": 5, "subscribed_topic_ids": [FOO, GONE],
             "topic_partitions": []}],
        "topics": [{"topic_id": FOO, "topic_name": "foo", "num_partitions": 3},
                   {"topic_id": BAR, "topic_name": "bar", "num_partitions": 1}]})


def test_the_prepare_answer_becomes_the_assignors_spec():
    group = prepared_group(answer())
    assert group.group_epoch == 7 and group.assignor_name == "range"
    assert {n: t.partitions for n, t in group.spec.topics.items()} == {"foo": 3, "bar": 1}
    a, b = group.spec.members["a"], group.spec.members["b"]
    assert a.subscribed_topics == {"foo", "bar"} and b.subscribed_topics == {"foo"}
    assert a.owned == {("foo", 0), ("foo", 1)}  # a topic id it does not list is dropped
    assert (a.instance_id, a.rack, a.generation) == ("i-a", "r1", 6)
    assert group.topic_ids == {"foo": FOO, "bar": BAR}


def test_the_assignors_answer_maps_back_to_topic_ids():
    group = prepared_group(answer())
    members = install_members(RangeAssignor().assign(group.spec), group.topic_ids)
    assert members == [
        {"member_id": "a", "partitions": [{"topic_id": FOO, "partitions": [0, 1]},
                                          {"topic_id": BAR, "partitions": [0]}]},
        {"member_id": "b", "partitions": [{"topic_id": FOO, "partitions": [2]}]}]


def test_a_topic_nobody_subscribes_to_cannot_be_installed():
    bad = GroupAssignment({"a": MemberAssignment(frozenset({("elsewhere", 0)}))})
    with pytest.raises(UnmappableAssignment, match="elsewhere-0"):
        install_members(bad, {"foo": FOO})


def test_the_server_assignor_field_names_the_client_assignor():
    assert server_assignor_name(RangeAssignor()) == "client:range"


@pytest.mark.parametrize("options, problem", [
    ({"group_protocol": "classic", "group_client_assignor": "range"}, "needs group_protocol"),
    ({"group_protocol": "consumer", "group_client_assignor": "range",
      "group_remote_assignor": "uniform"}, "exclude each other"),
    ({"group_protocol": "consumer", "group_client_assignor": object()}, "must be an Assignor"),
])
def test_the_consumer_refuses_settings_that_do_not_fit(options, problem):
    with pytest.raises(ValueError, match=problem):
        Consumer("127.0.0.1:1", "g", topics=["foo"], **options)


def test_the_consumer_asks_for_the_client_assignor_by_name():
    c = Consumer("127.0.0.1:1", "g", topics=["foo"], group_protocol="consumer",
                 group_client_assignor="range")
    assert c.member.server_assignor == "client:range"
    assert c.member.assigner is not None and c.member.assigner.assignor.name == "range"
