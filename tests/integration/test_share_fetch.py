"""ShareFetch and ShareAcknowledge (KIP-932) against a real broker, over TCP, request by
request: acquisition, acknowledgement, redelivery with a higher delivery count, lock expiry,
share-session epochs, bad acknowledgements that change nobody's records, and a kill -9 in
the middle (nothing accepted comes back, nothing unaccepted is lost)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from coterie.wire.build import build
from coterie.wire.codec import request_schema
from tests.kafka_raw import RawConnection

ACCEPT, RELEASE, REJECT = 1, 2, 3
LOCK_MS = 1500
SHARE_CONFIG = {"group.share.record.lock.duration.ms": str(LOCK_MS),
                "group.share.min.record.lock.duration.ms": "1000"}


def _topic(broker, name: str) -> uuid.UUID:
    """Create a one-partition topic; its id."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    tid = admin.describe_topics(TopicCollection([name]))[name].result(15).topic_id
    high = tid.get_most_significant_bits() & (1 << 64) - 1
    low = tid.get_least_significant_bits() & (1 << 64) - 1
    return uuid.UUID(int=high << 64 | low)


def _produce(broker, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=0)
        p.flush(10)  # a batch each: acquisitions then split on batch bounds too
    assert p.flush(10) == 0


class Member:
    """One share consumer speaking raw ShareFetch / ShareAcknowledge."""

    def __init__(self, broker, group: str, topic_id: uuid.UUID, version: int = 1,
                 topic: str | None = None) -> None:
        """A member of `group`: joined subscribing to `topic` (a ShareGroupHeartbeat), unless
        `topic` is None."""
        self.conn = RawConnection(broker.host, broker.port)
        self.group, self.topic_id, self.version = group, topic_id, version
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        if topic is not None:
            joined = self.conn.request(build(request_schema(76, 1), {
                "group_id": group, "member_id": self.member_id, "member_epoch": 0,
                "rack_id": None, "subscribed_topic_names": [topic]}))
            assert joined.error_code == ErrorCode.none, joined.error_message

    def close(self) -> None:
        self.conn.close()

    def fetch(self, acks: list[tuple[int, int, list[int]]] | None = None, *,
              max_wait_ms: int = 0, max_records: int = 500, epoch: int | None = None,
              partitions: bool = True) -> object:
        batches = [{"first_offset": f, "last_offset": last, "acknowledge_types": t}
                   for f, last, t in acks or ()]
        topics = [{"topic_id": self.topic_id,
                   "partitions": [{"partition_index": 0,
                                   "acknowledgement_batches": batches}]}] if partitions else []
        request = build(request_schema(78, self.version), {
            "group_id": self.group, "member_id": self.member_id,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "max_records": max_records, "batch_size": 500, "topics": topics,
            "forgotten_topics_data": []})
        answer = self.conn.request(request)
        if epoch is None and answer.error_code == ErrorCode.none:
            self.epoch = -1 if self.epoch == -1 else self.epoch + 1
        return answer

    def acknowledge(self, acks: list[tuple[int, int, list[int]]], epoch: int | None = None
                    ) -> object:
        request = build(request_schema(79, self.version), {
            "group_id": self.group, "member_id": self.member_id,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "topics": [{"topic_id": self.topic_id, "partitions": [{
                "partition_index": 0,
                "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": t}
                    for f, last, t in acks]}]}]})
        answer = self.conn.request(request)
        if epoch is None and answer.error_code == ErrorCode.none:
            self.epoch += 1
        return answer


def _partition(answer) -> object:
    assert answer.error_code == ErrorCode.none, answer.error_message
    (topic,) = answer.responses
    (part,) = topic.partitions
    return part


