"""Strings too long for a group record are refused up front (issue 10, item 5).

Group records store strings with an int16 length. A JoinGroup or ConsumerGroupHeartbeat whose
group id, member id, instance id, rack id, protocol or assignor name, topic name or regex is
longer than 32,767 bytes used to be accepted and then fail at the append, an error the client
retried forever. Now it is refused with a non-retriable error before anything is applied, and
the group is left as it was.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coterie.group.consumer.messages import ConsumerHeartbeatRequest
from coterie.group.limits import MAX_STRING_BYTES, first_too_long, too_long

from .test_mixed_groups import harness

LONG = "x" * (MAX_STRING_BYTES + 1)
MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"  # a 22-character Kafka Uuid string


def test_the_limit_counts_utf8_bytes_not_characters():
    assert not too_long("x" * MAX_STRING_BYTES)
    assert too_long("x" * (MAX_STRING_BYTES + 1))
    assert too_long("é" * (MAX_STRING_BYTES // 2 + 1))  # two bytes each
    assert not too_long("é" * (MAX_STRING_BYTES // 2))
    assert not too_long(None)
    assert first_too_long([("a", "ok"), ("b", LONG), ("c", LONG)]) == (
        f"b is longer than {MAX_STRING_BYTES} bytes.")


@pytest.mark.parametrize(("field", "code"), [
    ("group_id", ErrorCode.invalid_group_id),
    ("instance_id", ErrorCode.invalid_request),
    ("protocol", ErrorCode.invalid_request),
    ("protocol_type", ErrorCode.invalid_request),
])
def test_classic_join_with_a_string_no_record_can_hold_is_refused(field, code):
    h = harness()
    kw = {"group_id": "g"}
    if field == "protocol":
        kw["protocol"] = LONG
    else:
        kw[field] = LONG
    token = h.cjoin(**kw)
    answer = h.answers[token]
    assert answer.error == code
    assert "longer than 32767 bytes" in answer.reason
    assert "g" not in h.coordinator.classic.groups or not h.classic_group().members
    assert not h.records  # nothing was written


def test_classic_join_with_a_long_member_id_is_refused():
    h = harness()
    answer = h.answers[h.cjoin(member_id=LONG)]
    assert answer.error == ErrorCode.invalid_request
    assert answer.reason == f"The member id is longer than {MAX_STRING_BYTES} bytes."


def _heartbeat(**fields) -> ConsumerHeartbeatRequest:
    base = {"group_id": "g", "member_id": MEMBER, "member_epoch": 0,
            "rebalance_timeout_ms": 30_000, "subscribed_topic_names": ("foo",), "owned": ()}
    base.update(fields)
    return ConsumerHeartbeatRequest(**base)


@pytest.mark.parametrize(("fields", "code", "named"), [
    ({"group_id": LONG}, ErrorCode.invalid_group_id, "GroupId"),
    ({"instance_id": LONG}, ErrorCode.invalid_request, "InstanceId"),
    ({"rack_id": LONG}, ErrorCode.invalid_request, "RackId"),
    ({"server_assignor": LONG}, ErrorCode.invalid_request, "ServerAssignor"),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": LONG},
     ErrorCode.invalid_request, "SubscribedTopicRegex"),
    ({"subscribed_topic_names": ("foo", LONG)}, ErrorCode.invalid_request,
     "A subscribed topic name"),
    ({"member_id": LONG, "version": 0}, ErrorCode.invalid_request, "MemberId"),
])
def test_consumer_heartbeat_with_a_string_no_record_can_hold_is_refused(fields, code, named):
    h = harness()
    response = h.request(_heartbeat(**fields))
    assert response.error == code
    assert response.error_message == f"{named} is longer than {MAX_STRING_BYTES} bytes."
    assert not h.coordinator.consumer.groups
    assert not h.records


def test_strings_at_the_limit_are_accepted():
    h = harness()
    response = h.request(_heartbeat(rack_id="r" * MAX_STRING_BYTES))
    assert response.error == ErrorCode.none
