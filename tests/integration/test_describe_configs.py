"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics and the broker
(issue 14, first part), as Kafka 4.2 answers.

The scenario runs against any broker started with `log.segment.bytes=5000000` and
`log.retention.hours=100` (`SETTINGS`); tests/reference runs it against Apache Kafka 4.2.1,
where it passes as written. It checks the answer request by request (kio, version 4, with
synonyms): every topic config Kafka lists; a topic's own setting (source TOPIC_CONFIG, with its
synonym first and the broker default after); a broker setting that is the primary synonym
(STATIC_BROKER_CONFIG, both synonyms); a broker setting reached only through another unit
(`log.retention.hours` shows in retention.ms as a DEFAULT_CONFIG value without synonyms, as
Kafka shows it); types, read-only and sensitive flags; the key filter; an unknown topic; the
broker resource and the empty (cluster default) one. Then confluent-kafka's AdminClient and
Kafka's own kafka-topics --describe read the same configs.

`alter_scenario` changes a topic's configs with confluent-kafka's AdminClient (set, append to
and subtract from a list, delete) and with the legacy AlterConfigs (the whole set replaced);
the new max.message.bytes refuses a larger record at once; validate_only changes nothing; an
unknown name, an unusable value, an append to a non-list setting, a name given twice, an
unknown topic and a broker resource are refused with Kafka's codes. On coterie the changes
survive a kill -9, and Kafka's kafka-configs tool alters and describes them.

`broker_scenario` describes broker "1" through confluent-kafka's AdminClient and a raw request
and checks every log setting both brokers serve (value, source, read-only flag, type,
synonyms), as Kafka 4.2.1 answers for a broker started with `SETTINGS` (issue 22, point 9).
`dynamic_names_scenario` changes Kafka's dynamic broker configs beyond the log defaults (a
SASL setting, thread counts, connection limits, a list, a custom name), for this broker and
the cluster, then describes them with every unit synonym, and checks Kafka's refusals: static
names, values of the wrong type or range, security configs without a listener prefix,
per-broker configs as the cluster default (issue 22, point 11).
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kio.schema.alter_configs.v2.request import AlterableConfig as LegacyConfig
from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.alter_configs.v2.request import AlterConfigsResource as LegacyResource
from kio.schema.describe_configs.v4.request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

from tests.fixtures.coterie_broker import both_storages
from tests.fixtures.reference_broker import kafka_tool
from tests.kafka_raw import RawConnection

CONFIG_COMMAND = "kafka.admin.ConfigCommand"  # kafka-configs
SETTINGS = {"log.segment.bytes": "5000000", "log.retention.hours": "100"}
TOPIC, BROKER = 2, 4
TOPIC_SOURCE, DYNAMIC, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
UNKNOWN, BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 5, 6, 7
LONG_MAX = str(2**63 - 1)
# Every topic config Kafka 4.2.1 describes, with its type.
TYPES = {
    "cleanup.policy": LIST, "compression.gzip.level": INT, "compression.lz4.level": INT,
    "compression.type": STRING, "compression.zstd.level": INT, "delete.retention.ms": LONG,
    "file.delete.delay.ms": LONG, "flush.messages": LONG, "flush.ms": LONG,
    "follower.replication.throttled.replicas": LIST, "index.interval.bytes": INT,
    "leader.replication.throttled.replicas": LIST, "local.retention.bytes": LONG,
    "local.retention.ms": LONG, "max.compaction.lag.ms": LONG, "max.message.bytes": INT,
    "message.timestamp.after.max.ms": LONG, "message.timestamp.before.max.ms": LONG,
    "message.timestamp.type": STRING, "min.cleanable.dirty.ratio": DOUBLE,
    "min.compaction.lag.ms": LONG, "min.insync.replicas": INT, "preallocate": BOOLEAN,
    "remote.log.copy.disable": BOOLEAN, "remote.log.delete.on.disable": BOOLEAN,
    "remote.storage.enable": BOOLEAN, "retention.bytes": LONG, "retention.ms": LONG,
    "segment.bytes": INT, "segment.index.bytes": INT, "segment.jitter.ms": LONG,
    "segment.ms": LONG, "unclean.leader.election.enable": BOOLEAN,
}


def _describe(conn: RawConnection, kind: int, name: str,
              keys: tuple[str, ...] | None = None) -> Any:
    answer = conn.request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=keys),),
        include_synonyms=True, include_documentation=False))
    (result,) = answer.results
    return result


def _create(admin: AdminClient, *topics: NewTopic, timeout: float = 15.0) -> None:
    """CreateTopics, then wait until the broker's metadata shows every topic. Kafka answers
    CreateTopics once its controller committed the topics, and its broker learns of them a
    moment later: a DescribeConfigs right after answered UNKNOWN_TOPIC_OR_PARTITION once
    (seen in CI). coterie knows them at once."""
    for f in admin.create_topics(list(topics)).values():
        f.result(30)
    deadline = time.monotonic() + timeout
    names = {t.topic for t in topics}
    while names - set(admin.list_topics(timeout=10).topics) and time.monotonic() < deadline:
        time.sleep(0.1)


