"""Dynamic broker configs (issue 22, points 9 and 11): Kafka 4.2's table of broker configs, the
checks of a new value with Kafka's wording, the describe of the broker resource (values,
sources, synonyms in every unit) and the broker acting on the changes it implements.

The expectations are what Apache Kafka 4.2.1 answered to the same requests (the integration
scenarios in tests/integration/test_describe_configs.py check them against it as well).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from coterie.broker.config import BrokerConfig
from coterie.broker.config_defs import (
    COTERIE_CONFIGS,
    DYNAMIC_CONFIGS,
    PER_BROKER,
    STATIC_CONFIGS,
    UNKNOWN,
    canonical,
    check_value,
    config_type,
    java_double,
    per_broker_only,
)
from coterie.broker.dynamic_configs import (
    BROKER,
    BROKER_CONFIG_FILE,
    CLUSTER,
    DynamicBrokerConfigs,
    NotDynamic,
)
from coterie.broker.server import Broker
from coterie.log.config import (
    BROKER_LOG_PROPERTIES,
    DOUBLE,
    INT,
    LIST,
    LONG,
    PASSWORD,
    TOPIC_CONFIG_DEFS,
)
from coterie.log.errors import InvalidConfigError

DYNAMIC, DEFAULT_SOURCE, STATIC, CLUSTER_SOURCE = 2, 5, 4, 3
MAX_INT = str(2**31 - 1)


def test_the_tables_are_kafkas():
    """92 dynamic names, the broker synonym of every topic config among them, their other
    units static, and no name in two tables."""
    assert len(DYNAMIC_CONFIGS) == 92
    assert len(STATIC_CONFIGS) == 249
    assert not set(DYNAMIC_CONFIGS) & set(STATIC_CONFIGS)
    assert not set(COTERIE_CONFIGS) & (set(DYNAMIC_CONFIGS) | set(STATIC_CONFIGS))
    primaries = {d.broker_synonym for d in TOPIC_CONFIG_DEFS.values() if d.broker_synonym}
    assert primaries <= set(DYNAMIC_CONFIGS)
    assert BROKER_LOG_PROPERTIES - primaries == {
        "log.retention.minutes", "log.retention.hours", "log.roll.hours",
        "log.roll.jitter.hours", "log.flush.scheduler.interval.ms"}
    assert all(n in STATIC_CONFIGS for n in BROKER_LOG_PROPERTIES - primaries)
    assert DYNAMIC_CONFIGS["ssl.keystore.location"].scope == PER_BROKER
    assert not per_broker_only("max.connections")
    assert per_broker_only("listener.name.external.ssl.keystore.location")
    assert not per_broker_only("listener.name.external.max.connections")
    assert config_type("listener.name.external.plain.sasl.jaas.config") == PASSWORD
    assert config_type("no.such.config") is None


@pytest.mark.parametrize(("name", "value", "answer"), [
    ("num.io.threads", "4", None),
    ("num.io.threads", "abc", "Invalid value abc for configuration num.io.threads: Not a number "
                              "of type INT"),
    ("num.io.threads", "", "Invalid value  for configuration num.io.threads: Not a number of "
                           "type INT"),
    ("num.io.threads", "0", "Invalid value 0 for configuration num.io.threads: Value must be at "
                            "least 1"),
    ("message.max.bytes", "99999999999", "Invalid value 99999999999 for configuration "
                                         "message.max.bytes: Not a number of type INT"),
    ("log.retention.ms", " 77 ", None),
    ("log.retention.ms", "-5", None),
    ("log.retention.ms", "1.5", "Invalid value 1.5 for configuration log.retention.ms: Not a "
                                "number of type LONG"),
    ("log.segment.bytes", "5000", "Invalid value 5000 for configuration log.segment.bytes: Value "
                                  "must be at least 1048576"),
    ("log.cleaner.min.cleanable.ratio", "2", "Invalid value 2.0 for configuration "
                                             "log.cleaner.min.cleanable.ratio: Value must be no "
                                             "more than 1"),
    ("compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: "
                                     "Value must be between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "-1", None),
    ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: "
                                   "String must be one of: uncompressed, zstd, lz4, snappy, "
                                   "gzip, producer"),
    ("log.cleanup.policy", "compact,delete", None),
    ("log.cleanup.policy", "", None),
    ("log.cleanup.policy", "delete,bogus", "Invalid value bogus for configuration "
                                           "log.cleanup.policy: String must be one of: compact, "
                                           "delete"),
    ("ssl.client.auth", "REQUIRED", "Invalid value REQUIRED for configuration ssl.client.auth: "
                                    "String must be one of: required, requested, none"),
    ("transaction.partition.verification.enable", "TRUE", None),
    ("log.preallocate", "yes", "Invalid value yes for configuration log.preallocate: Expected "
                               "value to be either true or false"),
    ("sasl.login.refresh.buffer.seconds", "99999", "Invalid value 99999 for configuration "
                                                   "sasl.login.refresh.buffer.seconds: Not a "
                                                   "number of type SHORT"),
    ("listener.name.plaintext.max.connections", "abc", "Invalid value abc for configuration "
                                                       "max.connections: Not a number of type "
                                                       "INT"),
    ("listeners", "garbage", "Error creating broker listeners from '[garbage]': Unable to parse "
                             "garbage to a broker endpoint"),
    ("listeners", "PLAINTEXT://127.0.0.1:9092,EXTERNAL://:9093", None),
    ("no.such.config", "anything", None),
])
def test_values_are_checked_as_kafka_checks_them(name, value, answer):
    assert check_value(name, value) == answer


def test_values_are_shown_as_kafka_shows_them():
    assert [java_double(x) for x in (0.5, 2.0, 1e7, 1e-4, 1.7976931348623157e308, -0.1)] == [
        "0.5", "2.0", "1.0E7", "1.0E-4", "1.7976931348623157E308", "-0.1"]
    assert canonical(LONG, " 77 ") == "77"
    assert canonical(DOUBLE, "1") == "1.0"
    assert canonical(LIST, "a , b") == "a,b"
    assert canonical(INT, "lots") == "lots"  # (a bad static value is shown as set)


def test_what_kafka_refuses_is_refused_in_kafkas_order(tmp_path: Path):
    store = DynamicBrokerConfigs(tmp_path)
    with pytest.raises(NotDynamic, match=r"^Cannot update these configs dynamically: "
                                         r"Set\(broker.id, log.dirs\)$"):
        store.alter(BROKER, {"log.dirs": "/x", "broker.id": "2", "num.io.threads": "abc"})
    with pytest.raises(NotDynamic, match=r"Set\(log.retention.hours\)"):
        store.alter(BROKER, {"log.retention.hours": "5"})  # only the primary unit is dynamic
    with pytest.raises(NotDynamic, match=r"Set\(max.partitions.per.request\)"):
        store.alter(BROKER, {"max.partitions.per.request": "5"})  # coterie's own, static
    with pytest.raises(NotDynamic, match=r"^These security configs can be dynamically updated "
                                         r"only per-listener using the listener prefix: "
                                         r"HashSet\(ssl.keystore.type\)$"):
        store.alter(BROKER, {"ssl.keystore.type": "PKCS12", "num.io.threads": "abc"})
    with pytest.raises(InvalidConfigError, match=r"num\.io\.threads"):
        store.alter(CLUSTER, {"num.io.threads": "abc", "ssl.cipher.suites": "x"})
    with pytest.raises(NotDynamic, match=r"^Cannot update these configs at default cluster "
                                         r"level, broker id must be specified: "
                                         r"Set\(listeners, ssl.cipher.suites\)$"):
        store.alter(CLUSTER, {"ssl.cipher.suites": "x", "listeners": "PLAINTEXT://:1",
                              "max.connections": "5"})
    assert store.layers == {CLUSTER: {}, BROKER: {}}
    assert not (tmp_path / BROKER_CONFIG_FILE).exists()
    # Accepted: dynamic names, listener overrides, custom names (kept for plugins).
    store.alter(BROKER, {"ssl.cipher.suites": "x", "listener.name.external.ssl.keystore.type":
                         "PKCS12", "no.such.config": "1"})
    store.alter(CLUSTER, {"listener.name.external.max.connections": "7"})
    assert DynamicBrokerConfigs(tmp_path).layers == store.layers  # durable


def test_watchers_check_first_and_act_after_the_change_is_kept(tmp_path: Path):
    seen: list[dict[str, str]] = []

    def refuse_big(props):
        if int(props.get("max.connections", "0")) > 100:
            raise InvalidConfigError("too many")

    store = DynamicBrokerConfigs(tmp_path, {"max.connections": "10"},
                                 {"max.connections": MAX_INT, "num.io.threads": "8"})
    store.watch(lambda props: seen.append(dict(props)), check=refuse_big)
    with pytest.raises(InvalidConfigError):
        store.alter(BROKER, {"max.connections": "1000"})
    store.alter(BROKER, {"max.connections": "50"}, validate_only=True)
    assert seen == [] and store.layers[BROKER] == {}
    store.alter(CLUSTER, {"max.connections": "60", "num.io.threads": "4"})
    assert json.loads((tmp_path / BROKER_CONFIG_FILE).read_text())[CLUSTER] == {
        "max.connections": "60", "num.io.threads": "4"}
    assert seen[-1]["max.connections"] == "60" and seen[-1]["num.io.threads"] == "4"
    store.alter(BROKER, {"max.connections": "50"})
    assert seen[-1]["max.connections"] == "50"  # this broker's value before the cluster's


def _by_name(described):
    return {d.name: d for d in described}


def test_the_broker_is_described_as_kafka_describes_it(tmp_path: Path):
    """A broker started with log.retention.hours=100 and max.connections=5000, with
    log.retention.ms set for it and for the cluster, a password, a custom name: Kafka
    4.2.1's answer, entry by entry."""
    store = DynamicBrokerConfigs(tmp_path, {"log.retention.hours": "100",
                                            "max.connections": "5000"},
                                 {"max.connections": MAX_INT, "log.flush.scheduler.interval.ms":
                                  "1000"})
    before = _by_name(store.describe(per_broker=True))
    # Nothing set through ms: null, and no synonym (Kafka drops those before the name).
    assert (before["log.retention.ms"].value, before["log.retention.ms"].source,
            before["log.retention.ms"].synonyms) == (None, DEFAULT_SOURCE, ())
    assert before["log.retention.hours"].synonyms == (
        ("log.retention.hours", "100", STATIC), ("log.retention.hours", "168", DEFAULT_SOURCE))
    assert before["log.retention.hours"].read_only
    assert not before["log.retention.ms"].read_only
    assert before["log.cleaner.threads"].value == "1"  # Kafka's default, every dynamic name
    assert before["log.flush.scheduler.interval.ms"].value == "1000"  # coterie's default

    store.alter(BROKER, {"log.retention.ms": "12345", "sasl.jaas.config": "secret;",
                         "no.such.config": "1", "log.cleaner.min.cleanable.ratio": "1"})
    store.alter(CLUSTER, {"log.retention.ms": "54321", "max.connections": "2000"})
    now = _by_name(store.describe(per_broker=True))
    ms = now["log.retention.ms"]
    assert (ms.value, ms.source, ms.type) == ("12345", DYNAMIC, LONG)
    assert ms.synonyms == (  # every unit, from the first layer that sets ms
        ("log.retention.ms", "12345", DYNAMIC), ("log.retention.ms", "54321", CLUSTER_SOURCE),
        ("log.retention.hours", "100", STATIC), ("log.retention.hours", "168", DEFAULT_SOURCE))
    hours = now["log.retention.hours"]  # the dynamic ms took the file's hours away
    assert (hours.value, hours.source) == ("168", STATIC)
    assert now["log.cleaner.min.cleanable.ratio"].value == "1.0"
    assert now["max.connections"].synonyms == (
        ("max.connections", "2000", CLUSTER_SOURCE), ("max.connections", "5000", STATIC),
        ("max.connections", MAX_INT, DEFAULT_SOURCE))
    jaas = now["sasl.jaas.config"]
    assert (jaas.value, jaas.sensitive, jaas.synonyms) == (
        None, True, (("sasl.jaas.config", None, DYNAMIC),))
    custom = now["no.such.config"]
    assert (custom.value, custom.source, custom.type, custom.sensitive, custom.read_only) == (
        None, DYNAMIC, UNKNOWN, True, True)
    cluster = _by_name(store.describe(per_broker=False))
    assert set(cluster) == {"log.retention.ms", "max.connections"}
    assert cluster["max.connections"].synonyms == (("max.connections", "2000", CLUSTER_SOURCE),)


