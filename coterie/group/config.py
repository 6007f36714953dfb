"""The broker settings a shard's rules read, per group type (`coterie.broker.groups` maps
the broker's properties, Kafka's names, onto them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from coterie.group.classic.config import ClassicConfig
from coterie.group.consumer.config import ConsumerGroupConfig, TopicAccess
from coterie.group.share.config import ShareGroupConfig
from coterie.group.streams.config import StreamsGroupConfig


@dataclass(frozen=True, slots=True)
class ShardConfig:
    classic: ClassicConfig
    consumer: ConsumerGroupConfig
    client_assignment_timeout_ms: int = 10_000
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes
    # The broker's authorizer, when one is configured: which topics a principal may
    # describe (a regex subscription resolves only to those). None: every topic.
    topic_access: TopicAccess | None = None
    streams: StreamsGroupConfig = field(default_factory=StreamsGroupConfig)
    share: ShareGroupConfig = field(default_factory=ShareGroupConfig)
