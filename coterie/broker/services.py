"""What a request handler may use: the `Services` of the broker, not the broker itself.

Handlers receive these through their `RequestContext`. Keeping them to this list (no
`Broker` object, no server internals) is what lets a handler be read, and tested, as a
translation between wire messages and the values of the layers below, and what keeps the
broker package free of import cycles (the server imports handlers, never the reverse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coterie.broker.config import BrokerConfig
from coterie.broker.groups import GroupRuntime
from coterie.broker.producer_ids import ProducerIdAllocator
from coterie.broker.topic_admin import TopicAdmin
from coterie.broker.waiters import FetchWaiters
from coterie.log.manager import LogManager


@dataclass(frozen=True, slots=True)
class ApiRange:
    """One API the broker serves, as ApiVersions lists it."""

    key: int
    min_version: int
    max_version: int


@dataclass(slots=True)
class Services:
    config: BrokerConfig
    cluster_id: str
    logs: LogManager
    topics: TopicAdmin
    groups: GroupRuntime
    waiters: FetchWaiters
    producer_ids: ProducerIdAllocator
    clock: Callable[[], int]
    apis: tuple[ApiRange, ...] = ()
    # The transaction coordinator's runtime (coterie.broker.transactions), once it runs.
    transactions: Any = None
    # The groups' own settings (coterie.broker.group_configs.GroupConfigs).
    group_configs: Any = None
    # Broker configs changed at run time (coterie.broker.dynamic_configs).
    dynamic_configs: Any = None
    # The users' SCRAM credentials (coterie.broker.scram_credentials.ScramCredentials).
    scram_credentials: Any = None
    # The authorizer and the ACLs (coterie.broker.acls.BrokerAuthorizer): what the handlers
    # ask before acting on a resource, once ACLs are enforced (its docstring says how).
    authorizer: Any = None
    # Settled members' encoded heartbeat answers
    # (coterie.broker.steady_answers.SteadyAnswers), once the server sets it.
    steady_answers: Any = None
    # A cluster broker's part in its cluster (coterie.broker.cluster.ClusterNode); None on a
    # single broker.
    cluster: Any = None
    # KIP-932: the share sessions (coterie.broker.share_sessions.ShareSessions) and the
    # share partitions this broker leads (coterie.broker.share_partitions.SharePartitions).
    share_sessions: Any = None
    share_partitions: Any = None
    # Each listener's advertised (host, port), by listener name (coterie.broker.listeners),
    # once the broker listens: what a client that came in on it is told.
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    # The broker's Prometheus metrics (coterie.broker.metrics.BrokerMetrics) when
    # metrics.listen is set; None: off (handlers then count nothing).
    metrics: Any = None

    def now_ms(self) -> int:
        return self.clock()

    def address(self, listener: str) -> tuple[str, int]:
        """This broker's advertised address on `listener` (its first listener's if the
        name is not one of them: a request made up by a test)."""
        found = self.addresses.get(listener)
        if found is None:
            if self.addresses:
                return next(iter(self.addresses.values()))
            return self.config.advertised_host, self.config.advertised_port
        return found
