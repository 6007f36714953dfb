"""Kafka 4.2's broker configs: every name with its type and default, the ones Kafka changes at
run time, and the checks Kafka makes of a new value.

Why a table of Kafka's names: DescribeConfigs of a broker answers each setting with Kafka's type
and default (tools and consoles show them), and AlterConfigs / IncrementalAlterConfigs of a
broker must answer as Kafka 4.2 does: a name in `DYNAMIC_CONFIGS` (Kafka's DynamicBrokerConfig
AllDynamicConfigs) is accepted; a name in `STATIC_CONFIGS` (the rest of Kafka's broker configs)
or in `COTERIE_CONFIGS` (coterie's own settings, which Kafka does not have) is refused, "Cannot
update these configs dynamically"; any other name is a custom config, which Kafka accepts and
keeps for the plugins that read them. `check_value` checks a value by type, range and choices
with Kafka's wording; `listener_base` and `broker_config_synonyms` give Kafka's reading of the
`listener.name.<listener>.<config>` names and of the settings given in several units.

The names, types, defaults, bounds and update modes are Apache Kafka 4.2.1's (its broker's own
definitions); the reference tests check the ones their scenarios use against that release.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from coterie.log.config import (
    BOOLEAN,
    CLASS,
    DOUBLE,
    INT,
    LIST,
    LONG,
    PASSWORD,
    SHORT,
    STRING,
    broker_synonyms,
)

UNKNOWN = 0  # DescribeConfigs' type of a name Kafka does not define (a custom config)
PER_BROKER, CLUSTER_WIDE = "per-broker", "cluster-wide"
_LONG_MAX, _INT_MAX = str(2**63 - 1), str(2**31 - 1)
_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", SHORT: "SHORT", LONG: "LONG",
              DOUBLE: "DOUBLE", LIST: "LIST", CLASS: "CLASS", PASSWORD: "PASSWORD"}

# A check of a parsed value beyond its type: why Kafka refuses it, or None.
Check = Callable[[object], str | None]


def at_least(low: int) -> Check:
    """Kafka's Range.atLeast."""
    def check(value: object) -> str | None:
        return f"Value must be at least {low}" if value < low else None  # type: ignore[operator]
    return check


def between(low: int, high: int, also: int | None = None) -> Check:
    """Kafka's Range.between; with `also`, the one value outside the range it accepts too
    (compression.gzip.level's -1)."""
    def check(value: object) -> str | None:
        v: float = value  # type: ignore[assignment]
        if also is not None:
            if v == also or low <= v <= high:
                return None
            return f"Value must be between {low} and {high} or equal to {also}"
        if v < low:
            return f"Value must be at least {low}"
        if v > high:
            return f"Value must be no more than {high}"
        return None
    return check


def one_of(*choices: str) -> Check:
    """Kafka's ValidString / ValidList: the value (each item of a list) is one of `choices`,
    case counting."""
    def check(value: object) -> str | None:
        return None if value in choices else f"String must be one of: {', '.join(choices)}"
    return check


@dataclass(frozen=True, slots=True)
class Dynamic:
    """A broker config Kafka 4.2 changes at run time: its type, its default (None when
    Kafka's default is null), whether it may be set for the whole cluster or only for one
    broker (`scope`), and the check of a value beyond its type."""

    type: int
    default: str | None
    scope: str
    check: Check | None = None


