"""`coterie groups ...` against a real coterie broker over TCP, run in-process with click's
CliRunner: groups made by confluent-kafka consumers (the classic protocol and KIP-848's
consumer protocol, a share group) and a streams group joined raw, described as
`kafka-consumer-groups` would, reset only with --execute, and bad input ending in exit code 1
and one line on stderr."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.streams_group_heartbeat.v0.request import StreamsGroupHeartbeatRequest

from coterie.cli.groups import DESCRIBE_COLUMNS, MEMBERS_COLUMNS, STATE_COLUMNS
from coterie.cli.main import main
from coterie.wire.build import build
from tests.integration.test_acl_enforcement_groups import _streams_join
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 3
PER_PARTITION = 10
COMMITTED = {0: 4, 1: 5, 2: 6}  # what the test's consumers commit: lag 6, 5, 4


def cli(broker, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--bootstrap-server", broker.bootstrap,
                                     "--timeout", "20"])


def cli_json(broker, *args: str) -> dict:
    result = cli(broker, *args, "--output", "json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def make_topic(bootstrap: str, name: str, partitions: int = PARTITIONS,
               per_partition: int = PER_PARTITION) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(partitions * per_partition):
        p.produce(name, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(15) == 0


def join_group(bootstrap: str, group: str, topic: str, protocol: str,
               client_id: str) -> Consumer:
    """A member of `group` that owns every partition of `topic` and has committed
    COMMITTED, still in the group when this returns."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                  "client.id": client_id, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False}
                 | ({"session.timeout.ms": 10_000, "heartbeat.interval.ms": 500}
                    if protocol == "classic" else {}))
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while len(c.assignment()) < PARTITIONS and time.monotonic() < deadline:
        c.poll(0.2)
    assert len(c.assignment()) == PARTITIONS, c.assignment()
    c.commit(offsets=[CkTopicPartition(topic, p, o) for p, o in COMMITTED.items()],
             asynchronous=False)
    return c


@pytest.fixture
def broker(coterie):
    """The broker the scenarios run on (tests/reference runs them on Kafka 4.2.1 too)."""
    return coterie


@pytest.fixture
def groups_state(broker) -> Iterator[dict]:
    """A topic, a classic group and a consumer-protocol group, each with one live member."""
    suffix = uuid.uuid4().hex[:6]
    topic = f"orders-{suffix}"
    make_topic(broker.bootstrap, topic)
    classic = join_group(broker.bootstrap, f"classic-{suffix}", topic, "classic", "cli-c")
    modern = join_group(broker.bootstrap, f"modern-{suffix}", topic, "consumer", "cli-m")
    members = {"classic": classic, "consumer": modern}
    yield {"topic": topic, "classic": f"classic-{suffix}", "consumer": f"modern-{suffix}",
           "members": members}
    for c in members.values():
        c.close()


def rows_of(table_text: str) -> list[list[str]]:
    return [line.split() for line in table_text.splitlines() if line.strip()]


@pytest.mark.parametrize("kind", ["classic", "consumer"])
def test_describe_shows_members_offsets_and_lag(broker, groups_state, kind):
    group, topic = groups_state[kind], groups_state["topic"]
    doc = cli_json(broker, "groups", "describe", group)
    assert (doc["group"], doc["type"], doc["state"]) == (group, kind, "Stable")
    assert doc["coordinator"]["port"] == broker.port
    (member,) = doc["members"]
    assert member["client_id"] == ("cli-c" if kind == "classic" else "cli-m")
    assert member["assignment"] == [{"topic": topic, "partition": p} for p in range(PARTITIONS)]
    assert [(p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"],
             p["member_id"]) for p in doc["partitions"]] == [
        (p, COMMITTED[p], PER_PARTITION, PER_PARTITION - COMMITTED[p], member["member_id"])
        for p in range(PARTITIONS)]
    assert doc["total_lag"] == sum(PER_PARTITION - o for o in COMMITTED.values())

    table = cli(broker, "groups", "describe", group)
    assert table.exit_code == 0, table.stderr
    header, *rows = rows_of(table.stdout)
    assert " ".join(header) == " ".join(DESCRIBE_COLUMNS)
    assert [r[:6] for r in rows] == [[group, topic, str(p), str(COMMITTED[p]),
                                      str(PER_PARTITION), str(PER_PARTITION - COMMITTED[p])]
                                     for p in range(PARTITIONS)]
    assert all(r[6] == member["member_id"] for r in rows)

    state = cli(broker, "groups", "describe", group, "--state")
    assert state.stdout.splitlines()[0].split() == " ".join(STATE_COLUMNS).split()
    assert rows_of(state.stdout)[1][-2:] == ["Stable", "1"]

    members = cli(broker, "groups", "members", group, "--verbose")
    header, row = rows_of(members.stdout)
    assert header[:len(MEMBERS_COLUMNS)] == list(MEMBERS_COLUMNS)
    assert row[1] == member["member_id"] and row[4] == str(PARTITIONS)
    assert row[-1] == f"{topic}(0,1,2)"


