import pytest

from coterie.log.config import (
    LONG_MAX,
    TOPIC_CONFIG_KEYS,
    LogConfig,
    validate_topic_configs,
)
from coterie.log.errors import InvalidConfigError
from coterie.log.names import validate_topic_name


def test_defaults_are_kafkas():
    c = LogConfig.from_properties({}, {})
    assert c == LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert (c.index_interval_bytes, c.segment_index_bytes) == (4096, 10 << 20)
    assert c.flush_messages == c.flush_ms == LONG_MAX
    assert c.max_message_bytes == 1048588
    assert (c.cleanup_policy, c.message_timestamp_type) == ("delete", "CreateTime")


def test_retention_precedence_ms_minutes_hours():
    hours = {"log.retention.hours": "2"}
    assert LogConfig.from_properties(hours, {}).retention_ms == 2 * 3600_000
    minutes = {**hours, "log.retention.minutes": "3"}
    assert LogConfig.from_properties(minutes, {}).retention_ms == 3 * 60_000
    ms = {**minutes, "log.retention.ms": "5"}
    assert LogConfig.from_properties(ms, {}).retention_ms == 5
    assert LogConfig.from_properties(ms, {"retention.ms": "-1"}).retention_ms == -1
    assert LogConfig.from_properties({"log.retention.hours": "-1"}, {}).retention_ms == -1


def test_roll_and_topic_overrides():
    broker = {
        "log.roll.hours": "1",
        "log.segment.bytes": "1000",
        "message.max.bytes": "50",
        "log.cleanup.policy": "compact",
        "log.message.timestamp.type": "LogAppendTime",
    }
    c = LogConfig.from_properties(broker, {})
    assert (c.segment_ms, c.segment_bytes, c.max_message_bytes) == (3600_000, 1000, 50)
    assert not c.deletes and c.message_timestamp_type == "LogAppendTime"
    c = LogConfig.from_properties(
        {**broker, "log.roll.ms": "9"},
        {"segment.bytes": "2000", "max.message.bytes": "60", "cleanup.policy": "compact,delete"},
    )
    assert (c.segment_ms, c.segment_bytes, c.max_message_bytes) == (9, 2000, 60)
    assert c.deletes
    assert c.topic_config_values()["segment.bytes"] == "2000"


def test_bad_values_raise():
    with pytest.raises(InvalidConfigError, match=r"log\.segment\.bytes"):
        LogConfig.from_properties({"log.segment.bytes": "big"}, {})
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        LogConfig.from_properties({}, {"segment.bytes": "0"})


def test_validate_topic_configs():
    assert "retention.ms" in TOPIC_CONFIG_KEYS and "compression.type" in TOPIC_CONFIG_KEYS
    assert validate_topic_configs({}) is None
    assert validate_topic_configs({"retention.ms": "1000", "cleanup.policy": "compact"}) is None
    assert validate_topic_configs({"min.insync.replicas": "1", "preallocate": "true"}) is None
    assert "Unknown" in validate_topic_configs({"retention.millis": "1"})
    assert "retention.ms" in validate_topic_configs({"retention.ms": "soon"})
    assert validate_topic_configs({"retention.ms": "-2"}) is not None
    assert validate_topic_configs({"segment.bytes": str(2**31)}) is not None
    assert validate_topic_configs({"cleanup.policy": "shred"}) is not None
    assert validate_topic_configs({"message.timestamp.type": "Now"}) is not None
    assert validate_topic_configs({"retention.ms": None}) is not None


@pytest.mark.parametrize("name", ["a", "my-topic.v1_2", "x" * 249, "__consumer_offsets"])
def test_legal_topic_names(name):
    assert validate_topic_name(name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a/b", "a b", "ü", "../etc"])
def test_illegal_topic_names(name):
    assert validate_topic_name(name) is not None


def test_described_topic_configs_name_their_source_and_primary_synonym():
    from coterie.log.config import TOPIC_CONFIG_DEFS, describe_topic_configs

    described = {d.name: d for d in describe_topic_configs(
        {"log.segment.bytes": "5000", "log.retention.minutes": "2"},
        {"cleanup.policy": "compact"})}
    assert set(described) == set(TOPIC_CONFIG_DEFS)
    policy = described["cleanup.policy"]
    assert (policy.value, policy.source) == ("compact", 1)
    assert policy.synonyms == (("cleanup.policy", "compact", 1),
                               ("log.cleanup.policy", "delete", 5))
    segment = described["segment.bytes"]
    assert (segment.value, segment.source) == ("5000", 4)
    assert segment.synonyms == (("log.segment.bytes", "5000", 4),
                                ("log.segment.bytes", "1073741824", 5))
    # Reached through another unit: the value, but no synonym and the default's source.
    retention = described["retention.ms"]
    assert (retention.value, retention.source, retention.synonyms) == ("120000", 5, ())


def test_every_described_config_has_its_documentation():
    from coterie.broker.group_configs import GROUP_CONFIG_DEFS
    from coterie.log.config import TOPIC_CONFIG_DEFS
    from coterie.log.config_docs import GROUP_CONFIG_DOCS, TOPIC_CONFIG_DOCS

    assert set(TOPIC_CONFIG_DOCS) == set(TOPIC_CONFIG_DEFS)
    assert set(GROUP_CONFIG_DOCS) == set(GROUP_CONFIG_DEFS)


def _named(described):
    return {d.name: d for d in described}


def test_a_topic_lists_every_unit_synonym_of_a_dynamic_value():
    """The known gap of the first part: with log.retention.ms set dynamically, a topic's
    retention.ms lists log.retention.hours too, as set and as defaulted (Kafka's answer)."""
    from coterie.log.config import describe_topic_configs

    described = _named(describe_topic_configs(
        {"log.retention.hours": "100", "log.roll.hours": "50"}, {},
        {"log.retention.ms": "12345", "log.roll.ms": "60000"}, {"log.retention.ms": "54321"}))
    assert described["retention.ms"].synonyms == (
        ("log.retention.ms", "12345", 2), ("log.retention.ms", "54321", 3),
        ("log.retention.hours", "100", 4), ("log.retention.hours", "168", 5))
    assert described["segment.ms"].synonyms == (
        ("log.roll.ms", "60000", 2), ("log.roll.hours", "50", 4),
        ("log.roll.hours", "168", 5))
    static_only = _named(describe_topic_configs({"log.retention.hours": "100"}, {}))
    assert static_only["retention.ms"].synonyms == ()
    assert static_only["retention.ms"].value == str(100 * 3600 * 1000)


def test_a_broker_retention_below_zero_means_unlimited():
    """Kafka takes any negative log.retention.* as unlimited (-1); a topic's own retention.ms
    below -1 stays refused."""
    assert LogConfig.from_properties({"log.retention.ms": "-5"}, {}).retention_ms == -1
    assert LogConfig.from_properties({"log.retention.hours": "-3"}, {}).retention_ms == -1
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties({}, {"retention.ms": "-5"})