def _by_name(result: Any) -> dict[str, tuple]:
    return {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def scenario(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic("plain", 1, 1),
            NewTopic("tuned", 1, 1, config={"retention.ms": "1000", "cleanup.policy": "compact",
                                            "segment.ms": "50000"}))
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        plain, tuned = _describe(conn, TOPIC, "plain"), _describe(conn, TOPIC, "tuned")
        for result in (plain, tuned):
            assert result.error_code == ErrorCode.none
            assert {c.name: c.config_type for c in result.configs} == TYPES
            assert not any(c.read_only or c.is_sensitive for c in result.configs)
        p, t = _by_name(plain), _by_name(tuned)
        # The topic's own settings: their synonym first, the broker default after.
        assert t["cleanup.policy"] == ("compact", TOPIC_SOURCE, [
            ("cleanup.policy", "compact", TOPIC_SOURCE),
            ("log.cleanup.policy", "delete", DEFAULT)])
        assert t["retention.ms"] == ("1000", TOPIC_SOURCE, [("retention.ms", "1000", TOPIC_SOURCE)])
        assert t["segment.ms"] == ("50000", TOPIC_SOURCE, [("segment.ms", "50000", TOPIC_SOURCE)])
        # A broker setting that is the primary synonym.
        for answer in (p, t):
            assert answer["segment.bytes"] == ("5000000", STATIC, [
                ("log.segment.bytes", "5000000", STATIC),
                ("log.segment.bytes", "1073741824", DEFAULT)])
        # log.retention.hours reaches retention.ms, but is not its primary synonym.
        assert p["retention.ms"] == (str(100 * 3600 * 1000), DEFAULT, [])
        assert p["cleanup.policy"] == ("delete", DEFAULT, [("log.cleanup.policy", "delete",
                                                            DEFAULT)])
        assert p["max.message.bytes"] == ("1048588", DEFAULT, [("message.max.bytes", "1048588",
                                                                DEFAULT)])
        assert p["flush.ms"] == (LONG_MAX, DEFAULT, [])
        assert p["segment.ms"] == ("604800000", DEFAULT, [])
        assert p["compression.type"] == ("producer", DEFAULT, [("compression.type", "producer",
                                                                DEFAULT)])
        # Only the asked keys (an unknown one is left out).
        some = _describe(conn, TOPIC, "tuned", ("retention.ms", "no.such.config"))
        assert [c.name for c in some.configs] == ["retention.ms"]
        missing = _describe(conn, TOPIC, "no-such-topic")
        assert missing.error_code == ErrorCode.unknown_topic_or_partition
        assert missing.configs == ()
        # The broker: its settings as set, read-only where they cannot change at run time.
        broker = _describe(conn, BROKER, "1", ("log.retention.hours", "log.segment.bytes"))
        assert broker.error_code == ErrorCode.none
        b = _by_name(broker)
        assert b["log.retention.hours"][:2] == ("100", STATIC)
        assert b["log.segment.bytes"][:2] == ("5000000", STATIC)
        assert {c.name: c.read_only for c in broker.configs}["log.retention.hours"]
        everything = _describe(conn, BROKER, "1")
        assert len(everything.configs) > 10
        assert _by_name(everything)["num.partitions"][0] == "1"
        # The cluster-wide dynamic defaults: none set on coterie; Kafka's storage format
        # sets min.insync.replicas there (KIP-966).
        cluster = _describe(conn, BROKER, "")
        assert cluster.error_code == ErrorCode.none
        assert {c.name for c in cluster.configs} <= {"min.insync.replicas"}
    # A real admin client reads the same.
    (future,) = admin.describe_configs([ConfigResource("topic", "tuned")]).values()
    entries = future.result(30)
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_describe_configs(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    scenario(broker.bootstrap)


def test_describe_configs_of_the_broker_resource_name_must_be_this_broker(coterie):
    with RawConnection(coterie.host, coterie.port) as conn:
        other = _describe(conn, BROKER, "7")
        assert other.error_code == ErrorCode.invalid_request
        loggers = _describe(conn, 8, "7")
        assert loggers.error_code == ErrorCode.invalid_request
        assert "Unexpected broker id" in (loggers.error_message or "")
        unknown = _describe(conn, 99, "x")
        assert unknown.error_code == ErrorCode.invalid_request


def test_kafka_topics_describe_prints_the_topic_configs(coterie_factory, tmp_path):
    """Kafka 4.2.1's kafka-topics --describe (it failed with "The node does not support
    DESCRIBE_CONFIGS"): the topic's own configs in its Configs column."""
    broker = coterie_factory(config=SETTINGS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("described", 2, 1, config={"retention.ms": "1000"})])[
        "described"].result(30)
    out = kafka_tool("org.apache.kafka.tools.TopicCommand", broker.bootstrap, "--describe",
                     "--topic", "described")
    assert "PartitionCount: 2" in out, out
    assert "retention.ms=1000" in out, out
    assert "segment.bytes=5000000" in out, out


def _alter(admin: AdminClient, topic: str, *ops: tuple[str, str | None, AlterConfigOpType],
           validate_only: bool = False) -> None:
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    (future,) = admin.incremental_alter_configs([resource],
                                                validate_only=validate_only).values()
    future.result(30)


def _raw_alter(conn: RawConnection, kind: int, name: str,
               *ops: tuple[str, str | None, int]) -> Any:
    answer = conn.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=kind, resource_name=name, configs=tuple(
            AlterableConfig(name=k, config_operation=op, value=v) for k, v, op in ops)),),
        validate_only=False))
    (result,) = answer.responses
    return result


