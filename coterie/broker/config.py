"""Broker settings: Kafka's property names, a properties file, and command-line overrides.

Settings are kept as the raw `key=value` strings Kafka operators already write, so the same
file can carry log settings (`log.segment.bytes`, ...) that coterie.log reads by their own
names. The handful the broker itself needs are exposed as typed properties with Kafka's
defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from coterie.assign.registry import UnknownAssignor, lookup
from coterie.broker.acls import AuthorizerConfigError, authorizer_settings
from coterie.broker.listeners import Listener, ListenerError, listeners_from
from coterie.broker.metrics_settings import MetricsConfigError, metrics_settings
from coterie.broker.sasl import SaslError, jaas_file, sasl_settings
from coterie.broker.ssl_principal import RulesError, principal_mapper
from coterie.broker.tls import TlsConfigError, server_context
from coterie.group import ConsumerGroupConfig
from coterie.log.errors import InvalidConfigError
from coterie.log.open_files import MAX_OPEN_FILES_KEY, capacity_from

DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "log.retention.check.interval.ms": str(5 * 60 * 1000),
    "log.flush.scheduler.interval.ms": "1000",
    # The log cleaner (coterie.broker.log_cleaner), Kafka's names and defaults.
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.dedupe.buffer.size": str(128 * 1024 * 1024),
    "producer.id.expiration.ms": str(24 * 60 * 60 * 1000),
    "producer.id.expiration.check.interval.ms": str(10 * 60 * 1000),
    "queued.max.requests": "500",
    # Bytes large frames being received may reserve together (coterie.broker.request_memory);
    # Kafka's default is no bound (-1), coterie's is 100 MiB (docs/decisions.md).
    "queued.max.request.bytes": str(100 * 1024 * 1024),
    # Connection limits and idle expiry, Kafka's names and defaults (coterie.broker.connections).
    "max.connections": str(2**31 - 1),
    "max.connections.per.ip": str(2**31 - 1),
    "connections.max.idle.ms": str(10 * 60 * 1000),
    # coterie's own: the most partitions one CreateTopics or CreatePartitions may create, all
    # topics of the request together (Kafka's controller refuses operations of more than
    # 10,000 metadata records, one per partition, with POLICY_VIOLATION).
    "max.partitions.per.request": "10000",
    # coterie's own: segment files kept open at once, by all partitions together; -1 is half
    # the process's open-file limit (coterie.log.open_files).
    MAX_OPEN_FILES_KEY: "-1",
    # The group-event stream (coterie.broker.group_events).
    "group.events.enable": "true",
    "group.events.retention.ms": str(7 * 24 * 60 * 60 * 1000),
    "group.events.partitions": "1",
    # coterie's own: where durable state lives. Empty: local files in the data directory
    # (one broker). A PostgreSQL URI (postgresql://...): a broker of a cluster whose every
    # durable thing is in that database (coterie.broker.cluster, docs/cluster.md).
    "storage": "",
    # coterie's own: how long a cluster broker's leases (its partitions, its registration)
    # outlive its last renewal; a dead broker's partitions move after about this long.
    "cluster.lease.ms": "6000",
    # coterie's own: how many database connections a cluster broker writes through, each
    # with its own group commits; a partition always writes through the same one, so its
    # appends keep their order (docs/cluster.md, "Writing").
    "cluster.write.connections": "1",
    # coterie's own: how many of a partition's most recent bytes (whole batches) a cluster
    # broker copies when it takes the partition over, and keeps as it grows; older offsets
    # are read from the database (docs/cluster.md, "The copy of a partition"). Coordinator
    # partitions and compacted topics are copied whole.
    "cluster.copy.bytes": str(256 * 1024 * 1024),
    # coterie's own: where the broker serves its web console (coterie.console), HOST:PORT;
    # empty: no console. It runs in a thread of its own and reads the broker as a client.
    "console.listen": "",
    # How long a TLS client may take over its handshake before its connection is closed
    # (coterie's own: Kafka's broker has no such bound).
    "tls.handshake.timeout.ms": "10000",
    # Kafka's: how long after a failed SASL authentication its connection is closed.
    "connection.failed.authentication.delay.ms": "100",
    # Kafka's: the largest frame a SASL listener takes before authentication.
    "sasl.server.max.receive.size": "524288",
    # coterie's own: Prometheus metrics at http://HOST:PORT/metrics (coterie.broker.metrics,
    # docs/operations.md); empty: off. Per-partition group series (committed
    # offset, lag) can be turned off; metrics.series.max caps each per-group and
    # per-partition family.
    "metrics.listen": "",
    "metrics.group.partition.series.enable": "true",
    "metrics.series.max": "10000",
}

STORAGE_SCHEMES = ("postgresql://", "postgres://")


# group.consumer.* integer settings (KIP-848 consumer groups) -> ConsumerGroupConfig fields;
# defaults and bounds live there, with Kafka's values and Kafka's start-up checks.
CONSUMER_GROUP_INT_SETTINGS: dict[str, str] = {
    "group.consumer.session.timeout.ms": "session_timeout_ms",
    "group.consumer.min.session.timeout.ms": "min_session_timeout_ms",
    "group.consumer.max.session.timeout.ms": "max_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "heartbeat_interval_ms",
    "group.consumer.min.heartbeat.interval.ms": "min_heartbeat_interval_ms",
    "group.consumer.max.heartbeat.interval.ms": "max_heartbeat_interval_ms",
    "group.consumer.max.size": "max_size",
    "group.consumer.regex.refresh.interval.ms": "regex_refresh_interval_ms",
}
# Kafka names its server assignors by class in group.consumer.assignors too.
KAFKA_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


class ConfigError(ValueError):
    """A setting has a value coterie cannot use."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-style `.properties` text (`key=value` or `key: value`, `#`/`!` comments;
    a line ending in a backslash goes on on the next one, as Kafka's inline PEM settings are
    written)."""
    props: dict[str, str] = {}
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:  # an odd run: continued
            line = line[:-1] + next(lines, "").strip()
        for sep in ("=", ":"):
            if sep in line:
                key, _, value = line.partition(sep)
                props[key.strip()] = value.strip()
                break
        else:
            props[line] = ""
    return props


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    data_dir: Path = Path("./data")
    props: dict[str, str] = field(default_factory=dict)
    # The properties set in the file or on the command line (not coterie's defaults): what
    # DescribeConfigs reports as STATIC_BROKER_CONFIG.
    explicit: frozenset[str] = frozenset()

    @classmethod
    def load(cls, host: str, port: int, data_dir: Path, config_file: Path | None = None,
             overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        props = dict(DEFAULTS)
        given: dict[str, str] = {}
        if config_file is not None:
            try:
                given.update(parse_properties(config_file.read_text()))
            except OSError as e:
                raise ConfigError(f"cannot read config file {config_file}: {e.strerror}") from e
        given.update(overrides or {})
        props.update(given)
        cfg = cls(host=host, port=port, data_dir=data_dir, props=props,
                  explicit=frozenset(given))
        cfg.validate()
        return cfg

    def get_int(self, key: str) -> int:
        value = self.props.get(key, DEFAULTS.get(key, ""))
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key}={value!r} is not an integer") from None

    def get_bool(self, key: str) -> bool:
        value = self.props.get(key, DEFAULTS.get(key, "false")).lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{key}={value!r} is not true or false")
        return value == "true"

    def validate(self) -> None:
        for key in ("node.id", "socket.request.max.bytes", "num.partitions",
                    "log.retention.check.interval.ms", "log.flush.scheduler.interval.ms"):
            self.get_int(key)
        for key in ("producer.id.expiration.ms", "producer.id.expiration.check.interval.ms"):
            if self.get_int(key) <= 0:
                raise ConfigError(f"{key} must be positive")
        self.get_bool("auto.create.topics.enable")
        self.get_bool("log.cleaner.enable")
        for key in ("log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size"):
            if self.get_int(key) <= 0:
                raise ConfigError(f"{key} must be positive")
        self.get_bool("group.events.enable")
        if self.get_int("group.events.partitions") <= 0:
            raise ConfigError("group.events.partitions must be positive")
        if self.get_int("group.events.retention.ms") < -1:
            raise ConfigError("group.events.retention.ms must be -1 (forever) or more")
        if self.num_partitions <= 0:
            raise ConfigError(f"num.partitions must be positive, got {self.num_partitions}")
        storage = self.props.get("storage", "").strip()
        if storage and not storage.startswith(STORAGE_SCHEMES):
            raise ConfigError(f"storage={storage!r}: coterie stores in local files (leave it "
                              "empty) or in PostgreSQL (a postgresql:// URI)")
        if self.get_int("cluster.lease.ms") < 300:
            raise ConfigError("cluster.lease.ms must be at least 300")
        if not 1 <= self.get_int("cluster.write.connections") <= 64:
            raise ConfigError("cluster.write.connections must be from 1 to 64")
        if self.get_int("cluster.copy.bytes") < 1:
            raise ConfigError("cluster.copy.bytes must be at least 1")
        if self.node_id < 0:
            raise ConfigError(f"node.id must be 0 or more, got {self.node_id}")
        console = self.console_listen
        if console is not None:
            _host, sep, port = console.rpartition(":")
            if not sep or not port.isdigit() or int(port) > 65535:
                raise ConfigError(f"console.listen={console!r} must be HOST:PORT")
        if self.socket_request_max_bytes <= 0:
            raise ConfigError("socket.request.max.bytes must be positive")
        if self.max_partitions_per_request <= 0:
            raise ConfigError("max.partitions.per.request must be positive, got "
                              f"{self.max_partitions_per_request}")
        try:
            capacity_from(self.props)
        except InvalidConfigError as e:
            raise ConfigError(str(e)) from None
        self.consumer_group_config()
        if self.get_int("tls.handshake.timeout.ms") <= 0:
            raise ConfigError("tls.handshake.timeout.ms must be positive")
        if self.get_int("connection.failed.authentication.delay.ms") < 0:
            raise ConfigError("connection.failed.authentication.delay.ms must be 0 or more")
        try:
            authorizer_settings(self.props)
        except AuthorizerConfigError as e:
            raise ConfigError(str(e)) from None
        try:
            metrics_settings(self.props)
        except MetricsConfigError as e:
            raise ConfigError(str(e)) from None
        try:
            jaas_file(self.props)  # the JAAS file, when named, is read at start
        except SaslError as e:
            raise ConfigError(str(e)) from None
        for spec in self.listeners():
            if spec.sasl:
                try:
                    sasl_settings(self.props, spec.name)
                except SaslError as e:
                    raise ConfigError(str(e)) from None
            if spec.tls:
                try:
                    server_context(self.props, spec.name)
                    principal_mapper(self.props, spec.name)
                except (TlsConfigError, RulesError) as e:
                    raise ConfigError(str(e)) from None

    def listeners(self) -> list[Listener]:
        """The broker's listeners (coterie.broker.listeners: `listeners` wins over the
        command line's host and port)."""
        try:
            return listeners_from(self.props, self.host, self.port)
        except ListenerError as e:
            raise ConfigError(str(e)) from None

    def consumer_group_config(self) -> ConsumerGroupConfig:
        """The group.consumer.* settings (Kafka's names, defaults and cross-checks)."""
        kwargs: dict[str, object] = {}
        for key, name in CONSUMER_GROUP_INT_SETTINGS.items():
            if key in self.props:
                kwargs[name] = self.get_int(key)
        if "group.consumer.assignors" in self.props:
            names = [n.strip() for n in self.props["group.consumer.assignors"].split(",")]
            assignors = tuple(KAFKA_ASSIGNOR_CLASSES.get(n, n) for n in names if n)
            for name in assignors:
                try:
                    lookup(name)
                except UnknownAssignor:
                    raise ConfigError(f"group.consumer.assignors: unknown assignor {name!r}"
                                      ) from None
            kwargs["assignors"] = assignors
        if "group.consumer.migration.policy" in self.props:
            kwargs["migration_policy"] = self.props["group.consumer.migration.policy"].lower()
        try:
            return ConsumerGroupConfig(**kwargs)  # type: ignore[arg-type]
        except ValueError as e:
            raise ConfigError(str(e)) from None

    @property
    def console_listen(self) -> str | None:
        """Where the web console listens (HOST:PORT), or None for no console."""
        return self.props.get("console.listen", "").strip() or None

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def storage(self) -> str | None:
        """The PostgreSQL URI of a cluster broker's storage; None: local files."""
        return self.props.get("storage", "").strip() or None

    @property
    def lease_s(self) -> float:
        return self.get_int("cluster.lease.ms") / 1000

    @property
    def write_connections(self) -> int:
        return self.get_int("cluster.write.connections")

    @property
    def copy_bytes(self) -> int:
        return self.get_int("cluster.copy.bytes")

    @property
    def socket_request_max_bytes(self) -> int:
        return self.get_int("socket.request.max.bytes")

    @property
    def auto_create_topics(self) -> bool:
        return self.get_bool("auto.create.topics.enable")

    @property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @property
    def max_partitions_per_request(self) -> int:
        """The most partitions one CreateTopics / CreatePartitions may create (all its topics
        together); a larger request is refused before anything is written."""
        return self.get_int("max.partitions.per.request")

    @property
    def advertised_host(self) -> str:
        return self.props.get("advertised.host", self.host)

    @property
    def advertised_port(self) -> int:
        return int(self.props.get("advertised.port", self.port))
