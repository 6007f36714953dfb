"""Regex subscriptions are resolved asynchronously, as in Apache Kafka 4.2.

A heartbeat that brings a regex new to the group answers without it: the member's literal
topics are assigned at once, and the group asks for a resolution through a timer due at once
(a CONSUMER_REGEX timer of the group, fired by the broker on a later turn of its loop). The firing
resolves the group's regexes against the topics the coordinator knows, writes their records
and bumps the group epoch, so the matched topics come in a later epoch. Resolved regexes are
refreshed on a heartbeat, never more often than every 10 s, and only when one is unresolved,
topics were created since the last resolution, or group.consumer.regex.refresh.interval.ms
has passed. Topic changes pushed by the broker do not resolve anything."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from coterie.broker.config import BrokerConfig, ConfigError
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.kinds import ConsumerTimer
from coterie.group.consumer.messages import (
    ConsumerHeartbeatRequest,
    Requester,
    SettledHeartbeat,
)
from coterie.group.records.consumer import (
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
)
from coterie.group.timers import TimerKey

from .consumer_harness import ConsumerHarness, change_topics, delete_group, mid
from .mixed_harness import MixedHarness

A, B = mid("A"), mid("B")
SETTLED = SettledHeartbeat("g", A, 2, "client", "/127.0.0.1")  # A settled at epoch 2
REGEX_TIMER = TimerKey(ConsumerTimer.CONSUMER_REGEX, "g")
TOPICS = {"orders": 2, "prefix-a": 1, "prefix-b": 1, "other": 1}


def regex_records(records: list) -> list:
    return [r for r in records if isinstance(r.key, ConsumerGroupRegularExpressionKey)]


def epoch_records(records: list) -> list:
    return [r for r in records if isinstance(r.key, ConsumerGroupMetadataKey)]


def joined_and_resolved(h: ConsumerHarness) -> None:
    """A joins with a literal topic and a regex; the resolution runs at once."""
    h.join(A, topics=["orders"], regex="prefix.*")
    h.advance(0)
    r = h.heartbeat(A, 1)
    assert r.member_epoch == 2


# -- a new regex: the literal topic first, the matched topics in a later epoch --------------------

def test_literal_topic_is_assigned_first_and_the_regex_topics_in_a_later_epoch():
    h = ConsumerHarness(TOPICS)
    before = len(h.records)
    r = h.join(A, topics=["orders"], regex="prefix.*")
    g = h.group()
    # The join's answer: the literal topic only, at the group's first epoch.
    assert r.error == ErrorCode.none and r.member_epoch == 1
    assert h.assigned(r) == {"orders-0", "orders-1"}
    assert (g.group_epoch, g.assignment_epoch) == (1, 1)
    assert regex_records(h.records[before:]) == []
    assert "prefix.*" not in g.resolved_regexes
    # The resolution is asked for, due at once.
    assert h.timers[REGEX_TIMER] == h.now
    # The timer fires (the broker's next loop turn): resolution recorded, epoch bumped.
    before = len(h.records)
    assert h.advance(0) == [REGEX_TIMER]
    written = h.records[before:]
    assert [type(rec.key) for rec in written] == [ConsumerGroupRegularExpressionKey,
                                                 ConsumerGroupMetadataKey]
    assert written[0].value.topics == ("prefix-a", "prefix-b")
    assert written[0].value.timestamp_ms == h.now
    assert g.resolved_regexes["prefix.*"].topics == {"prefix-a", "prefix-b"}
    assert (g.group_epoch, g.assignment_epoch) == (2, 1)
    # The next heartbeat brings the matched topics, at epoch 2.
    r = h.heartbeat(A, 1)
    assert r.member_epoch == 2
    assert h.assigned(r) == {"orders-0", "orders-1", "prefix-a-0", "prefix-b-0"}
    assert REGEX_TIMER not in h.timers


def test_a_new_group_with_only_a_regex_starts_at_epoch_1_with_nothing():
    """Kafka 4.2 bumps a new group (epoch 0) whatever the subscription: the member gets
    epoch 1 and no partitions; the regex's topics come at epoch 2."""
    h = ConsumerHarness(TOPICS)
    r = h.join(A, topics=None, regex="prefix.*")
    assert r.member_epoch == 1 and h.assigned(r) == set()
    h.advance(0)
    r = h.heartbeat(A, 1)
    assert r.member_epoch == 2 and h.assigned(r) == {"prefix-a-0", "prefix-b-0"}