def alter_scenario(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic("altered", 1, 1))
    host, port = bootstrap.rsplit(":", 1)
    set_, append, subtract, delete = (AlterConfigOpType.SET, AlterConfigOpType.APPEND,
                                      AlterConfigOpType.SUBTRACT, AlterConfigOpType.DELETE)
    _alter(admin, "altered", ("retention.ms", "5000", set_),
           ("cleanup.policy", "compact", append), ("max.message.bytes", "2000", set_))
    with RawConnection(host, int(port)) as conn:
        now = _eventually(lambda: _by_name(_describe(conn, TOPIC, "altered")),
                          lambda d: d["max.message.bytes"][0] == "2000")
        assert now["retention.ms"][:2] == ("5000", TOPIC_SOURCE)
        assert now["cleanup.policy"][:2] == ("delete,compact", TOPIC_SOURCE)
        assert now["max.message.bytes"][:2] == ("2000", TOPIC_SOURCE)
    # The new limit holds at once.
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce("altered", b"x" * 5000,
                     on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE], errors
    _alter(admin, "altered", ("cleanup.policy", "compact", subtract),
           ("max.message.bytes", None, delete))
    _alter(admin, "altered", ("retention.ms", "1", set_), validate_only=True)
    with RawConnection(host, int(port)) as conn:
        now = _eventually(lambda: _by_name(_describe(conn, TOPIC, "altered")),
                          lambda d: d["max.message.bytes"][0] == "1048588")
        assert now["cleanup.policy"][:2] == ("delete", TOPIC_SOURCE)
        assert now["max.message.bytes"][:2] == ("1048588", DEFAULT)
        assert now["retention.ms"][:2] == ("5000", TOPIC_SOURCE)  # validate_only: unchanged
        # Refused, nothing changed.
        unknown = _raw_alter(conn, TOPIC, "altered", ("no.such.config", "1", 0))
        assert unknown.error_code == ErrorCode.invalid_config
        assert "no.such.config" in (unknown.error_message or "")
        assert _raw_alter(conn, TOPIC, "altered", ("retention.ms", "soon", 0)).error_code == (
            ErrorCode.invalid_config)
        assert _raw_alter(conn, TOPIC, "altered", ("retention.ms", "9", 2)).error_code == (
            ErrorCode.invalid_config)
        assert _raw_alter(conn, TOPIC, "altered", ("retention.ms", "9", 0),
                          ("retention.ms", "8", 0)).error_code == ErrorCode.invalid_request
        assert _raw_alter(conn, TOPIC, "no-such-topic", ("retention.ms", "9", 0)).error_code == (
            ErrorCode.unknown_topic_or_partition)
        assert _by_name(_describe(conn, TOPIC, "altered"))["retention.ms"][0] == "5000"
        # The legacy AlterConfigs replaces the whole set.
        legacy = conn.request(AlterConfigsRequest(resources=(LegacyResource(
            resource_type=TOPIC, resource_name="altered", configs=(
                LegacyConfig(name="segment.ms", value="60000"),)),), validate_only=False))
        assert legacy.responses[0].error_code == ErrorCode.none
        now = _eventually(lambda: _by_name(_describe(conn, TOPIC, "altered")),
                          lambda d: d["segment.ms"][0] == "60000")
        assert now["segment.ms"][:2] == ("60000", TOPIC_SOURCE)
        assert now["retention.ms"][1] != TOPIC_SOURCE
        assert now["cleanup.policy"][:2] == ("delete", DEFAULT)


def test_alter_configs(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    alter_scenario(broker.bootstrap)
    broker.kill9()
    broker.restart_after_kill9()
    with RawConnection(broker.host, broker.port) as conn:
        now = _by_name(_describe(conn, TOPIC, "altered"))
        assert now["segment.ms"][:2] == ("60000", TOPIC_SOURCE)  # durable
        refused = _raw_alter(conn, BROKER, "1", ("node.id", "2", 0))
        assert refused.error_code == ErrorCode.invalid_request
        assert "Cannot update these configs dynamically" in (refused.error_message or "")


@both_storages  # also on PostgreSQL (a broker alone in a cluster)
def test_kafka_configs_alters_and_describes_a_topic(coterie, tmp_path):
    """Kafka 4.2.1's kafka-configs: --alter --add-config, then --describe."""
    admin = AdminClient({"bootstrap.servers": coterie.bootstrap})
    admin.create_topics([NewTopic("configured", 1, 1)])["configured"].result(30)

    def tool(*args: str) -> str:
        return kafka_tool(CONFIG_COMMAND, coterie.bootstrap, "--entity-type", "topics",
                          "--entity-name", "configured", *args)

    tool("--alter", "--add-config", "retention.ms=7000,cleanup.policy=[delete,compact]")
    described = tool("--describe")
    assert "retention.ms=7000" in described, described
    assert "cleanup.policy=delete,compact" in described, described
    tool("--alter", "--delete-config", "retention.ms")
    assert "retention.ms=7000" not in tool("--describe")


GROUP = 32
GROUP_SOURCE = 8
GROUP_KEYS = {
    "consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000",
    "share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
    "share.record.lock.duration.ms": "30000", "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted", "streams.session.timeout.ms": "45000",
    "streams.heartbeat.interval.ms": "5000", "streams.num.standby.replicas": "0",
    "streams.initial.rebalance.delay.ms": "3000",
}


def _heartbeat_interval(conn: RawConnection, group: str, member_id: str, epoch: int) -> Any:
    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest

    return conn.request(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None,
        rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("grouped",) if epoch == 0 else None,
        subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=() if epoch == 0 else None))


