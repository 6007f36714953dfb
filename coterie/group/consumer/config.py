"""`group.consumer.*` settings of KIP-848 consumer groups, with Apache Kafka 4.x's defaults
and the same cross-checks Kafka's GroupCoordinatorConfig makes at start-up.

Unlike the classic protocol, the coordinator (not the client) decides the session timeout
and the heartbeat interval: every member gets the configured values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
# Kafka's floor for group.consumer.regex.refresh.interval.ms (atLeast(10 * 1000)), which is
# also the least time between two refreshes of a group's regexes whatever the reason
# (GroupMetadataManager.REGEX_BATCH_REFRESH_MIN_INTERVAL_MS).
MIN_REGEX_REFRESH_INTERVAL_MS = 10_000


class TopicAccess(Protocol):
    """What a regex resolution asks the broker's authorizer: of `topics`, those the
    principal (from `host`) may DESCRIBE. Kafka 4.2 resolves a group's regexes for the
    member whose heartbeat asked for the resolution and keeps only the topics it may
    describe. The answer is a function of its arguments and the ACLs, which the broker
    holds; the core asks, and writes the answer into the resolution's record, so a replay
    never asks again."""

    def describable(self, principal: str, host: str, topics: Iterable[str]) -> frozenset[str]:
        ...


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The settings; building one with inconsistent values raises ValueError."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    min_session_timeout_ms: int = 45_000  # group.consumer.min.session.timeout.ms
    max_session_timeout_ms: int = 60_000  # group.consumer.max.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    min_heartbeat_interval_ms: int = 5_000  # group.consumer.min.heartbeat.interval.ms
    max_heartbeat_interval_ms: int = 15_000  # group.consumer.max.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    # group.consumer.assignors: the first is the default for groups where nobody asks.
    assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: whether groups convert between the classic and the
    # consumer protocol online (read by the mixed kind, coterie.group.mixed.groups).
    migration_policy: str = "bidirectional"
    # group.consumer.regex.refresh.interval.ms: how old a group's regex resolutions may get
    # before a heartbeat refreshes them even though no topic was created (Kafka's internal
    # setting, 10 minutes by default, at least 10 s).
    regex_refresh_interval_ms: int = 600_000

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list[str]:
        """Kafka's start-up checks, in Kafka's words."""
        out = []
        for name, value in (("group.consumer.session.timeout.ms", self.session_timeout_ms),
                            ("group.consumer.min.session.timeout.ms",
                             self.min_session_timeout_ms),
                            ("group.consumer.max.session.timeout.ms",
                             self.max_session_timeout_ms),
                            ("group.consumer.heartbeat.interval.ms", self.heartbeat_interval_ms),
                            ("group.consumer.min.heartbeat.interval.ms",
                             self.min_heartbeat_interval_ms),
                            ("group.consumer.max.heartbeat.interval.ms",
                             self.max_heartbeat_interval_ms),
                            ("group.consumer.max.size", self.max_size)):
            if value < 1:
                out.append(f"{name} must be greater than or equal to 1")
        pairs = (
            ("group.consumer.max.heartbeat.interval.ms", self.max_heartbeat_interval_ms,
             "group.consumer.min.heartbeat.interval.ms", self.min_heartbeat_interval_ms),
            ("group.consumer.heartbeat.interval.ms", self.heartbeat_interval_ms,
             "group.consumer.min.heartbeat.interval.ms", self.min_heartbeat_interval_ms),
            ("group.consumer.max.session.timeout.ms", self.max_session_timeout_ms,
             "group.consumer.min.session.timeout.ms", self.min_session_timeout_ms),
            ("group.consumer.session.timeout.ms", self.session_timeout_ms,
             "group.consumer.min.session.timeout.ms", self.min_session_timeout_ms),
        )
        for big, big_value, small, small_value in pairs:
            if big_value < small_value:
                out.append(f"{big} must be greater than or equal to {small}")
        for small, small_value, big, big_value in (
                ("group.consumer.heartbeat.interval.ms", self.heartbeat_interval_ms,
                 "group.consumer.max.heartbeat.interval.ms", self.max_heartbeat_interval_ms),
                ("group.consumer.session.timeout.ms", self.session_timeout_ms,
                 "group.consumer.max.session.timeout.ms", self.max_session_timeout_ms)):
            if small_value > big_value:
                out.append(f"{small} must be less than or equal to {big}")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            out.append("group.consumer.heartbeat.interval.ms must be less than "
                       "group.consumer.session.timeout.ms")
        if not self.assignors:
            out.append("group.consumer.assignors must name at least one assignor")
        if len(set(self.assignors)) != len(self.assignors):
            out.append("group.consumer.assignors must not name an assignor twice")
        if self.regex_refresh_interval_ms < MIN_REGEX_REFRESH_INTERVAL_MS:
            out.append("group.consumer.regex.refresh.interval.ms must be greater than or equal "
                       f"to {MIN_REGEX_REFRESH_INTERVAL_MS}")
        if self.migration_policy not in MIGRATION_POLICIES:
            out.append("group.consumer.migration.policy must be one of "
                       + ", ".join(MIGRATION_POLICIES))
        return out