def test_the_broker_acts_on_the_dynamic_configs_it_implements(tmp_path: Path):
    """In-process broker: connection limits, the log cleaner's backoff and key budget,
    producer expiration and the log defaults change at once, and are what a restarted
    broker starts with; a value coterie cannot use is refused, nothing changed."""
    async def scenario() -> None:
        config = BrokerConfig.load("127.0.0.1", 0, tmp_path / "d",
                                   overrides={"max.connections": "500"})
        broker = Broker(config)
        try:
            broker.create_topic("t", 1, {})
            broker.dynamic_configs.alter(BROKER, {
                "max.connections.per.ip": "2", "log.cleaner.backoff.ms": "500",
                "log.cleaner.dedupe.buffer.size": "1048576", "producer.id.expiration.ms": "9000",
                "message.max.bytes": "2000", "num.io.threads": "4"})
            broker.dynamic_configs.alter(CLUSTER, {"max.connections": "300"})
            assert (broker.connections.max_connections, broker.connections.max_per_ip) == (
                300, 2)
            assert broker.cleaner is not None
            assert (broker.cleaner.backoff_s, broker.cleaner.key_budget_bytes) == (0.5, 1 << 20)
            assert broker._producer_expiration_ms == 9000
            assert broker.logs.log_config("t").max_message_bytes == 2000
            with pytest.raises(InvalidConfigError, match=r"log\.cleaner\.backoff\.ms"):
                broker.dynamic_configs.alter(BROKER, {"log.cleaner.backoff.ms": "0"})
            assert broker.cleaner.backoff_s == 0.5
        finally:
            await broker.stop()
        again = Broker(BrokerConfig.load("127.0.0.1", 0, tmp_path / "d",
                                         overrides={"max.connections": "500"}))
        try:
            assert (again.connections.max_connections, again.connections.max_per_ip) == (300, 2)
            assert again.cleaner is not None and again.cleaner.backoff_s == 0.5
            assert again._producer_expiration_ms == 9000
            assert again.logs.log_config("t").max_message_bytes == 2000
            listed = _by_name(again.dynamic_configs.describe(per_broker=True))
            assert (listed["num.io.threads"].value, listed["num.io.threads"].source) == (
                "4", DYNAMIC)
            assert listed["listeners"].value == "PLAINTEXT://127.0.0.1:0"
            assert listed["listeners"].source == STATIC
        finally:
            await again.stop()

    asyncio.run(scenario())
