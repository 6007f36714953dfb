"""Per-topic log settings, resolved the way Kafka resolves them.

Operators and client tools already know Kafka's property names, so coterie uses them
verbatim: a topic-level name (`retention.ms`) overrides the broker-level default
(`log.retention.ms`), which falls back to Kafka's built-in default. Settings that Kafka
accepts but coterie does not act on (compression.type, min.insync.replicas, ...) are still
accepted and stored, so that tools which set them keep working.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coterie.log.config_docs import TOPIC_CONFIG_DOCS
from coterie.log.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_DAY_MS = 24 * 60 * 60 * 1000

CLEANUP_POLICIES = frozenset({"delete", "compact"})
TIMESTAMP_TYPES = frozenset({"CreateTime", "LogAppendTime"})
COMPRESSION_TYPES = frozenset({"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"})


def _int_check(lo: int, hi: int) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            n = int(value.strip())
        except ValueError:
            return f"value '{value}' is not an integer"
        if not lo <= n <= hi:
            return f"value {n} is out of range [{lo}, {hi}]"
        return None

    return check


def _choice_check(choices: frozenset[str], *, listed: bool = False) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        items = [v.strip() for v in value.split(",")] if listed else [value.strip()]
        bad = [v for v in items if v not in choices]
        if bad or not items:
            return f"value '{value}' must be one of {', '.join(sorted(choices))}"
        return None

    return check


def _bool_check(value: str) -> str | None:
    if value.strip().lower() not in ("true", "false"):
        return f"value '{value}' is not a boolean (true or false)"
    return None


def _ratio_check(value: str) -> str | None:
    try:
        x = float(value)
    except ValueError:
        return f"value '{value}' is not a number"
    if not (math.isfinite(x) and 0.0 <= x <= 1.0):
        return f"value {value} is out of range [0, 1]"
    return None


def _any(value: str) -> str | None:
    return None


# Every topic-level name Kafka accepts, with the same type and lower bound Kafka enforces.
_TOPIC_CHECKS: dict[str, Callable[[str], str | None]] = {
    "cleanup.policy": _choice_check(CLEANUP_POLICIES, listed=True),
    "compression.type": _choice_check(COMPRESSION_TYPES),
    "compression.gzip.level": _int_check(-1, 9),
    "compression.lz4.level": _int_check(1, 17),
    "compression.zstd.level": _int_check(-131072, 22),
    "delete.retention.ms": _int_check(0, LONG_MAX),
    "file.delete.delay.ms": _int_check(0, LONG_MAX),
    "flush.messages": _int_check(1, LONG_MAX),
    "flush.ms": _int_check(0, LONG_MAX),
    "follower.replication.throttled.replicas": _any,
    "index.interval.bytes": _int_check(0, INT_MAX),
    "leader.replication.throttled.replicas": _any,
    "local.retention.bytes": _int_check(-2, LONG_MAX),
    "local.retention.ms": _int_check(-2, LONG_MAX),
    "max.compaction.lag.ms": _int_check(1, LONG_MAX),
    "max.message.bytes": _int_check(0, INT_MAX),
    "message.downconversion.enable": _bool_check,
    "message.format.version": _any,
    "message.timestamp.after.max.ms": _int_check(0, LONG_MAX),
    "message.timestamp.before.max.ms": _int_check(0, LONG_MAX),
    "message.timestamp.difference.max.ms": _int_check(0, LONG_MAX),
    "message.timestamp.type": _choice_check(TIMESTAMP_TYPES),
    "min.cleanable.dirty.ratio": _ratio_check,
    "min.compaction.lag.ms": _int_check(0, LONG_MAX),
    "min.insync.replicas": _int_check(1, INT_MAX),
    "preallocate": _bool_check,
    "remote.log.copy.disable": _bool_check,
    "remote.log.delete.on.disable": _bool_check,
    "remote.storage.enable": _bool_check,
    "retention.bytes": _int_check(-(2**63), LONG_MAX),
    "retention.ms": _int_check(-1, LONG_MAX),
    # Kafka's floor is the size of one legacy record; anything below cannot hold a batch.
    "segment.bytes": _int_check(14, INT_MAX),
    "segment.index.bytes": _int_check(4, INT_MAX),
    "segment.jitter.ms": _int_check(0, LONG_MAX),
    "segment.ms": _int_check(1, LONG_MAX),
    "unclean.leader.election.enable": _bool_check,
}

TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(_TOPIC_CHECKS)


def validate_topic_configs(configs: Mapping[str, str | None]) -> str | None:
    """Return why `configs` cannot be used for a topic, or None if they can.

    Used by CreateTopics/AlterConfigs to answer INVALID_CONFIG before anything is written.
    """
    for name, value in configs.items():
        check = _TOPIC_CHECKS.get(name)
        if check is None:
            return f"Unknown topic config name: {name}"
        if value is None:
            return f"Null value not supported for topic config '{name}'"
        problem = check(value)
        if problem is not None:
            return f"Invalid value {value} for configuration {name}: {problem}"
    return None


@dataclass(frozen=True)
class LogConfig:
    """The settings one partition log acts on. Defaults are Kafka's."""

    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes / log.segment.bytes
    segment_ms: int = 7 * _DAY_MS  # segment.ms / log.roll.ms, log.roll.hours
    retention_ms: int = 7 * _DAY_MS  # retention.ms / log.retention.{ms,minutes,hours}; -1 = all
    retention_bytes: int = -1  # retention.bytes / log.retention.bytes; -1 = unlimited
    index_interval_bytes: int = 4096  # index.interval.bytes / log.index.interval.bytes
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes / log.index.size.max.bytes
    flush_messages: int = LONG_MAX  # flush.messages / log.flush.interval.messages
    flush_ms: int = LONG_MAX  # flush.ms / log.flush.interval.ms
    max_message_bytes: int = 1048588  # max.message.bytes / message.max.bytes
    cleanup_policy: str = "delete"  # cleanup.policy / log.cleanup.policy
    # message.timestamp.type / log.message.timestamp.type
    message_timestamp_type: str = "CreateTime"
    # The log cleaner's settings (coterie.log.cleaner), for compacted topics.
    delete_retention_ms: int = _DAY_MS  # delete.retention.ms / log.cleaner.delete.retention.ms
    # min.cleanable.dirty.ratio / log.cleaner.min.cleanable.ratio
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms / log.cleaner.min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms / log.cleaner.max...

    @property
    def deletes(self) -> bool:
        """True when time/size retention applies (cleanup.policy contains "delete")."""
        return "delete" in (p.strip() for p in self.cleanup_policy.split(","))

    @property
    def compacts(self) -> bool:
        """True when the log cleaner compacts the log (cleanup.policy contains "compact")."""
        return "compact" in (p.strip() for p in self.cleanup_policy.split(","))

    @property
    def roll_ms(self) -> int:
        """How old the active segment may get: segment.ms, or max.compaction.lag.ms when
        that is shorter and the log is compacted (the cleaner never touches the active
        segment, so it must roll for the lag to be kept; Kafka's rule)."""
        if self.compacts:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @classmethod
    def from_properties(
        cls, broker_props: Mapping[str, str], topic_configs: Mapping[str, str]
    ) -> LogConfig:
        """Resolve every setting: topic config, then broker property, then Kafka's default.

        Raises InvalidConfigError for values that are not usable, naming the property.
        """

        def number(topic_key: str, broker_keys: list[tuple[str, int]], default: int,
                   unlimited_below_zero: bool = False) -> int:
            # broker_keys: (name, multiplier) in Kafka's precedence order.
            keys = [(topic_key, 1), *broker_keys]
            for key, unit in keys:
                raw = topic_configs.get(key) if key == topic_key else broker_props.get(key)
                if raw is None or (key != topic_key and raw.strip() == ""):
                    continue
                try:
                    value = int(raw.strip())
                except ValueError:
                    raise InvalidConfigError(
                        f"Invalid value {raw} for configuration {key}: not an integer"
                    ) from None
                # -1 means "unlimited" for the retention settings whatever the unit; a
                # broker's retention time takes any negative value for it (Kafka's rule).
                if value < 0 and unlimited_below_zero and key != topic_key:
                    return -1
                return value if value < 0 else value * unit
            return default

        def text(topic_key: str, broker_key: str, default: str, allowed: frozenset[str]) -> str:
            raw = topic_configs.get(topic_key)
            key = topic_key
            if raw is None:
                raw, key = broker_props.get(broker_key), broker_key
            if raw is None:
                return default
            check = _choice_check(allowed, listed=topic_key == "cleanup.policy")
            problem = check(raw)
            if problem is not None:
                raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: {problem}")
            return ",".join(v.strip() for v in raw.split(","))

        def ratio(topic_key: str, broker_key: str, default: float) -> float:
            raw, key = topic_configs.get(topic_key), topic_key
            if raw is None:
                raw, key = broker_props.get(broker_key), broker_key
            if raw is None or raw.strip() == "":
                return default
            problem = _ratio_check(raw.strip())
            if problem is not None:
                raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: {problem}")
            return float(raw)

        hour = 60 * 60 * 1000
        config = cls(
            segment_bytes=number("segment.bytes", [("log.segment.bytes", 1)], cls.segment_bytes),
            segment_ms=number(
                "segment.ms", [("log.roll.ms", 1), ("log.roll.hours", hour)], cls.segment_ms
            ),
            retention_ms=number(
                "retention.ms",
                [
                    ("log.retention.ms", 1),
                    ("log.retention.minutes", 60 * 1000),
                    ("log.retention.hours", hour),
                ],
                cls.retention_ms,
                unlimited_below_zero=True,
            ),
            retention_bytes=number(
                "retention.bytes", [("log.retention.bytes", 1)], cls.retention_bytes
            ),
            index_interval_bytes=number(
                "index.interval.bytes", [("log.index.interval.bytes", 1)], cls.index_interval_bytes
            ),
            segment_index_bytes=number(
                "segment.index.bytes", [("log.index.size.max.bytes", 1)], cls.segment_index_bytes
            ),
            flush_messages=number(
                "flush.messages", [("log.flush.interval.messages", 1)], cls.flush_messages
            ),
            flush_ms=number(
                "flush.ms",
                [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)],
                cls.flush_ms,
            ),
            max_message_bytes=number(
                "max.message.bytes", [("message.max.bytes", 1)], cls.max_message_bytes
            ),
            cleanup_policy=text(
                "cleanup.policy", "log.cleanup.policy", cls.cleanup_policy, CLEANUP_POLICIES
            ),
            delete_retention_ms=number(
                "delete.retention.ms", [("log.cleaner.delete.retention.ms", 1)],
                cls.delete_retention_ms),
            min_cleanable_dirty_ratio=ratio(
                "min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio",
                cls.min_cleanable_dirty_ratio),
            min_compaction_lag_ms=number(
                "min.compaction.lag.ms", [("log.cleaner.min.compaction.lag.ms", 1)],
                cls.min_compaction_lag_ms),
            max_compaction_lag_ms=number(
                "max.compaction.lag.ms", [("log.cleaner.max.compaction.lag.ms", 1)],
                cls.max_compaction_lag_ms),
            message_timestamp_type=text(
                "message.timestamp.type",
                "log.message.timestamp.type",
                cls.message_timestamp_type,
                TIMESTAMP_TYPES,
            ),
        )
        config.check()
        return config

    def check(self) -> None:
        """Raise InvalidConfigError if a value cannot work (e.g. a zero segment size)."""
        limits = [
            ("segment.bytes", self.segment_bytes, 14, INT_MAX),
            ("segment.ms", self.segment_ms, 1, LONG_MAX),
            ("retention.ms", self.retention_ms, -1, LONG_MAX),
            ("index.interval.bytes", self.index_interval_bytes, 0, INT_MAX),
            ("segment.index.bytes", self.segment_index_bytes, 4, INT_MAX),
            ("flush.messages", self.flush_messages, 1, LONG_MAX),
            ("flush.ms", self.flush_ms, 0, LONG_MAX),
            ("max.message.bytes", self.max_message_bytes, 0, INT_MAX),
            ("delete.retention.ms", self.delete_retention_ms, 0, LONG_MAX),
            ("min.compaction.lag.ms", self.min_compaction_lag_ms, 0, LONG_MAX),
            ("max.compaction.lag.ms", self.max_compaction_lag_ms, 1, LONG_MAX),
        ]
        for name, value, lo, hi in limits:
            if not lo <= value <= hi:
                raise InvalidConfigError(
                    f"Invalid value {value} for configuration {name}: out of range [{lo}, {hi}]"
                )

    def topic_config_values(self) -> dict[str, str]:
        """The effective values under their topic-level names (for DescribeConfigs)."""
        return {
            "segment.bytes": str(self.segment_bytes),
            "segment.ms": str(self.segment_ms),
            "retention.ms": str(self.retention_ms),
            "retention.bytes": str(self.retention_bytes),
            "index.interval.bytes": str(self.index_interval_bytes),
            "segment.index.bytes": str(self.segment_index_bytes),
            "flush.messages": str(self.flush_messages),
            "flush.ms": str(self.flush_ms),
            "max.message.bytes": str(self.max_message_bytes),
            "cleanup.policy": self.cleanup_policy,
            "message.timestamp.type": self.message_timestamp_type,
            "delete.retention.ms": str(self.delete_retention_ms),
            "min.cleanable.dirty.ratio": str(self.min_cleanable_dirty_ratio),
            "min.compaction.lag.ms": str(self.min_compaction_lag_ms),
            "max.compaction.lag.ms": str(self.max_compaction_lag_ms),
        }