def test_a_member_bringing_a_new_regex_joins_without_a_new_epoch():
    """Kafka's testConsumerGroupMemberJoinsWithNewRegex: the member joins at the current
    epoch with nothing; the resolution bumps the epoch."""
    h = ConsumerHarness(TOPICS)
    h.join(A, topics=["orders"])
    before = len(h.records)
    r = h.join(B, topics=None, regex="prefix.*")
    assert r.member_epoch == 1 and h.assigned(r) == set()
    assert epoch_records(h.records[before:]) == []
    assert h.group().group_epoch == 1
    h.advance(0)
    assert h.group().group_epoch == 2
    h.heartbeat(A, 1)
    r = h.heartbeat(B, 1)
    assert r.member_epoch == 2 and h.assigned(r) == {"prefix-a-0", "prefix-b-0"}


def test_a_regex_already_resolved_is_used_at_once():
    h = ConsumerHarness(TOPICS)
    h.join(A, topics=None, regex="prefix.*")
    h.advance(0)
    h.heartbeat(A, 1)
    before = len(h.records)
    r = h.join(B, topics=None, regex="prefix.*")
    assert REGEX_TIMER not in h.timers
    assert regex_records(h.records[before:]) == []
    assert h.group().group_epoch == 3  # REGEX_UPDATED_AND_RESOLVED: a new epoch at once
    assert r.member_epoch == 3


def test_resolution_skips_a_regex_nobody_uses_any_more():
    """Kafka's testConsumerGroupMemberJoinsWithRegexAndUpdatesItBeforeResolutionCompleted:
    the pending resolution was for the old regex; it writes nothing, and the next heartbeat
    asks for the new one."""
    h = ConsumerHarness(TOPICS)
    h.join(A, topics=None, regex="prefix.*")
    h.heartbeat(A, 1, regex="orders|prefix-a")
    before = len(h.records)
    h.advance(0)
    assert h.records[before:] == []
    assert h.group().resolved_regexes == {}
    h.heartbeat(A, 1)
    assert REGEX_TIMER in h.timers
    h.advance(0)
    assert h.group().resolved_regexes["orders|prefix-a"].topics == {"orders", "prefix-a"}


def test_resolution_of_a_group_that_is_gone_does_nothing():
    h = ConsumerHarness(TOPICS)
    h.join(A, topics=None, regex="prefix.*")
    h.leave(A)
    delete_group(h.coordinator, "g")
    assert h.coordinator.on_timer(REGEX_TIMER, h.now).records == []


# -- refreshes ------------------------------------------------------------------------------------

def test_topic_changes_do_not_resolve_regexes():
    h = ConsumerHarness(TOPICS)
    joined_and_resolved(h)
    g = h.group()
    result = h.set_topics({**TOPICS, "prefix-c": 2})
    assert result.records == [] and REGEX_TIMER not in h.timers
    assert g.resolved_regexes["prefix.*"].topics == {"prefix-a", "prefix-b"}
    assert g.group_epoch == 2


def test_a_new_matching_topic_is_picked_up_by_the_first_heartbeat_after_10_s():
    h = ConsumerHarness(TOPICS)
    joined_and_resolved(h)
    g = h.group()
    resolved_at = g.resolved_regexes["prefix.*"].timestamp_ms
    h.set_topics({**TOPICS, "prefix-c": 2})
    # Heartbeats within 10 s of the last resolution do not refresh.
    h.advance(5_000)
    h.heartbeat(A, 2)
    h.advance(5_000)
    assert h.now == resolved_at + 10_000
    h.heartbeat(A, 2)
    assert REGEX_TIMER not in h.timers
    h.advance(1)
    r = h.heartbeat(A, 2)
    assert r.member_epoch == 2 and h.timers[REGEX_TIMER] == h.now
    before = len(h.records)
    h.advance(0)
    assert [type(rec.key) for rec in h.records[before:]] == [
        ConsumerGroupRegularExpressionKey, ConsumerGroupMetadataKey]
    assert g.resolved_regexes["prefix.*"].topics == {"prefix-a", "prefix-b", "prefix-c"}
    r = h.heartbeat(A, 2)
    assert r.member_epoch == 3
    assert h.assigned(r) == {"orders-0", "orders-1", "prefix-a-0", "prefix-b-0",
                             "prefix-c-0", "prefix-c-1"}


def test_nothing_new_refreshes_at_the_interval_and_not_before():
    h = ConsumerHarness(TOPICS, ConsumerGroupConfig(regex_refresh_interval_ms=60_000))
    joined_and_resolved(h)
    g = h.group()
    resolved_at = g.resolved_regexes["prefix.*"].timestamp_ms
    while h.now < resolved_at + 60_000:
        h.advance(5_000)
        h.heartbeat(A, 2)
        assert REGEX_TIMER not in h.timers, h.now
    h.advance(1)
    h.heartbeat(A, 2)
    assert h.timers[REGEX_TIMER] == h.now
    before = len(h.records)
    h.advance(0)
    # Same topics: the resolution is written again (new timestamp), the epoch stays.
    assert [type(rec.key) for rec in h.records[before:]] == [ConsumerGroupRegularExpressionKey]
    assert g.resolved_regexes["prefix.*"].timestamp_ms == h.now
    assert g.group_epoch == 2