def group_scenario(bootstrap: str) -> None:
    """Per-group configs (KIP-848): any group id describes the defaults; a set value is
    checked against the broker's bounds, shows as GROUP_CONFIG, and a live member's next
    heartbeat answer carries the group's own heartbeat interval; deleting it restores the
    default."""
    host, port = bootstrap.rsplit(":", 1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic("grouped", 1, 1))
    with RawConnection(host, int(port)) as conn:
        described = _describe(conn, GROUP, "tuned-group")
        assert described.error_code == ErrorCode.none
        assert {c.name: c.value for c in described.configs} == GROUP_KEYS
        assert _by_name(described)["consumer.session.timeout.ms"] == (
            "45000", DEFAULT, [("consumer.session.timeout.ms", "45000", DEFAULT)])
        member = str(uuid.uuid4())
        joined = _retried_heartbeat(conn, "tuned-group", member, 0)
        assert joined.heartbeat_interval == datetime.timedelta(seconds=5)
        assert _raw_alter(conn, GROUP, "tuned-group", ("consumer.session.timeout.ms", "50000", 0),
                          ("consumer.heartbeat.interval.ms", "6000", 0)).error_code == (
            ErrorCode.none)
        # Kafka applies a config change through its metadata log: a describe or heartbeat
        # right after the alter may still see the old value for a moment.
        now = _eventually(lambda: _by_name(_describe(conn, GROUP, "tuned-group")),
                          lambda d: d["consumer.session.timeout.ms"][0] == "50000")
        assert now["consumer.session.timeout.ms"] == (
            "50000", GROUP_SOURCE, [("consumer.session.timeout.ms", "50000", GROUP_SOURCE)])
        assert now["consumer.heartbeat.interval.ms"][:2] == ("6000", GROUP_SOURCE)
        again = _eventually(
            lambda: _heartbeat_interval(conn, "tuned-group", member, joined.member_epoch),
            lambda a: a.heartbeat_interval == datetime.timedelta(seconds=6))
        assert again.error_code == ErrorCode.none
        assert again.heartbeat_interval == datetime.timedelta(seconds=6)
        # Refused with Kafka's messages, nothing changed.
        low = _raw_alter(conn, GROUP, "tuned-group", ("consumer.session.timeout.ms", "5", 0))
        assert (low.error_code, low.error_message) == (
            ErrorCode.invalid_config, "consumer.session.timeout.ms must be greater than or "
                                      "equal to group.consumer.min.session.timeout.ms")
        fast = _raw_alter(conn, GROUP, "tuned-group", ("consumer.heartbeat.interval.ms", "4000", 0))
        assert (fast.error_code, fast.error_message) == (
            ErrorCode.invalid_config, "consumer.heartbeat.interval.ms must be greater than or "
                                      "equal to group.consumer.min.heartbeat.interval.ms")
        unknown = _raw_alter(conn, GROUP, "tuned-group", ("no.such", "1", 0))
        assert (unknown.error_code, unknown.error_message) == (
            ErrorCode.invalid_config, "Unknown group config name: no.such")
        assert _by_name(_describe(conn, GROUP, "tuned-group"))[
            "consumer.session.timeout.ms"][0] == "50000"
        assert _raw_alter(conn, GROUP, "tuned-group", ("consumer.heartbeat.interval.ms", None,
                                                       1)).error_code == ErrorCode.none
        back = _eventually(
            lambda: _heartbeat_interval(conn, "tuned-group", member, joined.member_epoch),
            lambda a: a.heartbeat_interval == datetime.timedelta(seconds=5))
        assert back.heartbeat_interval == datetime.timedelta(seconds=5)


def _eventually(get: Any, ok: Any, timeout: float = 10.0) -> Any:
    """`get()` until `ok` holds of it or `timeout` passes; the last answer either way (the
    caller's asserts then say what was wrong)."""
    deadline = time.monotonic() + timeout
    got = get()
    while not ok(got) and time.monotonic() < deadline:
        time.sleep(0.1)
        got = get()
    return got


def _retried_heartbeat(conn: RawConnection, group: str, member: str, epoch: int) -> Any:
    """Joins retry while a broker gets its coordinator ready (Kafka creates
    __consumer_offsets on first use)."""
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    for _ in range(150):
        conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
        answer = _heartbeat_interval(conn, group, member, epoch)
        if answer.error_code not in (ErrorCode.coordinator_not_available,
                                     ErrorCode.coordinator_load_in_progress,
                                     ErrorCode.not_coordinator):
            assert answer.error_code == ErrorCode.none, answer
            return answer
        time.sleep(0.2)
    raise AssertionError("the coordinator never became available")


