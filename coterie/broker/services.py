"""What a request handler may use: the `Services` of the broker, not the broker itself.

Handlers receive these through their `RequestContext`. Keeping them to this list (no
`Broker` object, no server internals) is what lets a handler be read, and tested, as a
translation between wire messages and the values of the layers below, and what keeps the
broker package free of import cycles (the server imports handlers, never the reverse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
    # Settled members' encoded heartbeat answers
    # (coterie.broker.handlers.consumer_groups.SteadyAnswers), once the server sets it.
    steady_answers: Any = None
    # A cluster broker's part in its cluster (coterie.broker.cluster.ClusterNode); None on a
    # single broker.
    cluster: Any = None

    def now_ms(self) -> int:
        return self.clock()
