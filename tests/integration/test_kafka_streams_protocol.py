"""Kafka Streams 4.2.1 with `group.protocol=streams` (KIP-1071) against coterie: the
coordinator assigns the tasks.

The same WordCount as tests/integration/test_kafka_streams.py (a stateless subtopology
that splits lines, a repartition topic, a stateful subtopology counting words with a
compacted changelog), now a streams group: the application declares its topology in its
first StreamsGroupHeartbeat, the broker creates the repartition and changelog topics the
coordinator asks for, and the coordinator's sticky task assignor gives each member its
active (and standby) tasks. With 4 input partitions the group has 8 tasks: subtopology 0
(4 stateless) and subtopology 1 (4 stateful).

What is checked: exact counts with two and then three instances, the tasks spread over all
of them (StreamsGroupDescribe, read raw), a killed instance's tasks moving to the others
once its session times out and nothing lost (at_least_once), and with
`group.streams.num.standby.replicas=1` a standby of every stateful task on the other
instance, never a standby of a stateless one. Interactive Queries (`application.server`) see
the assignment through the heartbeat answers' endpoint information and route each key to
the instance running its task. The broker's streams session timeout is
6 s (its minimum lowered to allow it), so that a kill is noticed quickly: the same on
Kafka, whose reference run of the scaling scenario is marked `reference` (the standby
scenario passed against Kafka 4.2.1 too when it was written; it runs against coterie only,
for the suite's time).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.partitioner.default import murmur2
from kio.schema.errors import ErrorCode
from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest

from tests.fixtures.reference_broker import (
    ReferenceBroker,
    kafka_tool,
    reference_tools_missing,
)
from tests.integration.clients import broker_log_on_failure
from tests.integration.test_kafka_streams import (
    PARTITIONS,
    Instance,
    _await_counts,
    _await_running,
    _produce_lines,
    _setup,
    nothing_lost,
    wordcount_classpath,  # noqa: F401  (the module's fixture)
)
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(300)

STREAMS_PROTOCOL = ("group.protocol=streams",)
BROKER_SETTINGS = {
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.min.heartbeat.interval.ms": "1000",
    "group.streams.initial.rebalance.delay.ms": "0",
}
STREAMS_GROUPS_TOOL = "org.apache.kafka.tools.streams.StreamsGroupCommand"
TASKS = {(s, p) for s in ("0", "1") for p in range(4)}


def _broker(request: pytest.FixtureRequest, coterie_factory: Any, tmp_path: Path,
            extra: dict[str, str]) -> Iterator[Any]:
    settings = {**BROKER_SETTINGS, **extra}
    if request.param == "coterie":
        yield coterie_factory(config=settings)
        return
    missing = reference_tools_missing()
    if missing:
        pytest.skip(f"reference broker needs java and mvn on PATH: missing {', '.join(missing)}")
    broker = ReferenceBroker(tmp_path / "kafka-data", config=settings)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(params=["coterie", pytest.param("reference_kafka", marks=pytest.mark.reference)])
def streams_broker(request: pytest.FixtureRequest, coterie_factory: Any,
                   tmp_path: Path) -> Iterator[Any]:
    yield from _broker(request, coterie_factory, tmp_path, {})


@pytest.fixture(params=["coterie"])
def standby_broker(request: pytest.FixtureRequest, coterie_factory: Any,
                   tmp_path: Path) -> Iterator[Any]:
    yield from _broker(request, coterie_factory, tmp_path,
                       {"group.streams.num.standby.replicas": "1"})


def describe(broker: Any, group: str) -> Any:
    host, port = broker.bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        (d,) = conn.request(StreamsGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False)).groups
    return d


def _tasks(entries: Any) -> set[tuple[str, int]]:
    return {(t.subtopology_id, int(p)) for t in entries for p in t.partitions}


def active_by_member(d: Any) -> dict[str, set[tuple[str, int]]]:
    return {m.member_id: _tasks(m.assignment.active_tasks) for m in d.members}


def settled(broker: Any, group: str, members: int, timeout: float = 60.0) -> Any:
    """The group described once it is Stable with `members` members, every member at the
    group's epoch, and every task active on exactly one member."""
    deadline = time.monotonic() + timeout
    d = None
    while time.monotonic() < deadline:
        d = describe(broker, group)
        if (d.error_code == ErrorCode.none and d.group_state == "Stable"
                and len(d.members) == members
                and all(m.member_epoch == d.group_epoch for m in d.members)):
            owned = [t for tasks in active_by_member(d).values() for t in tasks]
            if sorted(owned) == sorted(TASKS):
                return d
        time.sleep(0.3)
    raise AssertionError(f"streams group {group} did not settle with {members} members: {d}")