# -- DescribeConfigs --------------------------------------------------------------------------
# Kafka's config types (DescribeConfigs v3+ ConfigType).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """How Kafka 4.2 describes one topic config: its type, its default, and the broker
    property that is its primary synonym (the one Kafka lists, when it has a value)."""

    type: int
    default: str
    broker_synonym: str | None


_L = str(LONG_MAX)
# The topic configs Kafka 4.2 describes, every one (its DescribeConfigs answer for a topic).
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef(LIST, "delete", "log.cleanup.policy"),
    "compression.gzip.level": TopicConfigDef(INT, "-1", "compression.gzip.level"),
    "compression.lz4.level": TopicConfigDef(INT, "9", "compression.lz4.level"),
    "compression.type": TopicConfigDef(STRING, "producer", "compression.type"),
    "compression.zstd.level": TopicConfigDef(INT, "3", "compression.zstd.level"),
    "delete.retention.ms": TopicConfigDef(LONG, "86400000", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": TopicConfigDef(LONG, "60000", "log.segment.delete.delay.ms"),
    "flush.messages": TopicConfigDef(LONG, _L, "log.flush.interval.messages"),
    "flush.ms": TopicConfigDef(LONG, _L, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": TopicConfigDef(LIST, "", None),
    "index.interval.bytes": TopicConfigDef(INT, "4096", "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": TopicConfigDef(LIST, "", None),
    "local.retention.bytes": TopicConfigDef(LONG, "-2", "log.local.retention.bytes"),
    "local.retention.ms": TopicConfigDef(LONG, "-2", "log.local.retention.ms"),
    "max.compaction.lag.ms": TopicConfigDef(LONG, _L, "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": TopicConfigDef(INT, "1048588", "message.max.bytes"),
    "message.timestamp.after.max.ms": TopicConfigDef(
        LONG, "3600000", "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": TopicConfigDef(
        LONG, _L, "log.message.timestamp.before.max.ms"),
    "message.timestamp.type": TopicConfigDef(STRING, "CreateTime", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": TopicConfigDef(DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": TopicConfigDef(LONG, "0", "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": TopicConfigDef(INT, "1", "min.insync.replicas"),
    "preallocate": TopicConfigDef(BOOLEAN, "false", "log.preallocate"),
    "remote.log.copy.disable": TopicConfigDef(BOOLEAN, "false", None),
    "remote.log.delete.on.disable": TopicConfigDef(BOOLEAN, "false", None),
    "remote.storage.enable": TopicConfigDef(BOOLEAN, "false", None),
    "retention.bytes": TopicConfigDef(LONG, "-1", "log.retention.bytes"),
    "retention.ms": TopicConfigDef(LONG, str(7 * _DAY_MS), "log.retention.ms"),
    "segment.bytes": TopicConfigDef(INT, str(1024 * 1024 * 1024), "log.segment.bytes"),
    "segment.index.bytes": TopicConfigDef(INT, str(10 * 1024 * 1024), "log.index.size.max.bytes"),
    "segment.jitter.ms": TopicConfigDef(LONG, "0", "log.roll.jitter.ms"),
    "segment.ms": TopicConfigDef(LONG, str(7 * _DAY_MS), "log.roll.ms"),
    "unclean.leader.election.enable": TopicConfigDef(
        BOOLEAN, "false", "unclean.leader.election.enable"),
}
TOPIC_CONFIG_SOURCE, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5

# Broker properties that are one setting in several units, in Kafka's precedence order (the
# first one set wins). Kafka lists them all as synonyms of each other, and of the topic config
# whose primary broker synonym leads the group.
_UNIT_GROUPS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
)
# log.flush.interval.ms falls back to log.flush.scheduler.interval.ms, but not the reverse
# (the scheduler's interval is a setting of its own).
_ONE_WAY = {"log.flush.interval.ms": ("log.flush.interval.ms",
                                      "log.flush.scheduler.interval.ms")}


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker properties that set the same thing as `name`, in precedence order
    (`name` alone when it has none): what Kafka searches for a value, and lists as synonyms."""
    for group in _UNIT_GROUPS:
        if name in group:
            return group
    return _ONE_WAY.get(name, (name,))