def test_group_configs(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    group_scenario(broker.bootstrap)
    with RawConnection(broker.host, broker.port) as conn:
        assert _raw_alter(conn, GROUP, "kept", ("consumer.heartbeat.interval.ms", "7000",
                                                0)).error_code == ErrorCode.none
    broker.kill9()
    broker.restart_after_kill9()
    with RawConnection(broker.host, broker.port) as conn:
        assert _by_name(_describe(conn, GROUP, "kept"))["consumer.heartbeat.interval.ms"][
            :2] == ("7000", GROUP_SOURCE)
        member = str(uuid.uuid4())
        joined = _retried_heartbeat(conn, "kept", member, 0)
        assert joined.heartbeat_interval == datetime.timedelta(seconds=7)


def test_broker_loggers_are_described_and_their_levels_change_at_run_time(coterie, tmp_path):
    """BROKER_LOGGER: coterie's loggers and the root with their levels; a level set at run
    time shows in the broker's log at once (a debug line per new connection), deleting it
    inherits again; unknown loggers and levels are INVALID_CONFIG, the root cannot be
    deleted. Then Kafka's kafka-configs tool does the same."""
    loggers = 8
    with RawConnection(coterie.host, coterie.port) as conn:
        described = _by_name(_describe(conn, loggers, "1"))
        assert "root" in described and "coterie.broker" in described
        assert described["coterie.broker"][0] in ("INFO", "WARN")
        assert _raw_alter(conn, loggers, "1", ("coterie.broker", "DEBUG", 0)).error_code == (
            ErrorCode.none)
        assert _by_name(_describe(conn, loggers, "1"))["coterie.broker"][0] == "DEBUG"
        debug_lines = "DEBUG coterie.broker: connection from"
        assert debug_lines not in coterie.log_text()
        with RawConnection(coterie.host, coterie.port):
            pass
        time.sleep(0.5)
        assert debug_lines in coterie.log_text()
        bad = _raw_alter(conn, loggers, "1", ("coterie.broker", "LOUD", 0))
        assert bad.error_code == ErrorCode.invalid_config
        assert _raw_alter(conn, loggers, "1", ("no.such.logger", "INFO", 0)).error_code == (
            ErrorCode.invalid_config)
        assert _raw_alter(conn, loggers, "1", ("root", None, 1)).error_code == (
            ErrorCode.invalid_config)
        assert _raw_alter(conn, loggers, "1", ("coterie.broker", None, 1)).error_code == (
            ErrorCode.none)
        assert _by_name(_describe(conn, loggers, "1"))["coterie.broker"][0] != "DEBUG"

    def tool(*args: str) -> str:
        return kafka_tool(CONFIG_COMMAND, coterie.bootstrap, "--entity-type", "broker-loggers",
                          "--entity-name", "1", *args)

    tool("--alter", "--add-config", "coterie.groups=DEBUG")
    assert "coterie.groups=DEBUG" in tool("--describe")


def dynamic_scenario(bootstrap: str) -> None:
    """Dynamic broker configs: this broker's (resource "1") and the cluster-wide default
    (resource ""), in Kafka's precedence over the static ones, shown in the topics' configs
    with their synonyms and applied at once (a smaller message.max.bytes refuses a record)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic("dyn", 1, 1))
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        assert _raw_alter(conn, BROKER, "1", ("log.retention.ms", "12345", 0),
                          ("message.max.bytes", "2000", 0)).error_code == ErrorCode.none
        assert _raw_alter(conn, BROKER, "", ("log.segment.bytes", "6000000", 0)).error_code == (
            ErrorCode.none)
        # Kafka applies broker-level changes to its topics asynchronously; coterie at once.
        deadline = time.monotonic() + 15
        while True:
            topic = _by_name(_describe(conn, TOPIC, "dyn"))
            if topic["segment.bytes"][0] == "6000000" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # Every unit of the setting after the primary one: log.retention.hours, as set and
        # as defaulted.
        assert topic["retention.ms"] == ("12345", 2, [
            ("log.retention.ms", "12345", 2), ("log.retention.hours", "100", STATIC),
            ("log.retention.hours", "168", DEFAULT)])
        assert topic["segment.bytes"] == ("6000000", 3, [
            ("log.segment.bytes", "6000000", 3), ("log.segment.bytes", "5000000", STATIC),
            ("log.segment.bytes", "1073741824", DEFAULT)])
        broker = _by_name(_describe(conn, BROKER, "1", ("log.retention.ms", "log.segment.bytes")))
        assert broker["log.retention.ms"][:2] == ("12345", 2)
        assert broker["log.segment.bytes"][:2] == ("6000000", 3)
        cluster = _by_name(_describe(conn, BROKER, ""))
        assert cluster["log.segment.bytes"][:2] == ("6000000", 3)
        fixed = _raw_alter(conn, BROKER, "1", ("node.id", "2", 0))
        assert fixed.error_code == ErrorCode.invalid_request
        while topic["max.message.bytes"][0] != "2000" and time.monotonic() < deadline:
            time.sleep(0.2)  # (Kafka: asynchronously)
            topic = _by_name(_describe(conn, TOPIC, "dyn"))
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce("dyn", b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE], errors
    with RawConnection(host, int(port)) as conn:
        assert _raw_alter(conn, BROKER, "1", ("log.retention.ms", None, 1),
                          ("message.max.bytes", None, 1)).error_code == ErrorCode.none
        assert _raw_alter(conn, BROKER, "", ("log.segment.bytes", None, 1)).error_code == (
            ErrorCode.none)
        deadline = time.monotonic() + 15  # Kafka applies them asynchronously
        while True:
            topic = _by_name(_describe(conn, TOPIC, "dyn"))
            if topic["segment.bytes"][0] == "5000000" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert topic["segment.bytes"][:2] == ("5000000", STATIC)
        assert topic["max.message.bytes"][:2] == ("1048588", DEFAULT)


def test_dynamic_broker_configs(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    dynamic_scenario(broker.bootstrap)
    with RawConnection(broker.host, broker.port) as conn:
        assert _raw_alter(conn, BROKER, "", ("log.retention.bytes", "777777", 0)).error_code == (
            ErrorCode.none)
    broker.kill9()
    broker.restart_after_kill9()
    with RawConnection(broker.host, broker.port) as conn:
        assert _by_name(_describe(conn, TOPIC, "dyn"))["retention.bytes"][:2] == ("777777", 3)


def test_documentation_is_given_when_asked(coterie):
    """include_documentation: every topic and group config carries what it means; without
    it, none (as Kafka leaves it out)."""
    admin = AdminClient({"bootstrap.servers": coterie.bootstrap})
    admin.create_topics([NewTopic("documented", 1, 1)])["documented"].result(30)
    with RawConnection(coterie.host, coterie.port) as conn:
        for kind, name in ((TOPIC, "documented"), (GROUP, "any-group")):
            asked = conn.request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
                resource_type=kind, resource_name=name, configuration_keys=None),),
                include_synonyms=False, include_documentation=True)).results[0]
            assert asked.configs and all(c.documentation for c in asked.configs)
            plain = _describe(conn, kind, name)
            assert all(c.documentation is None for c in plain.configs)


# The log settings of a broker started with SETTINGS, nothing changed at run time, as Kafka
# 4.2.1 describes them: name -> (value, source, read-only, type). The synonyms are the
# default's own (none when it is null) but for BROKER_LOG_SYNONYMS. Not here: min.insync.replicas
# (Kafka's storage format sets it as a cluster default) and log.flush.scheduler.interval.ms
# (coterie's default is 1000 ms): docs/decisions.md.
BROKER_LOG_CONFIGS: dict[str, tuple[str | None, int, bool, int]] = {
    "log.retention.ms": (None, DEFAULT, False, LONG),
    "log.retention.minutes": (None, DEFAULT, True, INT),
    "log.retention.hours": ("100", STATIC, True, INT),
    "log.retention.bytes": ("-1", DEFAULT, False, LONG),
    "log.retention.check.interval.ms": ("300000", DEFAULT, True, LONG),
    "log.segment.bytes": ("5000000", STATIC, False, INT),
    "log.segment.delete.delay.ms": ("60000", DEFAULT, False, LONG),
    "log.roll.ms": (None, DEFAULT, False, LONG),
    "log.roll.hours": ("168", DEFAULT, True, INT),
    "log.roll.jitter.ms": (None, DEFAULT, False, LONG),
    "log.roll.jitter.hours": ("0", DEFAULT, True, INT),
    "log.cleanup.policy": ("delete", DEFAULT, False, LIST),
    "log.cleaner.enable": ("true", DEFAULT, True, BOOLEAN),
    "log.cleaner.threads": ("1", DEFAULT, False, INT),
    "log.cleaner.backoff.ms": ("15000", DEFAULT, False, LONG),
    "log.cleaner.dedupe.buffer.size": ("134217728", DEFAULT, False, LONG),
    "log.cleaner.delete.retention.ms": ("86400000", DEFAULT, False, LONG),
    "log.cleaner.min.cleanable.ratio": ("0.5", DEFAULT, False, DOUBLE),
    "log.cleaner.min.compaction.lag.ms": ("0", DEFAULT, False, LONG),
    "log.cleaner.max.compaction.lag.ms": (LONG_MAX, DEFAULT, False, LONG),
    "log.cleaner.io.max.bytes.per.second": ("1.7976931348623157E308", DEFAULT, False, DOUBLE),
    "log.flush.interval.messages": (LONG_MAX, DEFAULT, False, LONG),
    "log.flush.interval.ms": (None, DEFAULT, False, LONG),
    "log.index.interval.bytes": ("4096", DEFAULT, False, INT),
    "log.index.size.max.bytes": ("10485760", DEFAULT, False, INT),
    "log.preallocate": ("false", DEFAULT, False, BOOLEAN),
    "log.message.timestamp.type": ("CreateTime", DEFAULT, False, STRING),
    "log.message.timestamp.after.max.ms": ("3600000", DEFAULT, False, LONG),
    "log.message.timestamp.before.max.ms": (LONG_MAX, DEFAULT, False, LONG),
    "log.local.retention.ms": ("-2", DEFAULT, False, LONG),
    "log.local.retention.bytes": ("-2", DEFAULT, False, LONG),
    "message.max.bytes": ("1048588", DEFAULT, False, INT),
    "compression.type": ("producer", DEFAULT, False, STRING),
    "compression.gzip.level": ("-1", DEFAULT, False, INT),
    "compression.lz4.level": ("9", DEFAULT, False, INT),
    "compression.zstd.level": ("3", DEFAULT, False, INT),
    "unclean.leader.election.enable": ("false", DEFAULT, False, BOOLEAN),
}
BROKER_LOG_SYNONYMS = {
    "log.retention.hours": [("log.retention.hours", "100", STATIC),
                            ("log.retention.hours", "168", DEFAULT)],
    "log.segment.bytes": [("log.segment.bytes", "5000000", STATIC),
                          ("log.segment.bytes", "1073741824", DEFAULT)],
}


def _expected_synonyms(name: str) -> list[tuple[str, str | None, int]]:
    value = BROKER_LOG_CONFIGS[name][0]
    return BROKER_LOG_SYNONYMS.get(name, [] if value is None else [(name, value, DEFAULT)])


def _broker_entries(admin: AdminClient, name: str = "1") -> dict[str, Any]:
    (future,) = admin.describe_configs([ConfigResource("broker", name)]).values()
    return future.result(30)


def broker_scenario(bootstrap: str) -> None:
    """The broker's log settings, as a real client and a raw request see them."""
    entries = _broker_entries(AdminClient({"bootstrap.servers": bootstrap}))
    seen = {name: (e.value, e.source, e.is_read_only, list(e.synonyms))
            for name, e in entries.items() if name in BROKER_LOG_CONFIGS}
    assert seen == {name: (value, source, read_only,
                           list(dict.fromkeys(n for n, _, _ in _expected_synonyms(name))))
                    for name, (value, source, read_only, _) in BROKER_LOG_CONFIGS.items()}
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as conn:
        answer = _describe(conn, BROKER, "1", tuple(BROKER_LOG_CONFIGS))
    assert answer.error_code == ErrorCode.none
    raw = {c.name: (c.value, c.config_source, c.read_only, c.config_type,
                    [(s.name, s.value, s.source) for s in c.synonyms]) for c in answer.configs}
    assert raw == {name: (*BROKER_LOG_CONFIGS[name], _expected_synonyms(name))
                   for name in BROKER_LOG_CONFIGS}
    assert not any(c.is_sensitive for c in answer.configs)


# Kafka's dynamic broker configs set by `dynamic_names_scenario`, for this broker and for the
# cluster (no thread count changes by more than half or double: Kafka refuses that).
THIS_BROKER = {"sasl.kerberos.min.time.before.relogin": "70000", "log.cleaner.threads": "2",
               "num.io.threads": "4", "max.connections": "1000", "log.retention.ms": "12345",
               "no.such.config": "1"}
CLUSTER_WIDE = {"max.connections": "2000", "log.retention.ms": "54321"}
INT_MAX = str(2**31 - 1)


def _set(admin: AdminClient, name: str, ops: dict[str, str | None],
         op: AlterConfigOpType = AlterConfigOpType.SET) -> None:
    resource = ConfigResource("broker", name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v in ops.items()])
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(30)