def test_wordcount_on_the_streams_protocol_scales_out_and_survives_a_kill(
        streams_broker: Any, wordcount_classpath: str, tmp_path: Path) -> None:  # noqa: F811
    broker = streams_broker
    source, a, b, output = _setup(broker, wordcount_classpath, "at_least_once", tmp_path,
                                  STREAMS_PROTOCOL)
    app = source.replace("wc-in", "wordcount")
    c = Instance(wordcount_classpath, broker.bootstrap, app, "at_least_once",
                 (source, source.replace("wc-in", "wc-out")), tmp_path / "state-c",
                 STREAMS_PROTOCOL)
    expected: Counter = Counter()
    with broker_log_on_failure(getattr(broker, "log_text", lambda: "")):
        try:
            a.start()
            b.start()
            _await_running([a, b])
            _produce_lines(broker.bootstrap, source, 200, 11, expected)
            _await_counts(output, expected, [a, b])
            two = settled(broker, app, 2)
            assert all(active_by_member(two).values()), "a member runs no task"
            # The coordinator made the internal topics the topology asked for.
            assert two.topology is not None and two.topology.subtopologies
            # Kafka 4.2's kafka-streams-groups tool lists and describes the group.
            listed = kafka_tool(STREAMS_GROUPS_TOOL, broker.bootstrap, "--list")
            assert app in listed.split()
            members = kafka_tool(STREAMS_GROUPS_TOOL, broker.bootstrap, "--describe",
                                 "--members", "--group", app)
            for m in two.members:
                assert m.member_id in members, members

            c.start()
            _await_running([a, b, c])
            three = settled(broker, app, 3)
            assert sorted(len(t) for t in active_by_member(three).values()) == [2, 3, 3]
            _produce_lines(broker.bootstrap, source, 200, 12, expected)
            _await_counts(output, expected, [a, b, c])

            c.kill9()
            after = settled(broker, app, 2)
            assert len(active_by_member(after)) == 2
            _produce_lines(broker.bootstrap, source, 200, 13, expected)
            nothing_lost(output, expected)
        finally:
            for inst in (a, b, c):
                inst.stop()
            output.close()


def test_standby_tasks_are_placed_on_the_other_instance(
        standby_broker: Any, wordcount_classpath: str, tmp_path: Path) -> None:  # noqa: F811
    broker = standby_broker
    source, a, b, output = _setup(broker, wordcount_classpath, "at_least_once", tmp_path,
                                  STREAMS_PROTOCOL)
    app = source.replace("wc-in", "wordcount")
    expected: Counter = Counter()
    with broker_log_on_failure(getattr(broker, "log_text", lambda: "")):
        try:
            a.start()
            b.start()
            _await_running([a, b])
            d = settled(broker, app, 2)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                standby = {m.member_id: _tasks(m.assignment.standby_tasks) for m in d.members}
                if sum(len(s) for s in standby.values()) == 4:
                    break
                time.sleep(0.3)
                d = describe(broker, app)
            active = active_by_member(d)
            standby = {m.member_id: _tasks(m.assignment.standby_tasks) for m in d.members}
            # Every stateful task (subtopology 1) has one standby, on the other process.
            assert sorted(t for s in standby.values() for t in s) == [("1", p) for p in range(4)]
            for member, tasks in standby.items():
                assert not tasks & active[member]
            _produce_lines(broker.bootstrap, source, 100, 21, expected)
            _await_counts(output, expected, [a, b])
        finally:
            for inst in (a, b):
                inst.stop()
            output.close()


# -- Interactive Queries ------------------------------------------------------------------------

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")


