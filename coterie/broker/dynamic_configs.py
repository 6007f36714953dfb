"""Broker configs changed at run time (Kafka's dynamic broker configs), for the log defaults.

Kafka lets an operator change a broker's topic-level defaults without a restart, for one
broker (resource name = its id: DYNAMIC_BROKER_CONFIG) or as the cluster-wide default
(resource name "": DYNAMIC_DEFAULT_BROKER_CONFIG). coterie does the same for the properties
that are the broker synonyms of topic configs (`DYNAMIC_KEYS`: retention, segment size and
roll time, cleanup policy, message size, ...). A change is checked with the topic config's
rules (the value of `log.retention.ms` as that of retention.ms), written durably
(`broker-configs.json` in the data directory, replaced atomically) and then applied to every
topic that has no setting of its own. Precedence, as in Kafka: this broker's dynamic value,
then the cluster-wide one, then the properties file or command line, then the default. Other
properties cannot be changed at run time (INVALID_REQUEST naming them, Kafka's wording).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from coterie.log.config import TOPIC_CONFIG_DEFS, validate_topic_configs
from coterie.log.errors import InvalidConfigError
from coterie.log.files import atomic_write

BROKER_CONFIG_FILE = "broker-configs.json"
# Broker property -> the topic config it is the default of (its value rules).
DYNAMIC_KEYS: dict[str, str] = {
    d.broker_synonym: name for name, d in TOPIC_CONFIG_DEFS.items()
    if d.broker_synonym is not None}
# (log.retention.hours and the other unit variants stay read-only, as in Kafka.)
CLUSTER, BROKER = "cluster", "broker"


class NotDynamic(Exception):
    """A property that cannot change at run time."""


class DynamicBrokerConfigs:
    """The two dynamic layers (this broker's and the cluster's), durable."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / BROKER_CONFIG_FILE
        self.layers: dict[str, dict[str, str]] = {CLUSTER: {}, BROKER: {}}
        if self._path.exists():
            loaded = json.loads(self._path.read_text())
            for scope in (CLUSTER, BROKER):
                self.layers[scope] = dict(loaded.get(scope, {}))

    def overlay(self, static: Mapping[str, str],
                layers: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, str]:
        """The broker properties in effect: static, then cluster-wide, then this broker's."""
        layers = self.layers if layers is None else layers
        return {**static, **layers[CLUSTER], **layers[BROKER]}

    @staticmethod
    def check(configs: Mapping[str, str]) -> None:
        """Raise NotDynamic or InvalidConfigError unless every property can take its value."""
        fixed = sorted(k for k in configs if k not in DYNAMIC_KEYS)
        if fixed:
            raise NotDynamic(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
        for key, value in configs.items():
            problem = validate_topic_configs({DYNAMIC_KEYS[key]: value})
            if problem is not None:
                raise InvalidConfigError(problem.replace(DYNAMIC_KEYS[key], key))

    def with_scope(self, scope: str, configs: Mapping[str, str]) -> dict[str, dict[str, str]]:
        """The layers as they would be with `configs` as `scope`'s whole set."""
        return {**self.layers, scope: dict(configs)}

    def save(self, layers: dict[str, dict[str, str]]) -> None:
        atomic_write(self._path, json.dumps(layers, sort_keys=True).encode())
        self.layers = layers
