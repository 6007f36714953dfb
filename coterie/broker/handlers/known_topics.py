"""Admin requests about topics another broker of the cluster just created.

Kafka sends CreateTopics, DeleteTopics, CreatePartitions and AlterConfigs to its controller,
so a topic whose creation was acknowledged is known to every one of them at once, whichever
broker the next admin request reaches. A coterie cluster broker learns of other brokers'
topics from the database, at its next round or NOTIFY: a request arriving before that would
be answered UNKNOWN_TOPIC_OR_PARTITION for a topic that exists. So a handler naming topics
this broker does not know reads the database's topics first, then answers. A single broker
(no cluster) knows every topic already and answers at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from types import CoroutineType
from typing import Any

from coterie.broker.context import RequestContext


def after_topics_known(ctx: RequestContext, names: Iterable[str | None],
                       answer: Callable[[], Any],
                       ids: Iterable[uuid.UUID | None] = ()) -> Any:
    """`answer()` at once when this broker knows every named topic (and topic id), or is no
    cluster broker; else a coroutine that first reads the database's topics."""
    cluster = ctx.services.cluster
    if cluster is None:
        return answer()
    logs = ctx.services.logs
    unknown = any(n is not None and n not in logs.topics for n in names) or any(
        i is not None and logs.topic_by_id(i) is None for i in ids)
    if not unknown:
        return answer()
    return _refreshed(cluster, answer)


async def _refreshed(cluster: Any, answer: Callable[[], Any]) -> Any:
    await cluster.refresh_topics()
    out = answer()
    if type(out) is CoroutineType:
        out = await out
    return out