def test_list_names_every_group_with_its_type(broker, groups_state):
    listed = {g["group"]: g for g in cli_json(broker, "groups", "list")}
    assert listed[groups_state["classic"]]["type"] == "classic"
    assert listed[groups_state["consumer"]]["type"] == "consumer"
    only = cli_json(broker, "groups", "list", "--type", "consumer")
    assert groups_state["consumer"] in {g["group"] for g in only}
    assert {g["type"] for g in only} == {"consumer"}  # (the reference broker has others)


@pytest.mark.parametrize("kind", ["classic", "consumer"])
def test_reset_offsets_changes_nothing_without_execute(broker, groups_state, kind):
    group, topic = groups_state[kind], groups_state["topic"]
    refused = cli(broker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest",
                  "--execute")
    assert refused.exit_code == 1
    assert "inactive" in refused.stderr and "Stable" in refused.stderr
    groups_state["members"].pop(kind).close()  # the group is empty now

    def committed() -> list[int]:
        return [p["committed_offset"]
                for p in cli_json(broker, "groups", "describe", group)["partitions"]]

    plan = cli(broker, "groups", "reset-offsets", group, "--topic", f"{topic}:0,2",
               "--to-earliest")
    assert plan.exit_code == 0, plan.stderr
    assert [r[1:] for r in rows_of(plan.stdout)[1:]] == [[topic, "0", "0"], [topic, "2", "0"]]
    assert "dry run" in plan.stderr
    assert committed() == [COMMITTED[p] for p in range(PARTITIONS)]

    # --by-duration, as Kafka's tool: every record is younger than an hour (the log start),
    # none is younger than nothing (the log end); a dry run either way.
    for duration, expected in (("PT1H", 0), ("PT0S", PER_PARTITION)):
        planned = cli_json(broker, "groups", "reset-offsets", group, "--all-topics",
                           "--by-duration", duration)
        assert planned["executed"] is False
        assert [o["new_offset"] for o in planned["offsets"]] == [expected] * PARTITIONS
    assert committed() == [COMMITTED[p] for p in range(PARTITIONS)]

    shifted = cli_json(broker, "groups", "reset-offsets", group, "--all-topics",
                       "--shift-by", "-2", "--execute")
    assert shifted["executed"] is True
    assert committed() == [COMMITTED[p] - 2 for p in range(PARTITIONS)]
    cli_json(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-offset", "99",
             "--execute")
    assert committed() == [PER_PARTITION] * PARTITIONS  # clamped to the log end


def test_delete_offsets_and_delete_group(broker, groups_state):
    group, topic = groups_state["classic"], groups_state["topic"]
    busy = cli(broker, "groups", "delete", group)
    assert busy.exit_code == 1 and "not empty" in busy.stderr
    groups_state["members"].pop("classic").close()
    dropped = cli(broker, "groups", "delete-offsets", group, "--topic", f"{topic}:1")
    assert dropped.exit_code == 0, dropped.stderr
    assert rows_of(dropped.stdout)[1] == [topic, "1", "Successful"]
    assert [p["partition"] for p in cli_json(broker, "groups", "describe", group)["partitions"]
            ] == [0, 2]
    deleted = cli(broker, "groups", "delete", group)
    assert deleted.exit_code == 0, deleted.stderr
    gone = cli(broker, "groups", "describe", group)
    assert gone.exit_code == 1 and "does not exist" in gone.stderr


