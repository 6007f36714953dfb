"""The group-event stream on a real broker: a confluent-kafka consumer group forms, a second
member joins, one leaves; `__group_events`, read back with confluent-kafka, tells that story
in order (joins, rebalances, generation bumps, the leave, the states)."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

EVENTS = "__group_events"


def topic_configs(broker: Any) -> dict[str, str]:
    """The topic configs coterie stored for __group_events (DescribeConfigs is not served)."""
    return json.loads((broker.data_dir / "topics" / f"{EVENTS}.json").read_text())["configs"]


def member(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    return c


def poll_until(members: list[Consumer], done: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in members:
            c.poll(0.1)
        if done():
            return
    raise AssertionError("the group did not get there in time")


def read_events(bootstrap: str, group: str, until: Any, timeout: float = 20.0) -> list[dict]:
    """Every event of `group` in __group_events (partition 0, from the start), read until
    `until(events)` holds."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "events-reader",
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(EVENTS, 0, 0)])
    events: list[dict] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(events):
            msg = reader.poll(0.2)
            if msg is None or msg.error():
                continue
            assert msg.key() == group.encode() or json.loads(msg.value())["group"] != group
            event = json.loads(msg.value())
            if event["group"] == group:
                events.append(event)
    finally:
        reader.close()
    return events