def test_the_interval_refresh_picks_up_a_topic_that_appeared_unnoticed():
    """A topic that matches without having been created since the last resolution (here:
    one the coordinator is told about under the resolution's own image version) waits for
    the interval."""
    h = ConsumerHarness(TOPICS, ConsumerGroupConfig(regex_refresh_interval_ms=30_000))
    joined_and_resolved(h)
    g = h.group()
    version = g.resolved_regexes["prefix.*"].version
    topics = {name: (h.topic_ids[name], n) for name, n in TOPICS.items()}
    topics["prefix-z"] = (uuid.UUID(int=12345), 1)
    h.apply(change_topics(h.coordinator, topics, h.now, version=version))
    for _ in range(5):
        h.advance(5_000)
        h.heartbeat(A, 2)
        assert REGEX_TIMER not in h.timers
    h.advance(5_001)
    h.heartbeat(A, 2)
    h.advance(0)
    assert "prefix-z" in g.resolved_regexes["prefix.*"].topics
    assert g.group_epoch == 3


def test_a_deleted_matching_topic_bumps_the_epoch_at_once_and_leaves_at_the_next_refresh():
    h = ConsumerHarness(TOPICS)
    joined_and_resolved(h)
    g = h.group()
    remaining = {k: v for k, v in TOPICS.items() if k != "prefix-b"}
    result = h.set_topics(remaining)
    assert [type(rec.key) for rec in result.records] == [ConsumerGroupMetadataKey]
    assert g.group_epoch == 3
    # The resolution still names it until the next refresh.
    assert g.resolved_regexes["prefix.*"].topics == {"prefix-a", "prefix-b"}
    r = h.heartbeat(A, 2)
    assert h.assigned(r) == {"orders-0", "orders-1", "prefix-a-0"}


def test_a_second_new_regex_within_10_s_waits_for_a_later_heartbeat():
    h = ConsumerHarness(TOPICS)
    joined_and_resolved(h)
    h.advance(3_000)
    r = h.join(B, topics=None, regex="oth.*")
    assert r.member_epoch == 2 and h.assigned(r) == set()
    assert REGEX_TIMER not in h.timers
    h.advance(7_001)
    h.heartbeat(B, 2)
    h.advance(0)
    g = h.group()
    assert g.resolved_regexes["oth.*"].topics == {"other"}
    # Every regex of the group is resolved together.
    assert g.resolved_regexes["prefix.*"].timestamp_ms == h.now


def test_after_a_restart_topics_created_meanwhile_are_picked_up():
    """Image versions restart with the process; the coordinator keeps them above the
    versions its loaded resolutions name, so the first picture after loading counts as new
    topics and a heartbeat refreshes the regexes."""
    h = ConsumerHarness(TOPICS, ConsumerGroupConfig(regex_refresh_interval_ms=10_000))
    joined_and_resolved(h)
    for _ in range(5):  # topic changes that create nothing: the image version grows
        h.set_topics(TOPICS)
    h.advance(20_000)
    h.heartbeat(A, 2)  # the interval has passed: a refresh at the current version
    h.advance(0)
    assert h.group().resolved_regexes["prefix.*"].version == 6
    restarted = ConsumerHarness(records=list(h.records), now_ms=h.now)
    restarted.topic_ids = dict(h.topic_ids)
    restarted.set_topics({**TOPICS, "prefix-c": 1})
    restarted.advance(11_000)
    restarted.heartbeat(A, 2)
    assert REGEX_TIMER in restarted.timers
    restarted.advance(0)
    assert "prefix-c" in restarted.group().resolved_regexes["prefix.*"].topics


# -- the settled-heartbeat shortcut ---------------------------------------------------------------

def test_the_shortcut_steps_aside_when_a_refresh_is_due():
    h = ConsumerHarness(TOPICS)
    joined_and_resolved(h)
    h.set_topics({**TOPICS, "prefix-c": 1})
    h.advance(5_000)
    assert h.coordinator.settled_heartbeat(SETTLED, h.now)
    h.advance(6_000)
    assert h.coordinator.settled_heartbeat(SETTLED, h.now) is None
    h.heartbeat(A, 2)
    assert REGEX_TIMER in h.timers


