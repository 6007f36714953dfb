"""Broker configs changed at run time (Kafka's dynamic broker configs): checked, kept, described
and handed to the parts that act on them.

Kafka lets an operator change some broker configs without a restart, for one broker (resource
name = its id: DYNAMIC_BROKER_CONFIG) or as the cluster-wide default (resource name "":
DYNAMIC_DEFAULT_BROKER_CONFIG). coterie accepts the names Kafka 4.2 accepts
(coterie.broker.config_defs: its dynamic configs, listener overrides and custom names) and
refuses the others with Kafka's answers, in Kafka's order: a static name ("Cannot update these
configs dynamically"), a security config without its listener prefix, a value of the wrong type
or out of range, a per-broker config given as the cluster default. Both layers are kept
durably (`broker-configs.json` in the data directory, replaced atomically), and the properties
then in effect go to every watcher (`watch`): the log manager (the log defaults), the
connection table, the log cleaner and housekeeping (coterie.broker.server). Whatever no watcher
reads is kept and described only (docs/decisions.md lists which). A broker of a cluster keeps the
cluster-wide layer in the database (coterie.storage.group_config_rows) and `adopt_cluster`s
it at each of its rounds. Precedence, as in Kafka:
this broker's dynamic value, then the cluster-wide one, then the properties file or command
line, then the default.

`describe` answers DescribeConfigs of the broker as Kafka 4.2 does: every setting coterie
reads, every dynamic config and every broker property that is a topic-config default (all
units), plus whatever is set; each with its value, source, type, read-only flag and synonyms
(coterie.log.config `synonym_chain`); values of passwords and of custom names are not shown.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from coterie.broker.config_defs import (
    DYNAMIC_CONFIGS,
    PASSWORD,
    PER_LISTENER_ONLY,
    STATIC_NAMES,
    UNKNOWN,
    broker_config_synonyms,
    canonical,
    check_value,
    config_type,
    kafka_default,
    listener_base,
    per_broker_only,
)
from coterie.log.config import (
    BROKER_LOG_PROPERTIES,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    DescribedConfig,
    broker_synonyms,
    synonym_chain,
)
from coterie.log.errors import InvalidConfigError
from coterie.log.files import atomic_write

BROKER_CONFIG_FILE = "broker-configs.json"
CLUSTER, BROKER = "cluster", "broker"

# Called with the broker properties in effect: `check` raises InvalidConfigError when they
# cannot be used (before anything is kept), `apply` acts on them (after they are kept).
Apply = Callable[[Mapping[str, str]], None]


class NotDynamic(Exception):
    """A config that cannot change at run time, or not at the level asked."""


def _scala_set(names: Iterable[str], kind: str = "") -> str:
    """A set of names as Kafka's messages print it (Scala: Set(...) up to four, else
    HashSet(...)); sorted, where Kafka's order is its hash's."""
    items = sorted(names)
    return f"{kind or ('Set' if len(items) <= 4 else 'HashSet')}({', '.join(items)})"


def check_dynamic(configs: Mapping[str, str], per_broker: bool) -> None:
    """Raise NotDynamic or InvalidConfigError (Kafka's message) unless `configs` can be the
    whole dynamic set of one broker (`per_broker`) or of the cluster default, in the order
    Kafka checks: static names, security configs without their listener prefix, values,
    per-broker configs at the cluster level."""
    fixed = [k for k in configs if k in STATIC_NAMES]
    if fixed:
        raise NotDynamic(f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    bare = [k for k in configs if k in PER_LISTENER_ONLY]
    if bare:
        raise NotDynamic("These security configs can be dynamically updated only per-listener "
                         f"using the listener prefix: {_scala_set(bare, 'HashSet')}")
    for key, value in configs.items():
        problem = check_value(key, value)
        if problem is not None:
            raise InvalidConfigError(problem)
    if not per_broker:
        own = [k for k in configs if per_broker_only(k)]
        if own:
            raise NotDynamic("Cannot update these configs at default cluster level, broker id "
                             f"must be specified: {_scala_set(own)}")


class DynamicBrokerConfigs:
    """The two dynamic layers (this broker's and the cluster's), durable, over the static
    properties (`static`: those set in the file or on the command line) and coterie's
    defaults (`defaults`: the value of each setting it reads when nothing sets it)."""

    def __init__(self, data_dir: Path, static: Mapping[str, str] | None = None,
                 defaults: Mapping[str, str] | None = None) -> None:
        self._path = data_dir / BROKER_CONFIG_FILE
        self.static = dict(static or {})
        self.defaults = dict(defaults or {})
        self.layers: dict[str, dict[str, str]] = {CLUSTER: {}, BROKER: {}}
        self._watchers: list[tuple[Apply, Apply | None]] = []
        if self._path.exists():
            loaded = json.loads(self._path.read_text())
            for scope in (CLUSTER, BROKER):
                self.layers[scope] = dict(loaded.get(scope, {}))

    def effective(self, layers: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, str]:
        """The broker properties in effect: defaults, static, cluster-wide, this broker's."""
        layers = self.layers if layers is None else layers
        return {**self.defaults, **self.static, **layers[CLUSTER], **layers[BROKER]}

    def watch(self, apply: Apply, check: Apply | None = None) -> None:
        """Hand every change to `apply` (the properties then in effect); `check` may refuse
        a change first, by raising InvalidConfigError."""
        self._watchers.append((apply, check))

    def alter(self, scope: str, configs: Mapping[str, str], validate_only: bool = False) -> None:
        """Make `configs` the whole dynamic set of `scope` (BROKER or CLUSTER): checked as
        Kafka checks it and by every watcher, kept durably, then handed to the watchers.
        Raises NotDynamic, InvalidConfigError or OSError, changing nothing."""
        check_dynamic(configs, per_broker=scope == BROKER)
        layers = {**self.layers, scope: dict(configs)}
        effective = self.effective(layers)
        for _, check in self._watchers:
            if check is not None:
                check(effective)
        if validate_only:
            return
        atomic_write(self._path, json.dumps(layers, sort_keys=True).encode())
        self.layers = layers
        for apply, _ in self._watchers:
            apply(effective)

    def adopt_cluster(self, configs: Mapping[str, str]) -> None:
        """A cluster broker: the database's cluster-wide set (checked by the broker that
        altered it) becomes this broker's cluster layer, kept in the data directory too, and
        goes to the watchers if it changed."""
        if dict(configs) == self.layers[CLUSTER]:
            return
        layers = {**self.layers, CLUSTER: dict(configs)}
        atomic_write(self._path, json.dumps(layers, sort_keys=True).encode())
        self.layers = layers
        effective = self.effective()
        for apply, _ in self._watchers:
            apply(effective)

    # -- DescribeConfigs --------------------------------------------------------------------
    def describe(self, per_broker: bool) -> list[DescribedConfig]:
        """The broker resource as Kafka 4.2 describes it: this broker's configs
        (`per_broker`), or the cluster-wide dynamic defaults (only those set, with only
        their DYNAMIC_DEFAULT_BROKER_CONFIG synonyms)."""
        cluster = self.layers[CLUSTER]
        if not per_broker:
            return [self._entry(name, cluster[name], per_broker=False)
                    for name in sorted(cluster)]
        names = {*self.defaults, *DYNAMIC_CONFIGS, *BROKER_LOG_PROPERTIES, *self.static,
                 *cluster, *self.layers[BROKER]}
        current = self._current()
        out = []
        for name in sorted(names):
            value = current.get(name, self._default(name))
            if value is not None and listener_base(name) is None:
                known = config_type(name)
                value = canonical(known, value) if known is not None else value
            out.append(self._entry(name, value, per_broker=True))
        return out

    def _current(self) -> dict[str, str]:
        """The values set now, as Kafka's current config has them: a dynamic value removes
        the settings of its other units below it (a dynamic log.retention.ms leaves
        log.retention.hours at its default, whatever the file says)."""
        props = dict(self.static)
        for layer in (self.layers[CLUSTER], self.layers[BROKER]):
            for key, value in layer.items():
                for synonym in broker_synonyms(key):
                    props.pop(synonym, None)
                props[key] = value
        return props

    def _default(self, name: str) -> str | None:
        return self.defaults[name] if name in self.defaults else kafka_default(name)

    def _entry(self, name: str, value: str | None, per_broker: bool) -> DescribedConfig:
        type_ = config_type(name)
        hidden = type_ is None or type_ == PASSWORD  # unknown types too, as Kafka
        names = broker_config_synonyms(name)
        defaults = {n: d for n in names if (d := self._default(n)) is not None}
        synonyms = synonym_chain(name, names, [
            (self.layers[BROKER], DYNAMIC_BROKER_CONFIG),
            (self.layers[CLUSTER], DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, STATIC_BROKER_CONFIG), (defaults, DEFAULT_CONFIG)])
        if not per_broker:
            synonyms = [s for s in synonyms if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        if hidden:
            synonyms = [(n, None, source) for n, _, source in synonyms]
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        return DescribedConfig(name, None if hidden else value, source,
                               UNKNOWN if type_ is None else type_, tuple(synonyms),
                               read_only=name not in DYNAMIC_CONFIGS, sensitive=hidden)
