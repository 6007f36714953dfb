"""Internal topics cannot be deleted or re-partitioned by clients (issue 10).

Apache Kafka 4.2.1 accepts DeleteTopics and CreatePartitions of `__consumer_offsets` (checked
against the reference broker: both answer NONE, and every commit then fails with
NOT_COORDINATOR). coterie refuses both with INVALID_TOPIC_EXCEPTION, the code Kafka's broker
uses to refuse appends and record deletions on internal topics, and the group state stays
whole: commits keep working and survive a kill -9.
"""

from __future__ import annotations

import datetime
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.delete_topics.v3.request import DeleteTopicsRequest as DeleteTopicsV3
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from coterie.log.names import INTERNAL_TOPICS
from tests.integration.test_data_plane_raw import create
from tests.integration.test_offsets_durability import commit, fetch, wait_loaded
from tests.kafka_raw import RawConnection

OFFSETS = "__consumer_offsets"
EVENTS = "__group_events"
TIMEOUT = datetime.timedelta(seconds=5)
ZERO = uuid.UUID(int=0)


def metadata(conn: RawConnection, names: list[str] | None, auto: bool = False) -> dict:
    topics = None if names is None else tuple(
        MetadataRequestTopic(name=n, topic_id=ZERO) for n in names)
    md = conn.request(MetadataRequest(topics=topics, allow_auto_topic_creation=auto,
                                      include_topic_authorized_operations=False))
    return {t.name: t for t in md.topics}


def delete_by_name(conn: RawConnection, name: str):
    return conn.request(DeleteTopicsRequest(
        topics=(DeleteTopicState(name=name, topic_id=ZERO),), timeout=TIMEOUT)).responses[0]


def grow(conn: RawConnection, name: str, count: int, validate_only: bool = False):
    return conn.request(CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=name, count=count, assignments=None),),
        timeout=TIMEOUT, validate_only=validate_only)).results[0]


@pytest.fixture
def conn(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        yield c


def test_the_broker_topics_are_the_internal_ones():
    from coterie.broker.group_events import EVENTS_TOPIC
    from coterie.broker.groups import OFFSETS_TOPIC

    assert {OFFSETS_TOPIC, EVENTS_TOPIC} <= INTERNAL_TOPICS


@pytest.mark.parametrize("name", [OFFSETS, EVENTS])
def test_delete_internal_topic_is_refused(conn, name):
    before = metadata(conn, [name])[name]
    refused = delete_by_name(conn, name)
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.invalid_topic_exception, f"Cannot delete internal topic {name}")
    by_id = conn.request(DeleteTopicsRequest(
        topics=(DeleteTopicState(name=None, topic_id=before.topic_id),),
        timeout=TIMEOUT)).responses[0]
    assert (by_id.name, by_id.error_code) == (name, ErrorCode.invalid_topic_exception)
    old = conn.request(DeleteTopicsV3(topic_names=(name,), timeout=TIMEOUT)).responses[0]
    assert old.error_code == ErrorCode.invalid_topic_exception
    after = metadata(conn, [name])[name]
    assert after.error_code == ErrorCode.none
    assert after.topic_id == before.topic_id
    assert len(after.partitions) == len(before.partitions)


@pytest.mark.parametrize("name", [OFFSETS, EVENTS])
def test_create_partitions_of_internal_topic_is_refused(conn, name):
    count = len(metadata(conn, [name])[name].partitions)
    for validate_only in (True, False):
        refused = grow(conn, name, count + 10, validate_only)
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.invalid_topic_exception, f"Cannot add partitions to internal topic {name}")
    assert len(metadata(conn, [name])[name].partitions) == count


def test_admin_client_sees_the_refusals(coterie):
    admin = AdminClient({"bootstrap.servers": coterie.bootstrap})
    for future in admin.delete_topics([OFFSETS, EVENTS], operation_timeout=5).values():
        with pytest.raises(KafkaException) as caught:
            future.result(timeout=15)
        # (librdkafka asks for a DeleteTopics version without messages; the raw tests above
        # check the message.)
        assert caught.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    grown = admin.create_partitions([NewPartitions(OFFSETS, 60)], operation_timeout=5)
    with pytest.raises(KafkaException) as caught:
        grown[OFFSETS].result(timeout=15)
    assert caught.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert len(admin.list_topics(timeout=10).topics[OFFSETS].partitions) == 50


def test_commits_work_and_survive_a_restart_after_the_refusals(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        create(c, "orders", 3)
        wait_loaded(c, "g1", "orders")
        assert commit(c, "g1", "orders", {0: 5, 1: 6, 2: 7}) == [ErrorCode.none] * 3
        for name in (OFFSETS, EVENTS):
            assert delete_by_name(c, name).error_code == ErrorCode.invalid_topic_exception
            assert grow(c, name, 60).error_code == ErrorCode.invalid_topic_exception
        assert commit(c, "g1", "orders", {1: 16}) == [ErrorCode.none]
        assert fetch(c, "g1", "orders", [0, 1, 2]) == {0: 5, 1: 16, 2: 7}
    coterie.restart_after_kill9()
    with RawConnection(coterie.host, coterie.port) as c:
        wait_loaded(c, "g1", "orders")
        assert fetch(c, "g1", "orders", [0, 1, 2]) == {0: 5, 1: 16, 2: 7}
        assert commit(c, "g1", "orders", {2: 27}) == [ErrorCode.none]
        assert len(metadata(c, [OFFSETS])[OFFSETS].partitions) == 50
    assert "Traceback" not in coterie.log_text()


def test_metadata_marks_exactly_the_internal_topics(conn):
    assert create(conn, "__mine", 1).error_code == ErrorCode.none
    assert create(conn, "plain", 1).error_code == ErrorCode.none
    flags = {name: t.is_internal for name, t in metadata(conn, None).items()}
    # A "__" name alone does not make a topic internal, as in Kafka.
    assert flags == {OFFSETS: True, EVENTS: True, "__transaction_state": True,
                     "__mine": False, "plain": False}
    # ... and such a topic may be deleted like any other.
    assert delete_by_name(conn, "__mine").error_code == ErrorCode.none


def test_missing_internal_topic_is_not_auto_created(conn):
    answer = metadata(conn, ["__share_group_state", "auto-made"], auto=True)
    missing = answer["__share_group_state"]
    assert (missing.error_code, missing.is_internal) == (
        ErrorCode.unknown_topic_or_partition, True)
    assert answer["auto-made"].error_code == ErrorCode.none  # ordinary names still are
    assert "__share_group_state" not in metadata(conn, None)


def test_create_topics_of_an_existing_internal_topic(conn):
    again = create(conn, OFFSETS, 5)
    assert (again.error_code, again.error_message) == (
        ErrorCode.topic_already_exists, f"Topic '{OFFSETS}' already exists.")