# Kafka 4.2's broker configs that change only with a restart (and its internal ones, which
# it refuses to change too): name -> (type, default; None when null or none).
STATIC_CONFIGS: dict[str, tuple[int, str | None]] = {
    "add.partitions.to.txn.retry.backoff.max.ms": (INT, "100"),
    "add.partitions.to.txn.retry.backoff.ms": (INT, "20"),
    "advertised.listeners": (LIST, None),
    "alter.config.policy.class.name": (CLASS, None),
    "alter.log.dirs.replication.quota.window.num": (INT, "11"),
    "alter.log.dirs.replication.quota.window.size.seconds": (INT, "1"),
    "authorizer.class.name": (STRING, ""),
    "auto.create.topics.enable": (BOOLEAN, "true"),
    "auto.leader.rebalance.enable": (BOOLEAN, "true"),
    "broker.heartbeat.interval.ms": (INT, "2000"),
    "broker.id": (INT, "-1"),
    "broker.rack": (STRING, None),
    "broker.session.timeout.ms": (INT, "9000"),
    "client.quota.callback.class": (CLASS, None),
    "connection.failed.authentication.delay.ms": (INT, "100"),
    "connections.max.idle.ms": (LONG, "600000"),
    "connections.max.reauth.ms": (LONG, "0"),
    "controlled.shutdown.enable": (BOOLEAN, "true"),
    "controller.listener.names": (LIST, None),
    "controller.performance.always.log.threshold.ms": (LONG, "2000"),
    "controller.performance.sample.period.ms": (LONG, "60000"),
    "controller.quorum.append.linger.ms": (INT, "25"),
    "controller.quorum.auto.join.enable": (BOOLEAN, "false"),
    "controller.quorum.bootstrap.servers": (LIST, ""),
    "controller.quorum.election.backoff.max.ms": (INT, "1000"),
    "controller.quorum.election.timeout.ms": (INT, "1000"),
    "controller.quorum.fetch.timeout.ms": (INT, "2000"),
    "controller.quorum.request.timeout.ms": (INT, "2000"),
    "controller.quorum.retry.backoff.ms": (INT, "20"),
    "controller.quorum.voters": (LIST, ""),
    "controller.quota.window.num": (INT, "11"),
    "controller.quota.window.size.seconds": (INT, "1"),
    "controller.socket.timeout.ms": (INT, "30000"),
    "create.topic.policy.class.name": (CLASS, None),
    "default.replication.factor": (INT, "1"),
    "delegation.token.expiry.check.interval.ms": (LONG, "3600000"),
    "delegation.token.expiry.time.ms": (LONG, "86400000"),
    "delegation.token.max.lifetime.ms": (LONG, "604800000"),
    "delegation.token.secret.key": (PASSWORD, None),
    "delete.records.purgatory.purge.interval.requests": (INT, "1"),
    "delete.topic.enable": (BOOLEAN, "true"),
    "early.start.listeners": (LIST, None),
    "fetch.max.bytes": (INT, "57671680"),
    "fetch.purgatory.purge.interval.requests": (INT, "1000"),
    "group.consumer.assignors": (LIST, "uniform,range"),
    "group.consumer.heartbeat.interval.ms": (INT, "5000"),
    "group.consumer.max.heartbeat.interval.ms": (INT, "15000"),
    "group.consumer.max.session.timeout.ms": (INT, "60000"),
    "group.consumer.max.size": (INT, _INT_MAX),
    "group.consumer.migration.policy": (STRING, "bidirectional"),
    "group.consumer.min.heartbeat.interval.ms": (INT, "5000"),
    "group.consumer.min.session.timeout.ms": (INT, "45000"),
    "group.consumer.regex.refresh.interval.ms": (INT, "600000"),
    "group.consumer.session.timeout.ms": (INT, "45000"),
    "group.coordinator.append.linger.ms": (INT, "-1"),
    "group.coordinator.rebalance.protocols": (LIST, "classic,consumer,streams"),
    "group.coordinator.threads": (INT, "4"),
    "group.initial.rebalance.delay.ms": (INT, "3000"),
    "group.max.session.timeout.ms": (INT, "1800000"),
    "group.max.size": (INT, _INT_MAX),
    "group.min.session.timeout.ms": (INT, "6000"),
    "group.share.assignors": (LIST, "simple"),
    "group.share.delivery.count.limit": (INT, "5"),
    "group.share.enable": (BOOLEAN, "false"),
    "group.share.heartbeat.interval.ms": (INT, "5000"),
    "group.share.initialize.retry.interval.ms": (INT, "30000"),
    "group.share.max.heartbeat.interval.ms": (INT, "15000"),
    "group.share.max.record.lock.duration.ms": (INT, "60000"),
    "group.share.max.session.timeout.ms": (INT, "60000"),
    "group.share.max.share.sessions": (INT, "2000"),
    "group.share.max.size": (INT, "200"),
    "group.share.min.heartbeat.interval.ms": (INT, "5000"),
    "group.share.min.record.lock.duration.ms": (INT, "15000"),
    "group.share.min.session.timeout.ms": (INT, "45000"),
    "group.share.partition.max.record.locks": (INT, "2000"),
    "group.share.persister.class.name":
        (STRING, "org.apache.kafka.server.share.persister.DefaultStatePersister"),
    "group.share.record.lock.duration.ms": (INT, "30000"),
    "group.share.session.timeout.ms": (INT, "45000"),
    "group.streams.heartbeat.interval.ms": (INT, "5000"),
    "group.streams.initial.rebalance.delay.ms": (INT, "3000"),
    "group.streams.max.heartbeat.interval.ms": (INT, "15000"),
    "group.streams.max.session.timeout.ms": (INT, "60000"),
    "group.streams.max.size": (INT, _INT_MAX),
    "group.streams.max.standby.replicas": (INT, "2"),
    "group.streams.min.heartbeat.interval.ms": (INT, "5000"),
    "group.streams.min.session.timeout.ms": (INT, "45000"),
    "group.streams.num.standby.replicas": (INT, "0"),
    "group.streams.session.timeout.ms": (INT, "45000"),
    "initial.broker.registration.timeout.ms": (INT, "60000"),
    "inter.broker.listener.name": (STRING, None),
    "internal.metadata.delete.delay.millis": (LONG, "60000"),
    "internal.metadata.log.segment.bytes": (INT, None),
    "internal.metadata.max.batch.size.in.bytes": (INT, "8388608"),
    "internal.metadata.max.fetch.size.in.bytes": (INT, "8388608"),
    "kafka.metrics.polling.interval.secs": (INT, "10"),
    "kafka.metrics.reporters": (LIST, ""),
    "leader.imbalance.check.interval.seconds": (LONG, "300"),
    "log.cleaner.enable": (BOOLEAN, "true"),
    "log.dir": (LIST, "/tmp/kafka-logs"),
    "log.dir.failure.timeout.ms": (LONG, "30000"),
    "log.dirs": (LIST, None),
    "log.flush.offset.checkpoint.interval.ms": (INT, "60000"),
    "log.flush.scheduler.interval.ms": (LONG, _LONG_MAX),
    "log.flush.start.offset.checkpoint.interval.ms": (INT, "60000"),
    "log.initial.task.delay.ms": (LONG, "30000"),
    "log.retention.check.interval.ms": (LONG, "300000"),
    "log.retention.hours": (INT, "168"),
    "log.retention.minutes": (INT, None),
    "log.roll.hours": (INT, "168"),
    "log.roll.jitter.hours": (INT, "0"),
    "max.incremental.fetch.session.cache.slots": (INT, "1000"),
    "max.request.partition.size.limit": (INT, "2000"),
    "metadata.log.dir": (STRING, None),
    "metadata.log.max.record.bytes.between.snapshots": (LONG, "20971520"),
    "metadata.log.max.snapshot.interval.ms": (LONG, "3600000"),
    "metadata.log.segment.bytes": (INT, "1073741824"),
    "metadata.log.segment.ms": (LONG, "604800000"),
    "metadata.max.idle.interval.ms": (INT, "500"),
    "metadata.max.retention.bytes": (LONG, "104857600"),
    "metadata.max.retention.ms": (LONG, "604800000"),
    "metrics.num.samples": (INT, "2"),
    "metrics.recording.level": (STRING, "INFO"),
    "metrics.sample.window.ms": (LONG, "30000"),
    "node.id": (INT, None),
    "num.partitions": (INT, "1"),
    "num.replica.alter.log.dirs.threads": (INT, None),
    "offset.metadata.max.bytes": (INT, "4096"),
    "offsets.commit.timeout.ms": (INT, "5000"),
    "offsets.load.buffer.size": (INT, "5242880"),
    "offsets.retention.check.interval.ms": (LONG, "600000"),
    "offsets.retention.minutes": (INT, "10080"),
    "offsets.topic.compression.codec": (INT, "0"),
    "offsets.topic.num.partitions": (INT, "50"),
    "offsets.topic.replication.factor": (SHORT, "3"),
    "offsets.topic.segment.bytes": (INT, "104857600"),
    "process.roles": (LIST, None),
    "producer.id.expiration.check.interval.ms": (INT, "600000"),
    "producer.purgatory.purge.interval.requests": (INT, "1000"),
    "queued.max.request.bytes": (LONG, "-1"),
    "queued.max.requests": (INT, "500"),
    "quota.window.num": (INT, "11"),
    "quota.window.size.seconds": (INT, "1"),
    "remote.log.manager.copy.quota.window.num": (INT, "11"),
    "remote.log.manager.copy.quota.window.size.seconds": (INT, "1"),
    "remote.log.manager.fetch.quota.window.num": (INT, "11"),
    "remote.log.manager.fetch.quota.window.size.seconds": (INT, "1"),
    "remote.log.manager.task.interval.ms": (LONG, "30000"),
    "remote.log.manager.task.retry.backoff.max.ms": (LONG, "30000"),
    "remote.log.manager.task.retry.backoff.ms": (LONG, "500"),
    "remote.log.manager.task.retry.jitter": (DOUBLE, "0.2"),
    "remote.log.manager.thread.pool.size": (INT, "2"),
    "remote.log.metadata.custom.metadata.max.bytes": (INT, "128"),
    "remote.log.metadata.manager.class.name": (STRING,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"),
    "remote.log.metadata.manager.class.path": (STRING, None),
    "remote.log.metadata.manager.impl.prefix": (STRING, "rlmm.config."),
    "remote.log.metadata.manager.listener.name": (STRING, None),
    "remote.log.reader.max.pending.tasks": (INT, "100"),
    "remote.log.storage.manager.class.name": (STRING, None),
    "remote.log.storage.manager.class.path": (STRING, None),
    "remote.log.storage.manager.impl.prefix": (STRING, "rsm.config."),
    "remote.log.storage.system.enable": (BOOLEAN, "false"),
    "replica.fetch.backoff.ms": (INT, "1000"),
    "replica.fetch.max.bytes": (INT, "1048576"),
    "replica.fetch.min.bytes": (INT, "1"),
    "replica.fetch.response.max.bytes": (INT, "10485760"),
    "replica.fetch.wait.max.ms": (INT, "500"),
    "replica.high.watermark.checkpoint.interval.ms": (LONG, "5000"),
    "replica.lag.time.max.ms": (LONG, "30000"),
    "replica.selector.class": (STRING, None),
    "replica.socket.receive.buffer.bytes": (INT, "65536"),
    "replica.socket.timeout.ms": (INT, "30000"),
    "replication.quota.window.num": (INT, "11"),
    "replication.quota.window.size.seconds": (INT, "1"),
    "request.timeout.ms": (INT, "30000"),
    "sasl.client.callback.handler.class": (CLASS, None),
    "sasl.login.callback.handler.class": (CLASS, None),
    "sasl.login.class": (CLASS, None),
    "sasl.login.connect.timeout.ms": (INT, None),
    "sasl.login.read.timeout.ms": (INT, None),
    "sasl.login.retry.backoff.max.ms": (LONG, "10000"),
    "sasl.login.retry.backoff.ms": (LONG, "100"),
    "sasl.mechanism.controller.protocol": (STRING, "GSSAPI"),
    "sasl.oauthbearer.assertion.algorithm": (STRING, "RS256"),
    "sasl.oauthbearer.assertion.claim.aud": (STRING, None),
    "sasl.oauthbearer.assertion.claim.exp.seconds": (INT, "300"),
    "sasl.oauthbearer.assertion.claim.iss": (STRING, None),
    "sasl.oauthbearer.assertion.claim.jti.include": (BOOLEAN, "false"),
    "sasl.oauthbearer.assertion.claim.nbf.seconds": (INT, "60"),
    "sasl.oauthbearer.assertion.claim.sub": (STRING, None),
    "sasl.oauthbearer.assertion.file": (STRING, None),
    "sasl.oauthbearer.assertion.private.key.file": (STRING, None),
    "sasl.oauthbearer.assertion.private.key.passphrase": (PASSWORD, None),
    "sasl.oauthbearer.assertion.template.file": (STRING, None),
    "sasl.oauthbearer.client.credentials.client.id": (STRING, None),
    "sasl.oauthbearer.client.credentials.client.secret": (PASSWORD, None),
    "sasl.oauthbearer.clock.skew.seconds": (INT, "30"),
    "sasl.oauthbearer.expected.audience": (LIST, ""),
    "sasl.oauthbearer.expected.issuer": (STRING, None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (LONG, "3600000"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (LONG, "10000"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (LONG, "100"),
    "sasl.oauthbearer.jwks.endpoint.url": (STRING, None),
    "sasl.oauthbearer.jwt.retriever.class":
        (CLASS, "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever"),
    "sasl.oauthbearer.jwt.validator.class":
        (CLASS, "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator"),
    "sasl.oauthbearer.scope": (STRING, None),
    "sasl.oauthbearer.scope.claim.name": (STRING, "scope"),
    "sasl.oauthbearer.sub.claim.name": (STRING, "sub"),
    "sasl.oauthbearer.token.endpoint.url": (STRING, None),
    "sasl.server.callback.handler.class": (CLASS, None),
    "sasl.server.max.receive.size": (INT, "524288"),
    "security.inter.broker.protocol": (STRING, "PLAINTEXT"),
    "security.providers": (STRING, None),
    "server.max.startup.time.ms": (LONG, _LONG_MAX),
    "share.coordinator.append.linger.ms": (INT, "-1"),
    "share.coordinator.cold.partition.snapshot.interval.ms": (INT, "300000"),
    "share.coordinator.load.buffer.size": (INT, "5242880"),
    "share.coordinator.snapshot.update.records.per.snapshot": (INT, "500"),
    "share.coordinator.state.topic.compression.codec": (INT, "0"),
    "share.coordinator.state.topic.min.isr": (SHORT, "2"),
    "share.coordinator.state.topic.num.partitions": (INT, "50"),
    "share.coordinator.state.topic.prune.interval.ms": (INT, "300000"),
    "share.coordinator.state.topic.replication.factor": (SHORT, "3"),
    "share.coordinator.state.topic.segment.bytes": (INT, "104857600"),
    "share.coordinator.threads": (INT, "1"),
    "share.coordinator.write.timeout.ms": (INT, "5000"),
    "share.fetch.purgatory.purge.interval.requests": (INT, "1000"),
    "socket.connection.setup.timeout.max.ms": (LONG, "30000"),
    "socket.connection.setup.timeout.ms": (LONG, "10000"),
    "socket.listen.backlog.size": (INT, "50"),
    "socket.receive.buffer.bytes": (INT, "102400"),
    "socket.request.max.bytes": (INT, "104857600"),
    "socket.send.buffer.bytes": (INT, "102400"),
    "ssl.allow.dn.changes": (BOOLEAN, "false"),
    "ssl.allow.san.changes": (BOOLEAN, "false"),
    "ssl.principal.mapping.rules": (STRING, "DEFAULT"),
    "telemetry.max.bytes": (INT, "1048576"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (INT, "10000"),
    "transaction.max.timeout.ms": (INT, "900000"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (INT, "3600000"),
    "transaction.state.log.load.buffer.size": (INT, "5242880"),
    "transaction.state.log.min.isr": (INT, "2"),
    "transaction.state.log.num.partitions": (INT, "50"),
    "transaction.state.log.replication.factor": (SHORT, "3"),
    "transaction.state.log.segment.bytes": (INT, "104857600"),
    "transaction.two.phase.commit.enable": (BOOLEAN, "false"),
    "transactional.id.expiration.ms": (INT, "604800000"),
    "unclean.leader.election.interval.ms": (LONG, "300000"),
    "unstable.api.versions.enable": (BOOLEAN, "false"),
    "unstable.feature.versions.enable": (BOOLEAN, "false"),
}

# Kafka 4.2's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs).
DYNAMIC_CONFIGS: dict[str, Dynamic] = {
    "background.threads": Dynamic(INT, "10", CLUSTER_WIDE, at_least(1)),
    "compression.gzip.level": Dynamic(INT, "-1", CLUSTER_WIDE, between(1, 9, also=-1)),
    "compression.lz4.level": Dynamic(INT, "9", CLUSTER_WIDE, between(1, 17)),
    "compression.type":
        Dynamic(STRING, "producer", CLUSTER_WIDE,
                one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    "compression.zstd.level": Dynamic(INT, "3", CLUSTER_WIDE, between(-131072, 22)),
    "config.providers": Dynamic(LIST, "", CLUSTER_WIDE),
    "listener.security.protocol.map": Dynamic(STRING, _PROTOCOL_MAP, PER_BROKER),
    "listeners": Dynamic(LIST, "PLAINTEXT://:9092", PER_BROKER),
    "log.cleaner.backoff.ms": Dynamic(LONG, "15000", CLUSTER_WIDE, at_least(0)),
    "log.cleaner.dedupe.buffer.size": Dynamic(LONG, "134217728", CLUSTER_WIDE),
    "log.cleaner.delete.retention.ms": Dynamic(LONG, "86400000", CLUSTER_WIDE, at_least(0)),
    "log.cleaner.io.buffer.load.factor": Dynamic(DOUBLE, "0.9", CLUSTER_WIDE),
    "log.cleaner.io.buffer.size": Dynamic(INT, "524288", CLUSTER_WIDE, at_least(0)),
    "log.cleaner.io.max.bytes.per.second": Dynamic(DOUBLE, "1.7976931348623157E308", CLUSTER_WIDE),
    "log.cleaner.max.compaction.lag.ms": Dynamic(LONG, _LONG_MAX, CLUSTER_WIDE, at_least(1)),
    "log.cleaner.min.cleanable.ratio": Dynamic(DOUBLE, "0.5", CLUSTER_WIDE, between(0, 1)),
    "log.cleaner.min.compaction.lag.ms": Dynamic(LONG, "0", CLUSTER_WIDE, at_least(0)),
    "log.cleaner.threads": Dynamic(INT, "1", CLUSTER_WIDE, at_least(0)),
    "log.cleanup.policy": Dynamic(LIST, "delete", CLUSTER_WIDE, one_of("compact", "delete")),
    "log.flush.interval.messages": Dynamic(LONG, _LONG_MAX, CLUSTER_WIDE, at_least(1)),
    "log.flush.interval.ms": Dynamic(LONG, None, CLUSTER_WIDE),
    "log.index.interval.bytes": Dynamic(INT, "4096", CLUSTER_WIDE, at_least(0)),
    "log.index.size.max.bytes": Dynamic(INT, "10485760", CLUSTER_WIDE, at_least(4)),
    "log.local.retention.bytes": Dynamic(LONG, "-2", CLUSTER_WIDE, at_least(-2)),
    "log.local.retention.ms": Dynamic(LONG, "-2", CLUSTER_WIDE, at_least(-2)),
    "log.message.timestamp.after.max.ms": Dynamic(LONG, "3600000", CLUSTER_WIDE, at_least(0)),
    "log.message.timestamp.before.max.ms": Dynamic(LONG, _LONG_MAX, CLUSTER_WIDE, at_least(0)),
    "log.message.timestamp.type":
        Dynamic(STRING, "CreateTime", CLUSTER_WIDE, one_of("CreateTime", "LogAppendTime")),
    "log.preallocate": Dynamic(BOOLEAN, "false", CLUSTER_WIDE),
    "log.retention.bytes": Dynamic(LONG, "-1", CLUSTER_WIDE),
    "log.retention.ms": Dynamic(LONG, None, CLUSTER_WIDE),
    "log.roll.jitter.ms": Dynamic(LONG, None, CLUSTER_WIDE),
    "log.roll.ms": Dynamic(LONG, None, CLUSTER_WIDE),
    "log.segment.bytes": Dynamic(INT, "1073741824", CLUSTER_WIDE, at_least(1048576)),
    "log.segment.delete.delay.ms": Dynamic(LONG, "60000", CLUSTER_WIDE, at_least(0)),
    "max.connection.creation.rate": Dynamic(INT, _INT_MAX, CLUSTER_WIDE, at_least(0)),
    "max.connections": Dynamic(INT, _INT_MAX, CLUSTER_WIDE, at_least(0)),
    "max.connections.per.ip": Dynamic(INT, _INT_MAX, CLUSTER_WIDE, at_least(0)),
    "max.connections.per.ip.overrides": Dynamic(STRING, "", CLUSTER_WIDE),
    "message.max.bytes": Dynamic(INT, "1048588", CLUSTER_WIDE, at_least(0)),
    "metric.reporters": Dynamic(LIST, "org.apache.kafka.common.metrics.JmxReporter", CLUSTER_WIDE),
    "min.insync.replicas": Dynamic(INT, "1", CLUSTER_WIDE, at_least(1)),
    "num.io.threads": Dynamic(INT, "8", CLUSTER_WIDE, at_least(1)),
    "num.network.threads": Dynamic(INT, "3", CLUSTER_WIDE, at_least(1)),
    "num.recovery.threads.per.data.dir": Dynamic(INT, "2", CLUSTER_WIDE, at_least(1)),
    "num.replica.fetchers": Dynamic(INT, "1", CLUSTER_WIDE, at_least(1)),
    "principal.builder.class": Dynamic(CLASS, _PRINCIPAL_BUILDER, PER_BROKER),
    "producer.id.expiration.ms": Dynamic(INT, "86400000", CLUSTER_WIDE, at_least(1)),
    "remote.fetch.max.wait.ms": Dynamic(INT, "500", CLUSTER_WIDE, at_least(1)),
    "remote.list.offsets.request.timeout.ms": Dynamic(LONG, "30000", CLUSTER_WIDE, at_least(1)),
    "remote.log.index.file.cache.total.size.bytes":
        Dynamic(LONG, "1073741824", CLUSTER_WIDE, at_least(1)),
    "remote.log.manager.copier.thread.pool.size": Dynamic(INT, "10", CLUSTER_WIDE, at_least(1)),
    "remote.log.manager.copy.max.bytes.per.second":
        Dynamic(LONG, _LONG_MAX, CLUSTER_WIDE, at_least(1)),
    "remote.log.manager.expiration.thread.pool.size": Dynamic(INT, "10", CLUSTER_WIDE, at_least(1)),
    "remote.log.manager.fetch.max.bytes.per.second":
        Dynamic(LONG, _LONG_MAX, CLUSTER_WIDE, at_least(1)),
    "remote.log.manager.follower.thread.pool.size": Dynamic(INT, "2", CLUSTER_WIDE, at_least(1)),
    "remote.log.reader.threads": Dynamic(INT, "10", CLUSTER_WIDE, at_least(1)),
    "sasl.enabled.mechanisms": Dynamic(LIST, "GSSAPI", PER_BROKER),
    "sasl.jaas.config": Dynamic(PASSWORD, None, PER_BROKER),
    "sasl.kerberos.kinit.cmd": Dynamic(STRING, "/usr/bin/kinit", PER_BROKER),
    "sasl.kerberos.min.time.before.relogin": Dynamic(LONG, "60000", PER_BROKER),
    "sasl.kerberos.principal.to.local.rules": Dynamic(LIST, "DEFAULT", PER_BROKER),
    "sasl.kerberos.service.name": Dynamic(STRING, None, PER_BROKER),
    "sasl.kerberos.ticket.renew.jitter": Dynamic(DOUBLE, "0.05", PER_BROKER),
    "sasl.kerberos.ticket.renew.window.factor": Dynamic(DOUBLE, "0.8", PER_BROKER),
    "sasl.login.refresh.buffer.seconds": Dynamic(SHORT, "300", PER_BROKER),
    "sasl.login.refresh.min.period.seconds": Dynamic(SHORT, "60", PER_BROKER),
    "sasl.login.refresh.window.factor": Dynamic(DOUBLE, "0.8", PER_BROKER),
    "sasl.login.refresh.window.jitter": Dynamic(DOUBLE, "0.05", PER_BROKER),
    "sasl.mechanism.inter.broker.protocol": Dynamic(STRING, "GSSAPI", PER_BROKER),
    "ssl.cipher.suites": Dynamic(LIST, "", PER_BROKER),
    "ssl.client.auth": Dynamic(STRING, "none", PER_BROKER, one_of("required", "requested", "none")),
    "ssl.enabled.protocols": Dynamic(LIST, "TLSv1.2,TLSv1.3", PER_BROKER),
    "ssl.endpoint.identification.algorithm": Dynamic(STRING, "https", PER_BROKER),
    "ssl.engine.factory.class": Dynamic(CLASS, None, PER_BROKER),
    "ssl.key.password": Dynamic(PASSWORD, None, PER_BROKER),
    "ssl.keymanager.algorithm": Dynamic(STRING, "SunX509", PER_BROKER),
    "ssl.keystore.certificate.chain": Dynamic(PASSWORD, None, PER_BROKER),
    "ssl.keystore.key": Dynamic(PASSWORD, None, PER_BROKER),
    "ssl.keystore.location": Dynamic(STRING, None, PER_BROKER),
    "ssl.keystore.password": Dynamic(PASSWORD, None, PER_BROKER),
    "ssl.keystore.type": Dynamic(STRING, "JKS", PER_BROKER),
    "ssl.protocol": Dynamic(STRING, "TLSv1.3", PER_BROKER),
    "ssl.provider": Dynamic(STRING, None, PER_BROKER),
    "ssl.secure.random.implementation": Dynamic(STRING, None, PER_BROKER),
    "ssl.trustmanager.algorithm": Dynamic(STRING, "PKIX", PER_BROKER),
    "ssl.truststore.certificates": Dynamic(PASSWORD, None, PER_BROKER),
    "ssl.truststore.location": Dynamic(STRING, None, PER_BROKER),
    "ssl.truststore.password": Dynamic(PASSWORD, None, PER_BROKER),
    "ssl.truststore.type": Dynamic(STRING, "JKS", PER_BROKER),
    "transaction.partition.verification.enable": Dynamic(BOOLEAN, "true", CLUSTER_WIDE),
    "unclean.leader.election.enable": Dynamic(BOOLEAN, "false", CLUSTER_WIDE),
}

# coterie's own settings (Kafka has no such names): their types. They change only with a
# restart; their defaults are coterie.broker.config's.
COTERIE_CONFIGS: dict[str, int] = {
    "advertised.host": STRING,
    "advertised.port": INT,
    "cluster.copy.bytes": LONG,
    "cluster.lease.ms": INT,
    "cluster.write.connections": INT,
    # The web console the broker serves (coterie.console), HOST:PORT; empty: none.
    "console.listen": STRING,
    "group.classic.max.member.metadata.bytes": INT,
    "group.consumer.client.assignment.timeout.ms": INT,
    "group.events.enable": BOOLEAN,
    "group.events.partitions": INT,
    "group.events.retention.ms": LONG,
    # Kafka's JVM property naming the JAAS file (coterie.broker.jaas), as a setting here.
    "java.security.auth.login.config": STRING,
    "log.max.open.files": INT,
    "max.partitions.per.request": INT,
    # Prometheus metrics (coterie.broker.metrics).
    "metrics.group.partition.series.enable": BOOLEAN,
    "metrics.listen": STRING,
    "metrics.series.max": INT,
    "storage": STRING,
}
STATIC_NAMES: frozenset[str] = frozenset(STATIC_CONFIGS) | frozenset(COTERIE_CONFIGS)
# Security configs Kafka changes only per listener (listener.name.<listener>.<config>), never
# under the bare name (SslConfigs.RECONFIGURABLE_CONFIGS).
PER_LISTENER_ONLY = frozenset({
    "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type"})
# The listener configs that may be a cluster-wide default; any other listener config is one
# broker's own.
_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
# Configs of one SASL mechanism of a listener: listener.name.<l>.<mechanism>.<config>.
_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                      "sasl.login.class", "sasl.server.callback.handler.class",
                      "connections.max.reauth.ms")
_LISTENER = re.compile(r"listener\.name\.[^.]*\.(.*)")


def listener_base(name: str) -> str | None:
    """The config a `listener.name.<listener>.<config>` name overrides for that listener
    (for a mechanism's config, `<mechanism>.<config>`: the config), or None for a name
    without the listener prefix."""
    match = _LISTENER.fullmatch(name)
    if match is None:
        return None
    base = match.group(1)
    return next((m for m in _MECHANISM_CONFIGS if base.endswith(m)), base)


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's synonyms of a broker config, in precedence order: the units of one setting
    (log.retention.ms, .minutes, .hours), or a listener's override and the config it
    overrides; `name` alone otherwise."""
    base = listener_base(name)
    return broker_synonyms(name) if base is None else (name, base)


def config_type(name: str) -> int | None:
    """The type of a broker config (a listener override has its base config's), or None for
    a name neither Kafka nor coterie defines."""
    key = listener_base(name) or name
    if key in DYNAMIC_CONFIGS:
        return DYNAMIC_CONFIGS[key].type
    if key in STATIC_CONFIGS:
        return STATIC_CONFIGS[key][0]
    return COTERIE_CONFIGS.get(key)


def kafka_default(name: str) -> str | None:
    """Kafka 4.2's default of a broker config, None when it has none (or is null)."""
    if name in DYNAMIC_CONFIGS:
        return DYNAMIC_CONFIGS[name].default
    return STATIC_CONFIGS[name][1] if name in STATIC_CONFIGS else None


def per_broker_only(name: str) -> bool:
    """True for a config Kafka refuses as a cluster-wide default (security and listener
    settings belong to one broker)."""
    match = _LISTENER.fullmatch(name)
    if match is not None:
        return match.group(1) not in _CLUSTER_LEVEL_LISTENER_CONFIGS
    dynamic = DYNAMIC_CONFIGS.get(name)
    return dynamic is not None and dynamic.scope == PER_BROKER


# -- values ---------------------------------------------------------------------------------
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_INTEGER_BITS = {SHORT: 16, INT: 32, LONG: 64}


class BadValue(ValueError):
    """A value that is not of its config's type (the message is Kafka's reason)."""


def parse(type_: int, raw: str) -> object:
    """`raw` as Kafka's ConfigDef reads a value of `type_` (surrounding blanks ignored):
    bool, int, float, list of str or str. Raises BadValue with Kafka's reason."""
    text = raw.strip()
    if type_ == BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise BadValue("Expected value to be either true or false")
        return text.lower() == "true"
    if type_ in _INTEGER_BITS:
        bound = 2 ** (_INTEGER_BITS[type_] - 1)
        if not _INTEGER.fullmatch(text) or not -bound <= int(text) < bound:
            raise BadValue(f"Not a number of type {TYPE_NAMES[type_]}")
        return int(text)
    if type_ == DOUBLE:
        if not _DECIMAL.fullmatch(text):
            raise BadValue("Not a number of type DOUBLE")
        return float(text.rstrip("fFdD"))
    if type_ == LIST:
        return [] if text == "" else [item.strip() for item in text.split(",")]
    return text


def java_double(value: float) -> str:
    """A double as Java prints it (Double.toString), which is how Kafka shows one: 0.5, 2.0,
    1.0E7, 1.7976931348623157E308."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python's shortest digits, positional in this range as Java's
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    shown = "".join(map(str, digits))
    power = len(shown) - 1 + int(exponent)
    shown = shown.rstrip("0") or "0"
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def canonical(type_: int, raw: str) -> str:
    """A value as Kafka shows a broker config it parsed ("TRUE" as true, " 77 " as 77, a
    double as Java prints it); `raw` unchanged when it does not parse."""
    try:
        value = parse(type_, raw)
    except BadValue:
        return raw
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def _shown(value: object) -> str:
    return java_double(value) if isinstance(value, float) else str(value)


def check_value(name: str, raw: str) -> str | None:
    """Why Kafka 4.2 refuses `raw` as the value of broker config `name` (its type, range,
    choices and, for the listener settings, their format), or None when it takes it. A
    listener override is checked as its base config; a custom name takes any value."""
    key = listener_base(name) or name
    type_ = config_type(key)
    if type_ is None:
        return None
    try:
        value = parse(type_, raw)
    except BadValue as e:
        return f"Invalid value {raw} for configuration {key}: {e}"
    dynamic = DYNAMIC_CONFIGS.get(key)
    if dynamic is not None and dynamic.check is not None:
        for item in value if isinstance(value, list) else [value]:
            problem = dynamic.check(item)
            if problem is not None:
                return f"Invalid value {_shown(item)} for configuration {key}: {problem}"
    form = _FORMATS.get(key)
    return None if form is None else form(key, value)


_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_ENDPOINT = re.compile(r"[A-Za-z0-9_]+://(\[[0-9A-Fa-f:.]+\]|[^:\[\]/]*):[0-9]+")


def _protocol_map(key: str, value: object) -> str | None:
    for item in str(value).split(","):
        name, sep, protocol = item.strip().partition(":")
        if not sep or not name or protocol.strip().upper() not in _PROTOCOLS:
            return (f"Error parsing configuration property '{key}': {item.strip()!r} is not "
                    f"<listener name>:<one of {', '.join(sorted(_PROTOCOLS))}>")
    return None


def _per_ip_overrides(key: str, value: object) -> str | None:
    if str(value) == "":
        return None
    for item in str(value).split(","):
        host, sep, limit = item.strip().rpartition(":")
        if not sep or not host or not _INTEGER.fullmatch(limit.strip()):
            return (f"Error parsing configuration property '{key}': {item.strip()!r} is not "
                    "<host>:<connections>")
    return None


def _listeners(key: str, value: object) -> str | None:
    items: list[str] = value  # type: ignore[assignment]
    for item in items:
        if not _ENDPOINT.fullmatch(item):
            return (f"Error creating broker listeners from '[{', '.join(items)}]': Unable to "
                    f"parse {item} to a broker endpoint")
    return None


_FORMATS: dict[str, Callable[[str, object], str | None]] = {
    "listener.security.protocol.map": _protocol_map,
    "max.connections.per.ip.overrides": _per_ip_overrides,
    "listeners": _listeners,
}
