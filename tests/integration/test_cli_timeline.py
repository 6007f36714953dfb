"""`coterie groups timeline` against a real broker: two confluent-kafka consumers form a
group, one leaves; the command's JSON shows the rebalances with who joined and left and the
partitions that moved; against a broker without __group_events it says so, exit code 1."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from coterie.admin.group_events import read_group_events
from tests.integration.test_group_events import member, poll_until


def coterie_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coterie", *args], capture_output=True,
                          text=True, timeout=timeout)


def timeline_of(bootstrap: str, group: str, done: Any, timeout: float = 30) -> dict:
    """The command's JSON, asked again until `done(doc)` (events are appended as the
    coordinator acts; the last Stable may trail the consumers' view by a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        run = coterie_cli("groups", "timeline", group, "--bootstrap-server", bootstrap,
                          "--output", "json")
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        if done(doc) or time.monotonic() > deadline:
            return doc
        time.sleep(0.2)


def test_timeline_shows_joins_leaves_and_moves(coterie) -> None:
    bootstrap = coterie.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("tl-clicks", 2, 1)]).values():
        f.result(10)
    a: Consumer = member(bootstrap, "tl", "tl-clicks")
    poll_until([a], lambda: len(a.assignment()) == 2)
    b: Consumer = member(bootstrap, "tl", "tl-clicks")
    poll_until([a, b], lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1)
    b_partition = f"tl-clicks-{b.assignment()[0].partition}"
    b.close()
    poll_until([a], lambda: len(a.assignment()) == 2)

    def settled(doc: dict) -> bool:
        rebalances = doc["rebalances"]
        return (len(rebalances) >= 3 and any(r["departed"] for r in rebalances)
                and not rebalances[-1]["in_progress"])

    doc = timeline_of(bootstrap, "tl", settled)
    a.close()
    assert doc["group"] == "tl" and doc["protocol"] == "classic"
    rebalances = doc["rebalances"]
    joined = [c["member"] for r in rebalances for c in r["joined"]]
    assert len(joined) == 2 and joined[0] != joined[1]
    first_member, second_member = joined
    leave = next(r for r in rebalances if r["departed"])
    assert [(c["member"], c["kind"]) for c in leave["departed"]] == [(second_member, "left")]
    assert "left" in leave["cause"]
    # The leave moved B's partition to A.
    moves = {m["member"]: (m["gained"], m["lost"]) for m in leave["moved"]}
    assert moves[second_member] == ([], [b_partition])
    assert moves[first_member] == ([b_partition], [])
    # The join before it moved that same partition from A to B.
    join = next(r for r in rebalances if [c["member"] for c in r["joined"]] == [second_member])
    assert {m["member"]: m["gained"] for m in join["moved"]}[second_member] == [b_partition]
    assert all(r["duration_ms"] is not None and r["duration_ms"] >= 0 for r in rebalances)
    assert [r["generation"] for r in rebalances] == sorted(r["generation"] for r in rebalances)
    # Ownership: B held its partition exactly once, closed when it left.
    b_spans = [o for o in doc["ownership"] if o["member"] == second_member]
    assert [(o["partitions"], o["to_ms"] is not None) for o in b_spans] == [([b_partition], True)]

    table = coterie_cli("groups", "timeline", "tl", "--bootstrap-server", bootstrap)
    assert table.returncode == 0, table.stderr
    for column in ("GENERATION", "STARTED", "STABLE AFTER (ms)", "CAUSE", "JOINED",
                   "LEFT/FENCED", "MOVED"):
        assert column in table.stdout


def test_read_group_events_keeps_only_the_group(coterie) -> None:
    import asyncio

    bootstrap = coterie.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("tl-other", 1, 1)]).values():
        f.result(10)
    x = member(bootstrap, "tl-x", "tl-other")
    y = member(bootstrap, "tl-y", "tl-other")
    poll_until([x, y], lambda: len(x.assignment()) == 1 and len(y.assignment()) == 1)
    x.close()
    y.close()
    events = asyncio.run(read_group_events(bootstrap, "tl-x", all_partitions=True))
    assert events and {e["group"] for e in events} == {"tl-x"}
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    assert asyncio.run(read_group_events(bootstrap, "no-such-group")) == []