def _acquired(answer) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) of what a ShareFetch acquired; [] when nothing."""
    if not answer.responses:
        return []
    part = _partition(answer)
    assert part.error_code == ErrorCode.none, part.error_message
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in part.acquired_records]


def _offsets(ranges: list[tuple[int, int, int]]) -> list[int]:
    return [o for f, last, _ in ranges for o in range(f, last + 1)]


@pytest.fixture
def share_broker(coterie_factory):
    return coterie_factory(config=SHARE_CONFIG)


def test_acquire_acknowledge_release_and_redeliver_with_a_higher_count(share_broker):
    broker = share_broker
    topic_id = _topic(broker, "queue")
    a, b = (Member(broker, "g", topic_id, topic="queue") for _ in range(2))
    try:
        # The share partition starts at the log end (share.auto.offset.reset=latest).
        assert _acquired(a.fetch()) == []
        _produce(broker, "queue", [f"r{i}".encode() for i in range(10)])
        first = a.fetch(max_wait_ms=2000)
        assert _offsets(_acquired(first)) == list(range(10))
        assert all(count == 1 for _, _, count in _acquired(first))
        assert first.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
        assert _partition(first).records  # the batches holding them, as stored
        assert _acquired(b.fetch()) == []  # all held by a
        # a accepts 0-4 and releases 5-9 (acknowledgements on its next ShareFetch).
        again = a.fetch([(0, 4, [ACCEPT]), (5, 9, [RELEASE])], max_records=0)
        assert _partition(again).acknowledge_error_code == ErrorCode.none
        redelivered = _acquired(b.fetch(max_wait_ms=2000))
        assert _offsets(redelivered) == list(range(5, 10))
        assert {count for _, _, count in redelivered} == {2}
        # b accepts them by ShareAcknowledge: nothing is left to hand out.
        done = b.acknowledge([(5, 9, [ACCEPT])])
        assert done.responses[0].partitions[0].error_code == ErrorCode.none
        assert _acquired(a.fetch(max_wait_ms=300)) == []
    finally:
        a.close()
        b.close()


def test_a_bad_acknowledgement_changes_no_ones_records(share_broker):
    broker = share_broker
    topic_id = _topic(broker, "strict")
    a, b = (Member(broker, "g", topic_id, topic="strict") for _ in range(2))
    try:
        a.fetch()
        _produce(broker, "strict", [b"x", b"y", b"z"])
        assert _offsets(_acquired(a.fetch(max_wait_ms=2000))) == [0, 1, 2]
        b.fetch()  # opens b's session
        # b acknowledges a's records: INVALID_RECORD_STATE, and a still holds them.
        answer = b.acknowledge([(0, 2, [ACCEPT])])
        assert answer.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        # A malformed batch (an unknown type) is INVALID_REQUEST and changes nothing either.
        answer = a.acknowledge([(0, 2, [9])])
        assert answer.responses[0].partitions[0].error_code == ErrorCode.invalid_request
        ok = a.acknowledge([(0, 1, [ACCEPT]), (2, 2, [REJECT])])
        assert ok.responses[0].partitions[0].error_code == ErrorCode.none
        assert _acquired(b.fetch(max_wait_ms=300)) == []  # accepted and rejected: gone
    finally:
        a.close()
        b.close()


def test_session_epochs(share_broker):
    broker = share_broker
    topic_id = _topic(broker, "epochs")
    a = Member(broker, "g", topic_id, topic="epochs")
    try:
        assert a.fetch(epoch=3).error_code == ErrorCode.share_session_not_found
        assert a.fetch([(0, 0, [ACCEPT])], epoch=0).error_code == ErrorCode.invalid_request
        assert a.fetch().error_code == ErrorCode.none  # epoch 0 opens
        assert a.fetch(epoch=7).error_code == ErrorCode.invalid_share_session_epoch
        assert a.acknowledge([], epoch=0).error_code == ErrorCode.invalid_share_session_epoch
        assert a.fetch(partitions=False).error_code == ErrorCode.none  # epoch 1
        assert a.fetch(epoch=-1, partitions=False).error_code == ErrorCode.none  # closes
        assert a.fetch(epoch=2, partitions=False).error_code == \
            ErrorCode.share_session_not_found
    finally:
        a.close()


def test_unacknowledged_records_come_back_after_the_lock_and_after_a_disconnect(share_broker):
    broker = share_broker
    topic_id = _topic(broker, "locks")
    a, b = (Member(broker, "g", topic_id, topic="locks") for _ in range(2))
    try:
        a.fetch()
        _produce(broker, "locks", [b"1", b"2"])
        assert _offsets(_acquired(a.fetch(max_wait_ms=2000))) == [0, 1]
        assert _acquired(b.fetch()) == []
        # The lock lapses: a long-polling b is woken and gets them, delivered twice now.
        started = time.monotonic()
        got = _acquired(b.fetch(max_wait_ms=LOCK_MS * 4))
        assert _offsets(got) == [0, 1] and {c for _, _, c in got} == {2}
        assert time.monotonic() - started < LOCK_MS * 3 / 1000
        # b's connection drops with them acquired: released at once, not after the lock.
        b.close()
        c = Member(broker, "g", topic_id, topic="locks")
        again = _acquired(c.fetch(max_wait_ms=LOCK_MS // 2))
        assert _offsets(again) == [0, 1] and {n for _, _, n in again} == {3}
        c.close()
    finally:
        a.close()
        b.close()


def test_after_a_kill_nothing_accepted_returns_and_nothing_unaccepted_is_lost(coterie_factory):
    broker = coterie_factory(config=SHARE_CONFIG)
    topic_id = _topic(broker, "durable")
    a = Member(broker, "g", topic_id, topic="durable")
    a.fetch()
    _produce(broker, "durable", [f"v{i}".encode() for i in range(6)])
    assert _offsets(_acquired(a.fetch(max_wait_ms=2000))) == list(range(6))
    assert a.acknowledge([(0, 2, [ACCEPT])]).responses[0].partitions[0].error_code == \
        ErrorCode.none
    a.close()
    broker.restart_after_kill9()
    b = Member(broker, "g", topic_id, topic="durable")
    try:
        b.fetch()
        got = _acquired(b.fetch(max_wait_ms=3000))
        # 0-2 were accepted before the kill; 3-5 were held, never acknowledged: available
        # again (an acquisition is not written, as in Kafka, so their count starts over).
        assert _offsets(got) == [3, 4, 5]
    finally:
        b.close()


def test_the_groups_share_auto_offset_reset_decides_where_a_share_partition_starts(
        share_broker):
    broker = share_broker
    topic_id = _topic(broker, "history")
    _produce(broker, "history", [b"old0", b"old1", b"old2"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for group, value in (("from-start", "earliest"), ("recent", "by_duration:PT1H")):
        (future,) = admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", value,
                incremental_operation=AlterConfigOpType.SET)])]).values()
        future.result(10)
    (bad,) = admin.incremental_alter_configs([ConfigResource(
        ResourceType.GROUP, "bad", incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "by_duration:yesterday",
            incremental_operation=AlterConfigOpType.SET)])]).values()
    with pytest.raises(KafkaException, match=r"share\.auto\.offset\.reset"):
        bad.result(10)
    members = [Member(broker, g, topic_id, topic="history")
               for g in ("from-start", "recent", "latest")]
    try:
        got = [_offsets(_acquired(m.fetch(max_wait_ms=500))) for m in members]
        # earliest and the last hour start at the log start; latest at its end.
        assert got == [[0, 1, 2], [0, 1, 2], []]
    finally:
        for m in members:
            m.close()


def test_share_offsets_change_only_in_an_empty_share_group(share_broker):
    """Alter- and DeleteShareGroupOffsets refuse a group with members (NON_EMPTY_GROUP) and
    an id no share group has (GROUP_ID_NOT_FOUND); DescribeShareGroupOffsets of a member's
    group shows where its share partition starts."""
    broker = share_broker
    topic_id = _topic(broker, "busy")
    with RawConnection(broker.host, broker.port) as conn:
        member = str(uuid.uuid4())
        joined = conn.request(build(request_schema(76, 1), {
            "group_id": "busy-group", "member_id": member, "member_epoch": 0,
            "rack_id": None, "subscribed_topic_names": ["busy"]}))
        assert joined.error_code == ErrorCode.none
        a = Member(broker, "busy-group", topic_id)
        a.member_id = member
        a.fetch()  # sets the share partition up at the log end (0)
        a.close()
        alter = {"group_id": "busy-group", "topics": [
            {"topic_name": "busy", "partitions": [{"partition_index": 0, "start_offset": 0}]}]}
        refused = conn.request(build(request_schema(91, 0), alter))
        assert refused.error_code == ErrorCode.non_empty_group
        refused = conn.request(build(request_schema(92, 0), {
            "group_id": "busy-group", "topics": [{"topic_name": "busy"}]}))
        assert refused.error_code == ErrorCode.non_empty_group
        unknown = conn.request(build(request_schema(91, 0), {**alter, "group_id": "nobody"}))
        assert unknown.error_code == ErrorCode.group_id_not_found
        (described,) = conn.request(build(request_schema(90, 1), {"groups": [
            {"group_id": "busy-group", "topics": None}]})).groups
        assert described.error_code == ErrorCode.none
        (topic,) = described.topics
        assert (topic.topic_name, topic.topic_id) == ("busy", topic_id)
        assert [(p.partition_index, p.start_offset, p.lag) for p in topic.partitions] == \
            [(0, 0, 0)]


def test_a_share_fetch_outside_the_groups_subscription_is_refused(share_broker):
    """As Kafka 4.2.1 answers (seen against its broker): a partition the group never set up,
    its topic not subscribed, or no such share group, is UNKNOWN_SERVER_ERROR; coterie says
    why in the message. The group's subscribed topic is served in the same request."""
    broker = share_broker
    mine = _topic(broker, "mine")
    theirs = _topic(broker, "theirs")
    a = Member(broker, "subscribed", mine, topic="mine")
    stranger = Member(broker, "no-such-group", mine)
    try:
        a.topic_id = theirs
        (part,) = a.fetch().responses[0].partitions
        assert part.error_code == ErrorCode.unknown_server_error
        assert part.error_message == "share group subscribed is not subscribed to theirs"
        a.topic_id = mine  # the same session: the subscribed topic is served
        assert a.fetch().error_code == ErrorCode.none
        (part,) = stranger.fetch().responses[0].partitions
        assert part.error_code == ErrorCode.unknown_server_error
        assert part.error_message == "there is no share group no-such-group"
    finally:
        a.close()
        stranger.close()
