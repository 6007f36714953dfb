"""Per-group configs (KIP-848's GROUP config resource): what an operator sets for one group.

Kafka 4.2 describes eleven keys for any group id (whether the group exists or not): the
consumer group's session timeout and heartbeat interval, and the share and streams groups'
settings. Their defaults are the broker's `group.consumer.*`, `group.share.*` and
`group.streams.*` values. A value is checked against the broker's bounds with Kafka's
messages (`consumer.session.timeout.ms must be greater than or equal to
group.consumer.min.session.timeout.ms`), written durably (`group-configs.json` in the data
directory, replaced atomically) and then handed to the group coordinator, which applies the
consumer keys from each member's next heartbeat. A broker of a cluster keeps them in the
database instead (coterie.storage.group_config_rows), and every broker `adopt`s the
database's set at each of its rounds. Streams groups take their `streams.*` keys and share
groups `share.session.timeout.ms` and `share.heartbeat.interval.ms`; the share partitions read
`share.auto.offset.reset` (latest, earliest or by_duration:<ISO-8601 duration>) and
`share.record.lock.duration.ms` from here when they need them (`share.isolation.level` is
checked and kept: coterie's share partitions read uncommitted, docs/share-groups.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from coterie.broker.config import CONSUMER_GROUP_INT_SETTINGS
from coterie.group import ConsumerGroupConfig
from coterie.log.config import DEFAULT_CONFIG, INT, STRING, DescribedConfig
from coterie.log.config_docs import GROUP_CONFIG_DOCS
from coterie.log.errors import InvalidConfigError
from coterie.log.files import atomic_write
from coterie.share import parse_duration_ms

GROUP_CONFIG_FILE = "group-configs.json"
GROUP_CONFIG_SOURCE = 8  # Kafka's ConfigSource GROUP_CONFIG
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
BY_DURATION = "by_duration:"


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: its type, the broker property giving its default (and that
    default's own default), and the broker properties bounding it."""

    type: int
    broker_key: str
    default: str
    low: tuple[str, int] | None = None  # (broker property, its default)
    high: tuple[str, int] | None = None
    choices: tuple[str, ...] = ()


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {
    SESSION: GroupConfigDef(INT, "group.consumer.session.timeout.ms", "45000",
                            ("group.consumer.min.session.timeout.ms", 45_000),
                            ("group.consumer.max.session.timeout.ms", 60_000)),
    HEARTBEAT: GroupConfigDef(INT, "group.consumer.heartbeat.interval.ms", "5000",
                              ("group.consumer.min.heartbeat.interval.ms", 5_000),
                              ("group.consumer.max.heartbeat.interval.ms", 15_000)),
    "share.session.timeout.ms": GroupConfigDef(
        INT, "group.share.session.timeout.ms", "45000",
        ("group.share.min.session.timeout.ms", 45_000),
        ("group.share.max.session.timeout.ms", 60_000)),
    "share.heartbeat.interval.ms": GroupConfigDef(
        INT, "group.share.heartbeat.interval.ms", "5000",
        ("group.share.min.heartbeat.interval.ms", 5_000),
        ("group.share.max.heartbeat.interval.ms", 15_000)),
    "share.record.lock.duration.ms": GroupConfigDef(
        INT, "group.share.record.lock.duration.ms", "30000",
        ("group.share.min.record.lock.duration.ms", 15_000),
        ("group.share.max.record.lock.duration.ms", 60_000)),
    "share.auto.offset.reset": GroupConfigDef(STRING, "share.auto.offset.reset", "latest",
                                              choices=("latest", "earliest",
                                                       BY_DURATION + "<duration>")),
    "share.isolation.level": GroupConfigDef(STRING, "share.isolation.level",
                                            "read_uncommitted",
                                            choices=("read_committed", "read_uncommitted")),
    "streams.session.timeout.ms": GroupConfigDef(
        INT, "group.streams.session.timeout.ms", "45000",
        ("group.streams.min.session.timeout.ms", 45_000),
        ("group.streams.max.session.timeout.ms", 60_000)),
    "streams.heartbeat.interval.ms": GroupConfigDef(
        INT, "group.streams.heartbeat.interval.ms", "5000",
        ("group.streams.min.heartbeat.interval.ms", 5_000),
        ("group.streams.max.heartbeat.interval.ms", 15_000)),
    "streams.num.standby.replicas": GroupConfigDef(
        INT, "group.streams.num.standby.replicas", "0", None,
        ("group.streams.max.standby.replicas", 2)),
    "streams.initial.rebalance.delay.ms": GroupConfigDef(
        INT, "group.streams.initial.rebalance.delay.ms", "3000"),
}