def test_replayed_state_equals_live_state():
    h = ConsumerHarness(TOPICS)
    joined_and_resolved(h)
    h.join(B, topics=None, regex="oth.*")
    h.set_topics({**TOPICS, "prefix-c": 1})
    h.advance(11_000)
    h.heartbeat(B, 2)
    h.advance(0)
    fresh = h.replayed()
    assert fresh.groups["g"].snapshot() == h.group().snapshot()


# -- the setting ----------------------------------------------------------------------------------

def test_refresh_interval_default_and_bound():
    assert ConsumerGroupConfig().regex_refresh_interval_ms == 600_000
    ConsumerGroupConfig(regex_refresh_interval_ms=10_000)
    with pytest.raises(ValueError, match=r"group\.consumer\.regex\.refresh\.interval\.ms"):
        ConsumerGroupConfig(regex_refresh_interval_ms=9_999)


def test_the_broker_reads_the_setting():
    key = "group.consumer.regex.refresh.interval.ms"
    assert BrokerConfig(props={key: "15000"}).consumer_group_config(
    ).regex_refresh_interval_ms == 15_000
    assert BrokerConfig().consumer_group_config().regex_refresh_interval_ms == 600_000
    with pytest.raises(ConfigError, match=r"greater than or equal to 10000"):
        BrokerConfig(props={key: "5000"}).consumer_group_config()


def test_the_facade_routes_the_timer_to_the_consumer_core():
    h = MixedHarness({"orders": 1, "prefix-a": 1})
    h.request(ConsumerHeartbeatRequest(
        group_id="g", member_id=A, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("orders",), subscribed_topic_regex="prefix.*", owned=(),
        client_id="client", client_host="/127.0.0.1"))
    assert h.advance(0) == [REGEX_TIMER]
    assert h.group().resolved_regexes["prefix.*"].topics == {"prefix-a"}
    r = h.heartbeat(A, 1)
    assert r.member_epoch == 2 and h.assigned(r) == {"orders-0", "prefix-a-0"}


# -- with an authorizer: a resolution keeps the topics the asking member may describe ------------

class PrefixAccess:
    """Which topics each principal may describe: those starting with one of its prefixes
    (the broker's authorizer answers the same question from its ACLs)."""

    def __init__(self, prefixes: dict[str, tuple[str, ...]]) -> None:
        self.prefixes = prefixes
        self.asked: list[tuple[str, str]] = []

    def describable(self, principal: str, host: str, topics) -> frozenset[str]:
        self.asked.append((principal, host))
        return frozenset(t for t in topics if t.startswith(self.prefixes.get(principal, ())))


def _join_as(h: ConsumerHarness, member_id: str, regex: str,
             requester: Requester | None) -> None:
    h.request(ConsumerHeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_regex=regex, owned=(), version=1, client_id="client",
        client_host="/127.0.0.1", requester=requester))


def test_a_resolution_keeps_only_the_topics_the_asking_member_may_describe():
    """Kafka 4.2 (KIP-848 with an authorizer): the regex is resolved for the member whose
    heartbeat asked, and topics it may not describe are left out of the record."""
    h = ConsumerHarness(TOPICS)
    access = PrefixAccess({"User:alice": ("prefix-a", "orders")})
    h.coordinator.topic_access = access
    _join_as(h, A, ".*", Requester("User:alice", "127.0.0.1"))
    before = len(h.records)
    h.advance(0)
    (record,) = regex_records(h.records[before:])
    assert record.value.topics == ("orders", "prefix-a")
    assert access.asked == [("User:alice", "127.0.0.1")]
    r = h.heartbeat(A, 1)
    assert h.assigned(r) == {"orders-0", "orders-1", "prefix-a-0"}
    # Replayed, the group holds what was recorded: nobody is asked again.
    assert h.replayed().groups["g"].resolved_regexes[".*"].topics == {"orders", "prefix-a"}
    assert len(access.asked) == 1


def test_without_a_requester_or_an_authorizer_a_resolution_keeps_every_match():
    h = ConsumerHarness(TOPICS)
    _join_as(h, A, "prefix.*", Requester("User:alice", "127.0.0.1"))  # no authorizer
    h.advance(0)
    assert h.group().resolved_regexes["prefix.*"].topics == {"prefix-a", "prefix-b"}
    h2 = ConsumerHarness(TOPICS)
    h2.coordinator.topic_access = PrefixAccess({})
    _join_as(h2, A, "prefix.*", None)  # the broker gives a requester whenever it authorizes
    h2.advance(0)
    assert h2.group().resolved_regexes["prefix.*"].topics == {"prefix-a", "prefix-b"}