def _full(result: Any) -> dict[str, tuple]:
    return {c.name: (c.value, c.config_source, c.read_only, c.config_type, c.is_sensitive,
                     [(s.name, s.value, s.source) for s in c.synonyms]) for c in result.configs}


def dynamic_names_scenario(bootstrap: str) -> None:
    """Kafka's dynamic broker configs beyond the log defaults: set for this broker (through
    confluent-kafka's AdminClient) and the cluster, described with their synonyms in every
    unit, refused as Kafka refuses them, deleted again."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic("units", 1, 1))
    host, port = bootstrap.rsplit(":", 1)
    _set(admin, "1", THIS_BROKER)
    _set(admin, "1", {"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, AlterConfigOpType.APPEND)
    with RawConnection(host, int(port)) as conn:
        assert _raw_alter(conn, BROKER, "", *((k, v, 0) for k, v in CLUSTER_WIDE.items())
                          ).error_code == ErrorCode.none
        # Kafka applies changes through its metadata log: a describe may lag a moment.
        b = _eventually(lambda: _full(_describe(conn, BROKER, "1")),
                        lambda d: len(d["max.connections"][5]) == 3
                        and d["ssl.cipher.suites"][1] == DYNAMIC and "no.such.config" in d)
        relogin = "sasl.kerberos.min.time.before.relogin"
        assert b[relogin] == ("70000", DYNAMIC, False, LONG, False, [
            (relogin, "70000", DYNAMIC), (relogin, "60000", DEFAULT)])
        assert b["log.cleaner.threads"] == ("2", DYNAMIC, False, INT, False, [
            ("log.cleaner.threads", "2", DYNAMIC), ("log.cleaner.threads", "1", DEFAULT)])
        assert b["num.io.threads"] == ("4", DYNAMIC, False, INT, False, [
            ("num.io.threads", "4", DYNAMIC), ("num.io.threads", "8", DEFAULT)])
        assert b["max.connections"] == ("1000", DYNAMIC, False, INT, False, [
            ("max.connections", "1000", DYNAMIC), ("max.connections", "2000", DYNAMIC_DEFAULT),
            ("max.connections", INT_MAX, DEFAULT)])
        assert b["ssl.cipher.suites"] == ("TLS_AES_128_GCM_SHA256", DYNAMIC, False, LIST, False, [
            ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", DYNAMIC),
            ("ssl.cipher.suites", "", DEFAULT)])
        retention = [("log.retention.ms", "12345", DYNAMIC),
                     ("log.retention.ms", "54321", DYNAMIC_DEFAULT),
                     ("log.retention.hours", "100", STATIC),
                     ("log.retention.hours", "168", DEFAULT)]
        assert b["log.retention.ms"] == ("12345", DYNAMIC, False, LONG, False, retention)
        # The dynamic log.retention.ms takes the file's log.retention.hours out of the
        # config in effect: its value is the default again, its source still the file.
        assert b["log.retention.hours"] == ("168", STATIC, True, INT, False, retention[2:])
        # A custom name: kept, its value never shown, of unknown type, read-only.
        assert b["no.such.config"] == (None, DYNAMIC, True, UNKNOWN, True, [
            ("no.such.config", None, DYNAMIC)])
        cluster = _full(_describe(conn, BROKER, ""))
        assert cluster["max.connections"] == ("2000", DYNAMIC_DEFAULT, False, INT, False, [
            ("max.connections", "2000", DYNAMIC_DEFAULT)])
        assert cluster["log.retention.ms"][:2] == ("54321", DYNAMIC_DEFAULT)
        assert set(cluster) - {"min.insync.replicas"} == set(CLUSTER_WIDE)
        topic = _eventually(lambda: _by_name(_describe(conn, TOPIC, "units")),
                            lambda d: d["retention.ms"][0] == "12345")
        assert topic["retention.ms"] == ("12345", DYNAMIC, retention)

        # Refused, with Kafka's codes and messages; nothing changes.
        def refused(name: str, *ops: tuple[str, str | None, int]) -> tuple[Any, str | None]:
            answer = _raw_alter(conn, BROKER, name, *ops)
            return answer.error_code, answer.error_message

        request = ErrorCode.invalid_request
        assert refused("1", ("broker.id", "2", 0)) == (
            request, "Cannot update these configs dynamically: Set(broker.id)")
        assert refused("1", ("log.retention.hours", "50", 0)) == (
            request, "Cannot update these configs dynamically: Set(log.retention.hours)")
        assert refused("1", ("num.io.threads", "abc", 0)) == (
            request, "Invalid value abc for configuration num.io.threads: Not a number of type INT")
        assert refused("1", ("num.io.threads", "0", 0)) == (
            request, "Invalid value 0 for configuration num.io.threads: Value must be at least 1")
        assert refused("1", ("log.cleaner.min.cleanable.ratio", "2", 0)) == (
            request, "Invalid value 2.0 for configuration log.cleaner.min.cleanable.ratio: Value "
                     "must be no more than 1")
        assert refused("1", ("compression.type", "brotli", 0)) == (
            request, "Invalid value brotli for configuration compression.type: String must be one "
                     "of: uncompressed, zstd, lz4, snappy, gzip, producer")
        assert refused("1", ("log.segment.bytes", "5000", 0)) == (
            request, "Invalid value 5000 for configuration log.segment.bytes: Value must be at "
                     "least 1048576")
        assert refused("1", ("ssl.keystore.type", "PKCS12", 0)) == (
            request, "These security configs can be dynamically updated only per-listener using "
                     "the listener prefix: HashSet(ssl.keystore.type)")
        assert refused("", ("sasl.kerberos.min.time.before.relogin", "70000", 0)) == (
            request, "Cannot update these configs at default cluster level, broker id must be "
                     "specified: Set(sasl.kerberos.min.time.before.relogin)")
        assert refused("1", ("log.retention.ms", None, 0)) == (
            request, "Null value not supported for : log.retention.ms")
        assert refused("7", ("max.connections", "5", 0)) == (
            request, "Unexpected broker id, expected 1, but received 7")
        assert refused("1", ("max.connections", "5", 2)) == (
            ErrorCode.invalid_config, "Config value append is not allowed for config key: "
                                      "max.connections")
        checked = conn.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=BROKER, resource_name="1", configs=(AlterableConfig(
                name="max.connections", config_operation=0, value="10"),)),), validate_only=True))
        assert checked.responses[0].error_code == ErrorCode.none
        time.sleep(1)  # (time for Kafka to apply a change, were it made)
        assert _full(_describe(conn, BROKER, "1"))["max.connections"][0] == "1000"

        # Deleted: the defaults again.
        _set(admin, "1", dict.fromkeys([*THIS_BROKER, "ssl.cipher.suites"]),
             AlterConfigOpType.DELETE)
        assert _raw_alter(conn, BROKER, "", *((k, None, 1) for k in CLUSTER_WIDE)
                          ).error_code == ErrorCode.none
        back = _eventually(lambda: _full(_describe(conn, BROKER, "1")),
                           lambda d: d["max.connections"][0] == INT_MAX
                           and d["log.retention.ms"][0] is None and "no.such.config" not in d)
        assert back["max.connections"] == ("2147483647", DEFAULT, False, INT, False, [
            ("max.connections", INT_MAX, DEFAULT)])
        assert back["log.retention.ms"] == (None, DEFAULT, False, LONG, False, [])
        assert back["log.retention.hours"][:2] == ("100", STATIC)
        assert "no.such.config" not in back


def test_broker_configs(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    broker_scenario(broker.bootstrap)


def test_dynamic_broker_config_names(coterie_factory):
    broker = coterie_factory(config=SETTINGS)
    dynamic_names_scenario(broker.bootstrap)


def _third_connection_refused(broker: Any) -> bool:
    """With two connections open and served, whether a third one is closed at once."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    kept = [RawConnection(broker.host, broker.port) for _ in range(2)]
    try:
        for c in kept:
            assert c.request(ApiVersionsRequest(client_software_name="t",
                                                client_software_version="1")).error_code == 0
        with RawConnection(broker.host, broker.port) as extra:
            return extra.is_closed_by_peer(wait=3.0)
    finally:
        for c in kept:
            c.close()
        time.sleep(0.3)  # the broker has seen them go