# Kafka 4.2's defaults of the broker properties that are topic-config defaults, the unit
# variants included; a property whose Kafka default is null (log.retention.ms, log.roll.ms,
# log.roll.jitter.ms, log.flush.interval.ms, log.retention.minutes) is absent.
_NULL_DEFAULT = frozenset({"log.flush.interval.ms", "log.retention.ms", "log.roll.ms",
                           "log.roll.jitter.ms"})
BROKER_LOG_DEFAULTS: dict[str, str] = {
    **{d.broker_synonym: d.default for d in TOPIC_CONFIG_DEFS.values()
       if d.broker_synonym is not None and d.broker_synonym not in _NULL_DEFAULT},
    "log.retention.hours": "168",
    "log.roll.hours": "168",
    "log.roll.jitter.hours": "0",
    "log.flush.scheduler.interval.ms": _L,
}
# Every broker property that is (or, in another unit, sets) the default of a topic config.
BROKER_LOG_PROPERTIES: frozenset[str] = frozenset(
    name for d in TOPIC_CONFIG_DEFS.values() if d.broker_synonym is not None
    for name in broker_synonyms(d.broker_synonym))

Synonym = tuple[str, str | None, int]


def synonym_chain(name: str, names: tuple[str, ...],
                  layers: list[tuple[Mapping[str, str | None], int]]) -> list[Synonym]:
    """Kafka's synonyms of broker property `name`: for each layer in precedence order
    (`layers`: values and the source they stand for), each of `names` (name's unit
    synonyms) that the layer sets; then the leading ones before the first entry of `name`
    itself are dropped. So a value reached only through a later unit (log.retention.hours
    when log.retention.ms is set nowhere) lists nothing, and once log.retention.ms is set
    somewhere every unit below it is listed, as Kafka 4.2 answers."""
    found = [(n, layer[n], source) for layer, source in layers for n in names if n in layer]
    for i, (n, _, _) in enumerate(found):
        if n == name:
            return found[i:]
    return []


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One config as DescribeConfigs answers it (synonyms: name, value, source)."""

    name: str
    value: str | None
    source: int
    type: int
    synonyms: tuple[tuple[str, str | None, int], ...]
    read_only: bool = False
    sensitive: bool = False
    documentation: str | None = None  # what the config means (coterie.log.config_docs)


def describe_topic_configs(broker_props: Mapping[str, str],
                           topic_configs: Mapping[str, str],
                           dynamic_broker: Mapping[str, str] | None = None,
                           dynamic_default: Mapping[str, str] | None = None
                           ) -> list[DescribedConfig]:
    """Every topic config as Kafka 4.2 describes it for a topic with `topic_configs` on a
    broker with `broker_props` (the properties set in its file or on its command line) and
    the broker configs changed at run time, for this broker (`dynamic_broker`) and for the
    cluster (`dynamic_default`). The value is what the log acts on, resolved through every
    broker synonym (so `log.retention.hours` shows in retention.ms); the synonyms are the
    topic's own setting, then the broker properties by `synonym_chain` (every unit of the
    primary broker synonym, from the first layer that sets the primary one: dynamic broker,
    dynamic default, static, default), and the source is the first synonym's."""
    dynamic_broker = dynamic_broker or {}
    dynamic_default = dynamic_default or {}
    effective = {**broker_props, **dynamic_default, **dynamic_broker}
    try:
        resolved = LogConfig.from_properties(effective, topic_configs).topic_config_values()
    except InvalidConfigError:
        resolved = {}
    layers: list[tuple[Mapping[str, str | None], int]] = [
        (dynamic_broker, DYNAMIC_BROKER_CONFIG), (dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
        (broker_props, STATIC_BROKER_CONFIG), (BROKER_LOG_DEFAULTS, DEFAULT_CONFIG)]
    out = []
    for name, d in TOPIC_CONFIG_DEFS.items():
        synonyms: list[Synonym] = []
        own = topic_configs.get(name)
        if own is not None:
            synonyms.append((name, own, TOPIC_CONFIG_SOURCE))
        broker = d.broker_synonym
        if broker is not None:
            synonyms += synonym_chain(broker, broker_synonyms(broker), layers)
        if synonyms and synonyms[0][2] != DEFAULT_CONFIG:
            value, source = synonyms[0][1], synonyms[0][2]
        else:
            value, source = resolved.get(name, d.default), DEFAULT_CONFIG
        out.append(DescribedConfig(name, value, source, d.type, tuple(synonyms),
                                   documentation=TOPIC_CONFIG_DOCS.get(name)))
    return out