def _check_duration(name: str, value: str) -> None:
    """share.auto.offset.reset=by_duration:<ISO-8601 duration>, not negative (Kafka 4.2)."""
    try:
        parse_duration_ms(value[len(BY_DURATION):])
    except ValueError as e:
        raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                 f"{e}") from None


class GroupConfigs:
    """The groups' own settings, durable in the data directory. `apply(group_id, configs)`
    hands a group's settings to the coordinator (by name, typed: INT settings as ints), whose
    group types take the ones they know."""

    def __init__(self, data_dir: Path, props: Mapping[str, str],
                 consumer: ConsumerGroupConfig,
                 apply: Callable[[str, Mapping[str, int | str]], None],
                 in_data_dir: bool = True) -> None:
        self._path = data_dir / GROUP_CONFIG_FILE
        self._props = props
        self._consumer = consumer
        self._apply = apply
        self._configs: dict[str, dict[str, str]] = {}
        if in_data_dir and self._path.exists():  # else: a cluster's, from its database
            loaded = json.loads(self._path.read_text())
            self._configs = {g: dict(c) for g, c in loaded.items()}

    def apply_all(self) -> None:
        """Hand every stored group's consumer keys to the coordinator (after loading)."""
        for group_id in self._configs:
            self._hand_over(group_id)

    def _broker_value(self, key: str, fallback: str) -> str:
        # The consumer keys' defaults and bounds: the coordinator's own settings.
        field = CONSUMER_GROUP_INT_SETTINGS.get(key)
        if field is not None:
            return str(getattr(self._consumer, field))
        return self._props.get(key, fallback)

    def describe(self, group_id: str) -> list[DescribedConfig]:
        own = self._configs.get(group_id, {})
        out = []
        for name, d in GROUP_CONFIG_DEFS.items():
            default = self._broker_value(d.broker_key, d.default)
            # Kafka lists one synonym: the group's own setting, or else the default.
            value, source = (own[name], GROUP_CONFIG_SOURCE) if name in own else (
                default, DEFAULT_CONFIG)
            out.append(DescribedConfig(name, value, source, d.type, ((name, value, source),),
                                       documentation=GROUP_CONFIG_DOCS.get(name)))
        return out

    def current(self, group_id: str) -> dict[str, str]:
        return dict(self._configs.get(group_id, {}))

    def check(self, configs: Mapping[str, str | None]) -> None:
        """Raise InvalidConfigError (Kafka's messages) unless every setting is usable."""
        for name, value in configs.items():
            d = GROUP_CONFIG_DEFS.get(name)
            if d is None:
                raise InvalidConfigError(f"Unknown group config name: {name}")
            if value is None:
                raise InvalidConfigError(f"Null value not supported for group config '{name}'")
            if d.type == STRING:
                if name == "share.auto.offset.reset" and value.startswith(BY_DURATION):
                    _check_duration(name, value)
                    continue
                if d.choices and value not in d.choices:
                    raise InvalidConfigError(
                        f"Invalid value {value} for configuration {name}: String must be one "
                        f"of: {', '.join(d.choices)}")
                continue
            try:
                number = int(value.strip())
            except ValueError:
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                         "Not a number of type INT") from None
            if d.low is not None:
                bound = int(self._broker_value(d.low[0], str(d.low[1])))
                if number < bound:
                    raise InvalidConfigError(
                        f"{name} must be greater than or equal to {d.low[0]}")
            elif number < 0:
                raise InvalidConfigError(f"{name} must be greater than or equal to 0")
            if d.high is not None:
                bound = int(self._broker_value(d.high[0], str(d.high[1])))
                if number > bound:
                    raise InvalidConfigError(f"{name} must be less than or equal to {d.high[0]}")

    def replace(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Make `configs` the group's whole set: checked, written durably, then applied."""
        self.check(configs)
        updated = {**self._configs, group_id: dict(configs)}
        if not configs:
            del updated[group_id]
        atomic_write(self._path, json.dumps(updated, sort_keys=True).encode())
        self._configs = updated
        self._hand_over(group_id)

    def adopt(self, stored: Mapping[str, Mapping[str, str]]) -> None:
        """A cluster broker: make the database's group configs (`stored`, every group's)
        this broker's, handing the groups whose settings changed to the coordinator. Kept in
        memory only: the database is where they last."""
        before = self._configs
        self._configs = {g: dict(c) for g, c in stored.items() if c}
        for group_id in set(before) | set(self._configs):
            if before.get(group_id) != self._configs.get(group_id):
                self._hand_over(group_id)

    def _hand_over(self, group_id: str) -> None:
        own = self._configs.get(group_id, {})
        self._apply(group_id, {name: int(value) if GROUP_CONFIG_DEFS[name].type == INT
                               else value for name, value in own.items()})
