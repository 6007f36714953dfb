"""A group's rebalance timeline for its page: its `__group_events`, read over the Kafka
protocol (`coterie.admin.group_events`), turned into rebalances and ownership intervals
(`coterie.admin.timeline`), then into the console's values (`views.Timeline`).

Why the timeline never fails the group's page: a cluster without the topic (Apache Kafka, or
coterie with group.events.enable=false), or a user without READ on `__group_events`, still
sees the group, its members and its lag; a note says why the picture is missing. A page reads
at most the newest `EVENT_LIMIT` events of the group, so a group that rebalanced all week
costs one bounded read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from coterie.admin.group_events import NoGroupEventsError, read_group_events
from coterie.admin.timeline import build_timeline
from coterie.client.errors import AuthenticationError, ClientError
from coterie.console.views import AuthenticationFailed, Ownership, Rebalance, Timeline

log = logging.getLogger("coterie.console")

EVENT_LIMIT = 5_000


class TimelineReader:
    """Reads one group's timeline with one principal's settings."""

    def __init__(self, bootstrap: str, security: Mapping[str, object] | None = None, *,
                 timeout_s: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.security = dict(security or {})
        self.timeout_s = timeout_s

    async def read(self, group_id: str) -> Timeline:
        try:
            events = await read_group_events(
                self.bootstrap, group_id, security=self.security,
                request_timeout_ms=int(self.timeout_s * 1000), limit=EVENT_LIMIT)
        except NoGroupEventsError as e:
            return Timeline(note=str(e))
        except AuthenticationError as e:
            raise AuthenticationFailed(str(e)) from e
        except ClientError as e:
            log.info("console: no timeline for group %r: %s", group_id, e)
            return Timeline(note=f"The group's events could not be read: {e}")
        return to_view(build_timeline(group_id, events), len(events) >= EVENT_LIMIT)


def to_view(timeline, truncated: bool = False) -> Timeline:
    """`coterie.admin.timeline.Timeline` -> the page's values (one bar per partition)."""
    rebalances = tuple(Rebalance(r.started_ms, r.stable_ms, r.cause, r.generation)
                       for r in timeline.rebalances)
    ownership = tuple(Ownership(o.member, p, o.from_ms, o.to_ms)
                      for o in timeline.ownership for p in o.partitions)
    note = None
    if truncated:
        note = f"Only the newest {EVENT_LIMIT} events of this group are drawn."
    elif not timeline.events:
        note = "No events of this group in __group_events (yet, or any more)."
    return Timeline(rebalances, ownership, note)