@both_storages  # also on PostgreSQL (a broker alone in a cluster)
def test_dynamic_broker_configs_act_at_once_and_after_a_restart(coterie_factory):
    """coterie acts on max.connections.per.ip as soon as it is set, and again after a kill -9
    (read back from broker-configs.json); the dynamic configs it only keeps are described
    as set after the restart; deleting the limit lifts it at once."""
    broker = coterie_factory(config=SETTINGS)
    time.sleep(0.3)  # the start-up probe's connection is gone
    assert not _third_connection_refused(broker)
    with RawConnection(broker.host, broker.port) as conn:
        assert _raw_alter(conn, BROKER, "1", ("max.connections.per.ip", "2", 0),
                          ("num.io.threads", "4", 0),
                          ("sasl.kerberos.min.time.before.relogin", "70000", 0)
                          ).error_code == ErrorCode.none
    time.sleep(0.3)
    assert _third_connection_refused(broker)
    broker.kill9()
    broker.restart_after_kill9()
    time.sleep(0.3)
    assert _third_connection_refused(broker)
    with RawConnection(broker.host, broker.port) as conn:
        now = _full(_describe(conn, BROKER, "1"))
        assert now["num.io.threads"][:2] == ("4", DYNAMIC)
        assert now["sasl.kerberos.min.time.before.relogin"][:2] == ("70000", DYNAMIC)
        assert now["max.connections.per.ip"][:2] == ("2", DYNAMIC)
        assert _raw_alter(conn, BROKER, "1", ("max.connections.per.ip", None, 1)
                          ).error_code == ErrorCode.none
    time.sleep(0.3)
    assert not _third_connection_refused(broker)