def _key_partition(word: str, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a String-serialized key."""
    return (murmur2(word.encode()) & 0x7FFFFFFF) % partitions


def _iq_view(instance: Instance) -> tuple[dict[str, set[str]], dict[str, str]] | None:
    """What Interactive Queries last showed in `instance` (WordCount's print.metadata):
    endpoint -> the partitions it serves as active ("topic:partition"), and word -> the
    endpoint queryMetadataForKey routes it to. None before a complete print."""
    lines = list(instance.lines)
    for i in range(len(lines) - 1, -1, -1):
        if not lines[i].startswith("METADATA "):
            continue
        served: dict[str, set[str]] = {}
        for entry in lines[i].split()[1:]:
            endpoint, parts = entry.split("=", 1)
            active, standby = parts.split("/", 1)
            assert not standby, f"standby partitions without standby replicas: {entry}"
            served[endpoint] = set(filter(None, active.split(",")))
        keys = dict(line.split()[1:] for line in lines[i + 1:i + 1 + len(WORDS)]
                    if line.startswith("KEY "))
        if len(keys) == len(WORDS):
            return served, keys
    return None


def _await_iq(instances: list[Instance], endpoints: set[str], partitions: int,
              timeout: float = 60.0) -> tuple[dict[str, set[str]], dict[str, str]]:
    """Every instance's Interactive Queries view once it shows exactly `endpoints`, each
    serving some partitions, together every partition of both subtopologies' sources once,
    and the same view in every instance."""
    deadline = time.monotonic() + timeout
    views: list[Any] = []
    while time.monotonic() < deadline:
        views = [_iq_view(i) for i in instances]
        if all(v is not None and set(v[0]) == endpoints and all(v[0].values())
               for v in views):
            served = views[0][0]
            every = [p for parts in served.values() for p in parts]
            if len(every) == len(set(every)) == 2 * partitions and all(
                    v == views[0] for v in views):
                return views[0]
        time.sleep(0.5)
    errors = [line for i in instances for line in i.lines if "METADATA-ERROR" in line]
    raise AssertionError(f"Interactive Queries views did not settle on {endpoints}: "
                         f"{views} {errors[-3:]}")


def _check_routing(served: dict[str, set[str]], keys: dict[str, str], source: str,
                   partitions: int) -> None:
    """Each word's count is looked up where its repartition partition's task runs."""
    (repartition,) = {p.rsplit(":", 1)[0] for parts in served.values() for p in parts} - {
        source}
    for word, endpoint in keys.items():
        wanted = f"{repartition}:{_key_partition(word, partitions)}"
        assert wanted in served[endpoint], (word, endpoint, wanted, served)


@pytest.mark.parametrize("streams_broker", ["coterie"], indirect=True)
def test_interactive_queries_see_the_assignment_and_route_keys_to_their_instance(
        streams_broker: Any, wordcount_classpath: str, tmp_path: Path) -> None:  # noqa: F811
    """Two WordCount instances with `application.server` set: what Kafka Streams'
    Interactive Queries show (metadataForAllStreamsClients, queryMetadataForKey) comes from
    the heartbeat answers' endpoint information. Every instance sees both endpoints, each
    serving the source partitions of exactly the active tasks coterie's StreamsGroupDescribe
    gives the member with that endpoint; each word is routed to the instance running its
    repartition partition's task. After one instance is killed, the other serves
    everything and every key is routed to it. (Passed against Kafka 4.2.1 when written;
    runs against coterie only, for the suite's time.)"""
    broker = streams_broker
    source, _, _, output = _setup(broker, wordcount_classpath, "at_least_once", tmp_path,
                                  STREAMS_PROTOCOL)
    output.close()
    app = source.replace("wc-in", "wordcount")
    endpoints = ("127.0.0.1:7101", "127.0.0.1:7102")
    a, b = (Instance(wordcount_classpath, broker.bootstrap, app, "at_least_once",
                     (source, source.replace("wc-in", "wc-out")), tmp_path / f"iq-{n}",
                     (*STREAMS_PROTOCOL, f"application.server={endpoint}",
                      "print.metadata=true"))
            for n, endpoint in enumerate(endpoints))
    with broker_log_on_failure(getattr(broker, "log_text", lambda: "")):
        try:
            a.start()
            b.start()
            _await_running([a, b])
            d = settled(broker, app, 2)
            served, keys = _await_iq([a, b], set(endpoints), PARTITIONS)
            _check_routing(served, keys, source, PARTITIONS)
            for m in d.members:
                endpoint = f"{m.user_endpoint.host}:{m.user_endpoint.port}"
                tasks = _tasks(m.assignment.active_tasks)
                assert {int(p.rsplit(":", 1)[1]) for p in served[endpoint]
                        if p.startswith(f"{source}:")} == {p for s, p in tasks if s == "0"}
                assert {int(p.rsplit(":", 1)[1]) for p in served[endpoint]
                        if not p.startswith(f"{source}:")} == {p for s, p in tasks if s == "1"}

            b.kill9()
            settled(broker, app, 1)
            served, keys = _await_iq([a], {endpoints[0]}, PARTITIONS)
            assert set(keys.values()) == {endpoints[0]}
            _check_routing(served, keys, source, PARTITIONS)
            a.check()
        finally:
            for inst in (a, b):
                inst.stop()