def test_without_group_events_the_command_says_so(coterie_factory) -> None:
    broker = coterie_factory(config={"group.events.enable": "false"})
    run = coterie_cli("groups", "timeline", "g", "--bootstrap-server", broker.bootstrap)
    assert run.returncode == 1
    assert "no __group_events topic" in run.stderr and "Traceback" not in run.stderr


def test_unreachable_cluster_is_exit_code_1(coterie_factory) -> None:
    broker = coterie_factory(start=False)  # a free port nobody listens on
    run = coterie_cli("groups", "timeline", "g", "--bootstrap-server", broker.bootstrap,
                      "--request-timeout-ms", "1500")
    assert run.returncode == 1
    assert "no broker reachable" in run.stderr and "Traceback" not in run.stderr


def test_consumer_group_epochs_in_the_timeline(coterie_factory) -> None:
    """A KIP-848 consumer group (librdkafka, group.protocol=consumer): epochs, not
    generations; B's join moves half the partitions to B, its leave moves them back."""
    from tests.fixtures.reference_broker import REFERENCE_GROUP_SETTINGS

    broker = coterie_factory(config=dict(REFERENCE_GROUP_SETTINGS))
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("tl-848", 4, 1)]).values():
        f.result(10)

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tl848",
                      "group.protocol": "consumer", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["tl-848"])
        return c

    a = consumer()
    poll_until([a], lambda: len(a.assignment()) == 4)
    b = consumer()
    poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
    b_partitions = sorted(f"tl-848-{tp.partition}" for tp in b.assignment())
    b.close()
    poll_until([a], lambda: len(a.assignment()) == 4)

    def settled(doc: dict) -> bool:
        return (any(r["departed"] for r in doc["rebalances"])
                and not doc["rebalances"][-1]["in_progress"])

    doc = timeline_of(bootstrap, "tl848", settled)
    a.close()
    assert doc["protocol"] == "consumer"
    joined = [c["member"] for r in doc["rebalances"] for c in r["joined"]]
    assert len(joined) == 2
    join = next(r for r in doc["rebalances"] if [c["member"] for c in r["joined"]]
                == [joined[1]])
    assert join["generation"] > join["from_generation"]
    assert {m["member"]: m["gained"] for m in join["moved"]}[joined[1]] == b_partitions
    leave = next(r for r in doc["rebalances"] if r["departed"])
    assert [c["kind"] for c in leave["departed"]] == ["left"]
    assert {m["member"]: m["gained"] for m in leave["moved"]}[joined[0]] == b_partitions
    table = coterie_cli("groups", "timeline", "tl848", "--bootstrap-server", bootstrap)
    assert table.returncode == 0 and "EPOCH" in table.stdout


def test_since_skips_older_events(coterie) -> None:
    import asyncio

    bootstrap = coterie.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("tl-since", 1, 1)]).values():
        f.result(10)
    a = member(bootstrap, "tl-since", "tl-since")
    poll_until([a], lambda: len(a.assignment()) == 1)
    everything = asyncio.run(read_group_events(bootstrap, "tl-since"))
    assert everything
    later = max(e["ts"] for e in everything) + 1
    a.close()
    def left(events: list) -> bool:
        return any(e["type"] == "member_left" for e in events)

    deadline = time.monotonic() + 20
    recent: list = []
    while not left(recent) and time.monotonic() < deadline:
        recent = asyncio.run(read_group_events(bootstrap, "tl-since", since_ms=later))
    assert left(recent) and all(e["ts"] >= later for e in recent)
    assert not any(e["type"] == "member_joined" for e in recent)
    future = coterie_cli("groups", "timeline", "tl-since", "--bootstrap-server", bootstrap,
                         "--since", "2999-01-01T00:00:00Z", "--output", "json")
    assert future.returncode == 0 and json.loads(future.stdout)["events"] == 0