def test_a_group_forms_grows_and_shrinks_in_the_event_stream(coterie_factory) -> None:
    # A short initial delay: the first join phase is visible as PreparingRebalance.
    broker = coterie_factory(config={"group.initial.rebalance.delay.ms": "300"})
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("clicks", 2, 1)]).values():
        f.result(10)
    a = member(bootstrap, "ev", "clicks")
    poll_until([a], lambda: len(a.assignment()) == 2)
    b = member(bootstrap, "ev", "clicks")
    poll_until([a, b], lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1)
    b.close()
    poll_until([a], lambda: len(a.assignment()) == 2)

    def complete(events: list[dict]) -> bool:
        return sum(1 for e in events if e["type"] == "state_changed"
                   and e["details"]["state"] == "Stable") >= 3

    events = read_events(bootstrap, "ev", complete)
    a.close()
    assert all(e["protocol"] == "classic" for e in events)
    story = [(e["type"], e["generation"], e["details"].get("state"))
             for e in events if e["type"] in ("member_joined", "member_left",
                                               "rebalance_started", "generation_bumped",
                                               "state_changed")]
    joined = [e["member"] for e in events if e["type"] == "member_joined"]
    assert len(joined) == 2 and joined[0] != joined[1]
    left = [e for e in events if e["type"] == "member_left"]
    assert [e["member"] for e in left] == [joined[1]]
    assert left[0]["details"]["reason"] == "left the group"
    assert story == [
        ("member_joined", 0, None), ("rebalance_started", 0, None),
        ("state_changed", 0, "PreparingRebalance"),
        ("generation_bumped", 1, None), ("state_changed", 1, "CompletingRebalance"),
        ("state_changed", 1, "Stable"),
        ("member_joined", 1, None), ("rebalance_started", 1, None),
        ("state_changed", 1, "PreparingRebalance"),
        ("generation_bumped", 2, None), ("state_changed", 2, "CompletingRebalance"),
        ("state_changed", 2, "Stable"),
        ("member_left", 2, None), ("rebalance_started", 2, None),
        ("state_changed", 2, "PreparingRebalance"),
        ("generation_bumped", 3, None), ("state_changed", 3, "CompletingRebalance"),
        ("state_changed", 3, "Stable"),
    ], story
    # Timestamps never go backwards, and partitions were handed out at every generation.
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    assigned = [e for e in events if e["type"] == "partitions_assigned"]
    assert {e["generation"] for e in assigned} == {1, 2, 3}
    assert sorted(p for e in assigned if e["generation"] == 2
                  for p in e["details"]["partitions"]) == ["clicks-0", "clicks-1"]

    configs = topic_configs(broker)
    assert configs == {"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000)}


def test_settings_retention_and_off_switch(coterie_factory) -> None:
    short = coterie_factory(config={"group.events.retention.ms": "60000",
                                    "group.events.partitions": "3"})
    admin = AdminClient({"bootstrap.servers": short.bootstrap})
    meta = admin.list_topics(timeout=10)
    assert len(meta.topics[EVENTS].partitions) == 3
    assert topic_configs(short)["retention.ms"] == "60000"

    off = coterie_factory(config={"group.events.enable": "false"})
    meta = AdminClient({"bootstrap.servers": off.bootstrap}).list_topics(timeout=10)
    assert EVENTS not in meta.topics


def test_a_restart_is_not_news(coterie_factory) -> None:
    """Groups loaded from __consumer_offsets after a kill -9 emit nothing until they change;
    the next change continues the story where it stopped."""
    broker = coterie_factory(config={"group.initial.rebalance.delay.ms": "0"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        f.result(10)
    a = member(broker.bootstrap, "after", "orders")
    poll_until([a], lambda: len(a.assignment()) == 2)

    def stable_count(n: int) -> Any:
        return lambda events: sum(1 for e in events if e["type"] == "state_changed"
                                  and e["details"]["state"] == "Stable") >= n

    before = read_events(broker.bootstrap, "after", stable_count(1))
    broker.restart_after_kill9()
    # A keeps heartbeating its loaded generation: nothing happens, nothing is published.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        a.poll(0.1)
    assert read_events(broker.bootstrap, "after", lambda _: False, timeout=2) == before
    b = member(broker.bootstrap, "after", "orders")
    poll_until([a, b], lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1)
    after = read_events(broker.bootstrap, "after", stable_count(2))
    b.close()
    a.close()
    new = after[len(before):]
    assert after[:len(before)] == before
    assert new[0]["type"] == "member_joined" and new[0]["generation"] == 1
    assert [e["generation"] for e in new if e["type"] == "generation_bumped"] == [2]


def test_a_consumer_protocol_group_in_the_event_stream(coterie) -> None:
    """KIP-848: epochs, target assignments and reconciliation, as librdkafka drives them."""
    admin = AdminClient({"bootstrap.servers": coterie.bootstrap})
    for f in admin.create_topics([NewTopic("payments", 4, 1)]).values():
        f.result(10)

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": coterie.bootstrap, "group.id": "kip848",
                      "group.protocol": "consumer", "enable.auto.commit": False})
        c.subscribe(["payments"])
        return c

    a = consumer()
    poll_until([a], lambda: len(a.assignment()) == 4)
    b = consumer()
    poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
    b.close()
    poll_until([a], lambda: len(a.assignment()) == 4)

    def done(events: list[dict]) -> bool:
        return any(e["type"] == "epoch_bumped" and e["generation"] == 3 for e in events) and \
            events[-1]["type"] == "state_changed" and events[-1]["details"]["state"] == "Stable"

    events = read_events(coterie.bootstrap, "kip848", done)
    a.close()
    assert {e["protocol"] for e in events} == {"consumer"}
    assert [e["generation"] for e in events if e["type"] == "epoch_bumped"] == [1, 2, 3]
    assert [e["type"] for e in events if e["type"] in ("member_joined", "member_left")] == [
        "member_joined", "member_joined", "member_left"]
    # When B joined, A gave back two partitions and B got those same two.
    epoch2 = [e for e in events if e["generation"] == 2]
    [revoked] = [e for e in epoch2 if e["type"] == "partitions_revoked"]
    [assigned] = [e for e in epoch2 if e["type"] == "partitions_assigned"]
    assert revoked["details"]["partitions"] == assigned["details"]["partitions"]
    assert revoked["member"] != assigned["member"] and assigned["details"]["count"] == 2
    assert [e["details"]["state"] for e in epoch2 if e["type"] == "state_changed"][-1] == \
        "Stable"