def test_share_group_offsets_and_reset(broker):
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"jobs-{suffix}", f"workers-{suffix}"
    make_topic(broker.bootstrap, topic, partitions=1, per_partition=8)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])]).values()
    future.result(10)
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    try:
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 8 and time.monotonic() < deadline:
            got += [m for m in c.poll(0.5) or () if m.error() is None]
        assert len(got) == 8
        live = cli_json(broker, "groups", "describe", group)
        assert (live["type"], len(live["members"])) == ("share", 1)
        for m in got[:5]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
    finally:
        c.close()
    doc = cli_json(broker, "groups", "describe", group)
    assert [(p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"])
            for p in doc["partitions"]] == [(0, 5, 8, 3)]
    cli_json(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest",
             "--execute")
    assert cli_json(broker, "groups", "describe", group)["partitions"][0]["committed_offset"] \
        == 0


def test_bad_input_exits_1_with_a_message(broker):
    unknown = cli(broker, "groups", "describe", "no-such-group")
    assert unknown.exit_code == 1
    assert unknown.stderr.strip() == "coterie: error: group 'no-such-group' does not exist"
    assert "Traceback" not in unknown.output
    topic = cli(broker, "groups", "reset-offsets", "g", "--topic", "no-such-topic",
                "--to-earliest")
    assert topic.exit_code == 1 and "topic 'no-such-topic' does not exist" in topic.stderr
    started = time.monotonic()
    unreachable = CliRunner().invoke(main, ["groups", "list", "--bootstrap-server",
                                            "127.0.0.1:1", "--timeout", "1"])
    assert unreachable.exit_code == 1 and "no broker reachable" in unreachable.stderr
    assert time.monotonic() - started < 10
    bad = CliRunner().invoke(main, ["groups", "describe", "g", "--bootstrap-server", "nope"])
    assert bad.exit_code == 1 and "not host:port" in bad.stderr
    usage = cli(broker, "groups", "reset-offsets", "g", "--all-topics")
    assert usage.exit_code == 2 and "exactly one of" in usage.stderr
    both = cli(broker, "groups", "reset-offsets", "g", "--all-topics", "--topic", "t",
               "--to-latest")
    assert both.exit_code == 2
    partitions = cli(broker, "groups", "reset-offsets", "g", "--topic", "t:x", "--to-latest")
    assert partitions.exit_code == 2 and "partitions must be numbers" in partitions.stderr


def test_streams_group_is_described(coterie_factory):
    """A streams group (KIP-1071) of one member heartbeating raw StreamsGroupHeartbeats until
    it holds its tasks: described with its type, member, and as its assignment the source
    partitions of its active tasks."""
    broker = coterie_factory(config={"group.streams.initial.rebalance.delay.ms": "0"})
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"lines-{suffix}", f"wordcount-{suffix}"
    make_topic(broker.bootstrap, topic, partitions=2, per_partition=1)
    with RawConnection(broker.host, broker.port) as conn:
        joined = _streams_join(conn, group, topic)
        assert joined.error_code == 0, joined
        epoch, tasks = joined.member_epoch, joined.active_tasks
        deadline = time.monotonic() + 20
        while not tasks and time.monotonic() < deadline:
            beat = conn.request(build(StreamsGroupHeartbeatRequest, {
                "group_id": group, "member_id": joined.member_id, "member_epoch": epoch,
                "rebalance_timeout": -1, "topology": None, "active_tasks": None,
                "standby_tasks": None, "warmup_tasks": None, "process_id": None,
                "client_tags": None, "task_offsets": None, "task_end_offsets": None}))
            assert beat.error_code == 0, beat
            epoch, tasks = beat.member_epoch, beat.active_tasks
            time.sleep(0.1)
        assert tasks, "no tasks within 20 s"
        doc = cli_json(broker, "groups", "describe", group)
    assert (doc["group"], doc["type"]) == (group, "streams")
    (member,) = doc["members"]
    assert member["member_id"] == joined.member_id and member["client_id"] == "raw-test"
    # Subtopology 0 reads the topic: its two tasks are this member's, the only one.
    assert [(a["topic"], a["partition"]) for a in member["assignment"]] == [
        (topic, 0), (topic, 1)]
    listed = {g["group"]: g["type"] for g in cli_json(broker, "groups", "list")}
    assert listed[group] == "streams"