def test_kafka_configs_describes_and_alters_the_broker(coterie_factory):
    """Kafka 4.2.1's kafka-configs on the broker: --describe --all lists its log settings
    (there were none but those set in the file), --alter changes a dynamic config of this
    broker and the cluster default, and --describe shows them with their synonyms."""
    broker = coterie_factory(config=SETTINGS)

    def tool(*args: str) -> str:
        return kafka_tool(CONFIG_COMMAND, broker.bootstrap, "--entity-type", "brokers", *args)

    everything = tool("--entity-name", "1", "--describe", "--all")
    for line in ("log.retention.hours=100 sensitive=false synonyms={STATIC_BROKER_CONFIG:"
                 "log.retention.hours=100, DEFAULT_CONFIG:log.retention.hours=168}",
                 "log.cleanup.policy=delete ", "log.cleaner.min.cleanable.ratio=0.5 ",
                 "message.max.bytes=1048588 ", "log.segment.bytes=5000000 "):
        assert line in everything, everything
    tool("--entity-name", "1", "--alter", "--add-config", "log.cleaner.threads=2")
    tool("--entity-default", "--alter", "--add-config", "log.retention.ms=99999")
    mine = tool("--entity-name", "1", "--describe")
    assert ("log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}") in mine, mine
    cluster = tool("--entity-default", "--describe")
    assert "log.retention.ms=99999 sensitive=false" in cluster, cluster
